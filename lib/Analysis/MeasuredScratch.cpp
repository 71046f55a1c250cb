//===- MeasuredScratch.cpp - Operator scratch memory, measured ------------===//
#include "graphopt/Analysis/MeasuredScratch.h"

#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <absl/strings/str_cat.h>

namespace graphopt {

absl::StatusOr<MeasuredScratch> MeasuredScratchAnalysis::run(const Graph &graph,
                                                             AnalysisManager &analyses) {
  auto made = analyses.executionContext();
  if (!made.ok() || !(*made)->weights)
    return absl::FailedPreconditionError(absl::StrCat(
        "measuring operator scratch memory runs the graph: ",
        made.ok() ? "no weights were given" : std::string(made.status().message())));
  const ExecutionContext *context = *made;
  auto inputs = context->inputsFor(graph);
  if (!inputs.ok())
    return inputs.status();
  ExecutionOptions options;
  options.device = context->device;
  options.seed = context->seed;
  NodeProfiler profiler(context->device);
  Executor executor(graph, *context->weights, options);
  profiler.attach(executor);

  MeasuredScratch result;
  result.device = context->device.str();
  result.bytes.assign(graph.numNodes(), 0);
  // The warm-up run's one-time allocations (kernel caches) are not per step.
  constexpr unsigned kRuns = 3;
  for (unsigned run = 0; run < kRuns; ++run) {
    profiler.beginRun();
    auto outputs = executor.run(*inputs);
    if (!outputs.ok())
      return absl::Status(outputs.status().code(),
                          absl::StrCat("measuring operator scratch memory: ", outputs.status().message()));
    if (run == 0)
      continue;
    const std::vector<NodeProfile> &profiles = profiler.profiles();
    for (size_t i = 0; i < profiles.size() && i < result.bytes.size(); ++i)
      result.bytes[i] = std::max(result.bytes[i], profiles[i].scratchBytes());
    ++result.runs;
  }
  return result;
}

} // namespace graphopt
