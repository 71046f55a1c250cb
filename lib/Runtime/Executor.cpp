//===- Executor.cpp - Interpreting a Graph through the c10 dispatcher -----===//
#include "graphopt/Runtime/Executor.h"

#include "graphopt/IR/IValueConversion.h"
#include "graphopt/IR/SchemaUtils.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <mutex>

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

} // namespace

Executor::Executor(const Graph &graph, WeightStore &weights, ExecutionOptions options)
    : graph_(graph), weights_(weights), options_(options) {}

absl::Status Executor::prepare() {
  if (prepared_)
    return absl::OkStatus();
  // Slots: inputs first, then node outputs in order.
  for (const Value *v : graph_.allValues())
    slot_[v] = static_cast<unsigned>(slot_.size());
  values_.assign(slot_.size(), c10::IValue());
  isGraphOutput_.assign(slot_.size(), false);
  for (const GraphOutput &out : graph_.outputs())
    isGraphOutput_[slot_.lookup(out.value)] = true;

  // Last use of each value, in node order; values nobody reads die at once.
  std::vector<int64_t> lastUse(slot_.size(), -1);
  size_t index = 0;
  for (const Node &n : graph_.nodes()) {
    for (Value *v : n.operandValues())
      lastUse[slot_.lookup(v)] = static_cast<int64_t>(index);
    ++index;
  }
  freeAfter_.assign(graph_.numNodes(), {});
  index = 0;
  for (const Node &n : graph_.nodes()) {
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      unsigned s = slot_.lookup(n.output(i));
      if (lastUse[s] < 0)
        freeAfter_[index].push_back(s); // never read: drop right after the node
    }
    ++index;
  }
  for (unsigned s = 0; s < lastUse.size(); ++s)
    if (lastUse[s] >= 0)
      freeAfter_[lastUse[s]].push_back(s);

  // Buffers an operator writes in place (a `Tensor(a!)` argument in its
  // schema): the run mutates the device copy, which writeBackBuffers syncs.
  mutatedInPlace_.assign(graph_.inputs().size(), false);
  for (const Node &n : graph_.nodes()) {
    const auto &schemaArgs = n.schema().arguments();
    for (unsigned i = 0; i < n.numArgs() && i < schemaArgs.size(); ++i) {
      const c10::AliasInfo *alias = schemaArgs[i].alias_info();
      if (!alias || !alias->isWrite())
        continue;
      auto mark = [&](const Value *v) {
        if (v && v->isGraphInput())
          mutatedInPlace_[v->index()] = true;
      };
      const Argument &a = n.arg(i);
      if (a.isValue())
        mark(a.getValue());
      else if (a.isList())
        for (const Value *v : a.getList())
          mark(v);
    }
  }

  // Weights: looked up by target, moved to the device once.
  deviceWeights_.assign(graph_.inputs().size(), at::Tensor());
  for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
    const GraphInput &in = graph_.inputs()[i];
    if (in.role == InputRole::UserInput)
      continue;
    const at::Tensor *w = weights_.lookup(in.target);
    if (!w)
      return absl::FailedPreconditionError(absl::StrCat("no weight for ", inputRoleName(in.role).str(),
                                                        " '", in.target, "' (graph input %",
                                                        in.value->name().str(), ")"));
    const TensorType &want = in.value->tensorType();
    if (w->scalar_type() != want.dtype || !llvm::equal(w->sizes(), want.sizes))
      return absl::FailedPreconditionError(absl::StrCat(
          "weight '", in.target, "' is ", shapeOf(*w), " but graph input %", in.value->name().str(),
          " expects ", c10::toString(want.dtype), "[", absl::StrJoin(want.sizes, ", "), "]"));
    deviceWeights_[i] = w->device() == options_.device ? *w : w->to(options_.device);
  }
  prepared_ = true;
  return absl::OkStatus();
}

absl::StatusOr<c10::IValue> Executor::argumentValue(const Node &node, unsigned i) const {
  auto fromTable = [this](const Value *v) -> absl::StatusOr<c10::IValue> {
    return values_[slot_.lookup(v)];
  };
  // Wrapped numbers stay on the CPU, as PyTorch makes them; factory calls that
  // name the export's device run on ours.
  return argumentToIValue(node, i, fromTable, c10::Device(c10::DeviceType::CPU), options_.device);
}

