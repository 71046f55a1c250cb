//===- OperatorCost.h - An operator's work, from its schema and types -*- C++ -*-===//
//
// What a node costs on paper, from the operator and the tensor types alone
// (nothing runs): its floating-point operations (2*M*N*K for the matrix
// products, 2 * output elements * the weight's per-output work for
// convolutions, the two products of scaled dot-product attention (five in its
// backward), one per output element for everything else that computes,
// none for views) and the bytes it reads and writes. checkpoint{cost=flops}
// turns the operations into seconds at a nominal rate; the cost database
// (CostDatabase.h) records both beside each measured time and interpolates
// between measured configurations along them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

namespace graphopt {

/// The floating-point operations `node` performs (an estimate).
double estimateFlops(const Node &node);

/// The bytes `node` moves: each distinct tensor it reads (the span of its
/// elements, as typed) plus each tensor it makes. A view moves nothing.
int64_t estimateBytesMoved(const Node &node);

/// True for the operators whose time follows their floating-point work
/// (matrix products, convolutions, attention); the time of every other operator follows
/// the bytes it moves.
bool isComputeBound(const Node &node);

/// The measure of work the cost database interpolates along: the operations of
/// a compute-bound operator, else the bytes it moves.
double workOf(const Node &node);

} // namespace graphopt
