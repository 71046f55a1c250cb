//===- OperatorTiming.cpp - A small graph's time, measured as a layer sees it ===//
#include "graphopt/Cost/OperatorTiming.h"

#include "graphopt/Import/Importer.h"
#include "graphopt/IR/Exceptions.h"
#include "graphopt/Runtime/Benchmark.h"

#include <absl/strings/str_cat.h>

#include <chrono>

namespace graphopt {

absl::StatusOr<OperatorTiming> timeGraph(const Graph &graph, const OperatorTimingOptions &options,
                                         EnergyMeter *meter) {
  auto inputs = makeExampleInputs(graph, options.seed);
  if (!inputs.ok())
    return inputs.status();
  if (!options.device.is_cpu())
    for (at::Tensor &t : *inputs)
      t = t.to(options.device);
  WeightStore noWeights;
  ExecutionOptions exec;
  exec.device = options.device;
  exec.seed = options.seed;
  // TimedSteps: a CPU run's node time; on CUDA the wall time to the device's end.
  TimedSteps steps(graph, noWeights, exec);
  if (absl::Status st = steps.prepare(); !st.ok())
    return st;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a) {
    return std::chrono::duration<double>(Clock::now() - a).count();
  };
  auto warmStart = Clock::now();
  for (unsigned i = 0; i < options.warmupRuns || seconds(warmStart) < options.warmupSeconds; ++i)
    if (auto r = steps.step(*inputs); !r.ok())
      return r.status();

  GraphBenchmark runs; // its stepSeconds are the samples, its quantiles their spread
  std::vector<double> &samples = runs.stepSeconds;
  std::optional<double> joulesBefore;
  if (meter)
    if (auto j = meter->joules(); j.ok())
      joulesBefore = *j;
  auto start = Clock::now();
  while (samples.size() < options.minRuns ||
         (seconds(start) < options.minSeconds && samples.size() < options.maxRuns)) {
    auto r = steps.step(*inputs);
    if (!r.ok())
      return r.status();
    samples.push_back(*r);
  }
  OperatorTiming timing;
  timing.totalSeconds = seconds(start);
  if (meter && joulesBefore)
    if (auto j = meter->joules(); j.ok())
      timing.joulesPerCall = (*j - *joulesBefore) / static_cast<double>(samples.size());
  timing.runs = static_cast<unsigned>(samples.size());
  timing.medianSeconds = runs.median();
  timing.q1Seconds = runs.quantile(0.25);
  timing.q3Seconds = runs.quantile(0.75);
  timing.minSeconds = runs.min();
  return timing;
}

} // namespace graphopt
