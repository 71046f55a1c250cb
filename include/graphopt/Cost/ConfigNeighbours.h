//===- ConfigNeighbours.h - An operator configuration at nearby sizes -*- C++ -*-===//
//
// The cost database is filled around what models use: a configuration seen in
// one model, measured at nearby sizes as well, covers the next model of its
// family (another batch, another width). The neighbours are derived from the
// configuration itself, not from a hand-written sweep: one of its tensor sizes
// (those that are at least `minSize`, most used first) is scaled by each
// factor everywhere it appears, in every operand's sizes and in every constant
// argument the operator's schema declares a size (SymInt, SymInt?, SymInt[]:
// view and expand sizes, slice ends, a convolution's groups); the operands keep
// their layout (dimension order, broadcast dimensions) with dense strides, and
// the results' types come from the operator (TypeInference.h). A neighbour the
// operator rejects (a shape relation the substitution broke, such as a view to
// a product of sizes) is dropped, not an error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/OperatorConfig.h"

#include <vector>

namespace graphopt {

struct NeighbourOptions {
  /// Each chosen size v becomes round(v * factor) (at least 1).
  std::vector<double> factors = {0.5, 2.0};
  /// How many distinct sizes are scaled, one at a time: those carried by the
  /// most operand dimensions first, then the largest.
  unsigned sizesScaled = 2;
  /// Sizes below this are left alone: they are kernel sizes, strides, small
  /// heads counts, dimension indices more often than extents worth scaling.
  int64_t minSize = 8;
};

/// The configuration's neighbours, distinct and each different from it.
/// `config` must have its one-node graph.
std::vector<OperatorConfig> neighbourConfigs(const OperatorConfig &config,
                                             const NeighbourOptions &options = {});

} // namespace graphopt
