//===- Executor.cpp - Interpreting a Graph through the c10 dispatcher -----===//
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/Collectives.h"
#include "graphopt/Runtime/ParameterShards.h"

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/Exceptions.h"
#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/IR/IValueConversion.h"
#include "graphopt/IR/NodeResults.h"
#include "graphopt/IR/OpEffects.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_strided.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <chrono>
#include <mutex>
#include <optional>

namespace graphopt {

namespace {

std::string shapeOf(const c10::IValue &v) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    if (!t.defined())
      return "undefined";
    return absl::StrCat(c10::toString(t.scalar_type()), "[", absl::StrJoin(t.sizes(), ", "), "]");
  }
  if (v.isTensorList()) {
    std::vector<std::string> parts;
    for (const at::Tensor &t : v.toTensorList().vec())
      parts.push_back(shapeOf(t));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  if (v.isNone())
    return "None";
  return v.tagKind();
}

/// Seeds the default CPU generator, and every CUDA generator where CUDA is up.
void seedGenerators(uint64_t seed) {
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  if (at::hasCUDA()) {
    for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(at::getNumGPUs()); ++i) {
      at::Generator gen = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, i));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(seed);
    }
  }
}

/// What ran must be what the graph declares: every later node, analysis and
/// pass reads the declared type, so a tensor of another dtype or shape (an
/// operator given arguments its declared types do not describe) is an error
/// naming the node rather than a silent wrong answer or a crash further on.
/// Strides are not compared: kernels may lay out a result differently on
/// another device or backend.
absl::Status checkDeclaredType(const Node &node, unsigned i, const c10::IValue &result) {
  const Value *out = node.output(i);
  if (!out->isTensor() || !out->type().isKnown() || !result.isTensor())
    return absl::OkStatus();
  const at::Tensor &t = result.toTensor();
  const TensorType &want = out->tensorType();
  if (!t.defined() || (t.scalar_type() == want.dtype && llvm::equal(t.sizes(), want.sizes)))
    return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "node ", node.describe(), " (", node.opName(), ") declares %", out->name().str(), " as ",
      c10::toString(want.dtype), "[", absl::StrJoin(want.sizes, ", "), "] but computed ",
      shapeOf(t), ": the graph's types do not describe what its operators compute"));
}

/// Why `t`'s layout is not `want`'s, or "": its storage offset, strides over the dimensions of
/// more than one element (a stride of a size-1 dimension is never used), and
/// the device type when the graph was typed for the device it runs on.
std::string layoutDifference(const at::Tensor &t, const TensorType &want, c10::Device runDevice) {
  if (t.numel() == 0 || static_cast<size_t>(t.dim()) != want.strides.size())
    return "";
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) != want.strides[d])
      return absl::StrCat("strides [", absl::StrJoin(t.strides(), ", "), "], declared [",
                          absl::StrJoin(want.strides, ", "), "]");
  if (t.storage_offset() != want.storageOffset)
    return absl::StrCat("storage offset ", t.storage_offset(), ", declared ", want.storageOffset);
  if (want.device.type() == runDevice.type() && t.device().type() != want.device.type())
    return absl::StrCat("device ", t.device().str(), ", declared ", want.device.str());
  return "";
}

/// Cuts this rank's shard of a sharded parameter (ParameterShards.h) from the
/// whole parameter in the store, and keeps it under the shard's target, where
/// kept updates accumulate as they do for any weight.
absl::Status storeShard(WeightStore &weights, const GraphInput &in, const ShardTarget &shard) {
  const std::string holder = absl::StrCat("graph input %", in.value->name().str(),
                                          " (rank's shard of '", shard.parameter, "')");
  const at::Tensor *whole = weights.lookup(shard.parameter);
  if (!whole)
    return absl::FailedPreconditionError(
        absl::StrCat("no weight for parameter '", shard.parameter, "', whose shard ", holder,
                     " holds: the whole parameter is cut into the ranks' shards when the step runs"));
  auto world = processGroupSize(shard.group);
  auto rank = processGroupRank(shard.group);
  if (!world.ok() || !rank.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        holder, ": ", (world.ok() ? rank.status() : world.status()).message()));
  const TensorType &want = in.value->tensorType();
  const int64_t chunk = shardElements(whole->numel(), *world);
  if (want.rank() != 1 || want.sizes[0] != chunk)
    return absl::FailedPreconditionError(absl::StrCat(
        holder, " is ", c10::toString(want.dtype), "[", absl::StrJoin(want.sizes, ", "),
        "], but the parameter (", shapeOf(*whole), ") over the ", *world, " ranks of group \"",
        shard.group, "\" makes shards of ", chunk, " elements: the graph was sharded for another "
        "world size"));
  weights.set(in.target, shardOf(*whole, *world, *rank));
  return absl::OkStatus();
}

} // namespace

