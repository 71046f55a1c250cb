//===- StructuredPlanner.h - Plans that follow the model's blocks -*- C++ -*-===//
//
// Two levels, as Chen et al. 2016 and Rockmate (ICML 2023) plan. The
// model's blocks (ModelBlocks.h: transformer layers, ResNet stages' units,
// or runs of repeated shapes) and one group for what lies outside them each
// get a ladder: their candidates ordered by the block's own greedy (the most
// bytes freed at the peak per second of recomputation that the block's
// earlier drops do not already pay); rung k drops the first k, priced on the
// block's own nodes, with repeated clones shared and without (ladderOf in
// the .cpp). A second ladder covers a block's interiors alone (made and read
// in forward within it), whose recomputation reads only its block and the
// boundaries it keeps, so their prices add up exactly. A multiple-choice
// knapsack over the blocks chooses one rung per block that frees what the
// budget needs at the least summed time, by which boundaries (values the
// next block reads) it may drop: any, not in neighbouring blocks, none.
// Structurally identical blocks (the same operators on the same types, in
// the same order) are ordered and priced once, and the order carried to the
// others slot by slot.
//
// Each choice is a start for the greedy (GreedyPlanner.cpp), which drops
// more where the simulated peak is still over and refines the plan (shares
// repeated recomputations, undoes drops made unneeded): `planner=structured`
// runs it from these starts alone and keeps the best plan.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/RecomputeModel.h"

#include <string>
#include <utility>
#include <vector>

namespace graphopt {

/// Which block boundaries (values later blocks read in forward) a choice may drop.
enum class BoundaryRule : uint8_t {
  Free,          ///< any
  NotNeighbours, ///< not in two blocks in a row
  Kept,          ///< none: only what is made and read inside a block
};

struct StructuredChoice {
  /// The candidates to drop, each with why (its block and rung).
  std::vector<std::pair<int32_t, std::string>> drops;
  unsigned blocks = 0;  ///< blocks with interiors
  unsigned classes = 0; ///< of those, the structurally distinct ones (ordered once each)
  int64_t freedAtPeak = 0; ///< the bytes the choice frees at `peakRank`
  double seconds = 0;      ///< its recomputation (the plan of these drops alone)
  BoundaryRule boundaries = BoundaryRule::Free;
};

/// The rungs, one per block, that free `need` bytes of memory `kind` live
/// across rank `peakRank` at the least summed recomputation time (as much as
/// the ladders free, where that is less than `need`), one per BoundaryRule,
/// without repeats. None without blocks; a choice needing more than `maxClones`
/// clones is left out.
std::vector<StructuredChoice> structuredChoices(const RecomputeModel &model, BoundedMemory kind,
                                               int64_t peakRank, int64_t need,
                                               size_t maxClones);

} // namespace graphopt
