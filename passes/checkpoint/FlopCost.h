//===- FlopCost.h - A static time estimate for graphs that cannot run -*- C++ -*-===//
//
// checkpoint{cost=flops}: when the graph cannot be profiled, each node's time
// is estimated from its floating-point work, from the schema and the tensor
// types alone: 2*M*N*K for the matrix products, 2 * output elements * the
// weight's per-output work for convolutions, one operation per output element
// for everything else that computes, nothing for views. Seconds are the
// operations at a nominal rate (kNominalFlopsPerSecond); only their ratios
// steer the planners.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <vector>

namespace graphopt {

inline constexpr double kNominalFlopsPerSecond = 1e11;

/// The floating-point operations `node` performs (an estimate).
double estimateFlops(const Node &node);
/// Per node rank: estimateFlops at the nominal rate.
std::vector<double> estimatedNodeSeconds(const Graph &graph);

} // namespace graphopt
