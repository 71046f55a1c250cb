//===- FlopCost.cpp - A static time estimate for graphs that cannot run ---===//
#include "checkpoint/FlopCost.h"

namespace graphopt {

std::vector<double> estimatedNodeSeconds(const Graph &graph) {
  std::vector<double> seconds;
  seconds.reserve(graph.numNodes());
  for (const Node &n : graph.nodes())
    seconds.push_back(estimateFlops(n) / kNominalFlopsPerSecond);
  return seconds;
}

} // namespace graphopt
