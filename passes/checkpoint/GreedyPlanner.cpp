//===- GreedyPlanner.cpp - μ-TWO's recompute-ratio greedy, simulator in the loop ---===//
//
// Repeatedly: find the rank where the memory timeline peaks; among the
// candidates live across it (dropped there, they stop counting), take the
// one freeing the most bytes per second of recomputation, the seconds being
// what it adds to the recomputation already planned (shared clones are not
// paid twice); drop it. The timeline is updated by a range add (PeakTracker)
// per drop, an estimate that leaves out the clones' own temporaries; each
// time the estimate says the budget is met, the rewritten graph is simulated
// for real and the timeline replaced by that simulation, so the plan ends only
// on a simulated peak within the budget. Then repeated recomputations are
// shared and drops that later ones made unneeded undone, each step checked
// by a simulation. It runs from four starts (nothing dropped, a knapsack's
// choice at the peak, the recomputation relaxation's solution by priced
// minimum cuts, the model's block interiors) and keeps the best plan
// (planGreedy; docs/Checkpointing.md, "Four starts"); planner=structured
// runs it from the structured choices alone (StructuredPlanner.h). A start
// whose drops need more than kMaxStartClonesPerNode clones per node is given
// up.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/GreedyPlanner.h"

#include "checkpoint/BudgetLadder.h"
#include "checkpoint/LagrangianCut.h"
#include "checkpoint/ModelBlocks.h"
#include "checkpoint/RecomputeRelaxation.h"
#include "checkpoint/StructuredPlanner.h"

#include "graphopt/Analysis/PeakTracker.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/SmallPtrSet.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <queue>

namespace graphopt {

absl::Status predictPlan(const RecomputeModel &model, int64_t budget, CheckpointPlan &plan,
                         int64_t peakCap) {
  auto sim = model.simulate(plan.recompute);
  if (!sim.ok())
    return sim.status();
  predictPlan(*sim, budget, plan, peakCap);
  return absl::OkStatus();
}

void predictPlan(const Simulation &sim, int64_t budget, CheckpointPlan &plan, int64_t peakCap) {
  plan.predictedPeak = sim.peakAboveInputs;
  plan.predictedBounded = sim.bounded;
  plan.predictedActivations = sim.savedActivations;
  plan.predictedExtraSeconds = plan.recompute.seconds;
  plan.meetsBudget = plan.predictedBounded <= budget && plan.predictedPeak <= peakCap;
}

absl::Status completePlan(const RecomputeModel &model, int64_t budget, CheckpointPlan &plan) {
  auto set = model.closure(plan.dropped, plan.held);
  if (!set.ok())
    return set.status();
  plan.recompute = std::move(*set);
  return predictPlan(model, budget, plan);
}

namespace {

struct Entry {
  double ratio;
  int32_t candidate;
  bool operator<(const Entry &o) const { // max-heap; ties: the earlier candidate
    return ratio < o.ratio || (ratio == o.ratio && candidate > o.candidate);
  }
};

double ratioOf(int64_t bytes, double seconds) {
  return static_cast<double>(bytes) / std::max(seconds, 1e-9);
}

/// Each refinement below tries at most kMaxTrials plans, and together they
/// simulate at most kTrialNodes nodes of rewritten graphs (a simulation
/// costs some microseconds per node: well under a second in all). Counts,
/// not a clock, so that the plan does not depend on the machine's load.
constexpr unsigned kMaxTrials = 32;
class SimulationBudget {
public:
  static constexpr size_t kTrialNodes = 160000;
  /// At least kMinTrialsAtScale simulations of the graph itself, however
  /// large: with one or none, a graph past 80k nodes kept every repeated
  /// recomputation (a 300k-node chain of blocks planned 5.6x the 100k one's
  /// extra time for 3x the nodes, and its tighter rungs could not be ruled
  /// out). Two sufficed there (the first group of hoists is all repeats);
  /// four gave the same plans and cost more at 100k.
  static constexpr size_t kMinTrialsAtScale = 2;
  explicit SimulationBudget(const RecomputeModel &model)
      : nodesLeft_(std::max(kTrialNodes, kMinTrialsAtScale * model.graph().numNodes())) {}
  /// Charges one simulation of `set`'s rewrite; false, charging nothing, when
  /// what is left does not cover it.
  bool charge(const RecomputeModel &model, const RecomputeSet &set) {
    if (!covers(model, set))
      return false;
    nodesLeft_ -= model.graph().numNodes() + set.clones.size();
    return true;
  }
  /// Whether a simulation of `set`'s rewrite is still covered. Asked before
  /// building a trial plan, which on a large graph costs as much.
  bool covers(const RecomputeModel &model, const RecomputeSet &set) const {
    return model.graph().numNodes() + set.clones.size() <= nodesLeft_;
  }

private:
  size_t nodesLeft_;
};

/// A plan that meets the budget may still make some dropped value several
/// times: for other recomputations before its own clone. Making its own clone
/// at the earliest of those instead (held from there, shared) saves the
/// repeats' time and costs memory between the two points. Hoists are tried in
/// groups, the costliest repeats first, one simulation per group: all of
/// them, and while a group does not fit, its first half; a group that fits is
/// kept and the next one, as large, follows. On a tight plan with hundreds of
/// repeats (BERT-base at activations=10%) this keeps far more of them within
/// the trial limits than one simulation per hoist. Then single hoists, as the
/// first ones change the repeats of the rest.
absl::Status shareRepeats(const RecomputeModel &model, int64_t budget, int64_t peakCap,
                          PlanState &state,
                          std::optional<Simulation> &stateSim, SimulationBudget &simulations,
                          CheckpointPlan &plan,
                          std::vector<std::pair<int32_t, int64_t>> &hoists) {
  unsigned trials = 0;
  bool exhausted = false;
  RecomputeSet current = state.result();
  // Tries `points` on top of the current state; true when they were kept.
  auto tryHoists = [&](llvm::ArrayRef<std::pair<int32_t, int64_t>> points) -> absl::StatusOr<bool> {
    ++trials;
    auto next = state.hoisted(points);
    if (!next.ok())
      return false;
    RecomputeSet set = next->result();
    if (set.seconds >= current.seconds)
      return false;
    if (!simulations.charge(model, set)) {
      exhausted = true;
      return false;
    }
    auto sim = model.simulate(set);
    if (!sim.ok())
      return sim.status();
    ++plan.simulations;
    if (sim->bounded > budget || sim->peakAboveInputs > peakCap)
      return false;
    state = std::move(*next);
    stateSim = std::move(*sim);
    current = std::move(set);
    hoists.insert(hoists.end(), points.begin(), points.end());
    return true;
  };

  std::vector<std::pair<int32_t, int64_t>> all = state.repeatPoints();
  size_t group = all.size();
  for (size_t start = 0; start < all.size() && group >= 2 && !exhausted && trials < kMaxTrials;) {
    llvm::ArrayRef<std::pair<int32_t, int64_t>> points(all.data() + start,
                                                       std::min(group, all.size() - start));
    auto kept = tryHoists(points);
    if (!kept.ok())
      return kept.status();
    if (*kept)
      start += points.size();
    else
      group /= 2;
  }

  while (!exhausted && trials < kMaxTrials && simulations.covers(model, current)) {
    bool improved = false;
    for (const PlanState::Repeat &r : state.repeats()) {
      if (trials >= kMaxTrials || exhausted)
        break;
      auto kept = tryHoists({{r.candidate, r.earliest}});
      if (!kept.ok())
        return kept.status();
      if (*kept) {
        improved = true;
        break;
      }
    }
    if (!improved)
      break;
  }
  return absl::OkStatus();
}

/// The greedy drops at the peak of the moment, and a later drop at another
/// peak may bring that one down too: an earlier drop can end up unneeded.
/// Each dropped candidate, the dearest per byte first, is kept again when the
/// plan without it (the others' clones where they were) is faster and its
/// simulated rewrite still fits; so this step never slows the plan. The
/// estimate screens first: the candidate's bytes back over the ranks dropping
/// it freed, on the current simulation (an upper bound, as keeping it also
/// removes its clones).
absl::Status keepUnneeded(const RecomputeModel &model, int64_t budget, int64_t peakCap,
                          PlanState &state,
                          std::optional<Simulation> &stateSim, PeakTracker &peak,
                          const std::function<std::pair<int64_t, int64_t>(
                              const CheckpointCandidate &)> &freedRanks,
                          SimulationBudget &simulations, CheckpointPlan &plan) {
  auto candidates = model.candidates();
  std::vector<int32_t> order = plan.dropped;
  auto dearness = [&](int32_t c) {
    return candidates[c].standaloneSeconds / std::max<double>(candidates[c].bytes, 1);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return dearness(a) > dearness(b); });
  unsigned trials = 0;
  RecomputeSet current = state.result();
  for (int32_t c : order) {
    auto [first, last] = freedRanks(candidates[c]);
    peak.add(first, last, candidates[c].bytes);
    bool mayFit = peak.peak() <= budget;
    peak.add(first, last, -candidates[c].bytes);
    if (!mayFit)
      continue;
    if (trials++ >= kMaxTrials || !simulations.covers(model, current))
      break;
    auto without = state.without(c);
    if (!without.ok())
      continue;
    std::vector<int32_t> rest;
    for (int32_t d : plan.dropped)
      if (d != c)
        rest.push_back(d);
    RecomputeSet set = without->result();
    if (set.seconds >= current.seconds)
      continue;
    if (!simulations.charge(model, set))
      break;
    auto sim = model.simulate(set);
    if (!sim.ok())
      return sim.status();
    ++plan.simulations;
    if (sim->bounded > budget || sim->peakAboveInputs > peakCap)
      continue;
    state = std::move(*without);
    current = std::move(set);
    plan.dropped = std::move(rest);
    peak = PeakTracker(sim->boundedByRank);
    stateSim = std::move(*sim);
    ++plan.kept;
  }
  return absl::OkStatus();
}

const char *boundName(BoundedMemory kind) {
  return kind == BoundedMemory::SavedActivations ? "saved" : "memory";
}

/// A bound a plan must meet, with its timeline (estimated between simulations).
struct Bound {
  BoundedMemory kind;
  int64_t limit;
  PeakTracker timeline;
};

/// The bounds a plan must meet: the model's bounded memory, and with a peak
/// cap on saved activations, the peak above the inputs too.
std::vector<Bound> boundsOf(const RecomputeModel &model, int64_t budget, int64_t peakCap) {
  std::vector<Bound> bounds;
  if (model.boundedMemory() == BoundedMemory::PeakAboveInputs) {
    bounds.push_back({BoundedMemory::PeakAboveInputs, std::min(budget, peakCap),
                      PeakTracker(model.boundedTimeline())});
  } else {
    bounds.push_back({model.boundedMemory(), budget, PeakTracker(model.boundedTimeline())});
    if (peakCap != kNoPeakCap)
      bounds.push_back({BoundedMemory::PeakAboveInputs, peakCap,
                        PeakTracker(model.peakAboveInputsTimeline())});
  }
  return bounds;
}

/// The first bound whose timeline peaks over its limit, or null.
Bound *overBound(std::vector<Bound> &bounds) {
  for (Bound &b : bounds)
    if (b.timeline.peak() > b.limit)
      return &b;
  return nullptr;
}

/// The greedy's state while it drops candidates.
struct GreedySearch {
  GreedySearch(const RecomputeModel &model, std::vector<Bound> bounds)
      : model(model), bounds(std::move(bounds)), state(model) {
    auto candidates = model.candidates();
    for (size_t c = 0; c < candidates.size(); ++c)
      heap.push({ratioOf(candidates[c].bytes, candidates[c].standaloneSeconds),
                 static_cast<int32_t>(c)});
    impossible.assign(candidates.size(), 0);
    plan.planner = "greedy";
  }

