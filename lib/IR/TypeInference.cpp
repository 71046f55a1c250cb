//===- TypeInference.cpp - Output types by running ops on meta tensors ----===//
#include "graphopt/IR/TypeInference.h"

#include "graphopt/IR/Exceptions.h"
#include "graphopt/IR/IValueConversion.h"
#include "graphopt/IR/NodeResults.h"
#include "graphopt/IR/SchemaUtils.h"

#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <absl/strings/str_cat.h>

namespace graphopt {

namespace {

/// A stand-in for a tensor of type `t` on `on`: metadata only on meta, zeros
/// on CPU (zeros keep index-taking operators in bounds).
at::Tensor standIn(const TensorType &t, c10::Device on) {
  at::TensorOptions options = at::TensorOptions().dtype(t.dtype).device(on);
  at::Tensor x = at::empty_strided(t.sizes, t.strides, options);
  if (t.storageOffset != 0) // a view at its offset, so that views of it get theirs
    x = at::empty({t.storageOffset + static_cast<int64_t>(x.storage().nbytes() / x.itemsize())},
                  options)
            .as_strided(t.sizes, t.strides, t.storageOffset);
  if (!on.is_meta())
    x.zero_();
  return x;
}

/// The stand-in IValue of argument `i`; `device` becomes the first device
/// constant (`_to_copy(x, device=cuda:1)`; the execution device stands for the
/// model's device), else the device of the first tensor operand: where the
/// real outputs live.
absl::StatusOr<c10::IValue> toStandInIValue(const Node &node, unsigned i, c10::Device on,
                                            c10::Device &device, bool &sawDevice,
                                            bool &sawDeviceConstant) {
  const Argument &a = node.arg(i);
  if (!sawDeviceConstant && a.isConstant() && a.getConstant().kind() == ConstantKind::Device) {
    device = a.getConstant().asDevice();
    sawDevice = sawDeviceConstant = true;
  }
  auto standInOf = [&](const Value *v) -> absl::StatusOr<c10::IValue> {
    if (!v->type().isKnown())
      return absl::FailedPreconditionError(absl::StrCat("node ", node.describe(), ": operand %",
                                                        v->name().str(), " has no type"));
    if (!v->isTensor())
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", node.describe(), ": scalar operand %", v->name().str(),
          " has no known value, so the output types cannot be inferred"));
    if (!sawDevice) {
      device = v->tensorType().device;
      sawDevice = true;
    }
    return c10::IValue(standIn(v->tensorType(), on));
  };
  // Compute on the stand-in device; the real outputs keep `device`.
  return argumentToIValue(node, i, standInOf, on, on, DeviceConstants::All);
}

absl::StatusOr<ValueType> typeOfResult(const Node &node, const c10::IValue &v, c10::Device device) {
  if (v.isNone() || (v.isTensor() && !v.toTensor().defined()))
    return ValueType::ofScalar(ValueKind::None);
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    llvm::ArrayRef<int64_t> sizes(t.sizes().data(), t.sizes().size());
    llvm::ArrayRef<int64_t> strides(t.strides().data(), t.strides().size());
    TensorType type(t.scalar_type(), sizes, strides, device);
    type.storageOffset = t.storage_offset();
    return ValueType::ofTensor(std::move(type));
  }
  if (v.isInt())
    return ValueType::ofScalar(ValueKind::Int);
  if (v.isDouble())
    return ValueType::ofScalar(ValueKind::Float);
  if (v.isBool())
    return ValueType::ofScalar(ValueKind::Bool);
  return absl::UnimplementedError(absl::StrCat("node ", node.describe(), ": result of type ",
                                               v.tagKind(), " is not supported"));
}

} // namespace

namespace {
/// Runs `node`'s operator on stand-ins on `on`; the results are left in `stack`.
absl::Status runOnStandIns(const Node &node, c10::Device on, torch::jit::Stack &stack,
                           c10::Device &device) {
  stack.clear();
  bool sawDevice = false, sawDeviceConstant = false;
  // On CPU stand-ins an operator may throw what its backend throws, not only
  // c10::Error, and making the stand-ins may fail to allocate; any of it
  // means the types cannot be inferred.
  try {
    for (unsigned i = 0; i < node.numArgs(); ++i) {
      auto v = toStandInIValue(node, i, on, device, sawDevice, sawDeviceConstant);
      if (!v.ok())
        return v.status();
      stack.push_back(std::move(*v));
    }
    node.op().callBoxed(stack);
  } catch (...) {
    return absl::InvalidArgumentError(absl::StrCat("node ", node.describe(),
                                                   ": cannot infer output types: ",
                                                   describeCurrentException()));
  }
  return absl::OkStatus();
}
} // namespace

namespace {
/// The types of the results `runOnStandIns` left in `stack`, one per output.
absl::StatusOr<std::vector<ValueType>> typesOfResults(const Node &node, torch::jit::Stack &stack,
                                                      c10::Device device) {
  // One result per output, a lone Tensor[] spread as the executor spreads it.
  llvm::SmallVector<c10::IValue, 4> results;
  spreadResults(node.schema(), stack, results);
  std::vector<ValueType> types;
  for (const c10::IValue &r : results) {
    auto type = typeOfResult(node, r, device);
    if (!type.ok())
      return type.status();
    types.push_back(*type);
  }
  if (types.size() != node.numOutputs())
    return absl::FailedPreconditionError(absl::StrCat("node ", node.describe(), ": the operator returned ",
                                                      types.size(), " results for ", node.numOutputs(),
                                                      " outputs"));
  return types;
}

absl::Status checkArgumentCount(const Node &node) {
  if (node.numArgs() != node.schema().arguments().size())
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node.describe(), ": argument count does not match the schema"));
  return absl::OkStatus();
}
} // namespace

absl::Status inferNodeTypes(Node &node) {
  if (absl::Status st = checkArgumentCount(node); !st.ok())
    return st;
  torch::jit::Stack stack;
  c10::Device device(c10::DeviceType::CPU);
  // Meta kernels are free, but some live only in Python (convolution's, for
  // one); then run the operator on CPU zeros of the same shapes.
  if (absl::Status meta = runOnStandIns(node, c10::Device(at::kMeta), stack, device); !meta.ok())
    if (absl::Status cpu = runOnStandIns(node, c10::Device(at::kCPU), stack, device); !cpu.ok())
      return cpu;
  auto types = typesOfResults(node, stack, device);
  if (!types.ok())
    return types.status();
  for (unsigned i = 0; i < types->size(); ++i)
    node.output(i)->setType((*types)[i]);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ValueType>> kernelResultTypes(const Node &node, c10::Device on) {
  if (absl::Status st = checkArgumentCount(node); !st.ok())
    return st;
  torch::jit::Stack stack;
  c10::Device device(c10::DeviceType::CPU);
  if (absl::Status st = runOnStandIns(node, on, stack, device); !st.ok())
    return st;
  return typesOfResults(node, stack, device);
}

absl::Status inferTypes(Graph &graph) {
  for (Node &n : graph.nodes()) {
    bool known = true;
    for (unsigned i = 0; i < n.numOutputs(); ++i)
      known &= n.output(i)->type().isKnown();
    if (known)
      continue;
    if (absl::Status st = inferNodeTypes(n); !st.ok())
      return st;
  }
  return absl::OkStatus();
}

} // namespace graphopt
