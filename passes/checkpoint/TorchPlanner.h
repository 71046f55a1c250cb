//===- TorchPlanner.h - torch.compile's own choice, on graph-opt's graph -*- C++ -*-===//
//
// checkpoint{planner=torch}: torch.compile's own partitioner and knapsack,
// run on this graph in a Python helper process: the baseline, on the same
// executor (TorchPlanner.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointPlan.h"

namespace graphopt {

/// What torch.compile's partitioner saves at activation_memory_budget =
/// `memoryBudget` (0 to 1), as a plan on this model's graph: candidates it
/// saves no value of are dropped, forward values it saves that backward does
/// not read are held. Its predictions are filled for `budget` and `peakCap`
/// (graph-opt's measure, which need not agree with torch's).
absl::StatusOr<CheckpointPlan> planTorch(const RecomputeModel &model, double memoryBudget,
                                         int64_t budget, int64_t peakCap = kNoPeakCap);


} // namespace graphopt
