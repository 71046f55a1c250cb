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
  case LadderStep::How::TighterRungsBudget:
    return "capped, planned for a tighter rung's budget";
  case LadderStep::How::RaisedAboveLooserPeak:
    return "raised: no plan found under the looser rung's peak";
  }
  return "";
}

namespace {

/// Whether `plan` meets `target` (its bounded memory) and the peak cap.
bool fits(const CheckpointPlan &plan, int64_t target, int64_t peakCap) {
  return plan.predictedBounded <= target && plan.predictedPeak <= peakCap;
}

} // namespace

namespace {

/// The ladder of one planMonotone call: the rungs' plans, each planned from
/// the rung just looser than it and only when needed, and the answer for the
/// budget asked among them.
class Ladder {
public:
  Ladder(const RecomputeModel &model, int64_t peakCap, std::vector<BudgetRung> rungs,
         GreedyStarts starts, MonotonePlan &out)
      : model_(model), peakCap_(peakCap), rungs_(std::move(rungs)), starts_(std::move(starts)),
        out_(out),
        // Only where the peak is not what is bounded does a cap keep it monotone.
        capPeaks_(model.boundedMemory() == BoundedMemory::SavedActivations) {
    rungSteps_.reserve(rungs_.size()); // the pointers handed out stay valid
  }

  /// The answer for `budget` (step 3), the ladder as reported filled in.
  absl::Status answer(int64_t budget);
  unsigned simulations() const { return simulations_; }

private:
  using How = LadderStep::How;

  /// Plans one point from the rung just looser than it (`looser`, if any).
  absl::StatusOr<LadderStep> planPoint(const BudgetRung &rung, bool asked,
                                       const CheckpointPlan *looser);
  /// The greedy's plan for `target` under `cap`, its simulations counted.
  absl::StatusOr<CheckpointPlan> greedy(int64_t target, int64_t cap);
  /// Where the greedy finds no plan for `target` under `cap` (the looser
  /// rung's peak): one it finds for a tighter rung's budget under that cap
  /// (the greedy is not monotone in its budget; a tighter plan meets a looser
  /// budget), the loosest such; none if no tighter rung has one.
  absl::StatusOr<std::optional<CheckpointPlan>> planForTighterRung(int64_t target, int64_t cap);
  /// Where no plan under the looser rung's peak (`failedCap`) meets
  /// `target`: a plan that does at as low a peak as a few tries find, none
  /// when even the uncapped greedy does not meet it.
  absl::StatusOr<std::optional<CheckpointPlan>> leastRaisedCap(int64_t target, int64_t failedCap);
  /// How many raised caps leastRaisedCap tries after the uncapped plan.
  static constexpr unsigned kCapBisections = 5;
  /// 1. The rungs' plans, loose to tight, each from the one before it, up
  /// to rung `i`: whether it is there (false once a rung is out of reach).
  absl::StatusOr<bool> ensureRung(size_t i);
  /// Whether the rung at `target` cannot be faster than `best`: its lower
  /// bound (recomputeLowerBound, else the relaxation's) is above best's time.
  bool cannotWin(int64_t target, const CheckpointPlan &best) const;
  /// 2. The fastest of `best` and the rungs from `first` on (a tighter
  /// budget's plan meets a looser one), ties to the tighter. A rung that
  /// cannot win is not planned, nor any tighter one.
  absl::StatusOr<const LadderStep *> fastestFrom(size_t first, const LadderStep *best);
  /// The ladder as reported: the rungs, the budget asked among them.
  void report(size_t looser, std::optional<LadderStep> own);

