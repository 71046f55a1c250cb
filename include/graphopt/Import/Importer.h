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
#include "graphopt/Import/TypeCorrection.h"
#include "graphopt/IR/WeightStore.h"
#include "graphopt/Support/FileIO.h"

#include <llvm/ADT/StringRef.h>

#include <memory>

namespace graphopt {

struct ImportedModel {
  std::unique_ptr<Graph> graph;
  WeightStore weights;
  /// Example values for the user inputs, in order, when the file carries them
  /// (a .pt2 archive's data/sample_inputs); empty otherwise.
  std::vector<at::Tensor> exampleInputs;
  /// What the importer changed about the model as declared, one line each
  /// (unread results typed by their kernel: Import/TypeCorrection.h). What it
  /// could not mend is in graph->typeConflicts().
  std::vector<std::string> remarks;
};

/// Deterministic stand-ins for `graph`'s user inputs: floats from a seeded
/// normal distribution, integers and bools zero. An error names the input
/// when its dtype cannot be made (quantized types) or when together they
/// would take more than `maxBytes`; nothing is allocated past the limit.
absl::StatusOr<std::vector<at::Tensor>> makeExampleInputs(const Graph &graph, uint64_t seed,
                                                          int64_t maxBytes = kNoSizeLimit);

/// Gives every parameter, buffer and constant input that has no weight in
/// `weights` a deterministic stand-in (normal floats scaled by 0.1, zero
/// integers), so a .gir graph can run. Returns how many it made; errors as
/// makeExampleInputs (`maxBytes` bounds the stand-ins made here). Optimizer
/// state is left out: the executor starts missing state at zero, as
/// torch.optim does. A tied input gets its owner's tensor (one storage).
absl::StatusOr<size_t> fillMissingWeights(const Graph &graph, WeightStore &weights, uint64_t seed,
                                          int64_t maxBytes = kNoSizeLimit);

struct ImportOptions {
  /// Types of a TorchScript module's forward inputs: TorchScript keeps no
  /// shapes. When empty, the types tools/export stored in the module's extra
  /// file "graphopt/input_types" are used.
  std::vector<ValueType> inputTypes;
  /// Inputs larger than this are refused before they are read (graph-opt's
  /// --max-input-size); standard input is read only up to it.
  int64_t maxInputBytes = kNoSizeLimit;
};

/// The constant for a device an exported program names: the symbolic
/// execution device where it names the model's own device (`cuda` matches
/// `cuda:0`), "wherever the graph runs"; an explicit device otherwise. Both
/// importers use this rule.
Constant importedDeviceConstant(c10::Device device, c10::Device modelDevice);

/// Reads `path` by its extension (.pt2, .pt, .gir).
absl::StatusOr<ImportedModel> importModel(llvm::StringRef path, const ImportOptions &options = {});

/// A torch.export archive. The graph signature becomes input and output roles;
/// in a joint training graph, nodes after the loss are the backward phase.
absl::StatusOr<ImportedModel> importPt2(llvm::StringRef path);

/// A torch.export program held in memory (from Python: graph_opt.from_fx):
/// its JSON as models/<name>.json holds it, and its weights by target.
/// Inputs without a weight are allowed (seeded stand-ins where it runs, as
/// for .gir); a weight of another type than its input's is an error. The
/// declared types are checked as for a file (Import/TypeCorrection.h), against
/// the `kernels` asked. `where` starts every error message.
absl::StatusOr<ImportedModel>
importProgramJson(llvm::StringRef json, WeightStore weights, llvm::StringRef graphName,
                  llvm::StringRef where, TypeCheckKernels kernels = TypeCheckKernels::Cpu);

/// A TorchScript module's forward method, inlined and lowered to operator
/// calls, with types inferred on meta tensors from the input types.
absl::StatusOr<ImportedModel> importTorchScript(llvm::StringRef path,
                                                const ImportOptions &options = {});

} // namespace graphopt