  const RecomputeModel &model;
  std::vector<Bound> bounds;
  PlanState state;
  std::priority_queue<Entry> heap;
  std::vector<uint8_t> impossible;
  CheckpointPlan plan;
  bool synced = true; // the timelines hold a real simulation, not an estimate
  // The simulation of `state`'s plan, once made: the prediction reuses it
  // (at 100k nodes a simulation is a third of a second).
  std::optional<Simulation> stateSim;
};

/// Takes `sim`, the simulation of the plan in `g.state`, as the bounds'
/// timelines.
void adoptSimulation(GreedySearch &g, Simulation sim) {
  for (Bound &b : g.bounds)
    b.timeline = PeakTracker(b.kind == g.model.boundedMemory() ? sim.boundedByRank
                                                               : sim.peakAboveInputsByRank);
  g.synced = true;
  g.stateSim = std::move(sim);
}

/// Replaces the estimates by the simulation of the plan so far.
absl::Status syncWithSimulation(GreedySearch &g) {
  auto sim = g.model.simulate(g.state.result());
  if (!sim.ok())
    return sim.status();
  ++g.plan.simulations;
  adoptSimulation(g, std::move(*sim));
  return absl::OkStatus();
}

/// The best candidate live across `over`'s peak, re-rated against the current
/// plan (lazily: a re-rated entry that is no longer the best goes back); -1
/// when there is none.
int32_t bestAtPeak(GreedySearch &g, const Bound &over) {
  auto candidates = g.model.candidates();
  int64_t r = over.timeline.peakRank();
  std::vector<Entry> aside;
  int32_t chosen = -1;
  while (!g.heap.empty()) {
    Entry e = g.heap.top();
    g.heap.pop();
    const CheckpointCandidate &c = candidates[e.candidate];
    if (g.state.isDropped(e.candidate) || g.impossible[e.candidate])
      continue;
    if (auto [first, last] = freedRanksOf(g.model, over.kind, c); r < first || r > last) {
      aside.push_back(e);
      continue;
    }
    auto cost = g.state.marginal(e.candidate);
    if (!cost.ok()) {
      g.impossible[e.candidate] = 1;
      continue;
    }
    double ratio = ratioOf(c.bytes, cost->first);
    if (g.heap.empty() || ratio >= g.heap.top().ratio || ratio == e.ratio) {
      chosen = e.candidate;
      break;
    }
    g.heap.push({ratio, e.candidate});
  }
  for (const Entry &e : aside)
    g.heap.push(e);
  return chosen;
}

/// Drops candidate `c` (chosen for reason `why`) and lowers the bounds'
/// estimated timelines by its bytes where it is freed; one that cannot be
/// recomputed is marked impossible instead.
void drop(GreedySearch &g, int32_t c, std::string why) {
  if (!g.state.add(c).ok()) {
    g.impossible[c] = 1;
    return;
  }
  const CheckpointCandidate &cand = g.model.candidates()[c];
  g.plan.dropped.push_back(c);
  g.plan.why[c] = std::move(why);
  g.stateSim.reset();
  for (Bound &b : g.bounds) {
    auto [first, last] = freedRanksOf(g.model, b.kind, cand);
    b.timeline.add(first, last, -cand.bytes);
  }
  g.synced = false;
}

/// Drops the best candidate at the peak of a bound that is over, until every
/// bound holds on a simulated timeline or nothing is left to drop there.
absl::Status dropUntilWithinBounds(GreedySearch &g) {
  while (true) {
    Bound *over = overBound(g.bounds);
    if (!over || g.heap.empty()) {
      if (g.synced)
        break;
      // The estimate says it fits (or nothing is left): simulate for real.
      if (absl::Status st = syncWithSimulation(g); !st.ok())
        return st;
      continue;
    }
    int32_t chosen = bestAtPeak(g, *over);
    if (chosen < 0) { // nothing left to drop at the peak
      if (g.synced)
        break;
      if (absl::Status st = syncWithSimulation(g); !st.ok())
        return st;
      continue;
    }
    drop(g, chosen,
         absl::StrCat("best bytes/s at the ", boundName(over->kind), " peak (",
                      g.model.nodeAt(over->timeline.peakRank())->valueOrOperator(), ")"));
  }
  return absl::OkStatus();
}

/// A start whose drops, taken together, need more than this many clones per
/// node of the graph is given up before any simulation. Its candidates are
/// rebuilt through one another at every backward use: a knapsack's choice at
/// a tight budget, priced candidate by candidate, did so on BERT-base at
/// activations=10% and 5% (24k and 55k clones for 1.7k nodes, 61 and 152 s of
/// recomputation, still 24 and 62 s after refinement against 1.2 and 1.7 s
/// from the other starts) and GPT-2 at 5% (77k clones), and simulating such
/// plans was four fifths of the planning time. The starts that won on the
/// zoo and the default-size models needed at most 6.7 clones per node
/// (ResNet-50's knapsack start at 5%).
constexpr size_t kMaxStartClonesPerNode = 12;

/// A start for the greedy: at the first bound's unoptimised peak, the
/// candidates live across it whose drop frees the bytes over the limit at
/// the least standalone recomputation time, chosen together (a min-cost
/// covering knapsack, bytes in kKnapsackSteps steps, rounded down so the
/// chosen set frees at least what is needed) rather than one at a time by
/// ratio. The greedy's ratio order is myopic where drops interact; this
/// start is the other end (torch.compile's knapsack chooses the same way).
constexpr int64_t kKnapsackSteps = 2048;
std::vector<int32_t> knapsackStart(const RecomputeModel &model, const Bound &bound) {
  const int64_t need = bound.timeline.peak() - bound.limit;
  if (need <= 0)
    return {};
  const int64_t r = bound.timeline.peakRank();
  auto candidates = model.candidates();
  std::vector<int32_t> items;
  int64_t total = 0;
  for (size_t c = 0; c < candidates.size(); ++c)
    if (auto [first, last] = freedRanksOf(model, bound.kind, candidates[c]);
        first <= r && r <= last) {
      items.push_back(static_cast<int32_t>(c));
      total += candidates[c].bytes;
    }
  if (total < need)
    return items; // all of them, and the greedy goes on from there
  const int64_t unit = std::max<int64_t>(1, (need + kKnapsackSteps - 1) / kKnapsackSteps);
  const int64_t target = (need + unit - 1) / unit;
  // Weights rounded down can leave the target out of reach although the
  // bytes suffice: all of them then, as above; known before the table is
  // filled where even all the rounded weights fall short (many activations
  // each under a step: on a 100k-node chain, 11k of 1 KiB, a 22M-cell table).
  int64_t rounded = 0;
  for (int32_t i : items)
    rounded += candidates[i].bytes / unit;
  if (rounded < target)
    return items;
  const double kInf = std::numeric_limits<double>::infinity();
  // cost[t]: the least seconds freeing at least t steps; took[i][t]: item i taken there.
  std::vector<double> cost(target + 1, kInf);
  cost[0] = 0;
  std::vector<std::vector<uint8_t>> took(items.size(), std::vector<uint8_t>(target + 1, 0));
  for (size_t i = 0; i < items.size(); ++i) {
    const CheckpointCandidate &c = candidates[items[i]];
    const int64_t w = c.bytes / unit;
    const double s = c.standaloneSeconds;
    for (int64_t t = target; t >= 0; --t) {
      const int64_t from = std::max<int64_t>(0, t - w);
      if (cost[from] + s < cost[t]) {
        cost[t] = cost[from] + s;
        took[i][t] = 1;
      }
    }
  }
  // Weights rounded down can leave the target out of reach although the
  // bytes suffice: all of them then, as above.
  if (cost[target] == kInf)
    return items;
  std::vector<int32_t> chosen;
  for (int64_t i = static_cast<int64_t>(items.size()) - 1, t = target; i >= 0 && t > 0; --i)
    if (took[i][t]) {
      chosen.push_back(items[i]);
      t = std::max<int64_t>(0, t - candidates[items[i]].bytes / unit);
    }
  return chosen;
}

/// A starting set for the greedy, each candidate with why it is in it.
using Start = std::vector<std::pair<int32_t, std::string>>;

/// The knapsack's start, with its reason.
Start knapsackStartOf(const RecomputeModel &model, const Bound &bound) {
  std::string why = absl::StrCat("knapsack at the ", boundName(bound.kind), " peak (",
                                 model.nodeAt(bound.timeline.peakRank())->valueOrOperator(), ")");
  Start start;
  for (int32_t c : knapsackStart(model, bound))
    start.push_back({c, why});
  return start;
}

/// The per-block start: every candidate inside a block of the model
/// (ModelBlocks.h), so that only what passes between blocks stays saved.
Start blockStartOf(const RecomputeModel &model) {
  const ModelBlocks &blocks = findBlocks(model);
  Start start;
  for (int32_t c : blockInteriors(model, blocks))
    start.push_back(
        {c, absl::StrCat("inside its block (",
                         blocks.names[blocks.blockOfRank[model.candidates()[c].created]], ")")});
  return start;
}

/// The structured starts: one rung of each block's ladder, chosen together
/// to free what the first bound is over by (StructuredPlanner.h).
std::vector<Start> structuredStartsOf(const RecomputeModel &model, const Bound &bound) {
  std::vector<Start> starts;
  for (StructuredChoice &choice :
       structuredChoices(model, bound.kind, bound.timeline.peakRank(),
                         bound.timeline.peak() - bound.limit,
                         kMaxStartClonesPerNode * model.graph().numNodes()))
    starts.push_back(std::move(choice.drops));
  return starts;
}

/// Each priced cut reads every memory coefficient twice: past this many
/// (a 10k-node chain of activations has 25M, and took minutes) the
/// relaxation's start is left out, and its bound comes from the rows
/// furthest over the budget that fit in as many (RecomputeRelaxation's
/// partial program). ResNet-50, BERT-base and GPT-2 at default sizes have
/// 46k, 115k and 160k, the zoo's ResNet-152 377k.
constexpr size_t kMaxRelaxationNonzeros = 1000000;

/// The relaxation's start (RecomputeRelaxation.h), its program solved by
/// priced minimum cuts (LagrangianCut.h): drops and values held for the
/// clones, taken together where the greedy's ratios see one candidate at a
/// time (BERT-base at activations=30%: dropping a residual sum and its
/// dropout's mask pays once the dense layer's output before them is held,
/// not before). With it, the bound on every plan the prices proved.
struct RelaxedStart {
  bool infeasible = false; ///< no plan meets the budget
  bool found = false;
  Start drops;
  std::vector<const Value *> held;
  double boundSeconds = 0;
};
/// `relaxation`: the model's. `best`: the best plan so far (or none), the
/// solver's aim.
RelaxedStart relaxedStartOf(const RecomputeRelaxation &relaxation, int64_t budget,
                            const CheckpointPlan *best) {
  RelaxedStart out;
  if (relaxation.memoryNonzeros() > kMaxRelaxationNonzeros)
    return out; // too large to solve within the planning time (relaxedLowerBound bounds it)
  std::optional<MilpProblem> problem = relaxation.problem(budget);
  out.infeasible = !problem;
  if (!problem || problem->memoryRows == 0)
    return out; // no plan meets it, or nothing to drop
  double upper = std::numeric_limits<double>::infinity();
  if (best && best->meetsBudget) {
    std::vector<double> point = relaxation.pointOf(best->recompute, best->held);
    upper = 0;
    for (size_t j = 0; j < point.size(); ++j)
      upper += problem->objective[j] * point[j];
  }
  LagrangianCutSolution solved = solveByLagrangianCuts(*problem, upper);
  out.boundSeconds = relaxation.lowerBoundSeconds(solved.bound);
  if (solved.columns.empty())
    return out;
  RecomputeRelaxation::Decoded decoded = relaxation.decode(solved.columns);
  out.found = true;
  for (int32_t c : decoded.dropped)
    out.drops.push_back({c, "in the relaxation's cut"});
  out.held = std::move(decoded.held);
  return out;
}

/// Once the plan fits: shares repeated recomputations, then undoes the drops
/// later ones made unneeded.
absl::Status refinePlan(GreedySearch &g, int64_t budget, int64_t peakCap) {
  const RecomputeModel &model = g.model;
  std::function<std::pair<int64_t, int64_t>(const CheckpointCandidate &)> freedRanks =
      [&](const CheckpointCandidate &c) { return freedRanksOf(model, model.boundedMemory(), c); };
  PeakTracker &peak = g.bounds[0].timeline;
  std::vector<std::pair<int32_t, int64_t>> hoists; // (candidate, point), in the order made
  SimulationBudget simulations(model);
  if (absl::Status st =
          shareRepeats(model, budget, peakCap, g.state, g.stateSim, simulations, g.plan, hoists);
      !st.ok())
    return st;
  g.plan.hoists += static_cast<unsigned>(hoists.size());
  if (!hoists.empty()) // the tracker holds the plan before them; stateSim, after
    peak = PeakTracker(g.stateSim->boundedByRank);
  return keepUnneeded(model, budget, peakCap, g.state, g.stateSim, peak, freedRanks, simulations,
                      g.plan);
}

/// The first bound the plan so far is over, on its simulation (made first
/// where the timelines hold an estimate); none when it is within them.
absl::StatusOr<Bound *> overBoundSimulated(GreedySearch &g) {
  if (!g.synced || !g.stateSim)
    if (absl::Status st = syncWithSimulation(g); !st.ok())
      return st;
  return overBound(g.bounds);
}

/// How far a simulated plan is over the bounds: the bytes over each, summed.
int64_t excessOf(const std::vector<Bound> &bounds, const RecomputeModel &model,
                 const Simulation &sim) {
  int64_t excess = 0;
  for (const Bound &b : bounds) {
    const int64_t peak = b.kind == model.boundedMemory() ? sim.bounded : sim.peakAboveInputs;
    excess += std::max<int64_t>(0, peak - b.limit);
  }
  return excess;
}

/// Dropped values tried as chain cuts per round, and rounds.
constexpr unsigned kChainCutTrials = 4, kChainCutRounds = 3;

/// A plan whose repeats were all shared can peak over a bound where one
/// recomputation, early in backward, reaches back through a long chain of
/// dropped values, every one of them then made at once and held until its
/// own backward use. The relaxation counts each node once, wherever it runs,
/// so it sees no difference between a solution that keeps a value cutting
/// that chain and one that drops it (GPT-2 at activations=10%: the loss's
/// log-softmax, recomputed first in backward, reached back through the
/// residual stream of every layer: 1.11 GB at the start of backward, against
/// a cap of 0.85 GB; with the final layer norm's output kept, 3 MiB, the
/// chain stops there and the plan is under the cap). Each round keeps the dropped
/// value, read by the clones made up to the peak but not itself needed until
/// later, whose keeping (the rest shared again from scratch) leaves the plan
/// least over its bounds; the latest made tried first, a few per round. The
/// bytes it takes back from a bound the greedy drops elsewhere.
absl::Status keepChainCutsWhileOver(GreedySearch &g) {
  auto candidates = g.model.candidates();
  const LivenessResult &live = g.model.baseline();
  for (unsigned round = 0; round < kChainCutRounds; ++round) {
    auto simulatedOver = overBoundSimulated(g);
    if (!simulatedOver.ok())
      return simulatedOver.status();
    Bound *over = *simulatedOver;
    if (!over)
      break;
    const int64_t at = over->timeline.peakRank();
    llvm::DenseSet<const Value *> readEarly; // storages the clones up to the peak read
    for (const RecomputeSet::Clone &clone : g.state.result().clones)
      if (clone.before <= at)
        for (const Value *o : clone.original->operandValues())
          if (const ValueLiveness *l = live.lookup(o))
            readEarly.insert(l->storage);
    std::vector<int32_t> cuts;
    for (int32_t c : g.state.dropped())
      if (g.state.ownAt(c) <= at && candidates[c].firstBackwardUse > at &&
          readEarly.contains(candidates[c].storage))
        cuts.push_back(c);
    std::stable_sort(cuts.begin(), cuts.end(), [&](int32_t a, int32_t b) {
      return candidates[a].created > candidates[b].created;
    });
    if (cuts.size() > kChainCutTrials)
      cuts.resize(kChainCutTrials);
    int64_t bestExcess = excessOf(g.bounds, g.model, *g.stateSim);
    int32_t bestCut = -1;
    std::optional<PlanState> bestState;
    std::optional<Simulation> bestSim;
    unsigned bestHoists = 0;
    for (int32_t cut : cuts) {
      PlanState trial(g.model);
      for (const Value *v : g.plan.held)
        trial.hold(v);
      for (int32_t c : g.state.dropped())
        if (c != cut)
          if (absl::Status st = trial.add(c); !st.ok())
            return st;
      const unsigned hoists = trial.hoistEveryRepeat();
      auto sim = g.model.simulate(trial.result());
      if (!sim.ok())
        return sim.status();
      ++g.plan.simulations;
      if (int64_t excess = excessOf(g.bounds, g.model, *sim); excess < bestExcess) {
        bestExcess = excess;
        bestCut = cut;
        bestState = std::move(trial);
        bestSim = std::move(*sim);
        bestHoists = hoists;
        if (excess <= candidates[cut].bytes)
          break; // over by no more than it took back: the greedy drops that elsewhere
      }
    }
    if (bestCut < 0)
      break;
    g.state = std::move(*bestState);
    g.plan.hoists = bestHoists;
    llvm::erase_value(g.plan.dropped, bestCut);
    g.plan.why.erase(bestCut);
    adoptSimulation(g, std::move(*bestSim));
  }
  return absl::OkStatus();
}

/// A plan whose repeats were all shared (hoisted) may peak over a bound in
/// backward, where the hoisted clones are held (on GPT-2 at activations=10%
/// every repeat's earliest point was the first backward node). Each round
/// the own clones held across the simulated peak are made later: at the
/// first point after the peak where a clone reads them (there still shared
/// with the rest), or at their first backward use; the most bytes per second
/// of their own recomputation first, as many as the peak is over by. Until
/// the simulation fits or no hoist is held there (the greedy goes on from
/// there).
absl::Status lowerHoistsWhileOver(GreedySearch &g) {
  auto candidates = g.model.candidates();
  const LivenessResult &live = g.model.baseline();
  for (unsigned round = 0; round < kMaxTrials && g.plan.hoists > 0; ++round) {
    auto simulatedOver = overBoundSimulated(g);
    if (!simulatedOver.ok())
      return simulatedOver.status();
    Bound *over = *simulatedOver;
    if (!over)
      break;
    const int64_t at = over->timeline.peakRank();
    // Where clones read each storage (the points, ascending).
    llvm::DenseMap<const Value *, llvm::SmallVector<int64_t, 4>> readAt;
    for (const RecomputeSet::Clone &clone : g.state.result().clones)
      for (const Value *o : clone.original->operandValues())
        if (const ValueLiveness *l = live.lookup(o)) {
          auto &points = readAt[l->storage];
          if (points.empty() || points.back() != clone.before)
            points.push_back(clone.before);
        }
    struct Move {
      int32_t candidate;
      int64_t to;
    };
    std::vector<Move> moves;
    for (int32_t c : g.state.dropped()) {
      const CheckpointCandidate &cand = candidates[c];
      if (g.state.ownAt(c) > at || at >= cand.firstBackwardUse)
        continue;
      Move m{c, cand.firstBackwardUse};
      for (int64_t p : readAt.lookup(cand.storage))
        if (p > at && p < m.to)
          m.to = p;
      moves.push_back(m);
    }
    if (moves.empty())
      break;
    // Standalone seconds stand for what remaking costs: counting the reads
    // before the peak as well chose worse on BERT-base (activations=30%:
    // +9.9% against +8.2%).
    std::stable_sort(moves.begin(), moves.end(), [&](const Move &a, const Move &b) {
      const CheckpointCandidate &x = candidates[a.candidate], &y = candidates[b.candidate];
      return ratioOf(x.bytes, x.standaloneSeconds) > ratioOf(y.bytes, y.standaloneSeconds);
    });
    std::vector<std::pair<int32_t, int64_t>> points;
    int64_t freed = 0;
    for (const Move &m : moves) {
      if (freed >= over->timeline.peak() - over->limit)
        break;
      points.push_back({m.candidate, m.to});
      freed += candidates[m.candidate].bytes;
    }
    auto next = g.state.withOwnAt(points);
    if (!next.ok())
      break;
    g.state = std::move(*next);
    g.stateSim.reset(); // the timelines are the plan's before the move
    g.synced = false;
  }
  return absl::OkStatus();
}

/// Chains are followed through at most this many forward nodes per candidate
/// (chainClonesAtLeast; fewer only lowers the bound).
constexpr unsigned kChainWalk = 64;

} // namespace

