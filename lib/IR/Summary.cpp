//===- Summary.cpp - A short human-readable description of a graph --------===//
#include "graphopt/IR/Summary.h"
#include "graphopt/Support/Bytes.h"

#include <llvm/Support/Format.h>

#include <algorithm>
#include <vector>

namespace graphopt {

GraphSummary summarizeGraph(const Graph &graph) {
  GraphSummary s;
  s.name = graph.name().str();
  s.numNodes = graph.numNodes();
  s.numValues = graph.numValues();
  for (const Node &n : graph.nodes()) {
    ++s.nodesPerPhase[static_cast<size_t>(n.phase())];
    ++s.operatorCounts[n.opName()];
  }
  for (const GraphInput &in : graph.inputs()) {
    ++s.inputsPerRole[static_cast<size_t>(in.role)];
    if (in.tiedTo) { // its storage is counted with the input it is tied to
      ++s.tiedInputs;
      continue;
    }
    if (in.role == InputRole::Parameter && in.value->isTensor() && in.value->type().isKnown()) {
      s.parameterElements += in.value->tensorType().numel();
      s.parameterBytes += in.value->tensorType().storageBytes();
    }
  }
  for (const GraphOutput &out : graph.outputs())
    ++s.outputsPerRole[static_cast<size_t>(out.role)];
  return s;
}


void printSummary(llvm::raw_ostream &os, const GraphSummary &s) {
  os << "graph @" << s.name << ": " << s.numNodes << " nodes, " << s.numValues << " values\n";
  os << "  nodes per phase:";
  for (size_t p = 0; p < s.nodesPerPhase.size(); ++p)
    os << (p ? ", " : " ") << phaseName(static_cast<Phase>(p)) << ' ' << s.nodesPerPhase[p];
  os << '\n';
  os << "  parameters: " << s.inputsPerRole[static_cast<size_t>(InputRole::Parameter)] << " ("
     << s.parameterElements << " elements, " << formatBytes(s.parameterBytes);
  if (s.tiedInputs)
    os << "; " << s.tiedInputs << " tied input" << (s.tiedInputs == 1 ? ", its" : "s, their")
       << " storage counted once";
  os << ")\n";
  os << "  inputs:";
  for (size_t r = 0; r < s.inputsPerRole.size(); ++r)
    os << (r ? ", " : " ") << inputRoleName(static_cast<InputRole>(r)) << ' ' << s.inputsPerRole[r];
  os << '\n';
  os << "  outputs:";
  for (size_t r = 0; r < s.outputsPerRole.size(); ++r)
    os << (r ? ", " : " ") << outputRoleName(static_cast<OutputRole>(r)) << ' '
       << s.outputsPerRole[r];
  os << '\n';
  // Most frequent operators first; ties by name so the output is stable.
  std::vector<std::pair<std::string, size_t>> ops(s.operatorCounts.begin(), s.operatorCounts.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  size_t width = 0;
  for (const auto &[name, count] : ops)
    width = std::max(width, name.size());
  os << "  operators (" << ops.size() << " distinct):\n";
  for (const auto &[name, count] : ops)
    os << "    " << llvm::left_justify(name, width) << "  " << count << '\n';
}

} // namespace graphopt
