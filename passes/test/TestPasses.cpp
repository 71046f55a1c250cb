//===- TestPasses.cpp - Passes that exist to test the infrastructure ------===//
//
// Hidden from --list-passes, like LLVM's -test-* passes:
//   test-break-names  renames one value to another's name and claims it changed
//                     nothing: only --verify-each catches it.
//   test-fail         returns an error, to exercise failure reports and reproducers.
//   test-count        counts nodes per phase into statistics (an analysis-only pass
//                     with an option: phase=forward|backward|optimizer|all).
//
//===----------------------------------------------------------------------===//
#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>

namespace graphopt {
namespace {

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
    return false; // the lie --verify-each exists to catch
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

class TestCountPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-count"; }
  static llvm::StringRef passDescription() { return "test only: count nodes of a phase"; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::Status setOptions(const PassOptions &options) override {
    for (const auto &[key, value] : options) {
      if (key != "phase")
        return absl::InvalidArgumentError(absl::StrCat("pass 'test-count' has no option '", key, "'"));
      if (value != "all" && !parsePhaseName(value))
        return absl::InvalidArgumentError(absl::StrCat(
            "pass 'test-count': option 'phase' must be forward, backward, optimizer or all, got '",
            value, "'"));
      phase_ = value;
    }
    return absl::OkStatus();
  }
  PassOptions options() const override { return {{"phase", phase_}}; }
  absl::Status analyze(const Graph &graph, AnalysisManager &) override {
    for (const Node &n : graph.nodes())
      if (phase_ == "all" || phaseName(n.phase()) == phase_)
        addStatistic(absl::StrCat("nodes in phase ", phase_));
    return absl::OkStatus();
  }

private:
  std::string phase_ = "all";
};

} // namespace

GRAPHOPT_REGISTER_TEST_PASS(TestBreakNamesPass);
GRAPHOPT_REGISTER_TEST_PASS(TestFailPass);
GRAPHOPT_REGISTER_TEST_PASS(TestCountPass);

} // namespace graphopt