/// The clones `start`'s drops need at least, nothing held, counted without
/// making them (on a 1M-node chain the knapsack's start, every activation,
/// made 12M clones before it was given up: ten seconds). Each dropped
/// candidate's own clone, made at its first backward use P, needs the chain
/// of dropped candidates behind it whose own clones come after P, each made
/// again at P: through forward values freed before backward (every backward
/// point), one clone per candidate on the chain. Clones at one point are
/// shared, so each point counts its longest chain; points add up. It assumes
/// every drop succeeds: a drop refused would keep its value and cut chains
/// there. Where nothing is written in
/// place, dropouts are replayed and every activation may be dropped on its
/// own (nothing excluded), none of grow's refusals can apply (what a chain
/// reaches is made again by some candidate's own recomputation, priced when
/// the model was built), so the bound is used only on such graphs.
size_t chainClonesAtLeast(const RecomputeModel &model, llvm::ArrayRef<int32_t> start) {
  if (start.empty() || !model.replaysRngStates() || model.writesInPlace() ||
      !model.excluded().empty())
    return 0;
  const LivenessResult &live = model.baseline();
  auto candidates = model.candidates();
  const int64_t backwardStart = model.backwardStart();
  std::vector<uint8_t> dropped(candidates.size(), 0);
  std::vector<int32_t> order;
  for (int32_t c : start)
    if (!dropped[c]) {
      dropped[c] = 1;
      order.push_back(c);
    }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return candidates[a].created < candidates[b].created;
  });
  std::vector<size_t> depth(candidates.size(), 0);
  llvm::DenseMap<int64_t, size_t> longestAt; // own point -> longest chain there
  llvm::SmallVector<const Value *, 16> work;
  llvm::SmallPtrSet<const Node *, 16> walked;
  for (int32_t c : order) {
    const CheckpointCandidate &cand = candidates[c];
    const int64_t p = cand.firstBackwardUse;
    if (p < 0)
      continue;
    size_t behind = 0;
    llvm::SmallVector<Value *, 4> operands = cand.storage->definingNode()->operandValues();
    work.assign(operands.begin(), operands.end());
    walked.clear();
    while (!work.empty()) {
      const Value *v = work.pop_back_val();
      const ValueLiveness *l = live.lookup(v);
      const ValueLiveness *s = l ? live.lookup(l->storage) : nullptr;
      if (!s || s->created < 0)
        continue; // a graph input: there at every point
      if (int32_t d = model.candidateOf(s->value); d >= 0) {
        if (dropped[d] && candidates[d].firstBackwardUse > p)
          behind = std::max(behind, depth[d]); // its chain is made again at p
        continue; // kept (maybe there at p), or its own clone there
      }
      const Node *n = v->definingNode();
      if (s->freedAfter >= backwardStart || !n || n->phase() != Phase::Forward)
        continue; // may still be there at p
      if (!walked.insert(n).second)
        continue;
      if (walked.size() > kChainWalk)
        break;
      for (const Value *o : n->operandValues())
        work.push_back(o);
    }
    depth[c] = behind + 1;
    size_t &longest = longestAt[p];
    longest = std::max(longest, depth[c]);
  }
  size_t total = 0;
  for (const auto &[point, longest] : longestAt)
    total += longest;
  return total;
}

