//===- MilpPlanner.h - a plan and its distance to the optimum -*- C++ -*-===//
//
// checkpoint{planner=milp}: the best of the greedy, the relaxation's plan
// (RecomputeRelaxation.h, solved by CBC; it may hold forward values for the
// clones) and a clone-by-point program, with its proven gap to the
// relaxation's bound on every plan (MilpPlanner.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointPlan.h"

#include <optional>

namespace graphopt {

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


} // namespace graphopt
