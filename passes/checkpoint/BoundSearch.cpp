//===- BoundSearch.cpp - Plan, measure, tighten or loosen: one search -----===//
#include "checkpoint/BoundSearch.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <set>

namespace graphopt {

namespace {

/// The next knob: halfway between the loosest knob whose plan was within the
/// aim and the least a plan over it used, once both are known; else moved from
/// what this plan used by the miss, doubled for each further round over.
int64_t nextKnob(const BoundSearchOptions &o, int64_t aim, int64_t knob, const BoundProbe &p,
                 std::optional<int64_t> within, std::optional<int64_t> over, unsigned roundsOver) {
  if (within && over)
    return *within + (*over - *within) / 2;
  const int64_t from = std::min(knob, p.used);
  const int64_t step = (aim - p.peak) * (int64_t(1) << std::min(roundsOver ? roundsOver - 1 : 0u, 20u));
  return std::max(o.leastKnob, from + step);
}

} // namespace

absl::StatusOr<BoundSearchResult> searchBound(const BoundSearchOptions &options,
                                              const BoundProbeFn &probe) {
  BoundSearchResult result;
  result.aim = options.aim ? *options.aim
                           : static_cast<int64_t>(static_cast<double>(options.bound) *
                                                  (1 - options.margin));
  const int64_t aim = result.aim;
  std::set<std::string> seen;
  std::optional<int64_t> within, over; // the loosest knob within, the least used over
  unsigned roundsOver = 0;
  int64_t knob = options.firstKnob;
  result.ended = absl::StrCat(options.maxRounds, " rounds");
  for (unsigned round = 0; round < options.maxRounds; ++round) {
    auto p = probe(knob);
    if (!p.ok())
      return p.status();
    if (!seen.insert(p->key).second) {
      result.ended = "the planner gave a plan it gave before";
      break;
    }
    const bool in = p->peak <= aim;
    result.rounds.push_back({knob, *p, in});
    const size_t i = result.rounds.size() - 1;
    if (p->peak < result.rounds[result.closest].probe.peak)
      result.closest = i;
    roundsOver = in ? 0 : roundsOver + 1;
    if (in) {
      const BoundProbe *b = result.best ? &result.rounds[*result.best].probe : nullptr;
      if (!b || std::make_pair(p->peak, p->used) > std::make_pair(b->peak, b->used))
        result.best = i;
      if (!options.slack || aim - p->peak <= *options.slack * options.bound || p->atLoosest) {
        result.ended = "within the aim";
        break;
      }
      within = within ? std::max(*within, knob) : knob;
    } else {
      if (p->atLeast || knob <= options.leastKnob) {
        result.ended = "over the aim at the planner's least";
        break;
      }
      const int64_t used = std::min(knob, p->used);
      over = over ? std::min(*over, used) : used;
    }
    const int64_t following = nextKnob(options, aim, knob, *p, within, over, roundsOver);
    if (following == knob || following == within || following == over) {
      result.ended = "no other knob between the plans within and over";
      break;
    }
    knob = following;
  }
  return result;
}

} // namespace graphopt