namespace {

/// The candidates `drops` drops.
llvm::BitVector setOf(const RecomputeModel &model, llvm::ArrayRef<int32_t> drops) {
  llvm::BitVector set(static_cast<unsigned>(model.candidates().size()));
  for (int32_t c : drops)
    set.set(static_cast<unsigned>(c));
  return set;
}

/// Whether `drops` holds every drop of a start given up before.
bool knownGivenUp(const RecomputeModel &model, llvm::ArrayRef<int32_t> drops) {
  std::vector<llvm::BitVector> &givenUp = givenUpStartsOf(model);
  if (givenUp.empty())
    return false;
  llvm::BitVector set = setOf(model, drops);
  return llvm::any_of(givenUp, [&](const llvm::BitVector &g) { return !g.test(set); });
}

/// The greedy from `start` (dropped first, `held` kept for the clones),
/// refined once it fits; none when the start is given up (kMaxStartClonesPerNode).
/// `shareFirst`: every repeat shared before anything else, and where that
/// peaks over a bound (then `*sharedOver`, if given, is set), with
/// `cutChains` chain cuts kept first (keepChainCutsWhileOver), then the
/// shared clones made later.
absl::StatusOr<std::optional<CheckpointPlan>>
greedyFrom(const RecomputeModel &model, int64_t budget, int64_t peakCap, const Start &start,
           llvm::ArrayRef<const Value *> held = {}, bool shareFirst = false,
           bool cutChains = false, bool *sharedOver = nullptr) {
  GreedySearch g(model, boundsOf(model, budget, peakCap));
  for (const Value *v : held)
    g.state.hold(v);
  g.plan.held.assign(held.begin(), held.end());
  if (!held.empty())
    g.synced = false; // the timelines do not hold them yet: simulate before trusting
  // A start past the clone limit is given up (below) as soon as it is past it:
  // dropping the rest first costs time quadratic in the graph where every
  // activation of a chain is dropped (a knapsack start on a 10k-node chain
  // took 15 s to reach a plan given up). Drops only add clones, so checking on
  // the way, after every drop, gives up the same starts. A shared start is
  // checked after its sharing, which removes clones.
  const size_t cloneLimit = kMaxStartClonesPerNode * model.graph().numNodes();
  // For the same reason a start holding the drops of one given up before
  // (the knapsack's at each budget rung, on a long chain all of them) is
  // given up at once; held values change the clones, so only starts without.
  const bool remembered = held.empty() && !shareFirst;
  std::vector<int32_t> drops;
  for (const auto &[c, why] : start)
    drops.push_back(c);
  if (remembered && knownGivenUp(model, drops))
    return std::nullopt;
  if (remembered && chainClonesAtLeast(model, drops) > cloneLimit) {
    givenUpStartsOf(model).push_back(setOf(model, drops));
    return std::nullopt;
  }
  for (size_t i = 0; i < start.size(); ++i) {
    drop(g, start[i].first, start[i].second);
    if (!shareFirst && g.state.cloneCount() > cloneLimit) {
      if (remembered)
        givenUpStartsOf(model).push_back(setOf(model, llvm::ArrayRef(drops).take_front(i + 1)));
      return std::nullopt;
    }
  }
  // A start chosen with each value made once (the relaxation's) has its
  // repeats shared before anything else: rebuilt at every backward use, its
  // chains can need twenty times the clones (BERT-base at activations=30%:
  // 6675 clones against 312).
  if (shareFirst) {
    g.plan.hoists = g.state.hoistEveryRepeat();
    auto over = overBoundSimulated(g);
    if (!over.ok())
      return over.status();
    if (sharedOver)
      *sharedOver = *over != nullptr;
    if (cutChains)
      if (absl::Status st = keepChainCutsWhileOver(g); !st.ok())
        return st;
    if (absl::Status st = lowerHoistsWhileOver(g); !st.ok())
      return st;
  }
  if (!start.empty() && g.state.cloneCount() > cloneLimit)
    return std::nullopt;
  if (absl::Status st = dropUntilWithinBounds(g); !st.ok())
    return st;
  if (g.synced && !overBound(g.bounds))
    if (absl::Status st = refinePlan(g, budget, peakCap); !st.ok())
      return st;
  CheckpointPlan &plan = g.plan;
  plan.recompute = g.state.result();
  if (g.stateSim)
    predictPlan(*g.stateSim, budget, plan, peakCap);
  else if (absl::Status st = predictPlan(model, budget, plan, peakCap); !st.ok())
    return st;
  return std::optional<CheckpointPlan>(std::move(plan));
}

/// Whether plan `a` is better than `b`: it meets the budget where `b` does
/// not; both meeting it, it is faster by more than kSameTime of the slower
/// one's extra time, or as fast and with a lower peak above the inputs (on
/// BERT-base at activations=10% a start that recomputes everything at the
/// start of backward saves 0.1% of the time and brings the peak back to the
/// unoptimised one); neither meeting it, it comes closer.
constexpr double kSameTime = 0.01;
bool better(const CheckpointPlan &a, const CheckpointPlan &b) {
  if (a.meetsBudget != b.meetsBudget)
    return a.meetsBudget;
  if (!a.meetsBudget)
    return a.predictedBounded < b.predictedBounded;
  const double slower = std::max(a.predictedExtraSeconds, b.predictedExtraSeconds);
  if (std::abs(a.predictedExtraSeconds - b.predictedExtraSeconds) > kSameTime * slower)
    return a.predictedExtraSeconds < b.predictedExtraSeconds;
  return a.predictedPeak < b.predictedPeak;
}

/// One start planGreedy tries (greedyFrom's arguments), and the plan it made.
struct Tried {
  Start start;
  const char *status;
  std::optional<CheckpointPlan> plan;
  std::vector<const Value *> held = {};
  bool shareFirst = false; ///< greedyFrom's
  bool cutChains = false;  ///< greedyFrom's
  bool sharedOver = false; ///< greedyFrom's answer
};

/// The starts of one planGreedy call, each run through greedyFrom, and the
/// pick among their plans. Four starts: nothing dropped (the ratio order from
/// the first drop), the knapsack's choice at the peak, the relaxation's
/// solution (drops and held values chosen together), and the model's block
/// interiors (per-block checkpointing, where the model has blocks).
/// planner=structured starts from its choices alone.
class GreedyTrials {
public:
  GreedyTrials(const RecomputeModel &model, int64_t budget, int64_t peakCap, GreedyStarts starts)
      : model_(model), budget_(budget), peakCap_(peakCap),
        bounds_(boundsOf(model, budget, peakCap)),
        structuredOnly_(starts == GreedyStarts::Structured && !findBlocks(model).names.empty()),
        peakFree_(model.boundedMemory() == BoundedMemory::SavedActivations &&
                  peakCap == kNoPeakCap) {}