Executor::Executor(const Graph &graph, WeightStore &weights, ExecutionOptions options)
    : graph_(graph), weights_(weights), options_(options) {
  linkOffloadKernels(); // graphopt::offload's kernels are in this library
  if (options_.planCpuMemory && options_.device.is_cpu())
    memoryPlan_ = std::make_unique<CpuMemoryPlan>();
}


// Moving weights to the device, copying inputs and restoring state allocate
// and may throw; nodes report their own failures (runNode). Both entry points
// turn anything thrown into a status naming the graph.
absl::Status Executor::prepare() {
  CpuAllocatorScope hooks; // graph-opt's allocators, for this call only
  try {
    return prepareUnguarded();
  } catch (...) {
    return absl::ResourceExhaustedError(absl::StrCat("preparing @", graph_.name().str(), " to run: ",
                                                     describeCurrentException()));
  }
}

absl::StatusOr<ExecutionResult> Executor::run(llvm::ArrayRef<at::Tensor> userInputs) {
  CpuAllocatorScope hooks; // graph-opt's allocators, for this call only
  try {
    return runUnguarded(userInputs);
  } catch (...) {
    std::fill(values_.begin(), values_.end(), c10::IValue());
    std::fill(boundUserInputs_.begin(), boundUserInputs_.end(), at::Tensor());
    return absl::InternalError(absl::StrCat("running @", graph_.name().str(), ": ",
                                            describeCurrentException()));
  }
}

absl::Status Executor::prepareUnguarded() {
  if (prepared_)
    return absl::OkStatus();
  // MKL may otherwise use fewer threads when the machine is busy (its
  // "dynamic" mode, on unless at::set_num_threads turned it off), which
  // changes how a GEMM's sums are split and so the last bits of its result:
  // a graph would not match itself bitwise under load. Setting the same
  // thread count turns the mode off, as PyTorch does when a count is set.
  static std::once_flag fixedThreads;
  std::call_once(fixedThreads, [] { at::set_num_threads(at::get_num_threads()); });
  // Collectives need their process groups here, of the sizes they say
  // (Collectives.h): checked before anything runs, not half way through.
  if (absl::Status st = checkProcessGroups(graph_); !st.ok())
    return st;
  values_.assign(graph_.valueIdBound(), c10::IValue());
  freePolicy_ = computeFreePolicy(graph_);

  // Inputs some node writes in place, directly or through a view (a
  // `Tensor(a!)` argument in its schema, OpEffects): unless the caller keeps
  // updates, the run works on a private copy restored after every run.
  mutatedInputs_ = AliasInfo(graph_).writtenGraphInputs();
  isMutated_.assign(graph_.inputs().size(), 0);
  for (unsigned i : mutatedInputs_)
    isMutated_[i] = 1;

  // Weights: looked up by target, moved to the device once.
  std::vector<at::Tensor> weights(graph_.inputs().size());
  for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
    const GraphInput &in = graph_.inputs()[i];
    if (in.role == InputRole::UserInput)
      continue;
    const at::Tensor *w = weights_.lookup(in.target);
    if (!w && in.role == InputRole::OptimizerState && in.value->isTensor() &&
        in.value->tensorType().isKnown()) {
      // Optimizer state starts as zeros of its input's type, as torch.optim
      // makes it on its first step (exp_avg, exp_avg_sq, momentum_buffer,
      // step); it goes into the store, where kept updates accumulate.
      const TensorType &t = in.value->tensorType();
      at::TensorOptions options = at::TensorOptions().dtype(t.dtype).device(t.device);
      weights_.set(in.target, at::empty_strided(t.sizes, t.strides, options).zero_());
      w = weights_.lookup(in.target);
    }
    if (!w && in.role == InputRole::Parameter && in.value->isTensor())
      if (std::optional<ShardTarget> shard = parseShardTarget(in.target)) {
        const Value *owner = graph_.storageOwner(in.value);
        if (owner != in.value) {
          // A tied parameter's shard is its owner's (an earlier input): one
          // storage, as the whole parameters shared one.
          if (const at::Tensor *o = weights_.lookup(graph_.inputs()[owner->index()].target))
            weights_.set(in.target, *o);
        } else if (absl::Status st = storeShard(weights_, in, *shard); !st.ok()) {
          return st;
        }
        w = weights_.lookup(in.target);
      }
    if (!w)
      return absl::FailedPreconditionError(absl::StrCat("no weight for ", inputRoleName(in.role).str(),
                                                        " '", in.target, "' (graph input %",
                                                        in.value->name().str(), ")"));
    const TensorType &want = in.value->tensorType();
    if (w->scalar_type() != want.dtype || !llvm::equal(w->sizes(), want.sizes))
      return absl::FailedPreconditionError(absl::StrCat(
          "weight '", in.target, "' is ", shapeOf(*w), " but graph input %", in.value->name().str(),
          " expects ", c10::toString(want.dtype), "[", absl::StrJoin(want.sizes, ", "), "]"));
    weights[i] = w->device() == options_.device ? *w : w->to(options_.device);
    if (isMutated_[i] && !options_.keepUpdates && weights[i].is_same(*w))
      weights[i] = w->clone(); // the store is never written
  }
  deviceWeights_ = std::move(weights);
  boundUserInputs_.assign(graph_.inputs().size(), at::Tensor());
  prepared_ = true;
  return absl::OkStatus();
}

