//===- RunLimits.h - graph-opt's resource limits ------------------*- C++ -*-===//
//
// --max-input-size and --max-memory (docs/Robustness.md): amounts of bytes or
// shares of physical memory, and the check that refuses a run before any of
// its tensors is made.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/StringRef.h>

namespace graphopt {

/// Physical memory in bytes (0 if unknown).
int64_t physicalMemoryBytes();

/// The bytes `value` of option `--name` allows: "8GiB", "512MB", "4096" or a
/// share of physical memory ("50%"). Errors name the option.
absl::StatusOr<int64_t> resolveLimit(llvm::StringRef name, llvm::StringRef value);

/// Refuses a run of `graph` whose simulated peak (weights, inputs and the
/// values live at once; operator scratch aside) is above `limit`, before
/// anything of it is made. `what` starts the message ("running").
absl::Status checkRunFits(const Graph &graph, int64_t limit, llvm::StringRef what);

} // namespace graphopt
