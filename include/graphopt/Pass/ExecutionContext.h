//===- ExecutionContext.h - What an analysis needs to run the graph -*- C++ -*-===//
//
// Most analyses read only the graph. A few measure it (operator scratch
// memory now, profiling later) and need what running it takes: the weights,
// one set of example inputs and the device. The driver gives these to the
// AnalysisManager; without them such analyses fail with a clear error.
//
// The example inputs belong to the model as it was read, and are known by
// name: a pass may change a graph's inputs, so each graph that runs takes the
// inputs its own user inputs name (`inputsFor`).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace graphopt {

struct ExecutionContext {
  WeightStore *weights = nullptr;
  /// Example values of the user inputs, and the names of those inputs.
  std::vector<at::Tensor> inputs;
  std::vector<std::string> inputNames;
  c10::Device device{c10::DeviceType::CPU};
  uint64_t seed = 0;

  /// The example values for `graph`'s user inputs, in its order, matched by
  /// name; an error names an input that has none. Without names, the inputs
  /// as given (the graph they were made for).
  absl::StatusOr<std::vector<at::Tensor>> inputsFor(const Graph &graph) const;
};

} // namespace graphopt
