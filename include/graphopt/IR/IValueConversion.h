//===- IValueConversion.h - Constants to and from c10::IValue -----*- C++ -*-===//
//
// Operators are called boxed, with IValue stacks; schema defaults and
// TorchScript constants arrive as IValues. These convert between the two,
// guided by the schema type (dtype, layout and memory format travel as ints).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Constant.h"
#include "graphopt/IR/Graph.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <optional>

namespace graphopt {

/// The IValue an operator expects for `c` (dtype as ScalarType, lists as typed lists).
c10::IValue constantToIValue(const Constant &c);

/// `v` as a Constant, reading ints as dtype/layout/memory format where `type`
/// (optionally wrapped in Optional) says so; nullopt for what a Constant cannot hold.
std::optional<Constant> constantFromIValue(const c10::IValue &v, const c10::TypePtr &type);

/// Which device constants argumentToIValue replaces by the run's device.
enum class DeviceConstants : uint8_t {
  /// Only the symbolic execution device (Constant::ofExecutionDevice);
  /// explicit devices are passed as written. What an executor wants.
  ExecutionDeviceOnly,
  /// Every device constant (type inference computes all on one stand-in device).
  All,
};

/// The IValue of argument `i` of `node` for a boxed call: each Value's comes
/// from `valueOf`; `Tensor[]` and `Tensor?[]` lists become typed lists; a
/// number in a Tensor position becomes a wrapped number (a 0-d tensor on
/// `numberDevice`, as PyTorch's argument parser makes it); the symbolic
/// execution device becomes `device`, an explicit device stays as written
/// (unless `replace` is All).
absl::StatusOr<c10::IValue>
argumentToIValue(const Node &node, unsigned i,
                 llvm::function_ref<absl::StatusOr<c10::IValue>(const Value *)> valueOf,
                 c10::Device numberDevice, c10::Device device,
                 DeviceConstants replace = DeviceConstants::ExecutionDeviceOnly);

} // namespace graphopt