  /// The first starts (nothing dropped and the knapsack's, or the structured
  /// choices), run; the flat greedy where every structured choice is given up.
  absl::Status runFirstStarts();
  /// The relaxation's start, and the same with its chains cut first.
  absl::Status runRelaxedStarts();
  /// The per-block start, unless a plan is already within kSameTime of the bound.
  absl::Status runBlockStart();
  /// The starts that met the bound above the lowest peak, again capped at it.
  absl::Status rerunCappedAtLowestPeak();
  /// The best plan tried, its totals filled in.
  CheckpointPlan pick(GreedyStarts starts);

private:
  /// Runs `t`'s start with `cap` as the peak cap; `t.plan` stays empty when
  /// the start is given up.
  absl::Status run(Tried &t, int64_t cap);
  /// Adds `t` to the starts tried and runs it.
  absl::Status runNext(Tried t) {
    tried_.push_back(std::move(t));
    return run(tried_.back(), peakCap_);
  }
  const CheckpointPlan *bestTried() const;
  /// Whether the best plan so far is within kSameTime of the lower bound.
  bool withinBound() const;
  bool overBounds() { return overBound(bounds_) != nullptr; }

  const RecomputeModel &model_;
  const int64_t budget_;
  const int64_t peakCap_;
  std::vector<Bound> bounds_;
  const bool structuredOnly_;
  // Nothing bounds the peak above the inputs (activations= alone).
  const bool peakFree_;
  std::vector<Tried> tried_;
  unsigned simulations_ = 0;
  double lowerBound_ = 0;
};

absl::Status GreedyTrials::run(Tried &t, int64_t cap) {
  auto made = greedyFrom(model_, budget_, cap, t.start, t.held, t.shareFirst, t.cutChains,
                         &t.sharedOver);
  if (!made.ok())
    return made.status();
  if (!*made)
    return absl::OkStatus(); // given up
  (*made)->solverStatus = t.status;
  simulations_ += (*made)->simulations;
  t.plan = std::move(*made);
  return absl::OkStatus();
}

const CheckpointPlan *GreedyTrials::bestTried() const {
  const CheckpointPlan *best = nullptr;
  for (const Tried &t : tried_)
    if (t.plan && (!best || better(*t.plan, *best)))
      best = &*t.plan;
  return best;
}

bool GreedyTrials::withinBound() const {
  const CheckpointPlan *best = bestTried();
  return best && best->meetsBudget &&
         best->predictedExtraSeconds <= lowerBound_ * (1 + kSameTime);
}

absl::Status GreedyTrials::runFirstStarts() {
  if (structuredOnly_) {
    if (overBounds())
      for (Start &start : structuredStartsOf(model_, bounds_[0]))
        tried_.push_back({std::move(start), "from the structured choice", std::nullopt});
    if (tried_.empty())
      tried_.push_back({Start{}, "", std::nullopt});
  } else {
    tried_.push_back({Start{}, "", std::nullopt});
    // The others where the graph has them (an empty start is the first again).
    if (Start knapsack = knapsackStartOf(model_, bounds_[0]); !knapsack.empty())
      tried_.push_back({std::move(knapsack), "from a knapsack start", std::nullopt});
  }
  for (Tried &t : tried_)
    if (absl::Status st = run(t, peakCap_); !st.ok())
      return st;
  // The structured choices given up (kMaxStartClonesPerNode): the flat greedy.
  if (llvm::none_of(tried_, [](const Tried &t) { return t.plan.has_value(); }))
    return runNext({Start{}, "the structured choice given up: the flat greedy", std::nullopt});
  return absl::OkStatus();
}

// The relaxation's start: its program solved by priced cuts, aiming below
// the best plan so far (its bound is kept with the plan).
absl::Status GreedyTrials::runRelaxedStarts() {
  if (structuredOnly_ || !overBounds())
    return absl::OkStatus();
  RelaxedStart relaxed = relaxedStartOf(relaxationOf(model_), budget_, bestTried());
  lowerBound_ = relaxed.boundSeconds;
  if (!relaxed.found)
    return absl::OkStatus();
  if (absl::Status st = runNext({relaxed.drops, "from the relaxation's cut", std::nullopt,
                                 relaxed.held, /*shareFirst=*/true});
      !st.ok())
    return st;
  // Shared, it was over a bound, and its plan is far from the bound
  // (more than kSameTime): the same start with the chains its shared
  // clones reach through cut first, as a second try rather than the
  // rule (on BERT-base and ResNet-50 making the shared clones later did
  // better; on GPT-2 at activations=10% the cut came to +21.2% where
  // the first try ended at +33.8%).
  if (tried_.back().sharedOver && !withinBound())
    return runNext({std::move(relaxed.drops), "from the relaxation's cut, a chain kept",
                    std::nullopt, std::move(relaxed.held), /*shareFirst=*/true,
                    /*cutChains=*/true});
  return absl::OkStatus();
}

// Unless a plan is already within kSameTime of the bound (then no start can
// be faster by more than that: BERT-base's and ResNet-50's budgets, where it
// was a tenth of the planning time).
absl::Status GreedyTrials::runBlockStart() {
  if (!structuredOnly_ && overBounds() && !withinBound())
    if (Start blocks = blockStartOf(model_); !blocks.empty())
      return runNext({std::move(blocks), "from a per-block start", std::nullopt});
  return absl::OkStatus();
}

// Where nothing bounds the peak above the inputs (activations= alone),
// sharing clones can lift it back towards the unoptimised one for little
// time (ResNet-50 at activations=10%: +38.4% at a peak of 0.88x, +38.6% at
// 0.67x with the peak held there). So each start whose plan met the bound
// above the lowest peak any reached, and is faster than every plan at that
// peak, runs again with that peak as a cap; better() then takes the lower
// peak where the times are within 1%.
absl::Status GreedyTrials::rerunCappedAtLowestPeak() {
  if (!peakFree_)
    return absl::OkStatus();
  int64_t lowest = kNoPeakCap;
  for (const Tried &t : tried_)
    if (t.plan && t.plan->meetsBudget)
      lowest = std::min(lowest, t.plan->predictedPeak);
  double fastestAtLowest = std::numeric_limits<double>::infinity();
  for (const Tried &t : tried_)
    if (t.plan && t.plan->meetsBudget && t.plan->predictedPeak == lowest)
      fastestAtLowest = std::min(fastestAtLowest, t.plan->predictedExtraSeconds);
  const size_t uncapped = tried_.size();
  for (size_t i = 0; i < uncapped; ++i) {
    const std::optional<CheckpointPlan> &p = tried_[i].plan;
    if (!p || !p->meetsBudget || p->predictedPeak == lowest ||
        p->predictedExtraSeconds >= fastestAtLowest)
      continue;
    Tried capped{tried_[i].start, tried_[i].status, std::nullopt, tried_[i].held,
                 tried_[i].shareFirst, tried_[i].cutChains};
    if (absl::Status st = run(capped, lowest); !st.ok())
      return st;
    if (capped.plan && capped.plan->meetsBudget)
      tried_.push_back(std::move(capped));
  }
  return absl::OkStatus();
}

// A plan that does not lower the peak above the inputs at all is kept only
// when no plan meeting the bound does (BERT-base at activations=5%: +28.8%
// at 1.00x, where another start reaches +31.5% at 0.54x).
CheckpointPlan GreedyTrials::pick(GreedyStarts starts) {
  const int64_t unoptimisedPeak = model_.baseline().peakBytes - model_.baseline().inputBytes;
  auto lowers = [&](const CheckpointPlan &p) {
    return p.meetsBudget && p.predictedPeak < unoptimisedPeak;
  };
  std::optional<CheckpointPlan> plan;
  for (Tried &t : tried_) {
    if (!t.plan)
      continue;
    bool wins = !plan;
    if (plan && peakFree_ && lowers(*t.plan) != lowers(*plan))
      wins = lowers(*t.plan);
    else if (plan)
      wins = better(*t.plan, *plan);
    if (wins)
      plan = std::move(t.plan);
  }
  plan->simulations = simulations_;
  plan->lowerBoundSeconds = std::max(plan->lowerBoundSeconds, lowerBound_);
  if (starts == GreedyStarts::Structured) {
    plan->planner = "structured";
    if (!structuredOnly_)
      plan->solverStatus = "no repeated blocks: the flat greedy";
  }
  return std::move(*plan);
}

} // namespace

