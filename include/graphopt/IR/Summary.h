//===- Summary.h - A short human-readable description of a graph --*- C++ -*-===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <llvm/Support/raw_ostream.h>

#include <array>
#include <map>
#include <string>

namespace graphopt {

struct GraphSummary {
  std::string name;
  size_t numNodes = 0;
  size_t numValues = 0;
  std::array<size_t, 3> nodesPerPhase{}; ///< indexed by Phase
  std::array<size_t, 5> inputsPerRole{}; ///< indexed by InputRole
  std::array<size_t, 5> outputsPerRole{}; ///< indexed by OutputRole
  int64_t parameterElements = 0;
  int64_t parameterBytes = 0; ///< tied inputs' shared storage counted once
  size_t tiedInputs = 0;      ///< inputs that share an earlier input's storage
  std::map<std::string, size_t> operatorCounts; ///< by qualified operator name
};

GraphSummary summarizeGraph(const Graph &graph);
void printSummary(llvm::raw_ostream &os, const GraphSummary &summary);

} // namespace graphopt
