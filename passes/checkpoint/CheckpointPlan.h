//===- CheckpointPlan.h - Which activations to recompute -------*- C++ -*-===//
//
// A plan: the candidates (RecomputeModel.h) dropped after their last forward
// use and recomputed in backward, and what the simulation of the graph it
// rewrites to predicts. The planners that choose one are registered by name
// (Planner.h): greedy (GreedyPlanner.h), structured (StructuredPlanner.h),
// milp (MilpPlanner.h) and torch (TorchPlanner.h).
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
