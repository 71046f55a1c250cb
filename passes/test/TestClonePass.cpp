//===- TestClonePass.cpp - Exercises the IR's rewrite API -----------------===//
//
// test-clone-to-backward{value=NAME}: recomputes the forward value %NAME in the
// backward phase, the way activation checkpointing does. The node defining
// %NAME is cloned (Graph::cloneNode, operands as they are) just before the
// first backward node that reads %NAME, marked `recompute_of = "NAME"`, and
// every backward use of %NAME is pointed at the clone (replaceUsesWithIf);
// forward uses and graph outputs keep the original. Hidden from --list-passes.
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/IRMap.h"
#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>

namespace graphopt {
namespace {

class TestCloneToBackwardPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "test-clone-to-backward"; }
  static llvm::StringRef passDescription() {
    return "test only: recompute a forward value in the backward phase";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }

  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &) override {
    Value *target = nullptr;
    for (Value *v : graph.allValues())
      if (v->name() == value_.get())
        target = v;
    if (!target)
      return absl::NotFoundError(absl::StrCat("no value named %", value_.get()));
    Node *def = target->definingNode();
    if (!def || def->phase() != Phase::Forward)
      return absl::InvalidArgumentError(
          absl::StrCat("%", value_.get(), " is not the result of a forward node"));
    // The first backward node that reads the value (uses are unordered).
    Node *first = nullptr;
    for (const Use &u : target->uses())
      if (u.user && u.user->phase() == Phase::Backward &&
          (!first || u.user->comesBefore(first)))
        first = u.user;
    if (!first)
      return false; // no backward use: nothing to recompute
    ValueMap<Value *> map(graph);
    auto clone = graph.cloneNode(*def, map, InsertionPoint::before(first));
    if (!clone.ok())
      return clone.status();
    markRecomputeOf(**clone, *target);
    Value *recomputed = map.lookup(target);
    target->replaceUsesWithIf(recomputed, [](const Use &u) {
      return u.user && u.user->phase() == Phase::Backward;
    });
    addStatistic("nodes cloned");
    return true;
  }

protected:
  absl::Status validateOptions() override {
    if (value_.get().empty())
      return absl::InvalidArgumentError("needs the option value=NAME (a forward value)");
    return absl::OkStatus();
  }

private:
  PassOption<std::string> value_{this, "value", "the forward value to recompute", ""};
};

} // namespace

GRAPHOPT_REGISTER_TEST_PASS(TestCloneToBackwardPass);

} // namespace graphopt
