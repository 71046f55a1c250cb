//===- BudgetLadder.cpp - Greedy plans monotone in the budget -------------===//

#include "checkpoint/BudgetLadder.h"

#include "graphopt/Pass/PassOption.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace graphopt {

std::vector<BudgetRung> standardRungs(int64_t whole, const std::string &option) {
  std::vector<BudgetRung> rungs;
  for (double share : {50.0, 30.0, 10.0, 5.0}) {
    MemoryAmount amount = MemoryAmount::percent(share);
    rungs.push_back({amount.resolve(whole), absl::StrCat(option, "=", amount.str())});
  }
  return rungs;
}

const char *howText(LadderStep::How how) {
  switch (how) {
  case LadderStep::How::Planned: return "planned";
  case LadderStep::How::CappedAtLooserPeak: return "capped at the looser rung's peak";
  case LadderStep::How::LooserRungsPlan: return "the looser rung's plan";
  case LadderStep::How::UncappedNoPlanUnderLooserPeak:
    return "uncapped: no plan under the looser rung's peak";
  }
  return "";
}

namespace {

/// Whether `plan` meets `target` (its bounded memory) and the peak cap.
bool fits(const CheckpointPlan &plan, int64_t target, int64_t peakCap) {
  return plan.predictedBounded <= target && plan.predictedPeak <= peakCap;
}

} // namespace