absl::Status Executor::runNode(const Node &node, size_t index) {
  torch::jit::Stack stack;
  stack.reserve(node.numArgs());
  for (unsigned i = 0; i < node.numArgs(); ++i) {
    auto v = argumentValue(node, i);
    if (!v.ok())
      return v.status();
    stack.push_back(std::move(*v));
  }
  if (hooks_.before)
    hooks_.before(node);
  try {
    node.op().callBoxed(stack);
  } catch (const c10::Error &e) {
    std::vector<std::string> shapes;
    for (unsigned i = 0; i < node.numArgs(); ++i) {
      auto v = argumentValue(node, i);
      if (v.ok() && (v->isTensor() || v->isTensorList()))
        shapes.push_back(absl::StrCat(node.schema().arguments()[i].name(), "=", shapeOf(*v)));
    }
    return absl::InternalError(absl::StrCat("node ", node.describe(), " (", node.opName(),
                                            ") failed with inputs ", absl::StrJoin(shapes, ", "),
                                            ": ", e.what_without_backtrace()));
  }
  // Results in schema order; a Tensor[] result spreads over the outputs.
  unsigned out = 0;
  for (c10::IValue &r : stack) {
    if (r.isTensorList() && returnsTensorList(node.schema())) {
      for (const at::Tensor &t : r.toTensorList().vec())
        if (out < node.numOutputs())
          values_[slot_.lookup(node.output(out++))] = t;
    } else if (out < node.numOutputs()) {
      values_[slot_.lookup(node.output(out++))] = std::move(r);
    }
  }
  if (out != node.numOutputs())
    return absl::InternalError(absl::StrCat("node ", node.describe(), " returned ", out,
                                            " results for ", node.numOutputs(), " outputs"));
  if (hooks_.after) {
    std::vector<c10::IValue> outs;
    for (unsigned i = 0; i < node.numOutputs(); ++i)
      outs.push_back(values_[slot_.lookup(node.output(i))]);
    hooks_.after(node, outs);
  }
  if (!options_.keepAllValues)
    for (unsigned s : freeAfter_[index])
      if (!isGraphOutput_[s])
        values_[s] = c10::IValue();
  return absl::OkStatus();
}

void Executor::writeBackBuffers(llvm::ArrayRef<at::Tensor> outputs) {
  // Buffers mutated in place: the store sees it already unless the device copy is separate.
  for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
    const GraphInput &in = graph_.inputs()[i];
    if (!mutatedInPlace_[i] || in.role == InputRole::UserInput)
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

absl::StatusOr<ExecutionResult> Executor::run(llvm::ArrayRef<at::Tensor> userInputs) {
  if (absl::Status st = prepare(); !st.ok())
    return st;
  // Bind inputs: weights from the store, user inputs checked against their types.
  size_t next = 0;
  for (unsigned i = 0; i < graph_.inputs().size(); ++i) {
    const GraphInput &in = graph_.inputs()[i];
    unsigned s = slot_.lookup(in.value);
    if (in.role != InputRole::UserInput) {
      values_[s] = deviceWeights_[i];
      continue;
    }
    if (next >= userInputs.size())
      return absl::InvalidArgumentError(absl::StrCat("missing user input %", in.value->name().str(),
                                                     ": ", userInputs.size(), " given"));
    const at::Tensor &t = userInputs[next++];
    const TensorType &want = in.value->tensorType();
    if (!t.defined() || t.scalar_type() != want.dtype || !llvm::equal(t.sizes(), want.sizes))
      return absl::InvalidArgumentError(absl::StrCat(
          "user input %", in.value->name().str(), " expects ", c10::toString(want.dtype), "[",
          absl::StrJoin(want.sizes, ", "), "], got ", t.defined() ? shapeOf(t) : "an undefined tensor"));
    values_[s] = t.device() == options_.device ? t : t.to(options_.device);
  }
  if (next != userInputs.size())
    return absl::InvalidArgumentError(absl::StrCat("the graph takes ", next, " user inputs, ",
                                                   userInputs.size(), " given"));

  seedGenerators(options_.seed);
  size_t index = 0;
  for (const Node &n : graph_.nodes()) {
    if (absl::Status st = runNode(n, index++); !st.ok()) {
      std::fill(values_.begin(), values_.end(), c10::IValue());
      return st;
    }
  }

  ExecutionResult result;
  for (const GraphOutput &out : graph_.outputs()) {
    const c10::IValue &v = values_[slot_.lookup(out.value)];
    result.outputs.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
  }
  if (options_.writeBackBuffers)
    writeBackBuffers(result.outputs);
  if (options_.keepAllValues)
    for (const Value *v : graph_.allValues())
      result.values.emplace_back(v, values_[slot_.lookup(v)]);
  std::fill(values_.begin(), values_.end(), c10::IValue());
  return result;
}

} // namespace graphopt