std::vector<llvm::BitVector> &givenUpStartsOf(const RecomputeModel &model) {
  if (!model.givenUpStarts_)
    model.givenUpStarts_ = std::make_shared<std::vector<llvm::BitVector>>();
  return *model.givenUpStarts_;
}

double recomputeLowerBound(const RecomputeModel &model, int64_t budget) {
  llvm::ArrayRef<int64_t> timeline = model.boundedTimeline();
  if (timeline.empty())
    return 0;
  const int64_t at = std::max_element(timeline.begin(), timeline.end()) - timeline.begin();
  int64_t need = timeline[at] - budget;
  if (need <= 0)
    return 0;
  // Every dropped candidate's own node runs again at least once; one node's
  // outputs (a dropout's and its mask) share that run.
  std::map<int64_t, int64_t> bytesByNode;
  for (const CheckpointCandidate &c : model.candidates())
    if (auto [first, last] = freedRanksOf(model, model.boundedMemory(), c);
        first <= at && at <= last)
      bytesByNode[c.created] += c.bytes;
  std::vector<std::pair<double, int64_t>> items; // seconds, bytes
  for (const auto &[rank, bytes] : bytesByNode)
    if (bytes > 0)
      items.push_back({model.seconds()[rank], bytes});
  std::sort(items.begin(), items.end(), [](const auto &a, const auto &b) {
    return a.first * static_cast<double>(b.second) < b.first * static_cast<double>(a.second);
  });
  double bound = 0;
  for (const auto &[seconds, bytes] : items) {
    if (need <= 0)
      break;
    const int64_t take = std::min(bytes, need);
    bound += seconds * static_cast<double>(take) / static_cast<double>(bytes);
    need -= take;
  }
  return need > 0 ? std::numeric_limits<double>::infinity() : bound;
}

