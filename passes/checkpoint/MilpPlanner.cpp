//===- MilpPlanner.cpp - The optimal plan of a MILP, solved by CBC ---------===//
#include "checkpoint/CheckpointPlan.h"

namespace graphopt {

absl::StatusOr<CheckpointPlan> planMilp(const RecomputeModel &, int64_t, const MilpOptions &) {
  return absl::UnimplementedError("checkpoint{planner=milp}: not built yet");
}

} // namespace graphopt
