//===- OperatorTiming.h - A small graph's time, measured as a layer sees it -*- C++ -*-===//
//
// What the cost database measures for each operator configuration: the
// graph (one node, OperatorConfig.h) runs on the executor again and again on
// the same input tensors, made once and kept resident, as a layer inside a
// model finds what the layer before it just wrote, not re-read from cold
// memory. Warm-up runs first (oneDNN primitives, caches), then timed runs
// until both a minimum count and a minimum duration are reached. Each run's
// time is the executor's node time (ExecutionResult::nodeSeconds: what a
// model's step counts for the node, its dispatch included); the figures are
// the median and quartiles over the runs. The inputs are the importer's
// seeded stand-ins (makeExampleInputs: of each input's dtype, sizes, strides
// and offset; floats normal, integers and bools zero, so indices, targets and
// masks are valid at every size). With an energy meter, its counter
// is read around the timed runs and divided by the calls.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/Runtime/EnergyMeter.h"

#include <ATen/core/Tensor.h>
#include <absl/status/statusor.h>

#include <optional>

namespace graphopt {

struct OperatorTimingOptions {
  c10::Device device{c10::DeviceType::CPU};
  uint64_t seed = 0;
  unsigned warmupRuns = 2;
  double warmupSeconds = 0.005; ///< warm-up goes on until both are reached
  unsigned minRuns = 5;
  double minSeconds = 0.02; ///< timed runs go on until both are reached
  unsigned maxRuns = 100000;
};

struct OperatorTiming {
  double medianSeconds = 0;
  double q1Seconds = 0, q3Seconds = 0; ///< the spread: quartiles over the runs
  double minSeconds = 0;
  unsigned runs = 0;
  double totalSeconds = 0; ///< wall time of the timed loop
  /// Joules per call, with a meter; nullopt without one.
  std::optional<double> joulesPerCall;
};

/// Times `graph` as described above. `meter` may be null.
absl::StatusOr<OperatorTiming> timeGraph(const Graph &graph, const OperatorTimingOptions &options,
                                         EnergyMeter *meter);

} // namespace graphopt
