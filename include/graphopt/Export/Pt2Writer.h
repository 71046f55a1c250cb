//===- Pt2Writer.h - The IR back to a torch.export archive (.pt2) -*- C++ -*-===//
//
// Writes a graph, with its weights and example inputs, in the format
// torch.export.save writes (torch 2.11, serde schema 8.x; docs/Pt2ArchiveFormat.md),
// so that torch.export.load, and graph-opt's own importer, read it back:
//
//   - inputs and outputs become the graph signature (parameters, buffers,
//     tensor constants, user inputs; loss, gradients, buffer mutations, user
//     outputs), as the passes left them;
//   - optimizer state (an input role torch has no kind for) is written as a
//     persistent buffer and listed in the graph module's meta["custom"], so
//     graph-opt reads it back as optimizer state;
//   - every node attribute (`module`, `source`, ...) and the node's phase go
//     into the node's meta["custom"], which torch keeps;
//   - the dialect is "ATEN" when every operator is functional, else
//     "TRAINING", the one torch's verifier accepts in-place operators in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"

#include <ATen/core/Tensor.h>
#include "graphopt/Import/Pt2Format.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>

#include <string>

namespace graphopt {

/// `graph` as the ExportedProgram JSON of models/<name>.json. Errors name
/// the node or input the format cannot express. `zeroFilledState` (targets)
/// is listed in the program's graph_opt metadata as zero_filled_state.
absl::StatusOr<std::string> serializeExportedProgram(
    const Graph &graph, llvm::ArrayRef<std::string> zeroFilledState = {});

/// The whole archive, as bytes (the caller writes them atomically). Weights
/// come from `weights` by each input's target (tied inputs share one record);
/// optimizer state that has none is written as zeros, the state torch.optim
/// starts from, and said: listed in the archive (the graph_opt metadata's
/// zero_filled_state) and, one line each, in `remarks` when given (the driver
/// prints them). A parameter, buffer or constant without a weight is an error.
/// `exampleInputs` (one per user input, in order) become data/sample_inputs;
/// where they are empty, seeded stand-ins are written (makeExampleInputs).
absl::StatusOr<std::string> writePt2Archive(const Graph &graph, const WeightStore &weights,
                                            llvm::ArrayRef<at::Tensor> exampleInputs,
                                            std::vector<std::string> *remarks = nullptr);

} // namespace graphopt
