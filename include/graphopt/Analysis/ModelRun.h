//===- ModelRun.h - What running an imported model takes --------*- C++ -*-===//
//
// The passes that run a graph (profile, liveness{scratch=measured},
// checkpoint{measure=true}) get an ExecutionContext from their caller. For a
// model as imported, the graph-opt driver and the Python binding make it the
// same way, here, with the limits they share: the run must fit the memory limit (simulated, before any
// tensor is made), missing weights become seeded stand-ins, and the user
// inputs are the archive's examples or seeded stand-ins.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"
#include "graphopt/Pass/ExecutionContext.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

namespace graphopt {

/// Physical memory in bytes (0 if unknown).
int64_t physicalMemoryBytes();

/// The bytes `value` of the option `option` (its name as the user wrote it:
/// "--max-memory", "max_memory") allows: "8GiB", "512MB", "4096" or a share of
/// physical memory ("50%"). Errors name the option. graph-opt's
/// --max-input-size and --max-memory, and the Python binding's max_memory.
absl::StatusOr<int64_t> resolveLimit(llvm::StringRef option, llvm::StringRef value);

/// Refuses a run of `graph` whose simulated peak (weights, inputs and the
/// values live at once; operator scratch aside) is above `limit`, before
/// anything of it is made. `what` starts the message ("running").
absl::Status checkRunFits(const Graph &graph, int64_t limit, llvm::StringRef what);

struct ModelRunOptions {
  c10::Device device{c10::DeviceType::CPU};
  uint64_t seed = 0;
  int64_t memoryLimit = std::numeric_limits<int64_t>::max();
};

/// The context for running `graph`: checks it fits `options.memoryLimit`,
/// completes `weights` with seeded stand-ins for the inputs of `signature`
/// (the model's inputs as read) that have none (their count in
/// `*weightsMade`), and takes `exampleInputs`, or seeded stand-ins where there
/// are none. `weights` must outlive the context.
absl::StatusOr<ExecutionContext> makeModelExecutionContext(const Graph &graph,
                                                           const Graph &signature,
                                                           WeightStore &weights,
                                                           llvm::ArrayRef<at::Tensor> exampleInputs,
                                                           const ModelRunOptions &options,
                                                           size_t *weightsMade = nullptr);

} // namespace graphopt
