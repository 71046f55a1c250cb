//===- SerdeEnums.h - torch.export serde enums to c10 (private) ---*- C++ -*-===//
//
// The torch.export serialization schema numbers dtypes, layouts and memory
// formats its own way (FLOAT = 7, Strided = 7, ...), not as c10 does; these
// map them explicitly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/utils/generated_serialization_types.h>

#include <optional>

namespace graphopt::serde {

namespace ts = torch::_export;

std::optional<c10::ScalarType> toScalarType(ts::ScalarType t);
std::optional<c10::Layout> toLayout(ts::Layout l);
std::optional<c10::MemoryFormat> toMemoryFormat(ts::MemoryFormat m);
/// {"type": "cuda", "index": 0} -> cuda:0; nullopt for a device c10 does not know.
std::optional<c10::Device> toDevice(const ts::Device &d);

/// The other way, for the .pt2 writer: nullopt for what the schema has no number for.
std::optional<ts::ScalarType> fromScalarType(c10::ScalarType t);
std::optional<ts::Layout> fromLayout(c10::Layout l);
std::optional<ts::MemoryFormat> fromMemoryFormat(c10::MemoryFormat m);
ts::Device fromDevice(c10::Device d);

} // namespace graphopt::serde
