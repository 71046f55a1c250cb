//===- TestPasses.cpp - Passes that exist to test the infrastructure ------===//
//
// Hidden from --list-passes, like LLVM's -test-* passes:
//   test-break-names  renames one value to another's name: the structural
//                     verifier after the pass catches it.
//   test-perturb-update
//                     scales the first float constant of the optimizer phase
//                     (a learning rate, a beta) by 1.5: the outputs stay, the
//                     parameter and state updates change; --verify must see it.
//   test-silent-edit  sets an attribute and claims it changed nothing: the pass
//                     manager sees the graph's edit epoch move and refuses it.
//   test-fail         returns an error, to exercise failure reports and reproducers.
//   test-count        counts nodes per phase into statistics (an analysis-only pass
//                     with an option: phase=forward|backward|optimizer|all).
//   test-erase-unused-inputs
//                     erases user inputs nothing reads: a pass that changes the
//                     graph's inputs, which --verify and --run must follow.
//   test-throw        throws std::runtime_error: the optimizer turns it into a
//                     failure with a reproducer, never an abort.
//   test-crash        crashes (a trap instruction): the crash handler says how to
//                     report it and what reproduces it.
//   test-merge-outputs
//                     makes the second of the first two gradient outputs of one
//                     type read the first's value, as a careless cse would: the
//                     pipeline must refuse outputs that now share storage.
//   test-flaky-output passes the first floating-point output through
//                     graphopt_test::flaky, which is right on one call and off
//                     by one on the next: a rewrite that is wrong only some of
//                     the time (a missing wait, a race), which --verify must
//                     fail every time.
//
// And two operators, in the graphopt_test namespace, for such tests:
//   graphopt_test::flaky(Tensor self) -> Tensor
//                     a copy of self on even calls, self + 1 on odd ones (one
//                     counter per process).
//   graphopt_test::either(Tensor(a) x, Tensor(a) y) -> Tensor(a)
//                     returns x; its schema says the result may alias either
//                     operand (one alias set), so it lives in two storages.
//   graphopt_test::noisy(Tensor self) -> Tensor
//                     self * (1 + k * 2^-20), k = 0, 1, 2 in turn: a stand-in for
//                     a kernel whose last bits vary from run to run (a
//                     nondeterministic scatter-add), which the verifier must
//                     tell apart from a wrong rewrite.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Pass/PassRegistry.h"

#include <ATen/ops/empty_like.h>
#include <absl/strings/str_cat.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <stdexcept>

namespace graphopt {
namespace {

std::atomic<uint64_t> flakyCalls{0}, noisyCalls{0};

at::Tensor flaky(const at::Tensor &self) {
  at::Tensor out = self.clone();
  if (flakyCalls.fetch_add(1) % 2 == 1)
    out.add_(1);
  return out;
}

at::Tensor noisy(const at::Tensor &self) {
  const double k = static_cast<double>(noisyCalls.fetch_add(1) % 3);
  return self.mul(1 + k * std::ldexp(1.0, -20));
}

at::Tensor likeSelf(const at::Tensor &self) { return at::empty_like(self); }

at::Tensor either(const at::Tensor &x, const at::Tensor &) { return x; }

class TestBreakNamesPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-break-names"; }
  static llvm::StringRef passDescription() { return "test only: make value names collide, silently"; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    std::vector<Value *> values = graph.allValues();
    if (values.size() >= 2)
      values.back()->setName(values.front()->name());
    return values.size() >= 2;
  }
};

class TestSilentEditPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-silent-edit"; }
  static llvm::StringRef passDescription() {
    return "test only: edit the graph and report no change";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    if (!graph.nodes().empty())
      graph.nodes().front().setAttr("silently_edited", Constant::ofBool(true));
    return false; // the lie the edit epoch exists to catch
  }
};

class TestFailPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-fail"; }
  static llvm::StringRef passDescription() { return "test only: always fails"; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    return absl::InternalError(absl::StrCat("deliberate failure on @", graph.name().str()));
  }
};

class TestThrowPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-throw"; }
  static llvm::StringRef passDescription() { return "test only: throws a std::runtime_error"; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    throw std::runtime_error(absl::StrCat("deliberate exception on @", graph.name().str()));
  }
};

class TestCrashPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-crash"; }
  static llvm::StringRef passDescription() { return "test only: crashes"; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &, AnalysisManager &) override { __builtin_trap(); }
};

class TestMergeOutputsPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-merge-outputs"; }
  static llvm::StringRef passDescription() {
    return "test only: make two gradient outputs one value";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    llvm::ArrayRef<GraphOutput> outs = graph.outputs();
    for (size_t i = 0; i < outs.size(); ++i)
      for (size_t j = i + 1; j < outs.size(); ++j)
        if (outs[i].role == OutputRole::Gradient && outs[j].role == OutputRole::Gradient &&
            outs[i].value != outs[j].value && outs[i].value->type() == outs[j].value->type()) {
          outs[j].value->replaceAllUsesWith(outs[i].value);
          return true;
        }
    return false;
  }
};

class TestCountPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-count"; }
  static llvm::StringRef passDescription() { return "test only: count nodes of a phase"; }
  /// Reads the graph only: torch.compile's partitioner accepts it from this
  /// declaration alone (python/tests/test_compile.py).
  static PassTraits passTraits() { return {/*insideCompile=*/true}; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::Status analyze(const Graph &graph, AnalysisManager &) override {
    for (const Node &n : graph.nodes())
      if (phase_.get() == "all" || phaseName(n.phase()) == phase_.get())
        addStatistic(absl::StrCat("nodes in phase ", phase_.get()));
    return absl::OkStatus();
  }

private:
  PassOption<std::string> phase_{this, "phase", "the phase whose nodes are counted", "all",
                                 {{"forward", "forward"},
                                  {"backward", "backward"},
                                  {"optimizer", "optimizer"},
                                  {"all", "all"}}};
};

class TestEraseUnusedInputsPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-erase-unused-inputs"; }
  static llvm::StringRef passDescription() { return "test only: erase user inputs nothing reads"; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    bool changed = false;
    for (unsigned i = graph.inputs().size(); i-- > 0;) {
      const GraphInput &in = graph.inputs()[i];
      if (in.role != InputRole::UserInput || in.value->hasUses())
        continue;
      if (absl::Status st = graph.eraseInput(i); !st.ok())
        return st;
      changed = true;
    }
    return changed;
  }
};

/// Changes the graph on every run (toggles an attribute on the first node), so
/// repeat{...} around it never reaches a fixpoint.
class TestToggleAttrPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-toggle-attr"; }
  static llvm::StringRef passDescription() {
    return "test only: toggle attribute 'toggled' on the first node (always changes the graph)";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    if (graph.nodes().empty())
      return false;
    Node &first = graph.nodes().front();
    if (!first.removeAttr("toggled"))
      first.setAttr("toggled", Constant::ofBool(true));
    return true;
  }
};

/// A wrong rewrite: adds 1 to the first floating-point constant argument, so
/// the graph computes something else (tests that verification catches it).
class TestWrongConstantPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-wrong-constant"; }
  static llvm::StringRef passDescription() {
    return "test only: add 1 to the first float constant argument (a wrong rewrite)";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    for (Node &n : graph.nodes())
      for (unsigned i = 0; i < n.numArgs(); ++i)
        if (n.arg(i).isConstant() && n.arg(i).getConstant().kind() == ConstantKind::Float) {
          n.setArg(i, Argument::constant(Constant::ofFloat(n.arg(i).getConstant().asFloat() + 1)));
          return true;
        }
    return false;
  }
};

/// A wrong rewrite of the update only: what the step returns is unchanged.
class TestPerturbUpdatePass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-perturb-update"; }
  static llvm::StringRef passDescription() {
    return "test only: scale the optimizer's first float constant by 1.5 (a wrong rewrite)";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    for (Node &n : graph.nodes())
      if (n.phase() == Phase::Optimizer)
        for (unsigned i = 0; i < n.numArgs(); ++i)
          if (n.arg(i).isConstant() && n.arg(i).getConstant().kind() == ConstantKind::Float) {
            double v = n.arg(i).getConstant().asFloat();
            n.setArg(i, Argument::constant(Constant::ofFloat(v == 0 ? 1e-3 : v * 1.5)));
            return true;
          }
    return false;
  }
};

/// Routes the first floating-point graph output through graphopt_test::flaky.
class TestFlakyOutputPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-flaky-output"; }
  static llvm::StringRef passDescription() {
    return "test only: make the first float output wrong on every other run (an intermittent "
           "wrong rewrite)";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    for (unsigned i = 0; i < graph.outputs().size(); ++i) {
      Value *v = graph.outputs()[i].value;
      if (!v->isTensor() || !v->tensorType().isKnown() ||
          !c10::isFloatingType(v->tensorType().dtype) || !v->definingNode())
        continue;
      auto made = graph.createNode("graphopt_test::flaky", {Argument::value(v)},
                                   {ValueType::ofTensor(TensorType::contiguous(
                                       v->tensorType().dtype, v->tensorType().sizes,
                                       v->tensorType().device))},
                                   InsertionPoint::atEnd(graph), {v->name().str() + "_flaky"});
      if (!made.ok())
        return made.status();
      graph.setOutputValue(i, (*made)->output(0));
      return true;
    }
    return false;
  }
};

} // namespace

GRAPHOPT_REGISTER_TEST_PASS(TestFlakyOutputPass);
GRAPHOPT_REGISTER_TEST_PASS(TestWrongConstantPass);
GRAPHOPT_REGISTER_TEST_PASS(TestPerturbUpdatePass);
GRAPHOPT_REGISTER_TEST_PASS(TestToggleAttrPass);
GRAPHOPT_REGISTER_TEST_PASS(TestBreakNamesPass);
GRAPHOPT_REGISTER_TEST_PASS(TestFailPass);
GRAPHOPT_REGISTER_TEST_PASS(TestCountPass);
GRAPHOPT_REGISTER_TEST_PASS(TestEraseUnusedInputsPass);
GRAPHOPT_REGISTER_TEST_PASS(TestThrowPass);
GRAPHOPT_REGISTER_TEST_PASS(TestCrashPass);
GRAPHOPT_REGISTER_TEST_PASS(TestMergeOutputsPass);
GRAPHOPT_REGISTER_TEST_PASS(TestSilentEditPass);

} // namespace graphopt

TORCH_LIBRARY(graphopt_test, m) {
  m.def("flaky(Tensor self) -> Tensor");
  m.def("noisy(Tensor self) -> Tensor");
  m.def("either(Tensor(a) x, Tensor(a) y) -> Tensor(a)");
}

TORCH_LIBRARY_IMPL(graphopt_test, CPU, m) {
  m.impl("flaky", graphopt::flaky);
  m.impl("noisy", graphopt::noisy);
  m.impl("either", graphopt::either);
}

TORCH_LIBRARY_IMPL(graphopt_test, Meta, m) {
  m.impl("flaky", graphopt::likeSelf);
  m.impl("noisy", graphopt::likeSelf);
  m.impl("either", graphopt::either);
}