double relaxedLowerBound(const RecomputeModel &model, int64_t budget, double enough) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  const RecomputeRelaxation &relaxation = relaxationOf(model);
  if (relaxation.memoryNonzeros() > kMaxRelaxationNonzeros) {
    // Too large to solve for a start: the bound alone, from the rows furthest
    // over the budget, searched for only until it passes `enough`. First from
    // a sixteenth of the rows' coefficients (the rows furthest over bind the
    // most: on a 100k-node chain of blocks their bound already passed the
    // plan to beat, at a sixth of the time), then from as many as fit.
    if (!std::isfinite(enough))
      return 0;
    const double stop = relaxation.objectiveOf(enough);
    double best = 0;
    for (size_t limit : {kMaxRelaxationNonzeros / 16, kMaxRelaxationNonzeros}) {
      bool partial = false;
      std::optional<MilpProblem> problem = relaxation.problem(budget, limit, partial);
      if (!problem)
        return kNone; // a row it keeps cannot be met: no plan meets the budget
      if (problem->memoryRows == 0)
        return 0;
      best = std::max(best,
                      relaxation.lowerBoundSeconds(boundByLagrangianCuts(*problem, stop, stop)));
      if (best > enough || !partial)
        break;
    }
    return best;
  }
  RelaxedStart relaxed = relaxedStartOf(relaxation, budget, nullptr);
  return relaxed.infeasible ? kNone : relaxed.boundSeconds;
}