absl::StatusOr<c10::IValue> Executor::argumentValue(const Node &node, unsigned i) const {
  auto fromTable = [this](const Value *v) -> absl::StatusOr<c10::IValue> {
    return values_[v->id()];
  };
  // Wrapped numbers stay on the CPU, as PyTorch makes them; factory calls that
  // name the export's device run on ours.
  return argumentToIValue(node, i, fromTable, c10::Device(c10::DeviceType::CPU), options_.device);
}

absl::Status Executor::runNode(const Node &node) {
  // Hooks bracket everything the node costs: its arguments, the call, its results.
  for (const ExecutionHooks &h : hooks_)
    if (h.before)
      h.before(node);
  torch::jit::Stack stack;
  stack.reserve(node.numArgs());
  for (unsigned i = 0; i < node.numArgs(); ++i) {
    auto v = argumentValue(node, i);
    if (!v.ok())
      return v.status();
    stack.push_back(std::move(*v));
  }
  // Operators throw c10::Error, and also what their backends throw
  // (std::runtime_error, oneDNN's dnnl::error, std::bad_alloc): every one of
  // them is a failure of this node, never an abort.
  std::optional<std::string> failure;
  try {
    node.op().callBoxed(stack);
  } catch (...) {
    failure = describeCurrentException();
  }
  if (failure) {
    std::vector<std::string> shapes;
    for (unsigned i = 0; i < node.numArgs(); ++i) {
      auto v = argumentValue(node, i);
      if (v.ok() && (v->isTensor() || v->isTensorList()))
        shapes.push_back(absl::StrCat(node.schema().arguments()[i].name(), "=", shapeOf(*v)));
    }
    return absl::InternalError(absl::StrCat("node ", node.describe(), " (", node.opName(),
                                            ") failed with inputs ", absl::StrJoin(shapes, ", "),
                                            ": ", *failure));
  }
  // Results in schema order, spread over the outputs as type inference does.
  llvm::SmallVector<c10::IValue, 4> results;
  spreadResults(node.schema(), stack, results);
  if (results.size() != node.numOutputs())
    return absl::InternalError(absl::StrCat("node ", node.describe(), " returned ", results.size(),
                                            " results for ", node.numOutputs(), " outputs"));
  for (unsigned i = 0; i < node.numOutputs(); ++i) {
    if (absl::Status st = checkDeclaredType(node, i, results[i]); !st.ok())
      return st;
    if (options_.checkLayouts && layoutMismatch_.empty() && results[i].isTensor() &&
        results[i].toTensor().defined() && node.output(i)->isTensor() &&
        node.output(i)->tensorType().isKnown())
      if (std::string why = layoutDifference(results[i].toTensor(), node.output(i)->tensorType(),
                                             options_.device);
          !why.empty())
        layoutMismatch_ = absl::StrCat("node ", node.describe(), " (", node.opName(), ") made %",
                                       node.output(i)->name().str(), " with ", why);
    values_[node.output(i)->id()] = results[i];
  }
  for (auto h = hooks_.rbegin(); h != hooks_.rend(); ++h)
    if (h->after)
      h->after(node, results);
  if (!options_.keepAllValues)
    for (const Value *v : freePolicy_.freedAfter(node))
      values_[v->id()] = c10::IValue();
  return absl::OkStatus();
}

void Executor::keepUpdates(llvm::ArrayRef<at::Tensor> userInputs, llvm::ArrayRef<at::Tensor> outputs) {
  // Inputs written in place: the store (or the caller's tensor) sees it
  // already unless the device copy is separate.
  size_t next = 0;
  for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
    const GraphInput &in = graph_.inputs()[i];
    if (in.role == InputRole::UserInput) {
      const at::Tensor &given = userInputs[next++];
      if (isMutated_[i] && !given.is_same(boundUserInputs_[i]))
        given.copy_(boundUserInputs_[i]);
      continue;
    }
    if (!isMutated_[i])
      continue;
    at::Tensor *stored = weights_.lookup(in.target);
    if (stored && !stored->is_same(deviceWeights_[i]))
      stored->copy_(deviceWeights_[i]);
  }
  for (unsigned o = 0; o < graph_.outputs().size(); ++o) {
    const GraphOutput &out = graph_.outputs()[o];
    if (out.role != OutputRole::BufferMutation || !outputs[o].defined())
      continue;
    // Update the device copy the next run reads, and the store if it differs.
    for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
      const GraphInput &in = graph_.inputs()[i];
      if (in.role != InputRole::Buffer || in.target != out.target)
        continue;
      deviceWeights_[i].copy_(outputs[o]);
      at::Tensor *stored = weights_.lookup(in.target);
      if (stored && !stored->is_same(deviceWeights_[i]))
        stored->copy_(deviceWeights_[i]);
    }
  }
}

