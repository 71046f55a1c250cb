//===- Importer.h - Reading models into the IR --------------------*- C++ -*-===//
//
// graph-opt reads three kinds of file, chosen by extension:
//   .pt2  archives written by torch.export.save (inference graphs and joint
//         forward+backward training graphs), with their weights;
//   .pt   TorchScript modules (forward only);
//   .gir  the IR's own text form (no weights).
// Every failure is a Status naming the file and what is wrong with it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"

#include <llvm/ADT/StringRef.h>

#include <memory>

namespace graphopt {

struct ImportedModel {
  std::unique_ptr<Graph> graph;
  WeightStore weights;
};

struct ImportOptions {
  /// Types of a TorchScript module's forward inputs: TorchScript keeps no
  /// shapes. When empty, the types tools/export stored in the module's extra
  /// file "graphopt/input_types" are used.
  std::vector<ValueType> inputTypes;
};

/// Reads `path` by its extension (.pt2, .pt, .gir).
absl::StatusOr<ImportedModel> importModel(llvm::StringRef path, const ImportOptions &options = {});

/// A torch.export archive. The graph signature becomes input and output roles;
/// in a joint training graph, nodes after the loss are the backward phase.
absl::StatusOr<ImportedModel> importPt2(llvm::StringRef path);

/// A TorchScript module's forward method, inlined and lowered to operator
/// calls, with types inferred on meta tensors from the input types.
absl::StatusOr<ImportedModel> importTorchScript(llvm::StringRef path,
                                                const ImportOptions &options = {});

} // namespace graphopt
