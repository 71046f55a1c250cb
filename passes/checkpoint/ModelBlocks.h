//===- ModelBlocks.h - A model's repeated blocks, from its module paths -*- C++ -*-===//
//
// Per-block checkpointing (Chen et al. 2016; what hand-placed
// torch.utils.checkpoint does per transformer layer) keeps what passes from
// one block to the next and recomputes each block's inside during its
// backward. The blocks are found from the nodes' `module` attributes (the
// exporter records every node's module, backward nodes their forward
// module's): a path component that ends in an index (`layer.3`, `h.11`,
// `layer3`, `denselayer24`) and has siblings with other indices under the
// same parent is a repetition; a node's block is its path up to the deepest
// such component (`bert.encoder.layer.3`, `layer3.1`).
//
// A graph without module paths, or without repetitions in them, gets its
// blocks from its shapes (repeatedBlocks): runs of forward nodes repeating
// the same operators on the same output types, the run covering most nodes
// first (one run per stage where shapes change), each cut where the fewest
// forward values cross.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/RecomputeModel.h"

#include <string>
#include <vector>

namespace graphopt {

struct ModelBlocks {
  /// Per node rank of the model's graph: its block, or -1 outside every block.
  std::vector<int32_t> blockOfRank;
  /// Block paths (`bert.encoder.layer.3`), by block index.
  std::vector<std::string> names;
  /// Found from repeated shapes, not module paths (names are then
  /// `repeat R.K (from %value)`, the K-th copy of the R-th run found).
  bool fromShapes = false;
};

/// A node's operator and output types (`aten::exp(Floatx16x16;)`): equal for
/// the same computation on the same shapes.
std::string shapeSignature(const Node &n);

/// The blocks of `model`'s graph: from module paths, else repeatedBlocks.
/// Found once per model (the planners ask for them per start and per budget
/// rung, and the shape search is not free) and kept with it.
const ModelBlocks &findBlocks(const RecomputeModel &model);
/// The blocks from repeated shapes alone (forward nodes only).
ModelBlocks repeatedBlocks(const RecomputeModel &model);

/// The candidates inside a block: made by a node of a block and read in
/// forward only by nodes of that block (every value of the storage). Dropping
/// them all keeps the blocks' boundaries: the per-block plan.
std::vector<int32_t> blockInteriors(const RecomputeModel &model, const ModelBlocks &blocks);

} // namespace graphopt
