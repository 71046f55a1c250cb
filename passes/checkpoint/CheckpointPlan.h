//===- CheckpointPlan.h - Which activations to recompute, and the planners -*- C++ -*-===//
//
// A planner chooses the candidates (RecomputeModel.h) to drop so that the
// simulated peak above the graph inputs fits a budget, at the least
// recomputation time:
//
//   - greedy (GreedyPlanner.cpp): μ-TWO's rule, by recompute ratio (bytes
//     freed per second of recomputation), only among activations live at the
//     current peak, with the liveness simulation of the rewritten graph in the
//     loop; then values made several times are shared where the budget allows;
//     from three starts (nothing dropped, a knapsack's choice, the model's
//     block interiors: ModelBlocks.h), the best plan kept;
//   - structured: the greedy from the structured choices alone, a rung of
//     each block's ladder (StructuredPlanner.h);
//   - milp (MilpPlanner.cpp): the best of the greedy, the relaxation's plan
//     (RecomputeRelaxation.h, solved by CBC; it may hold forward values for
//     the clones) and a clone-by-point program, with its proven gap to the
//     relaxation's bound on every plan;
//   - torch (TorchPlanner.cpp): torch.compile's own partitioner and knapsack,
//     run on this graph in a Python helper process: the baseline, on the same
//     executor.
//
// Every plan's predicted peak is the simulation of the graph it rewrites to.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/RecomputeModel.h"

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace graphopt {

struct CheckpointPlan {
  std::string planner;
  std::vector<int32_t> dropped; ///< candidate indices
  /// Why a dropped candidate was chosen, in a few words (the report's reason
  /// column); a candidate without one gets its planner's general reason.
  std::map<int32_t, std::string> why;
  /// Forward storages backward does not read, kept for the clones to read
  /// (RecomputeModel::closure's `held`; torch's plans have them).
  std::vector<const Value *> held;
  RecomputeSet recompute;
  int64_t predictedPeak = 0;        ///< simulated peak above the graph inputs
  int64_t predictedBounded = 0;     ///< simulated highest of the bounded memory
  int64_t predictedActivations = 0; ///< simulated highest of the saved activations
  double predictedExtraSeconds = 0; ///< the clones' time (the originals' measured or estimated)
  double solveSeconds = 0;
  double gap = -1; ///< relative optimality gap the solver proved; -1 when not a solver
  /// milp: the least time any plan within the budget needs (the relaxation's bound).
  double lowerBoundSeconds = 0;
  std::string solverStatus; ///< "optimal", "time limit", ... ("" for greedy)
  bool meetsBudget = false;
  unsigned simulations = 0; ///< rewritten graphs simulated while planning
  unsigned hoists = 0;      ///< own clones made earlier to share them (greedy)
  unsigned kept = 0;        ///< drops undone once later ones made them unneeded (greedy)
  /// milp: the greedy's predicted extra time on the same model and budget,
  /// -1 when its plan does not meet the budget (the oracle's comparison).
  double greedyExtraSeconds = -1;
};

// Budgets are bytes of the model's bounded memory (RecomputeModel::boundedMemory).

/// No bound on the peak above the inputs besides the budget.
inline constexpr int64_t kNoPeakCap = std::numeric_limits<int64_t>::max();

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

struct MilpOptions {
  double timeLimitSeconds = 10;
  /// Stop once the best plan is proven within this share of the optimum.
  double gap = 0.01;
};
/// The best plan of the greedy, the relaxation's plan (RecomputeRelaxation.h)
/// and the clone-by-point MILP (MilpFormulation.h), with its gap to the
/// relaxation's bound: a bound on every plan, so a gap to the optimum.
/// `greedy`: the default planner's plan for this budget, made by the caller
/// (the budget ladder's); planGreedy's when none is given.
absl::StatusOr<CheckpointPlan> planMilp(const RecomputeModel &model, int64_t budgetAboveInputs,
                                        const MilpOptions &options,
                                        std::optional<CheckpointPlan> greedy = std::nullopt);

/// What torch.compile's partitioner saves at activation_memory_budget =
/// `memoryBudget` (0 to 1), as a plan on this model's graph: candidates it
/// saves no value of are dropped, forward values it saves that backward does
/// not read are held. Its predictions are filled for `budget` and `peakCap`
/// (graph-opt's measure, which need not agree with torch's).
absl::StatusOr<CheckpointPlan> planTorch(const RecomputeModel &model, double memoryBudget,
                                         int64_t budget, int64_t peakCap = kNoPeakCap);

/// Fills a plan's predictions from its recomputation (simulated); it meets
/// the budget when its bounded memory is within `budget` and its peak above
/// the inputs within `peakCap`.
absl::Status predictPlan(const RecomputeModel &model, int64_t budget, CheckpointPlan &plan,
                         int64_t peakCap = kNoPeakCap);
/// The same from a simulation of `plan.recompute` already made.
void predictPlan(const Simulation &sim, int64_t budget, CheckpointPlan &plan,
                 int64_t peakCap = kNoPeakCap);
/// Fills a plan's recomputation (each own clone at its first backward use),
/// simulation and predictions from its dropped and held sets.
absl::Status completePlan(const RecomputeModel &model, int64_t budget, CheckpointPlan &plan);

} // namespace graphopt