void Executor::restoreState(ExecutionResult *result) {
  for (unsigned i : mutatedInputs_) {
    const GraphInput &in = graph_.inputs()[i];
    // A user input written in place was a private copy, dropped with the run.
    if (in.role == InputRole::UserInput)
      continue;
    at::Tensor &working = deviceWeights_[i];
    // Results that share the working copy's storage keep what the run left.
    if (result) {
      for (at::Tensor &t : result->outputs)
        if (t.defined() && t.is_alias_of(working))
          t = t.clone();
      for (auto &[v, iv] : result->values)
        if (iv.isTensor() && iv.toTensor().defined() && iv.toTensor().is_alias_of(working))
          iv = iv.toTensor().clone();
    }
    if (const at::Tensor *stored = weights_.lookup(in.target))
      working.copy_(*stored);
  }
}

absl::StatusOr<ExecutionResult> Executor::runUnguarded(llvm::ArrayRef<at::Tensor> userInputs) {
  if (absl::Status st = prepareUnguarded(); !st.ok())
    return st;
  std::optional<CpuMemoryPlan::RunScope> planned;
  if (memoryPlan_)
    planned.emplace(*memoryPlan_);
  // Bind inputs: weights from the store, user inputs checked against their types.
  size_t next = 0;
  for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
    const GraphInput &in = graph_.inputs()[i];
    const Value *value = in.value;
    if (in.role != InputRole::UserInput) {
      values_[value->id()] = deviceWeights_[i];
      continue;
    }
    if (next >= userInputs.size())
      return absl::InvalidArgumentError(absl::StrCat("missing user input %", value->name().str(),
                                                     ": ", userInputs.size(), " given"));
    const at::Tensor &t = userInputs[next++];
    const TensorType &want = value->tensorType();
    if (!t.defined() || t.scalar_type() != want.dtype || !llvm::equal(t.sizes(), want.sizes))
      return absl::InvalidArgumentError(absl::StrCat(
          "user input %", value->name().str(), " expects ", c10::toString(want.dtype), "[",
          absl::StrJoin(want.sizes, ", "), "], got ", t.defined() ? shapeOf(t) : "an undefined tensor"));
    at::Tensor bound = t.device() == options_.device ? t : t.to(options_.device);
    // The caller's tensor is not written unless updates are kept.
    if (isMutated_[i] && !options_.keepUpdates && bound.is_same(t))
      bound = t.clone();
    boundUserInputs_[i] = bound;
    values_[value->id()] = std::move(bound);
  }
  if (next != userInputs.size())
    return absl::InvalidArgumentError(absl::StrCat("the graph takes ", next, " user inputs, ",
                                                   userInputs.size(), " given"));

  seedGenerators(options_.seed);
  layoutMismatch_.clear();
  auto nodesStart = std::chrono::steady_clock::now();
  for (const Node &n : graph_.nodes()) {
    if (absl::Status st = runNode(n); !st.ok()) {
      std::fill(values_.begin(), values_.end(), c10::IValue());
      std::fill(boundUserInputs_.begin(), boundUserInputs_.end(), at::Tensor());
      if (!options_.keepUpdates)
        restoreState(nullptr);
      return st;
    }
  }

  ExecutionResult result;
  result.layoutMismatch = std::move(layoutMismatch_);
  result.nodeSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - nodesStart).count();
  for (const GraphOutput &out : graph_.outputs()) {
    const c10::IValue &v = values_[out.value->id()];
    result.outputs.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
  }
  if (options_.keepAllValues)
    for (const Value *v : graph_.allValues())
      result.values.emplace_back(v, values_[v->id()]);
  std::fill(values_.begin(), values_.end(), c10::IValue());
  if (options_.captureWrittenInputs)
    for (unsigned i : mutatedInputs_) {
      const at::Tensor &state = graph_.inputs()[i].role == InputRole::UserInput
                                    ? boundUserInputs_[i]
                                    : deviceWeights_[i];
      result.writtenInputs.emplace_back(i, state.defined() ? state.clone() : at::Tensor());
    }
  if (options_.keepUpdates)
    keepUpdates(userInputs, result.outputs);
  else
    restoreState(&result);
  std::fill(boundUserInputs_.begin(), boundUserInputs_.end(), at::Tensor());
  return result;
}

} // namespace graphopt
