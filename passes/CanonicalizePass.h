//===- CanonicalizePass.h - Folding no-ops and simple algebra -----*- C++ -*-===//
//
// `canonicalize` folds nodes whose output equals a value the graph already
// has: pairs of transposes or permutes that undo each other, views and copies
// that change nothing (view/reshape/expand to the same type, alias, detach,
// clone, _to_copy/to without a change, cat of one tensor) and arithmetic
// identities (x * 1, x / 1, x + 0, x - 0, where exact to the bit). One small
// named rule per pattern (CanonicalizeRules.h), driven to a fixpoint like
// MLIR's greedy pattern driver: a worklist of nodes, initially all in order;
// when a rule fires, every use of the node's output (graph outputs included)
// moves to the existing value, the node is erased, operands it leaves without
// uses are erased when they are pure or views, and the users of the value are
// revisited. Statistics: `folded <rule>` per rule, `erased dead operands`.
//
// Option `max-rewrites` caps the folds (unset: 10 per node + 100); reaching it
// is an error, not a silent stop. docs/RedundantOps.md has the rules and
// their safety arguments.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Pass/Pass.h"

#include <optional>

namespace graphopt {

class CanonicalizePass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "canonicalize"; }
  static llvm::StringRef passDescription() {
    return "fold no-op views and copies, transpose/permute pairs and x*1, x/1, x+0, x-0";
  }
  /// Runs inside torch.compile; fuzzed within repeat{cse,canonicalize,dce}.
  static PassTraits passTraits() { return {/*insideCompile=*/true}; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }

  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;
  /// The storage roots, told every fold (FoldContext says why they hold).
  PreservedAnalyses preservedAnalyses() const override {
    return PreservedAnalyses::none().preserve<StorageRootsAnalysis>();
  }

protected:
  absl::Status validateOptions() override;

private:
  PassOption<std::optional<int64_t>> maxRewrites_{
      this, "max-rewrites",
      "at most this many folds; reaching it is an error (unset: 10 per node + 100)", std::nullopt};
};

} // namespace graphopt
