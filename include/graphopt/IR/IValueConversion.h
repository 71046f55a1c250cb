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

/// The IValue of argument `i` of `node` for a boxed call: each Value's comes
/// from `valueOf`; `Tensor[]` and `Tensor?[]` lists become typed lists; a
/// number in a Tensor position becomes a wrapped number (a 0-d tensor on
/// `numberDevice`, as PyTorch's argument parser makes it); a device constant
/// becomes `device` (a graph names the device it was exported on).
absl::StatusOr<c10::IValue>
argumentToIValue(const Node &node, unsigned i,
                 llvm::function_ref<absl::StatusOr<c10::IValue>(const Value *)> valueOf,
                 c10::Device numberDevice, c10::Device device);

} // namespace graphopt
