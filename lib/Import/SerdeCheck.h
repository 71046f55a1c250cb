//===- SerdeCheck.h - JSON the serde types can read safely (private) -*- C++ -*-===//
//
// LibTorch's generated serde types (torch/csrc/utils/generated_serialization_types.h)
// read JSON without checking it: a union object with none of its alternatives'
// keys ({"parameterr": ...} as an input spec, null or {} as a size) leaves the
// union's tag uninitialised and its variant empty, and a missing key of a
// plain scalar field (tensor_meta's requires_grad) reads an uninitialised
// default. Both are undefined behaviour before anything can be checked on the
// C++ side, so the JSON is checked first, at the places the importer reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>
#include <nlohmann/json.hpp>

namespace graphopt::serde {

/// The model JSON (an ExportedProgram): every union the importer reads holds
/// one of its alternatives, and every tensor_meta has its scalar fields. The
/// message names the JSON path at fault.
absl::Status checkExportedProgramJson(const nlohmann::json &program);

/// A weights or constants payload config: each entry's flags and tensor_meta.
absl::Status checkPayloadConfigJson(const nlohmann::json &config);

} // namespace graphopt::serde
