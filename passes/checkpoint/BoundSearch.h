//===- BoundSearch.h - Plan, measure, tighten or loosen: one search -*- C++ -*-===//
//
// Every place graph-opt holds a step's peak to a bound plans with a knob the
// planner takes (bytes of a budget) and learns the plan's peak only after: on
// graph-opt's executor (checkpoint{measure=true}, CheckpointPass.cpp), from
// the prediction of the halves torch.compile runs (python/graph_opt/
// compile.py), or from a measured eager step. This is the one search they
// share (docs/Checkpointing.md, "One bound search"):
//
//   - the aim is the bound less `margin` (what the measurement may miss:
//     0 where the peak is measured on the step that runs);
//   - each round asks `probe` for the plan at the knob and its peak; a plan
//     within the aim ends the search where it is at most `slack` of the bound
//     under the aim (or always, without a slack, or where the plan cannot be
//     loosened); one over the aim makes the next knob tighter;
//   - the next knob moves from what the plan used of the knob by the miss
//     (doubled for each further round over the aim: peaks can fall more
//     slowly than the knob), and once a plan within and one over are known,
//     halves the interval between them;
//   - it ends after `maxRounds`, when the planner gives a plan it gave
//     before, or when a plan over the aim is already the planner's least.
//
// The result names the best round (within the aim, the highest peak: the
// least recomputed; of equals the one using most of its knob) and the closest
// (the least peak). What to do where none is within (refuse, or apply the
// closest: unmet=closest) is the caller's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace graphopt {

struct BoundSearchOptions {
  int64_t bound = 0;  ///< the peak allowed, as the probe states peaks
  double margin = 0;  ///< aim = bound * (1 - margin)
  std::optional<int64_t> aim; ///< the aim itself, instead (a search aimed under a known peak)
  /// A plan within the aim but more than slack * bound under it asks for a
  /// looser one; none: the first plan within ends the search.
  std::optional<double> slack;
  unsigned maxRounds = 3;
  int64_t firstKnob = 0;
  int64_t leastKnob = 0; ///< the tightest knob the planner takes
};

/// A plan at a knob, as the probe saw it.
struct BoundProbe {
  int64_t peak = 0; ///< measured or predicted, as the bound is stated
  /// What the plan used of its knob (its bytes; at most the knob): the next
  /// knob moves from here.
  int64_t used = 0;
  /// Identifies the plan: the planner giving the same plan again ends the search.
  std::string key;
  bool atLeast = false;  ///< the planner's least: no tighter knob gives less
  bool atLoosest = false; ///< nothing is recomputed: no looser knob gives more
};

struct BoundSearchRound {
  int64_t knob = 0;
  BoundProbe probe;
  bool withinAim = false;
};

struct BoundSearchResult {
  int64_t aim = 0;
  std::vector<BoundSearchRound> rounds;
  /// Within the aim, the highest peak (of equals, the most used); none where no round is.
  std::optional<size_t> best;
  size_t closest = 0; ///< the least peak (of equals, the first)
  /// Why the search ended, in a few words ("within the aim", "6 rounds", ...).
  std::string ended;
};

using BoundProbeFn = std::function<absl::StatusOr<BoundProbe>(int64_t knob)>;

/// Runs the search; an error only where `probe` returns one.
absl::StatusOr<BoundSearchResult> searchBound(const BoundSearchOptions &options,
                                              const BoundProbeFn &probe);

} // namespace graphopt
