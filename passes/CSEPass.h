//===- CSEPass.h - Common subexpression elimination ---------------*- C++ -*-===//
//
// Value numbering over (operator overload, arguments): a later call equal to
// an earlier one is removed and its uses read the earlier one's results.
// `commutative=true` (the default) also equates a+b with b+a for operators
// whose result does not depend on the operands' order (add with alpha 1, mul,
// eq, ne, logical and bitwise and/or/xor).
//
// Never merged (docs/RedundantOps.md argues each):
//   - random operators (at::Tag::nondeterministic_seeded): equal arguments,
//     different draws;
//   - operators with side effects (collectives, asserts, prints);
//   - calls that write any argument in place, calls whose results are written
//     in place anywhere (directly or through a view), and calls reading a
//     value after a write to anything it aliases between the two;
//   - calls whose results differ in dtype, shape, strides or device;
//   - calls whose results are both graph outputs (or views returned as
//     outputs) that do not already share storage: merged, the caller would
//     get two tensors that are one (two gradients, and an in-place
//     `clip_grad_norm_` or `add_` would be applied twice). Both calls stay;
//     nothing is inserted. When both are returned (alive to the end anyway),
//     the later call's pure readers read the earlier one, so what is computed
//     from the two still merges ("readers merged").
// The rules are the shared predicates' (Analysis/RewriteLegality.h,
// whyNotMergeable), asked on the alias analysis the pass keeps up to date.
// Memory-aware: a merge keeps the earlier result alive until the later one's
// last use, which can raise the peak (a forward value kept for a backward use
// is what checkpointing pays to avoid). A merge that would raise the
// simulated peak (liveness) above the pipeline's peak when cse started is
// refused; `across-phases=true` allows such merges when they cross the
// forward/backward boundary.
//
// With --report-dir, writes cse.csv: each merge and each refused pair of
// equal calls, with the reason.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Pass/Pass.h"

#include <set>
#include <utility>
#include <string>
#include <vector>

namespace graphopt {

class CSEPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "cse"; }
  static llvm::StringRef passDescription() {
    return "common subexpression elimination that keeps aliasing, mutation, randomness and the "
           "simulated peak intact";
  }
  /// Runs inside torch.compile; fuzzed within repeat{cse,canonicalize,dce}.
  static PassTraits passTraits() { return {/*insideCompile=*/true}; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;
  /// The storage roots, told every merge. Not the alias facts: a merged
  /// storage's writes are widened to all of it, which is safe for this pass
  /// but would make the passes after it refuse what they could do.
  PreservedAnalyses preservedAnalyses() const override {
    return PreservedAnalyses::none().preserve<StorageRootsAnalysis>();
  }

  /// One row of cse.csv.
  struct Decision {
    std::string kept, replaced, op, keptPhase, replacedPhase, reason; ///< reason "" = merged
    std::string decision; ///< merged, refused, or readers merged
  };

protected:
  void reset() override {
    decisions_.clear();
    recorded_.clear();
    refusedPairs_.clear();
  }

private:
  /// Records a decision on the pair for cse.csv (only with a report directory);
  /// `decision` "" is "merged" without a reason, else "refused".
  void record(const Node &kept, const Node &replaced, std::string reason,
              std::string decision = "");

  PassOption<bool> acrossPhases_{
      this, "across-phases",
      "merge across the forward/backward boundary even when that raises the simulated peak", false};
  PassOption<bool> commutative_{this, "commutative",
                                "equate a+b and b+a for operators whose operands commute", true};
  /// Every decision over the rounds of this run (repeat{...} runs the pass
  /// again), without repeats.
  std::vector<Decision> decisions_;
  std::set<std::string> recorded_;
  /// (earlier, later) node ids of refused pairs already counted.
  std::set<std::pair<unsigned, unsigned>> refusedPairs_;
};

} // namespace graphopt
