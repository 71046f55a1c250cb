//===- Executor.h - Interpreting a Graph through the c10 dispatcher -*- C++ -*-===//
//
// Runs a Graph node by node: each node is a boxed call through the c10
// dispatcher with a schema-ordered IValue stack; values live in a table and
// each is freed right after its last use, so the memory a run takes follows
// the graph's liveness. Weights and user inputs are moved to the device once.
// The RNG is seeded per run, and inputs the graph writes in place are restored
// after it (unless ExecutionOptions::keepUpdates), so every run starts from the
// same state and two runs with one seed are bitwise identical. Hooks before and
// after every node serve instrumentation (memory and time probes, the
// verifier's divergence search); several sets can be attached together.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"
#include "graphopt/Runtime/CpuMemoryPlan.h"
#include "graphopt/Runtime/FreePolicy.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <llvm/ADT/ArrayRef.h>

#include <functional>
#include <memory>
#include <vector>

namespace graphopt {

struct ExecutionOptions {
  c10::Device device{c10::DeviceType::CPU};
  uint64_t seed = 0;
  /// Keep every value until the run ends (for comparing intermediates) instead
  /// of freeing each after its last use.
  bool keepAllValues = false;
  /// Keep what a run changes, as a training loop does: in-place writes to
  /// weights and user inputs stay, and buffer-mutation outputs are copied into
  /// their buffers (in the copies the next run reads and in the WeightStore).
  /// Off by default: every run starts from the same state and leaves the
  /// WeightStore and the caller's inputs as they were, so running a graph
  /// twice, or two graphs one after the other, gives the same results.
  bool keepUpdates = false;
  /// On the CPU, lay the buffers of 16 KiB and up that a run allocates and
  /// frees out in one arena planned from the first run, and serve later runs
  /// from it (CpuMemoryPlan.h): a step reuses the previous step's memory
  /// instead of faulting it in again from the system.
  bool planCpuMemory = true;
  /// Keep a copy of every graph input the step wrote in place, as the step
  /// left it, in ExecutionResult::writtenInputs (before it is restored): what
  /// the verifier compares besides the outputs.
  bool captureWrittenInputs = false;
  /// Also compare each result's strides (over dimensions of more than one
  /// element) and device with its declared type, and record the first
  /// mismatch in ExecutionResult::layoutMismatch (the run goes on). What
  /// --verify turns on: passes decide on declared strides (cse, reinplace,
  /// add-optimizer), and a declared layout the kernel does not make is a
  /// wrong graph. Dtype and sizes are always checked (a mismatch fails the run).
  bool checkLayouts = false;
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
  /// Host time from the first node's start to the last node's return: the
  /// step itself, without binding inputs or restoring what the run wrote in
  /// place (on CUDA, kernels may still be running when it ends).
  double nodeSeconds = 0;
  /// With captureWrittenInputs: (graph input index, its value after the
  /// step) for every input some node writes in place, in input order.
  std::vector<std::pair<unsigned, at::Tensor>> writtenInputs;
  /// With checkLayouts: the first result whose strides, storage offset or device are not the
  /// declared ones, naming the node; "" when all were.
  std::string layoutMismatch;
};

class Executor {
public:
  /// `weights` must outlive the executor. Its tensors are written only with
  /// keepUpdates; prepare() adds the optimizer state it lacks (zeros).
  Executor(const Graph &graph, WeightStore &weights, ExecutionOptions options = {});

  /// Adds a set of hooks. Several sets nest: `before` hooks run in the order
  /// they were added, `after` hooks in the reverse order, so the set added
  /// last sits closest to the operator (add a time probe last to time the
  /// operator alone).
  void addHooks(ExecutionHooks hooks) { hooks_.push_back(std::move(hooks)); }
  size_t numHookSets() const { return hooks_.size(); }

  /// The one-time work before the first run: the free policy, the operator
  /// effects, weights looked up and moved to the device, private copies of
  /// the weights the graph writes in place. An optimizer_state input the
  /// store has no tensor for gets one: zeros of the input's type, put in the
  /// store (how torch.optim initialises its state). run() calls it when needed; call
  /// it first to keep that work (and its memory) out of a measured run.
  absl::Status prepare();

  /// Runs the graph once. `userInputs` are the user_input graph inputs in
  /// order; each must have its input's dtype and sizes.
  absl::StatusOr<ExecutionResult> run(llvm::ArrayRef<at::Tensor> userInputs);

  /// The graph inputs the graph writes in place (by input index), after prepare().
  llvm::ArrayRef<unsigned> mutatedInputs() const { return mutatedInputs_; }

  const Graph &graph() const { return graph_; }
  const ExecutionOptions &options() const { return options_; }
  /// The CPU memory plan, or null (not planCpuMemory, or not on the CPU).
  const CpuMemoryPlan *memoryPlan() const { return memoryPlan_.get(); }

private:
  absl::Status prepareUnguarded();
  absl::StatusOr<ExecutionResult> runUnguarded(llvm::ArrayRef<at::Tensor> userInputs);
  absl::StatusOr<c10::IValue> argumentValue(const Node &node, unsigned i) const;
  absl::Status runNode(const Node &node);
  void keepUpdates(llvm::ArrayRef<at::Tensor> userInputs, llvm::ArrayRef<at::Tensor> outputs);
  void restoreState(ExecutionResult *result);

  const Graph &graph_;
  WeightStore &weights_;
  ExecutionOptions options_;
  std::vector<ExecutionHooks> hooks_;
  bool prepared_ = false;

  /// The value table, indexed by Value::id().
  std::vector<c10::IValue> values_;
  /// Which values to drop after each node (computeFreePolicy).
  FreePolicy freePolicy_;
  /// Weights on the execution device, by input index (moved once); a private
  /// copy for a weight the graph writes in place unless keepUpdates.
  std::vector<at::Tensor> deviceWeights_;
  /// Graph inputs some node writes in place (OpEffects), by input index.
  llvm::SmallVector<unsigned, 4> mutatedInputs_;
  std::vector<uint8_t> isMutated_;
  /// This run's device copies of user inputs, by input index.
  std::vector<at::Tensor> boundUserInputs_;
  /// The arena plan of this executor's runs (planCpuMemory, on the CPU).
  std::unique_ptr<CpuMemoryPlan> memoryPlan_;
  /// The first layout mismatch of the run being made (checkLayouts).
  std::string layoutMismatch_;
};

} // namespace graphopt
