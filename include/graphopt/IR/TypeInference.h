//===- TypeInference.h - Output types by running ops on meta tensors -*- C++ -*-===//
//
// Infers a node's output types (dtype, sizes, strides) by calling its operator
// on stand-in tensors: "meta" tensors, which carry metadata and no data, where
// the operator has a meta kernel in C++; otherwise zero-filled CPU tensors of
// the same shapes (some meta kernels live only in Python). Either way the
// operator itself decides, so the result is what PyTorch would produce.
// Operators whose output shape depends on the data (nonzero, masked_select)
// get the shape zeros give. Used where a source carries no shapes
// (TorchScript) and by passes that create nodes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

namespace graphopt {

/// Sets the types of `node`'s outputs. Every operand must have a known type;
/// the operator must return as many results as the node has outputs.
absl::Status inferNodeTypes(Node &node);

/// The types `node`'s operator gives its results when run on zero-filled
/// stand-ins of its operands' declared types on `device` (no meta kernel):
/// what that device's kernel makes, which a graph's declared types (from
/// torch's fake tensors) do not always say. The node is left unchanged.
absl::StatusOr<std::vector<ValueType>> kernelResultTypes(const Node &node, c10::Device device);

/// inferNodeTypes for every node whose outputs are not all known, in order.
absl::Status inferTypes(Graph &graph);

} // namespace graphopt
