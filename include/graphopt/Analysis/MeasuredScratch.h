//===- MeasuredScratch.h - Operator scratch memory, measured ------*- C++ -*-===//
//
// Memory an operator holds only while it runs: workspaces, and copies of its
// operands reordered into another layout (oneDNN's blocked weights on CPU,
// cuDNN workspaces on CUDA). It is invisible in the graph and depends on the
// kernel a library picks for the shapes and the machine, so it is measured:
// the graph runs once to warm up and twice measured, on the execution
// context's device, and each node keeps the most it held above both the level
// before it and the level it left. Liveness adds it to its timeline when asked
// (`liveness{scratch=measured}`).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/AnalysisManager.h"

#include <string>
#include <vector>

namespace graphopt {

struct MeasuredScratch {
  std::vector<int64_t> bytes; ///< per node, in graph order
  std::string device;
  unsigned runs = 0; ///< measured runs (after one warm-up)
};

struct MeasuredScratchAnalysis {
  static llvm::StringRef analysisName() { return "measured-scratch"; }
  using Result = MeasuredScratch;
  /// Needs the AnalysisManager's execution context; an error without one.
  static absl::StatusOr<MeasuredScratch> run(const Graph &graph, AnalysisManager &analyses);
};

} // namespace graphopt
