//===- OperatorConfig.h - One operator call, out of its graph ---*- C++ -*-===//
//
// The unit the cost database measures and looks up: a node taken out of its
// graph with what decides its cost (the operator, each tensor operand's dtype,
// sizes, strides, storage offset and device, every constant argument) and
// nothing else (names, phase, module attributes). It is a graph of one node
// whose tensor operands are user inputs, so it runs on the executor as it is,
// and its `.gir` text, with canonical names, is its key: two nodes have the
// same key exactly when they make the same call on the same kind of tensors.
//
// Its family is the key without the tensor sizes and strides (the operator,
// each operand's dtype, rank and device, the constants that are not shapes):
// the set the database interpolates within when a configuration itself was
// never measured.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>

#include <memory>
#include <string>
#include <vector>

namespace graphopt {

struct OperatorConfig {
  std::string op;     ///< "aten::mm", with the overload: "aten::add.Tensor"
  std::string key;    ///< the one-node graph's .gir text
  std::string family; ///< see above
  /// Within a family, where the configuration lies: every operand's and
  /// result's sizes in order (their count is the family's), and the constant
  /// arguments as printed. The database's nearest measured neighbour is the
  /// one closest in log-sizes, constants that differ counting as far.
  std::vector<int64_t> dims;
  std::string constants;
  double flops = 0;          ///< estimateFlops
  int64_t bytesMoved = 0;    ///< estimateBytesMoved
  bool computeBound = false; ///< isComputeBound
  double work = 0;           ///< workOf: what the database interpolates along
  std::unique_ptr<Graph> graph; ///< the one-node graph the key prints
};

/// The configuration of `node`. An error says why it has none: a collective
/// (its time is the network's), an operand the graph computes that is not a
/// tensor (its value is known only when the graph runs), or a type not known.
absl::StatusOr<OperatorConfig> operatorConfigOf(const Node &node);

/// The configuration of a one-node graph read back (a key from the database, a
/// sweep's instance): `graph` must hold exactly one node.
absl::StatusOr<OperatorConfig> operatorConfigOfGraph(std::unique_ptr<Graph> graph);

} // namespace graphopt
