//===- GreedyPlanner.h - the default planner, μ-TWO's greedy -*- C++ -*-===//
//
// checkpoint{planner=greedy} (the default): μ-TWO's rule, by recompute ratio
// (bytes freed per second of recomputation), only among activations live at
// the current peak, with the liveness simulation of the rewritten graph in
// the loop; then values made several times are shared where the budget
// allows; from three starts (nothing dropped, a knapsack's choice, the
// model's block interiors: ModelBlocks.h), the best plan kept. On the budget
// ladder (BudgetLadder.h) by default.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointPlan.h"

#include <limits>
#include <optional>

namespace graphopt {

/// μ-TWO greedy with the simulator in the loop. When the budget cannot be
/// met, the plan returned is where it stopped: no activation left to drop at
/// the peak (meetsBudget false; its predicted bounded memory is the least the
/// greedy reaches). `peakCap` bounds the simulated peak above the inputs as
/// well, when the model bounds the saved activations: the greedy drops at
/// whichever bound is over, and sharing clones never lifts the peak past it.
/// `starts` chooses where the greedy starts from.
enum class GreedyStarts : uint8_t {
  /// Nothing dropped, the knapsack's choice at the peak, the block
  /// interiors; the best plan.
  All,
  /// The structured choices alone (StructuredPlanner.h, `planner=structured`);
  /// all of the above on a graph without repeated blocks.
  Structured,
};
absl::StatusOr<CheckpointPlan> planGreedy(const RecomputeModel &model, int64_t budget,
                                          int64_t peakCap = kNoPeakCap,
                                          GreedyStarts starts = GreedyStarts::All);

/// How planGreedyFrom goes on from its start.
struct GreedyFromOptions {
  int64_t peakCap = kNoPeakCap;
  /// Every repeat shared first (made once, held), as the relaxation's start
  /// is; where that peaks over a bound, the shared clones made later.
  bool shareFirst = false;
  /// With shareFirst, before that: dropped values the shared clones reach
  /// through at the peak kept, where that leaves the plan less over.
  bool cutChains = false;
};

/// The greedy from `start` (candidates dropped first, each said to be there
/// for `why`; `held`: forward storages kept for the clones, as
/// RecomputeModel::closure's): it drops more where the simulation is still
/// over the budget, then shares repeats and undoes unneeded drops. None when
/// the start needs too many clones to try (kMaxStartClonesPerNode).
absl::StatusOr<std::optional<CheckpointPlan>>
planGreedyFrom(const RecomputeModel &model, int64_t budget, llvm::ArrayRef<int32_t> start,
               llvm::ArrayRef<const Value *> held, llvm::StringRef why,
               const GreedyFromOptions &options = {});

/// A lower bound on the extra seconds of any plan whose bounded memory is
/// within `budget`: a fractional knapsack over what the unoptimised bounded
/// peak holds, each candidate's own node run once (infinity where even all
/// of it is not enough).
double recomputeLowerBound(const RecomputeModel &model, int64_t budget);
/// A tighter one, at some tens of milliseconds: the recomputation
/// relaxation's (RecomputeRelaxation.h) Lagrangian bound, by priced minimum
/// cuts (LagrangianCut.h); infinity when no plan meets `budget`. On a graph
/// whose program is too large, from its rows furthest over the budget. The
/// search may stop once the bound passes `enough` seconds.
double relaxedLowerBound(const RecomputeModel &model, int64_t budget,
                         double enough = std::numeric_limits<double>::infinity());

/// A lower bound on the clones dropping `start` (candidates, nothing held)
/// needs, counted without making them: per backward point, the longest chain
/// of dropped candidates made again there (GreedyPlanner.cpp). 0 where some
/// node writes in place, dropouts are not replayed or some activation cannot
/// be dropped (a drop may be refused there, which the bound does not foresee).
size_t chainClonesAtLeast(const RecomputeModel &model, llvm::ArrayRef<int32_t> start);


} // namespace graphopt
