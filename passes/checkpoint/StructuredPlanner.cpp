//===- StructuredPlanner.cpp - Plans that follow the model's blocks --------===//
#include "checkpoint/StructuredPlanner.h"

#include "checkpoint/BudgetLadder.h"
#include "checkpoint/ModelBlocks.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>

namespace graphopt {
namespace {

/// A block of the model, or everything outside the blocks (the stem, the
/// head, the loss: one more ladder, never shared).
struct Block {
  std::string name;
  bool outside = false;
  std::vector<int64_t> forwardRanks; ///< its forward nodes, in rank order
  std::vector<int32_t> members;      ///< the candidates they make that free bytes at the peak
};

/// The shape signatures of a block's forward nodes, in order: blocks with
/// the same signature are the same computation on the same shapes.
std::string signatureOf(const RecomputeModel &model, const Block &block) {
  std::string s;
  for (int64_t r : block.forwardRanks)
    s += shapeSignature(*model.nodeAt(r));
  return s;
}

/// Where a candidate sits in its block: its producer's position among the
/// block's forward nodes, and its storage's output index.
using Slot = std::pair<size_t, unsigned>;
Slot slotOf(const RecomputeModel &model, const Block &block, int32_t c) {
  const CheckpointCandidate &cand = model.candidates()[c];
  size_t at = std::lower_bound(block.forwardRanks.begin(), block.forwardRanks.end(),
                               cand.created) -
              block.forwardRanks.begin();
  return {at, cand.storage->index()};
}

/// The block's own greedy: repeatedly the member freeing the most bytes at
/// the peak per second it adds to the recomputation of the ones before it.
std::vector<int32_t> ladderOrder(const RecomputeModel &model, const Block &block,
                                 const std::vector<int64_t> &bytesAtPeak) {
  PlanState state(model);
  std::vector<int32_t> left = block.members, order;
  while (!left.empty()) {
    size_t best = left.size();
    double bestRatio = -1;
    for (size_t i = 0; i < left.size();) {
      auto cost = state.marginal(left[i]);
      if (!cost.ok()) { // cannot run again: never in the ladder
        left.erase(left.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      const double ratio = static_cast<double>(bytesAtPeak[left[i]]) / std::max(cost->first, 1e-9);
      if (ratio > bestRatio) {
        bestRatio = ratio;
        best = i;
      }
      ++i;
    }
    if (best == left.size())
      break;
    const int32_t c = left[best];
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(best));
    if (state.add(c).ok())
      order.push_back(c);
  }
  return order;
}

/// A block's ladder: rung k drops the first k candidates of `taken`, and
/// frees `rungs[k].bytes` at the peak for `rungs[k].seconds`, priced on the
/// block's own nodes (the rest of the graph kept). `shared`: as the greedy's
/// refinement may make them, each value that other clones make again before
/// its own clone made once, earlier, and shared (PlanState::hoisted); else
/// as the drops alone need. Unshared, rungs cost 3-6x what they cost after
/// refinement (BERT-base at activations=10%); shared, they ignore what
/// holding the shared clones costs in memory. Neither order of prices won
/// everywhere, so the choices are made with both.
struct Rung {
  int64_t bytes = 0;
  double seconds = 0;
};
struct Ladder {
  std::vector<int32_t> taken;
  std::vector<Rung> rungs{Rung{}};
  size_t firstBoundary = 0; ///< the first rung dropping a boundary (rungs.size() if none)
};
/// `pricedLike`: the rungs' seconds of an identical block's ladder, taken
/// as they are instead of pricing each rung again.
Ladder ladderOf(const RecomputeModel &model, llvm::ArrayRef<int32_t> order,
                const std::vector<int64_t> &bytesAtPeak, const std::vector<uint8_t> &interior,
                bool shared, const std::vector<double> *pricedLike = nullptr) {
  PlanState state(model);
  Ladder ladder;
  for (int32_t c : order) {
    if (!state.add(c).ok())
      break;
    const size_t k = ladder.rungs.size();
    double seconds;
    if (pricedLike && k < pricedLike->size()) {
      seconds = (*pricedLike)[k];
    } else {
      seconds = state.result().seconds;
      std::vector<std::pair<int32_t, int64_t>> points;
      if (shared)
        points = state.repeatPoints();
      if (!points.empty())
        if (auto hoisted = state.hoisted(points); hoisted.ok())
          seconds = std::min(seconds, hoisted->result().seconds);
    }
    ladder.rungs.push_back({ladder.rungs.back().bytes + bytesAtPeak[c], seconds});
    ladder.taken.push_back(c);
  }
  ladder.firstBoundary = ladder.rungs.size();
  for (size_t i = 0; i < ladder.taken.size(); ++i)
    if (!interior[ladder.taken[i]]) {
      ladder.firstBoundary = i + 1;
      break;
    }
  return ladder;
}

/// The multiple-choice knapsack over the blocks' ladders: one rung per
/// block, freeing at least `need` bytes (in kSteps units, rounded down so
/// that the rungs chosen free at least `need`; as much as they can where that
/// is out of reach) at the least summed seconds; `notNeighbours`: no two
/// blocks in a row drop a boundary (the outside group is unconstrained).
std::vector<size_t> chooseRungs(const std::vector<Block> &blocks,
                                const std::vector<Ladder> &ladders, int64_t need,
                                bool notNeighbours) {
  constexpr int64_t kSteps = 2048;
  const int64_t unit = std::max<int64_t>(1, (need + kSteps - 1) / kSteps);
  const int64_t target = (need + unit - 1) / unit;
  const double kInf = std::numeric_limits<double>::infinity();
  // cost[s][t]: the least seconds freeing t units, s: whether the block
  // before dropped a boundary.
  using Row = std::vector<double>;
  std::array<Row, 2> cost{Row(target + 1, kInf), Row(target + 1, kInf)}, next = cost;
  cost[0][0] = 0;
  struct Step {
    uint16_t rung = 0;
    uint8_t from = 0; ///< the state before the block
  };
  std::vector<std::array<std::vector<Step>, 2>> stepAt(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (Row &row : next)
      std::fill(row.begin(), row.end(), kInf);
    stepAt[b] = {std::vector<Step>(target + 1), std::vector<Step>(target + 1)};
    const std::vector<Rung> &rungs = ladders[b].rungs;
    for (size_t k = 0; k < rungs.size() && k <= UINT16_MAX; ++k) {
      const bool constrained =
          notNeighbours && !blocks[b].outside && k >= ladders[b].firstBoundary;
      const int64_t w = rungs[k].bytes / unit;
      const double seconds = rungs[k].seconds;
      for (uint8_t from = 0; from < 2; ++from) {
        if (constrained && from == 1)
          continue;
        const uint8_t to = blocks[b].outside ? from : constrained;
        for (int64_t t = 0; t <= target; ++t) {
          const double via = cost[from][std::max<int64_t>(0, t - w)] + seconds;
          if (via < next[to][t]) {
            next[to][t] = via;
            stepAt[b][to][t] = {static_cast<uint16_t>(k), from};
          }
        }
      }
    }
    std::swap(cost, next);
  }
  int64_t reach = target;
  while (reach > 0 && cost[0][reach] == kInf && cost[1][reach] == kInf)
    --reach;
  std::vector<size_t> chosen(blocks.size());
  uint8_t state = cost[1][reach] < cost[0][reach];
  for (int64_t b = static_cast<int64_t>(blocks.size()) - 1, t = reach; b >= 0; --b) {
    const Step step = stepAt[b][state][t];
    chosen[b] = step.rung;
    t = std::max<int64_t>(0, t - ladders[b].rungs[step.rung].bytes / unit);
    state = step.from;
  }
  return chosen;
}

/// The bytes each candidate frees of memory `kind` live across `peakRank`
/// when dropped (0 where it does not free any there).
std::vector<int64_t> bytesAtPeakOf(const RecomputeModel &model, BoundedMemory kind,
                                   int64_t peakRank) {
  auto candidates = model.candidates();
  std::vector<int64_t> bytesAtPeak(candidates.size(), 0);
  for (size_t c = 0; c < candidates.size(); ++c)
    if (auto [first, last] = freedRanksOf(model, kind, candidates[c]);
        first <= peakRank && peakRank <= last)
      bytesAtPeak[c] = candidates[c].bytes;
  return bytesAtPeak;
}

/// The model's blocks and the group outside them, each with its forward
/// nodes and the candidates it makes that free bytes at the peak; groups
/// without such candidates are left out.
std::vector<Block> blocksOf(const RecomputeModel &model, const ModelBlocks &found,
                            const std::vector<int64_t> &bytesAtPeak) {
  const int32_t outside = static_cast<int32_t>(found.names.size());
  auto candidates = model.candidates();
  std::vector<Block> blocks(found.names.size() + 1);
  for (size_t b = 0; b < found.names.size(); ++b)
    blocks[b].name = found.names[b];
  blocks[outside].name = "outside the blocks";
  blocks[outside].outside = true;
  auto groupOf = [&](int64_t rank) {
    return found.blockOfRank[rank] >= 0 ? found.blockOfRank[rank] : outside;
  };
  for (int64_t r = 0; r < static_cast<int64_t>(found.blockOfRank.size()); ++r)
    if (model.nodeAt(r)->phase() == Phase::Forward)
      blocks[groupOf(r)].forwardRanks.push_back(r);
  for (size_t c = 0; c < candidates.size(); ++c)
    if (bytesAtPeak[c] > 0)
      blocks[groupOf(candidates[c].created)].members.push_back(static_cast<int32_t>(c));
  blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                              [](const Block &b) { return b.members.empty(); }),
               blocks.end());
  return blocks;
}

/// The order a class of identical blocks was given, on its first block.
struct ClassOrder {
  std::vector<Slot> slots;
  std::array<std::vector<double>, 2> seconds; ///< its first block's rungs' prices
};

/// `part`'s members in `known`'s order, slot by slot; empty when a slot of
/// the order has no member in `part`.
std::vector<int32_t> orderLike(const RecomputeModel &model, const Block &part,
                               const ClassOrder &known) {
  std::map<Slot, int32_t> bySlot;
  for (int32_t c : part.members)
    bySlot[slotOf(model, part, c)] = c;
  std::vector<int32_t> order;
  for (const Slot &s : known.slots) {
    auto it = bySlot.find(s);
    if (it == bySlot.end())
      return {};
    order.push_back(it->second);
  }
  return order;
}

/// ladders[shared][interiorsOnly]: priced shared or not (ladderOf), over
/// all members or the interiors.
using Ladders = std::array<std::array<std::vector<Ladder>, 2>, 2>;

/// Two ladders per block: over all its members, and over its interiors
/// alone (what keeps every boundary). Each class of identical blocks is
/// ordered once, on its first block; the others take the order slot by slot
/// (a block whose slots do not all match is ordered on its own). `classes`
/// counts the classes ordered over all members.
Ladders laddersOf(const RecomputeModel &model, const std::vector<Block> &blocks,
                  const std::vector<int64_t> &bytesAtPeak, const std::vector<uint8_t> &interior,
                  unsigned &classes) {
  Ladders ladders;
  for (int interiorsOnly = 0; interiorsOnly < 2; ++interiorsOnly) {
    std::map<std::string, ClassOrder> orderOfClass;
    for (const Block &block : blocks) {
      Block part = block;
      if (interiorsOnly && !block.outside)
        part.members.erase(std::remove_if(part.members.begin(), part.members.end(),
                                          [&](int32_t c) { return !interior[c]; }),
                           part.members.end());
      std::string signature = block.outside ? "" : signatureOf(model, part);
      std::vector<int32_t> order;
      auto known = block.outside ? orderOfClass.end() : orderOfClass.find(signature);
      if (known != orderOfClass.end())
        order = orderLike(model, part, known->second);
      if (!order.empty()) { // priced as the class's first block
        for (int priced = 0; priced < 2; ++priced)
          ladders[priced][interiorsOnly].push_back(ladderOf(
              model, order, bytesAtPeak, interior, priced, &known->second.seconds[priced]));
        continue;
      }
      order = ladderOrder(model, part, bytesAtPeak);
      if (!interiorsOnly)
        ++classes;
      ClassOrder first;
      for (int32_t c : order)
        first.slots.push_back(slotOf(model, part, c));
      for (int priced = 0; priced < 2; ++priced) {
        Ladder ladder = ladderOf(model, order, bytesAtPeak, interior, priced);
        for (const Rung &r : ladder.rungs)
          first.seconds[priced].push_back(r.seconds);
        ladders[priced][interiorsOnly].push_back(std::move(ladder));
      }
      if (!block.outside && known == orderOfClass.end())
        orderOfClass.emplace(std::move(signature), std::move(first));
    }
  }
  return ladders;
}

/// The choice dropping, in each block, the rungs `chosen` of its ladder in
/// `from`, starting from `common`; none when it needs more than `maxClones`.
std::optional<StructuredChoice> choiceOf(const RecomputeModel &model,
                                         const std::vector<Block> &blocks,
                                         const std::vector<Ladder> &from,
                                         const std::vector<size_t> &chosen,
                                         const StructuredChoice &common, BoundaryRule rule,
                                         size_t maxClones) {
  StructuredChoice made = common;
  made.boundaries = rule;
  PlanState state(model);
  bool overLimit = false;
  for (size_t b = 0; b < blocks.size() && !overLimit; ++b) {
    const Ladder &ladder = from[b];
    const size_t k = chosen[b];
    made.freedAtPeak += ladder.rungs[k].bytes;
    for (size_t i = 0; i < k && !overLimit; ++i) {
      if (!state.add(ladder.taken[i]).ok())
        continue;
      made.drops.push_back(
          {ladder.taken[i], absl::StrCat("structured: rung ", k, " of ", ladder.rungs.size() - 1,
                                         blocks[b].outside ? " " : " inside ", blocks[b].name)});
      overLimit = state.cloneCount() > maxClones;
    }
  }
  if (overLimit)
    return std::nullopt;
  made.seconds = state.result().seconds;
  return made;
}

} // namespace

