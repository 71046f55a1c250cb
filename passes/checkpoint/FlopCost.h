//===- FlopCost.h - A static time estimate for graphs that cannot run -*- C++ -*-===//
//
// checkpoint{cost=flops}: when the graph cannot be profiled, each node's time
// is estimated from its floating-point work (estimateFlops,
// Cost/OperatorCost.h), from the schema and the tensor types alone.
// Seconds are the operations at a nominal rate (kNominalFlopsPerSecond); only
// their ratios steer the planners.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/OperatorCost.h"

#include <vector>

namespace graphopt {

inline constexpr double kNominalFlopsPerSecond = 1e11;

/// Per node rank: estimateFlops at the nominal rate.
std::vector<double> estimatedNodeSeconds(const Graph &graph);

} // namespace graphopt
