//===- TestGraphs.h - Small graphs shared by the IR unit tests ----*- C++ -*-===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <gtest/gtest.h>

namespace graphopt::test {

inline ValueType f32(llvm::ArrayRef<int64_t> sizes) {
  return ValueType::ofTensor(TensorType::contiguous(c10::ScalarType::Float, sizes));
}

/// Unwraps a StatusOr in a test, failing loudly with the status message.
template <typename T> T unwrap(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status().message();
  if (!v.ok())
    throw std::runtime_error(std::string(v.status().message()));
  return std::move(*v);
}

/// x -> relu -> add(relu, x) -> output; a minimal valid graph.
struct ReluAddGraph {
  Graph g{"relu_add"};
  Value *x;
  Node *relu;
  Node *add;

  ReluAddGraph() {
    x = g.addInput("x", f32({2, 3}), InputRole::UserInput);
    relu = unwrap(g.createNode("aten::relu", {Argument::value(x)}, {f32({2, 3})}));
    add = unwrap(g.createNode(
        "aten::add.Tensor",
        {Argument::value(relu->output()), Argument::value(x), Argument::constant(Constant::ofInt(1))},
        {f32({2, 3})}, Phase::Forward, {"sum"}));
    g.addOutput(add->output(), OutputRole::UserOutput);
  }
};

} // namespace graphopt::test
