//===- Importer.cpp - Reading a model by its file extension ---------------===//
#include "graphopt/Import/Importer.h"
#include "graphopt/IR/ShardTarget.h"
#include "graphopt/Import/TypeCorrection.h"

#include "graphopt/IR/Exceptions.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Support/Bytes.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <absl/strings/str_cat.h>
#include <llvm/Support/Path.h>

namespace graphopt {

namespace {

/// A seeded stand-in of type `t`. Overlapping or broadcast strides (a stride
/// of 0) are made as a view of a flat buffer of the span, since filling an
/// overlapping tensor in place is an error in PyTorch.
absl::StatusOr<at::Tensor> standIn(const Value &v, at::Generator &gen, double scale) {
  const TensorType &t = v.tensorType();
  auto fail = [&](llvm::StringRef why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot make a stand-in for %", v.name().str(),
                                                   " (", dtypeName(t.dtype).str(), "): ", why.str()));
  };
  if (absl::Status st = validateTensorType(t); !st.ok())
    return fail(std::string(st.message()));
  if (c10::isQIntType(t.dtype) || c10::isBitsType(t.dtype) || t.dtype == c10::ScalarType::Undefined)
    return fail("the executor makes no tensors of this dtype");
  try {
    auto options = at::TensorOptions().dtype(t.dtype);
    int64_t span = t.numel() == 0 ? 0 : t.storageBytes() / static_cast<int64_t>(c10::elementSize(t.dtype));
    // A view of a buffer of its span (and its offset) where it is not dense or starts inside.
    bool dense = span == t.numel() && t.storageOffset == 0;
    at::Tensor x = dense ? at::empty_strided(t.sizes, t.strides, options)
                         : at::empty({t.storageOffset + span}, options);
    if (t.dtype == c10::kFloat || t.dtype == c10::kDouble || t.dtype == c10::kHalf ||
        t.dtype == c10::kBFloat16)
      x.normal_(0, scale, gen);
    else if (at::isFloatingType(t.dtype)) // float8: drawn in f32, then rounded
      x.copy_(at::empty(x.sizes(), at::TensorOptions().dtype(c10::kFloat)).normal_(0, scale, gen));
    else
      x.zero_();
    return dense ? x : x.as_strided(t.sizes, t.strides, t.storageOffset);
  } catch (...) {
    return fail(describeCurrentException());
  }
}

/// Bytes of the stand-ins `graph` needs for the inputs `wanted` selects.
template <typename Pred> int64_t standInBytes(const Graph &graph, Pred wanted) {
  int64_t total = 0;
  for (const GraphInput &in : graph.inputs())
    if (in.value->isTensor() && wanted(in))
      if (__builtin_add_overflow(total, in.value->tensorType().storageBytes(), &total))
        return kNoSizeLimit;
  return total;
}

absl::Status checkStandInBytes(int64_t bytes, int64_t maxBytes, llvm::StringRef what) {
  if (bytes <= maxBytes)
    return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the stand-in ", what.str(), " would take ", formatBytes(bytes), ", more than --max-memory=",
      formatBytes(maxBytes), "; raise the limit if the graph is meant to be this large"));
}

bool needsWeightStandIn(const GraphInput &in, const WeightStore &weights) {
  // Optimizer state is left to the executor, which starts it at zero as
  // torch.optim does; a random momentum would be no stand-in for that.
  // A parameter's shard is cut from the whole parameter when the step runs
  // (ParameterShards.h): a stand-in shard would differ from it.
  return in.role != InputRole::UserInput && in.role != InputRole::OptimizerState &&
         in.value->isTensor() && !weights.contains(in.target) &&
         !(in.role == InputRole::Parameter && parseShardTarget(in.target));
}

} // namespace

absl::StatusOr<std::vector<at::Tensor>> makeExampleInputs(const Graph &graph, uint64_t seed,
                                                          int64_t maxBytes) {
  auto isUserInput = [](const GraphInput &in) { return in.role == InputRole::UserInput; };
  if (absl::Status st = checkStandInBytes(standInBytes(graph, isUserInput), maxBytes, "inputs");
      !st.ok())
    return st;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<at::Tensor> inputs;
  for (const GraphInput &in : graph.inputs())
    if (in.role == InputRole::UserInput && in.value->isTensor()) {
      auto t = standIn(*in.value, gen, 1.0);
      if (!t.ok())
        return t.status();
      inputs.push_back(std::move(*t));
    }
  return inputs;
}

absl::StatusOr<size_t> fillMissingWeights(const Graph &graph, WeightStore &weights, uint64_t seed,
                                          int64_t maxBytes) {
  auto missing = [&](const GraphInput &in) { return needsWeightStandIn(in, weights); };
  if (absl::Status st = checkStandInBytes(standInBytes(graph, missing), maxBytes, "weights");
      !st.ok())
    return st;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  size_t made = 0;
  for (const GraphInput &in : graph.inputs()) {
    if (!needsWeightStandIn(in, weights))
      continue;
    auto t = standIn(*in.value, gen, 0.1);
    if (!t.ok())
      return t.status();
    // A tied input (one storage with an earlier input: tied weights) takes its
    // owner's tensor, as the archive's weights share one; its own draw is
    // made anyway, so the inputs after it get the stand-ins they always had.
    const Value *owner = graph.storageOwner(in.value);
    if (const at::Tensor *o = owner != in.value ? weights.lookup(graph.inputs()[owner->index()].target)
                                                : nullptr;
        o && o->numel() == t->numel() && o->scalar_type() == t->scalar_type())
      *t = o->view(t->sizes());
    weights.set(in.target, std::move(*t));
    ++made;
  }
  return made;
}

Constant importedDeviceConstant(c10::Device device, c10::Device modelDevice) {
  bool sameDevice = device.type() == modelDevice.type() &&
                    (device.index() == modelDevice.index() || !device.has_index() ||
                     !modelDevice.has_index());
  return sameDevice ? Constant::ofExecutionDevice(modelDevice) : Constant::ofDevice(device);
}

absl::StatusOr<ImportedModel> importModel(llvm::StringRef path, const ImportOptions &options) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  if (path != "-" && (ext == ".pt2" || ext == ".pt"))
    if (absl::Status st = checkInputFile(path, options.maxInputBytes); !st.ok())
      return st;
  if (ext == ".pt2" || ext == ".pt") {
    auto model = ext == ".pt2" ? importPt2(path) : importTorchScript(path, options);
    // Types torch declared (fake tensors, meta kernels) where the CPU kernel
    // makes another: the kernel's for unread results, a recorded conflict
    // (passes refuse the graph) for read ones.
    if (model.ok() && model->graph)
      model->remarks = checkDeclaredTypes(*model->graph).remarks;
    return model;
  }
  if (ext == ".gir" || path == "-") {
    auto g = parseGraphFile(path, options.maxInputBytes);
    if (!g.ok())
      return g.status();
    ImportedModel m;
    m.graph = std::move(*g);
    return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path.str(), ": unknown input kind '", ext.str(),
                   "'; graph-opt reads .pt2 (torch.export), .pt (TorchScript) and .gir"));
}

} // namespace graphopt
