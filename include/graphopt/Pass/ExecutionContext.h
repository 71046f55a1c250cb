//===- ExecutionContext.h - What an analysis needs to run the graph -*- C++ -*-===//
//
// Most analyses read only the graph. A few measure it (operator scratch
// memory now, profiling later) and need what running it takes: the weights,
// one set of example inputs and the device. The driver gives these to the
// AnalysisManager; without them such analyses fail with a clear error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/WeightStore.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

namespace graphopt {

struct ExecutionContext {
  WeightStore *weights = nullptr;
  std::vector<at::Tensor> inputs;
  c10::Device device{c10::DeviceType::CPU};
  uint64_t seed = 0;
};

} // namespace graphopt