  const RecomputeModel &model_;
  const int64_t peakCap_;
  const std::vector<BudgetRung> rungs_;
  const GreedyStarts starts_;
  MonotonePlan &out_;
  const bool capPeaks_;
  unsigned simulations_ = 0;
  std::vector<LadderStep> rungSteps_;
  bool reachable_ = true; ///< false after a rung the greedy cannot meet
};

absl::StatusOr<LadderStep> Ladder::planPoint(const BudgetRung &rung, bool asked,
                                             const CheckpointPlan *looser) {
  LadderStep step{rung, asked, {}, How::Planned};
  if (looser && fits(*looser, rung.target, peakCap_)) {
    step.plan = *looser;
    step.how = How::LooserRungsPlan;
    return step;
  }
  int64_t cap = peakCap_;
  if (capPeaks_ && looser)
    cap = std::min(cap, looser->predictedPeak);
  auto made = greedy(rung.target, cap);
  if (!made.ok())
    return made.status();
  step.how = cap != peakCap_ ? How::CappedAtLooserPeak : How::Planned;
  if (!made->meetsBudget && cap != peakCap_) {
    auto tighter = planForTighterRung(rung.target, cap);
    if (!tighter.ok())
      return tighter.status();
    if (*tighter) {
      made = std::move(**tighter);
      step.how = How::TighterRungsBudget;
    }
  }
  if (!made->meetsBudget && cap != peakCap_) {
    auto raised = leastRaisedCap(rung.target, cap);
    if (!raised.ok())
      return raised.status();
    if (*raised) {
      made = std::move(**raised);
      step.how = How::RaisedAboveLooserPeak;
      out_.peaksMonotone = false; // the peak rises here
      ++out_.rungsPeakRose;
    }
  }
  step.plan = std::move(*made);
  return step;
}

absl::StatusOr<CheckpointPlan> Ladder::greedy(int64_t target, int64_t cap) {
  auto made = planGreedy(model_, target, cap, starts_);
  if (made.ok())
    simulations_ += made->simulations;
  return made;
}

absl::StatusOr<bool> Ladder::ensureRung(size_t i) {
  while (rungSteps_.size() <= i && reachable_) {
    const CheckpointPlan *looser = rungSteps_.empty() ? nullptr : &rungSteps_.back().plan;
    auto step = planPoint(rungs_[rungSteps_.size()], false, looser);
    if (!step.ok())
      return step.status();
    reachable_ = step->plan.meetsBudget; // the tighter rungs are out of reach too
    rungSteps_.push_back(std::move(*step));
  }
  return rungSteps_.size() > i;
}

absl::StatusOr<std::optional<CheckpointPlan>> Ladder::planForTighterRung(int64_t target,
                                                                         int64_t cap) {
  for (const BudgetRung &tighter : rungs_) {
    if (tighter.target >= target)
      continue;
    auto made = greedy(tighter.target, cap);
    if (!made.ok())
      return made.status();
    if (made->meetsBudget) {
      // Its lower bound was the tighter budget's: no bound on this one.
      made->lowerBoundSeconds = 0;
      return std::move(*made);
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<CheckpointPlan>> Ladder::leastRaisedCap(int64_t target,
                                                                     int64_t failedCap) {
  auto uncapped = greedy(target, peakCap_);
  if (!uncapped.ok())
    return uncapped.status();
  if (!uncapped->meetsBudget)
    return std::nullopt;
  // Bisect between the cap that failed and the uncapped plan's peak: the
  // greedy is not monotone in its cap, so this finds a lower peak that meets
  // the budget, not the least; a few steps bound its cost.
  CheckpointPlan best = std::move(*uncapped);
  int64_t lo = failedCap;
  for (unsigned i = 0; i < kCapBisections && best.predictedPeak - lo > std::max<int64_t>(1, lo / 100);
       ++i) {
    int64_t mid = lo + (best.predictedPeak - lo) / 2;
    auto tried = greedy(target, mid);
    if (!tried.ok())
      return tried.status();
    if (tried->meetsBudget && tried->predictedPeak < best.predictedPeak)
      best = std::move(*tried);
    else
      lo = mid;
  }
  return best;
}

bool Ladder::cannotWin(int64_t target, const CheckpointPlan &best) const {
  auto above = [&](double bound) {
    return bound * (1 - 1e-9) > best.predictedExtraSeconds + 1e-12;
  };
  return above(recomputeLowerBound(model_, target)) ||
         above(relaxedLowerBound(model_, target, best.predictedExtraSeconds));
}

absl::StatusOr<const LadderStep *> Ladder::fastestFrom(size_t first, const LadderStep *best) {
  for (size_t i = first; i < rungs_.size(); ++i) {
    if (best && i >= rungSteps_.size() && cannotWin(rungs_[i].target, best->plan))
      break;
    auto there = ensureRung(i);
    if (!there.ok())
      return there.status();
    if (!*there)
      break;
    const LadderStep &s = rungSteps_[i];
    if (s.plan.meetsBudget &&
        (!best || s.plan.predictedExtraSeconds <= best->plan.predictedExtraSeconds))
      best = &s;
  }
  return best;
}

absl::Status Ladder::answer(int64_t budget) {
  // 3. The budget asked: a rung's answer, or its own plan, capped at the
  // peak of the looser rung's answer, against the tighter rungs' plans.
  size_t looser = 0; // rungs at least as loose as the budget
  while (looser < rungs_.size() && rungs_[looser].target >= budget)
    ++looser;
  const LadderStep *best = nullptr;
  std::optional<LadderStep> own;
  if (looser > 0 && rungs_[looser - 1].target == budget) {
    auto found = fastestFrom(looser - 1, nullptr);
    if (!found.ok())
      return found.status();
    best = *found;
    if (!best) // the rung itself is out of reach: its closest plan
      best = &rungSteps_.back();
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
      own ? &*own : &rungSteps_[std::min(looser, rungSteps_.size()) - 1];
  out_.plan = best->plan;
  // The bound kept with a plan is its own budget's: a tighter rung's is no
  // bound on the budget asked. Its own step's plan was planned at it.
  out_.plan.lowerBoundSeconds = itself->rung.target == budget ? itself->plan.lowerBoundSeconds : 0;
  out_.from = best == itself ? "" : best->rung.name;
  if (!out_.from.empty())
    out_.plan.solverStatus = absl::StrCat("from the ", out_.from, " plan (budget ladder)");
  if (reachable_)
    out_.rungsSkipped = static_cast<unsigned>(rungs_.size() - rungSteps_.size());
  report(looser, std::move(own));
  return absl::OkStatus();
}

void Ladder::report(size_t looser, std::optional<LadderStep> own) {
  const bool asked = own.has_value();
  for (size_t i = 0; i <= rungSteps_.size(); ++i) {
    if (own && i == std::min(looser, rungSteps_.size()))
      out_.ladder.push_back(std::move(*own));
    if (i == rungSteps_.size())
      break;
    out_.ladder.push_back(std::move(rungSteps_[i]));
    out_.ladder.back().asked = !asked && i + 1 == looser;
  }
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
  Ladder ladder(model, peakCap, std::move(rungs), std::move(starts), out);
  if (absl::Status st = ladder.answer(budget); !st.ok())
    return st;
  out.plan.simulations = ladder.simulations();
  out.plan.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return out;
}

absl::StatusOr<CheckpointPlan> planGreedyOnLadder(const PlanRequest &request, GreedyStarts starts,
                                                  LadderReport *ladder) {
  *ladder = LadderReport();
  if (!request.options.monotone)
    return planGreedy(request.model, request.target, request.peakCap, starts);
  // The rungs are shares of the same whole the option resolves against.
  const bool activations =
      request.model.boundedMemory() == BoundedMemory::SavedActivations;
  auto made = planMonotone(request.model, request.target, request.peakCap,
                           standardRungs(request.ladderWhole, activations ? "activations" : "budget"),
                           starts);
  if (!made.ok())
    return made.status();
  for (const LadderStep &s : made->ladder)
    ladder->rungs.push_back({s.rung.name, howText(s.how), s.rung.target, s.plan.predictedBounded,
                             s.plan.predictedPeak, s.plan.predictedExtraSeconds,
                             s.how == LadderStep::How::LooserRungsPlan ? 0 : s.plan.solveSeconds,
                             s.plan.meetsBudget, s.asked});
  ladder->from = made->from;
  ladder->peaksMonotone = made->peaksMonotone;
  ladder->rungsSkipped = made->rungsSkipped;
  ladder->rungsPeakRose = made->rungsPeakRose;
  return std::move(made->plan);
}

} // namespace graphopt
