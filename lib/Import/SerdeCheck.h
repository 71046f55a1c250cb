//===- SerdeCheck.h - JSON the serde types can read safely (private) -*- C++ -*-===//
//
// LibTorch's generated serde types (torch/csrc/utils/generated_serialization_types.h)
// read JSON without checking it: a union object with none of its alternatives'
// keys ({"parameterr": ...} as an input spec, null or {} as a size) leaves the
// union's tag uninitialised and its variant empty, and a missing key of a
// plain scalar field (tensor_meta's requires_grad) reads an uninitialised
// default, and a floating-point number where the schema has an integer
// (6.1e89 as a size) is cast to it. All are undefined behaviour before anything
// can be checked on the C++ side, and a document nested deep enough overflows
// the stack of their recursive readers. So the JSON is checked first: numbers
// and nesting in the whole document, unions and tensor_meta at the places the
// importer reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>
#include <nlohmann/json.hpp>

namespace graphopt::serde {

/// The model JSON (an ExportedProgram): every number is an integer except the
/// F64 fields' (as_float, as_floats, real, imag), it nests at most 1000
/// levels deep, every union the importer reads holds one of its alternatives,
/// and every tensor_meta has its scalar fields. The message names the JSON
/// path at fault.
absl::Status checkExportedProgramJson(const nlohmann::json &program);

/// A weights or constants payload config: integers as above, each entry's
/// flags and tensor_meta.
absl::Status checkPayloadConfigJson(const nlohmann::json &config);

} // namespace graphopt::serde