absl::StatusOr<MonotonePlan> planMonotone(const RecomputeModel &model, int64_t budget,
                                          int64_t peakCap, std::vector<BudgetRung> rungs,
                                          GreedyStarts starts) {
  auto begin = std::chrono::steady_clock::now();
  // Loose to tight; the asked budget after the rungs at least as loose (a
  // rung equal to it is the asked budget itself).
  std::sort(rungs.begin(), rungs.end(),
            [](const BudgetRung &a, const BudgetRung &b) { return a.target > b.target; });
  rungs.erase(std::unique(rungs.begin(), rungs.end(),
                          [](const BudgetRung &a, const BudgetRung &b) {
                            return a.target == b.target;
                          }),
              rungs.end());
  MonotonePlan out;
  // A budget the unoptimised step meets needs no plan, and no ladder: nothing
  // is faster than recomputing nothing, at any looser budget either.
  if (model.boundedPeak() <= budget &&
      model.baseline().peakBytes - model.baseline().inputBytes <= peakCap) {
    auto made = planGreedy(model, budget, peakCap, starts);
    if (!made.ok())
      return made.status();
    out.plan = std::move(*made);
    out.ladder.push_back({{budget, "the budget asked"}, true, out.plan, LadderStep::How::Planned});
    return out;
  }
  // Only where the peak is not what is bounded does a cap keep it monotone.
  const bool capPeaks = model.boundedMemory() == BoundedMemory::SavedActivations;
  unsigned simulations = 0;
  // Plans one point from the rung just looser than it (`looser`, if any).
  using How = LadderStep::How;
  auto planPoint = [&](const BudgetRung &rung, bool asked,
                       const CheckpointPlan *looser) -> absl::StatusOr<LadderStep> {
    LadderStep step{rung, asked, {}, How::Planned};
    if (looser && fits(*looser, rung.target, peakCap)) {
      step.plan = *looser;
      step.how = How::LooserRungsPlan;
      return step;
    }
    int64_t cap = peakCap;
    if (capPeaks && looser)
      cap = std::min(cap, looser->predictedPeak);
    auto made = planGreedy(model, rung.target, cap, starts);
    if (!made.ok())
      return made.status();
    simulations += made->simulations;
    step.how = cap != peakCap ? How::CappedAtLooserPeak : How::Planned;
    if (!made->meetsBudget && cap != peakCap) {
      auto uncapped = planGreedy(model, rung.target, peakCap, starts);
      if (!uncapped.ok())
        return uncapped.status();
      simulations += uncapped->simulations;
      if (uncapped->meetsBudget) {
        made = std::move(uncapped);
        step.how = How::UncappedNoPlanUnderLooserPeak;
        out.peaksMonotone = false; // the peak rises here
        ++out.rungsPeakRose;
      }
    }
    step.plan = std::move(*made);
    return step;
  };

  // 1. The rungs' plans, loose to tight, each from the one before it. They do
  // not depend on the budget asked; a rung is planned only when it is
  // needed, and with the ones before it.
  std::vector<LadderStep> rungSteps;
  rungSteps.reserve(rungs.size()); // the pointers below stay valid
  bool reachable = true; // false after a rung the greedy cannot meet
  auto ensureRung = [&](size_t i) -> absl::StatusOr<bool> {
    while (rungSteps.size() <= i && reachable) {
      const CheckpointPlan *looser = rungSteps.empty() ? nullptr : &rungSteps.back().plan;
      auto step = planPoint(rungs[rungSteps.size()], false, looser);
      if (!step.ok())
        return step.status();
      reachable = step->plan.meetsBudget; // the tighter rungs are out of reach too
      rungSteps.push_back(std::move(*step));
    }
    return rungSteps.size() > i;
  };
  // 2. The fastest of `best` and the rungs from `first` on (a tighter
  // budget's plan meets a looser one), ties to the tighter. A rung whose
  // lower bound (recomputeLowerBound, else the relaxation's) is above
  // `best`'s time cannot win, nor can any tighter one: they are not planned.
  auto cannotWin = [&](int64_t target, const CheckpointPlan &best) {
    auto above = [&](double bound) {
      return bound * (1 - 1e-9) > best.predictedExtraSeconds + 1e-12;
    };
    return above(recomputeLowerBound(model, target)) ||
           above(relaxedLowerBound(model, target));
  };
  auto fastestFrom = [&](size_t first,
                         const LadderStep *best) -> absl::StatusOr<const LadderStep *> {
    for (size_t i = first; i < rungs.size(); ++i) {
      if (best && i >= rungSteps.size() && cannotWin(rungs[i].target, best->plan))
        break;
      auto there = ensureRung(i);
      if (!there.ok())
        return there.status();
      if (!*there)
        break;
      const LadderStep &s = rungSteps[i];
      if (s.plan.meetsBudget &&
          (!best || s.plan.predictedExtraSeconds <= best->plan.predictedExtraSeconds))
        best = &s;
    }
    return best;
  };
  // 3. The budget asked: a rung's answer, or its own plan, capped at the
  // peak of the looser rung's answer, against the tighter rungs' plans.
  size_t looser = 0; // rungs at least as loose as the budget
  while (looser < rungs.size() && rungs[looser].target >= budget)
    ++looser;
  const LadderStep *best = nullptr;
  std::optional<LadderStep> own;
  if (looser > 0 && rungs[looser - 1].target == budget) {
    auto found = fastestFrom(looser - 1, nullptr);
    if (!found.ok())
      return found.status();
    best = *found;
    if (!best) // the rung itself is out of reach: its closest plan
      best = &rungSteps.back();
  } else {
    const LadderStep *above = nullptr;
    if (looser > 0) {
      auto found = fastestFrom(looser - 1, nullptr);
      if (!found.ok())
        return found.status();
      above = *found;
    }
    auto step = planPoint({budget, "the budget asked"}, true, above ? &above->plan : nullptr);
    if (!step.ok())
      return step.status();
    own = std::move(*step);
    best = &*own;
    if (own->plan.meetsBudget) {
      auto found = fastestFrom(looser, best);
      if (!found.ok())
        return found.status();
      best = *found;
    }
  }
  const LadderStep *itself =
      own ? &*own : &rungSteps[std::min(looser, rungSteps.size()) - 1];
  out.plan = best->plan;
  // The bound kept with a plan is its own budget's: a tighter rung's is no
  // bound on the budget asked. Its own step's plan was planned at it.
  out.plan.lowerBoundSeconds = itself->rung.target == budget ? itself->plan.lowerBoundSeconds : 0;
  out.from = best == itself ? "" : best->rung.name;
  if (!out.from.empty())
    out.plan.solverStatus = absl::StrCat("from the ", out.from, " plan (budget ladder)");
  if (reachable)
    out.rungsSkipped = static_cast<unsigned>(rungs.size() - rungSteps.size());
  // The ladder as reported: the rungs, the budget asked among them.
  for (size_t i = 0; i <= rungSteps.size(); ++i) {
    if (own && i == std::min(looser, rungSteps.size()))
      out.ladder.push_back(std::move(*own));
    if (i == rungSteps.size())
      break;
    out.ladder.push_back(std::move(rungSteps[i]));
    out.ladder.back().asked = !own && i + 1 == looser;
  }
  out.plan.simulations = simulations;
  out.plan.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return out;
}

} // namespace graphopt