std::vector<StructuredChoice> structuredChoices(const RecomputeModel &model, BoundedMemory kind,
                                               int64_t peakRank, int64_t need,
                                               size_t maxClones) {
  StructuredChoice common; // what the choices have in common
  const ModelBlocks &found = findBlocks(model);
  if (found.names.empty() || need <= 0)
    return {};
  const std::vector<int64_t> bytesAtPeak = bytesAtPeakOf(model, kind, peakRank);
  const std::vector<Block> blocks = blocksOf(model, found, bytesAtPeak);
  if (blocks.empty())
    return {};

  std::vector<uint8_t> interior(model.candidates().size(), 0);
  for (int32_t c : blockInteriors(model, found))
    interior[c] = 1;
  const Ladders ladders = laddersOf(model, blocks, bytesAtPeak, interior, common.classes);
  common.blocks = static_cast<unsigned>(blocks.size());

  // Where a rung drops a block's boundary (a value later blocks read in
  // forward), its price assumed the block's input kept. Neighbouring blocks
  // that both drop boundaries chain their recomputations through each other,
  // which the summed prices do not see (the greedy's sharing of repeats then
  // wins some of it back). So three choices are made: free, never dropping
  // boundaries in two blocks in a row (Chen et al.'s segments of two), and
  // keeping every boundary (the interiors' ladders: their prices add up
  // exactly); the planner runs from each.
  std::vector<StructuredChoice> choices;
  constexpr std::array<std::pair<int, BoundaryRule>, 6> kChoices = {{
      {1, BoundaryRule::Free}, {1, BoundaryRule::NotNeighbours}, {1, BoundaryRule::Kept},
      {0, BoundaryRule::Free}, {0, BoundaryRule::NotNeighbours}, {0, BoundaryRule::Kept}}};
  for (auto [priced, rule] : kChoices) {
    const std::vector<Ladder> &from = ladders[priced][rule == BoundaryRule::Kept];
    std::vector<size_t> chosen =
        chooseRungs(blocks, from, need, rule == BoundaryRule::NotNeighbours);
    std::optional<StructuredChoice> made =
        choiceOf(model, blocks, from, chosen, common, rule, maxClones);
    if (!made)
      continue;
    bool same = false;
    for (const StructuredChoice &c : choices)
      same = same || c.drops == made->drops;
    if (!same)
      choices.push_back(std::move(*made));
  }
  return choices;
}

namespace {
/// planner=structured.
class StructuredPlannerEntry : public Planner {
public:
  static llvm::StringRef plannerName() { return "structured"; }
  static llvm::StringRef plannerDescription() {
    return "the greedy from the model's blocks' choices alone (a rung of each block's ladder)";
  }
  llvm::StringRef name() const override { return plannerName(); }
  absl::StatusOr<CheckpointPlan> plan(const PlanRequest &request,
                                      LadderReport *ladder) const override {
    return planGreedyOnLadder(request, GreedyStarts::Structured, ladder);
  }
};
} // namespace
GRAPHOPT_REGISTER_PLANNER(StructuredPlannerEntry);

} // namespace graphopt
