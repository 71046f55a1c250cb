//===- SweepFile.h - An operator with ranges of its configuration -*- C++ -*-===//
//
// A sweep file (docs/CostDB.md, "Sweep files"): JSON, {"sweeps": [...]}, each
// sweep a .gir template with {name} placeholders and the values to put in
// them: "ranges" (every combination of the lists) or "cases" (a list of
// objects, one instance each, for configurations whose sizes depend on each
// other, such as a strided convolution's output size). Each instance is
// parsed and its unknown types (`?`) are inferred.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>

#include <memory>
#include <string>
#include <vector>

namespace graphopt {

struct SweepInstance {
  std::string sweep; ///< the sweep's name
  std::string label; ///< its values: "m=64,n=128"
  std::unique_ptr<Graph> graph;
};

/// Every instance of every sweep in `path`; an error names the file, the sweep
/// and what is wrong. More than `maxInstances` in one sweep is refused.
absl::StatusOr<std::vector<SweepInstance>> expandSweepFile(const std::string &path,
                                                           size_t maxInstances);

} // namespace graphopt
