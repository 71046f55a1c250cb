//===- MeasuredScratch.cpp - Operator scratch memory, measured ------------===//
#include "graphopt/Analysis/MeasuredScratch.h"

#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <absl/strings/str_cat.h>

namespace graphopt {

absl::StatusOr<MeasuredScratch> MeasuredScratchAnalysis::run(const Graph &graph,
                                                             AnalysisManager &analyses) {
  auto setup = analyses.setupToRun(graph, "measuring operator scratch memory");
  if (!setup.ok())
    return setup.status();
  const ExecutionContext *context = setup->context;
  const std::vector<at::Tensor> &inputs = setup->inputs;
  ExecutionOptions options;
  options.device = context->device;
  options.seed = context->seed;

  MeasuredScratch result;
  result.device = context->device.str();
  result.bytes.assign(graph.numNodes(), 0);
  // The warm-up run's one-time allocations (kernel caches) are not per step.
  constexpr unsigned kRuns = 3;
  absl::Status st = profileRuns(
      graph, *context->weights, inputs, options, kRuns, [&](const ProfiledRun &run) {
        if (run.index == 0)
          return absl::OkStatus();
        const std::vector<NodeProfile> &profiles = run.profiler->profiles();
        for (size_t i = 0; i < profiles.size() && i < result.bytes.size(); ++i)
          result.bytes[i] = std::max(result.bytes[i], profiles[i].scratchBytes());
        ++result.runs;
        return absl::OkStatus();
      });
  if (!st.ok())
    return absl::Status(st.code(), absl::StrCat("measuring operator scratch memory: ", st.message()));
  return result;
}

} // namespace graphopt
