//===- Pt2Graph.h - torch.export's serialized graph to the IR (private) -*- C++ -*-===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <torch/csrc/utils/generated_serialization_types.h>

namespace graphopt::serde {

/// Builds the IR graph of a deserialized ExportedProgram. `where` (the archive
/// and record) starts every error message.
absl::StatusOr<std::unique_ptr<Graph>> buildGraph(const torch::_export::ExportedProgram &ep,
                                                  llvm::StringRef graphName, llvm::StringRef where);

} // namespace graphopt::serde
