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
// on a simulated peak within the budget.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/CheckpointPlan.h"

#include "graphopt/Analysis/PeakTracker.h"

#include <chrono>
#include <queue>

namespace graphopt {

absl::Status predictPlan(const RecomputeModel &model, int64_t budget, CheckpointPlan &plan) {
  auto sim = model.simulate(plan.recompute);
  if (!sim.ok())
    return sim.status();
  plan.predictedPeak = sim->peakAboveInputs;
  plan.predictedBounded = sim->bounded;
  plan.predictedActivations = sim->savedActivations;
  plan.predictedExtraSeconds = plan.recompute.seconds;
  plan.meetsBudget = plan.predictedBounded <= budget;
  return absl::OkStatus();
}

absl::Status completePlan(const RecomputeModel &model, int64_t budget, CheckpointPlan &plan) {
  auto set = model.closure(plan.dropped);
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

/// At most this many hoists are tried, and none once planning took this long.
constexpr unsigned kMaxHoistTrials = 32;
constexpr double kHoistSecondsLimit = 0.5;

/// A plan that meets the budget may still make some dropped value several
/// times: for other recomputations before its own clone. Making its own clone
/// at the earliest of those instead (held from there, shared) saves the
/// repeats' time and costs memory between the two points; each such hoist,
/// the costliest repeats first, is kept when the simulated rewrite still fits.
absl::Status shareRepeats(const RecomputeModel &model, int64_t budget, PlanState &state,
                          std::chrono::steady_clock::time_point begin, CheckpointPlan &plan) {
  unsigned trials = 0;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  while (trials < kMaxHoistTrials && elapsed() < kHoistSecondsLimit) {
    double seconds = state.result().seconds;
    bool improved = false;
    for (const PlanState::Repeat &r : state.repeats()) {
      if (trials >= kMaxHoistTrials || elapsed() >= kHoistSecondsLimit)
        break;
      ++trials;
      auto next = state.hoisted(r.candidate, r.earliest);
      if (!next.ok())
        continue;
      RecomputeSet set = next->result();
      if (set.seconds >= seconds)
        continue;
      auto sim = model.simulate(set);
      if (!sim.ok())
        return sim.status();
      ++plan.simulations;
      if (sim->bounded <= budget) {
        state = std::move(*next);
        ++plan.hoists;
        improved = true;
        break;
      }
    }
    if (!improved)
      break;
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<CheckpointPlan> planGreedy(const RecomputeModel &model, int64_t budget) {
  auto begin = std::chrono::steady_clock::now();
  const int64_t target = budget;
  auto candidates = model.candidates();
  // The ranks where dropping a candidate lowers the bounded memory. The peak
  // above the inputs: from its last forward use until its own clone is made.
  // The saved activations: its whole life, since neither it nor its clones
  // are saved for backward any more.
  auto freedRanks = [&](const CheckpointCandidate &c) -> std::pair<int64_t, int64_t> {
    if (model.boundedMemory() == BoundedMemory::SavedActivations)
      return {c.created, model.baseline().lookup(c.storage)->freedAfter};
    return {c.lastForwardUse + 1, c.firstBackwardUse - 1};
  };

  PeakTracker peak(model.boundedTimeline());
  PlanState state(model);
  std::priority_queue<Entry> heap;
  for (size_t c = 0; c < candidates.size(); ++c)
    heap.push({ratioOf(candidates[c].bytes, candidates[c].standaloneSeconds),
               static_cast<int32_t>(c)});
  std::vector<uint8_t> impossible(candidates.size(), 0);

  CheckpointPlan plan;
  plan.planner = "greedy";
  bool synced = true; // the tracker holds a real simulation, not an estimate
  // Replaces the estimate by the simulation of the plan so far.
  auto sync = [&]() -> absl::Status {
    auto sim = model.simulate(state.result());
    if (!sim.ok())
      return sim.status();
    peak = PeakTracker(sim->boundedByRank);
    ++plan.simulations;
    synced = true;
    return absl::OkStatus();
  };
  while (true) {
    if (peak.peak() <= target || heap.empty()) {
      if (synced)
        break;
      // The estimate says it fits (or nothing is left): simulate for real.
      if (absl::Status st = sync(); !st.ok())
        return st;
      continue;
    }
    int64_t r = peak.peakRank();
    // The best candidate live across r, re-rated against the current plan
    // (lazily: a re-rated entry that is no longer the best goes back).
    std::vector<Entry> aside;
    int32_t chosen = -1;
    while (!heap.empty()) {
      Entry e = heap.top();
      heap.pop();
      const CheckpointCandidate &c = candidates[e.candidate];
      if (state.isDropped(e.candidate) || impossible[e.candidate])
        continue;
      if (auto [first, last] = freedRanks(c); r < first || r > last) {
        aside.push_back(e);
        continue;
      }
      auto cost = state.marginal(e.candidate);
      if (!cost.ok()) {
        impossible[e.candidate] = 1;
        continue;
      }
      double ratio = ratioOf(c.bytes, cost->first);
      if (heap.empty() || ratio >= heap.top().ratio || ratio == e.ratio) {
        chosen = e.candidate;
        break;
      }
      heap.push({ratio, e.candidate});
    }
    for (const Entry &e : aside)
      heap.push(e);
    if (chosen < 0) { // nothing left to drop at the peak
      if (synced)
        break;
      if (absl::Status st = sync(); !st.ok())
        return st;
      continue;
    }
    if (absl::Status st = state.add(chosen); !st.ok()) {
      impossible[chosen] = 1;
      continue;
    }
    plan.dropped.push_back(chosen);
    auto [first, last] = freedRanks(candidates[chosen]);
    peak.add(first, last, -candidates[chosen].bytes);
    synced = false;
  }
  if (synced && peak.peak() <= target)
    if (absl::Status st = shareRepeats(model, budget, state, begin, plan); !st.ok())
      return st;
  plan.recompute = state.result();
  if (absl::Status st = predictPlan(model, budget, plan); !st.ok())
    return st;
  plan.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return plan;
}

} // namespace graphopt