absl::StatusOr<CheckpointPlan> planGreedy(const RecomputeModel &model, int64_t budget,
                                          int64_t peakCap, GreedyStarts starts) {
  auto begin = std::chrono::steady_clock::now();
  GreedyTrials trials(model, budget, peakCap, starts);
  if (absl::Status st = trials.runFirstStarts(); !st.ok())
    return st;
  if (absl::Status st = trials.runRelaxedStarts(); !st.ok())
    return st;
  if (absl::Status st = trials.runBlockStart(); !st.ok())
    return st;
  if (absl::Status st = trials.rerunCappedAtLowestPeak(); !st.ok())
    return st;
  CheckpointPlan plan = trials.pick(starts);
  plan.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return plan;
}

absl::StatusOr<std::optional<CheckpointPlan>>
planGreedyFrom(const RecomputeModel &model, int64_t budget, llvm::ArrayRef<int32_t> start,
               llvm::ArrayRef<const Value *> held, llvm::StringRef why,
               const GreedyFromOptions &options) {
  Start drops;
  for (int32_t c : start)
    drops.push_back({c, why.str()});
  return greedyFrom(model, budget, options.peakCap, drops, held, options.shareFirst,
                    options.cutChains);
}

namespace {
/// planner=greedy, the default.
class GreedyPlannerEntry : public Planner {
public:
  static llvm::StringRef plannerName() { return "greedy"; }
  static llvm::StringRef plannerDescription() {
    return "μ-TWO's greedy with the simulation in the loop, from three starts, on the budget "
           "ladder (the default)";
  }
  llvm::StringRef name() const override { return plannerName(); }
  bool plansAroundOffloads() const override { return true; }
  absl::StatusOr<CheckpointPlan> plan(const PlanRequest &request,
                                      LadderReport *ladder) const override {
    return planGreedyOnLadder(request, GreedyStarts::All, ladder);
  }
};
} // namespace
GRAPHOPT_REGISTER_PLANNER(GreedyPlannerEntry);

} // namespace graphopt
