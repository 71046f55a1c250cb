//===- Executor.h - Interpreting a Graph through the c10 dispatcher -*- C++ -*-===//
//
// Runs a Graph node by node: each node is a boxed call through the c10
// dispatcher with a schema-ordered IValue stack; values live in a table and
// each is freed right after its last use, so the memory a run takes follows
// the graph's liveness. Weights and user inputs are moved to the device once.
// The RNG is seeded per run, so two runs with one seed are bitwise identical.
// Hooks before and after every node serve instrumentation (memory and time
// probes, the verifier's divergence search).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <llvm/ADT/ArrayRef.h>

#include <functional>
#include <vector>

namespace graphopt {

struct ExecutionOptions {
  c10::Device device{c10::DeviceType::CPU};
  uint64_t seed = 0;
  /// Keep every value until the run ends (for comparing intermediates) instead
  /// of freeing each after its last use.
  bool keepAllValues = false;
  /// Write buffer-mutation outputs back into the WeightStore's buffers.
  bool writeBackBuffers = false;
};

/// Called before and after each node; `after` sees the node's outputs.
struct ExecutionHooks {
  std::function<void(const Node &)> before;
  std::function<void(const Node &, llvm::ArrayRef<c10::IValue> outputs)> after;
};

struct ExecutionResult {
  /// One entry per graph output, in order.
  std::vector<at::Tensor> outputs;
  /// Every value's final IValue, by value; only with keepAllValues.
  std::vector<std::pair<const Value *, c10::IValue>> values;
};

class Executor {
public:
  /// `weights` must outlive the executor; it is written to only with writeBackBuffers.
  Executor(const Graph &graph, WeightStore &weights, ExecutionOptions options = {});

  void setHooks(ExecutionHooks hooks) { hooks_ = std::move(hooks); }

  /// Runs the graph once. `userInputs` are the user_input graph inputs in
  /// order; each must have its input's dtype and sizes.
  absl::StatusOr<ExecutionResult> run(llvm::ArrayRef<at::Tensor> userInputs);

  const Graph &graph() const { return graph_; }
  const ExecutionOptions &options() const { return options_; }

private:
  absl::Status prepare();
  absl::StatusOr<c10::IValue> argumentValue(const Node &node, unsigned i) const;
  absl::Status runNode(const Node &node, size_t index);
  void writeBackBuffers(llvm::ArrayRef<at::Tensor> outputs);

  const Graph &graph_;
  WeightStore &weights_;
  ExecutionOptions options_;
  ExecutionHooks hooks_;
  bool prepared_ = false;

  llvm::DenseMap<const Value *, unsigned> slot_; ///< value -> index into values_
  std::vector<c10::IValue> values_;
  /// For each node, the operand slots whose last use it is.
  std::vector<llvm::SmallVector<unsigned, 4>> freeAfter_;
  std::vector<bool> isGraphOutput_;
  /// Weights on the execution device, by input index (moved once).
  std::vector<at::Tensor> deviceWeights_;
  /// Inputs some operator writes in place, by input index (schema alias info).
  std::vector<bool> mutatedInPlace_;
};

} // namespace graphopt
