//===- BudgetLadder.h - Greedy plans monotone in the budget -----*- C++ -*-===//
//
// The greedy is a heuristic: on its own, a looser budget can get a slower
// plan than a tighter one (a recurrent model at activations=30% predicted
// +150% where 10% predicted +33%), and a tighter budget a higher peak (BERT at
// 10%: 0.82x where 30% gave 0.54x). The ladder makes both monotone.
//
// It plans a fixed ladder of budgets (rungs) from the loosest to the tightest,
// each capped at the peak of the rung above it (so peaks only go down as the
// budget tightens), and a rung whose looser neighbour's plan already meets it
// takes that plan. A budget's plan is then the fastest of its own and of every
// tighter rung's (a plan for a tighter budget meets a looser one), ties to the
// tighter. Over the rungs, the predicted extra time only grows and the
// predicted peak only falls as the budget tightens, whatever budget was asked,
// because the rungs' plans do not depend on it. A budget between two rungs is
// no slower than the rung below it and peaks no higher than the rung above it.
// Where no plan is found under a looser rung's peak (saving fewer activations
// can force a higher peak), the cap is raised as little as a few tries find,
// and the ladder counts the rung (rungsPeakRose).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/Planner.h"

#include <string>
#include <vector>

namespace graphopt {

struct BudgetRung {
  int64_t target = 0; ///< bytes of the model's bounded memory
  std::string name;   ///< as the option reads ("activations=30%")
};

/// One planned point: a rung, or the budget asked.
struct LadderStep {
  BudgetRung rung;
  bool asked = false; ///< the budget asked, not a rung
  CheckpointPlan plan;
  /// How the plan was made.
  enum class How {
    Planned,
    CappedAtLooserPeak,
    LooserRungsPlan,
    TighterRungsBudget,    ///< capped, the greedy for a tighter rung's budget met it
    RaisedAboveLooserPeak, ///< no plan found under the looser peak: the least raised cap
  };
  How how = How::Planned;
};
/// The report's words for it.
const char *howText(LadderStep::How how);

struct MonotonePlan {
  CheckpointPlan plan;            ///< the budget's plan
  std::string from;               ///< the rung it came from ("" its own)
  std::vector<LadderStep> ladder; ///< loose to tight, the asked budget among them
  /// False where a rung's plan could not be held under its looser rung's
  /// peak (the peak then rises there; the ladder says where).
  bool peaksMonotone = true;
  /// How many rungs' peaks rose above their looser rung's (0 when monotone).
  unsigned rungsPeakRose = 0;
  /// Rungs not planned: their lower bound showed they could not be faster.
  unsigned rungsSkipped = 0;
};

/// The standard rungs: 50, 30, 10 and 5% of `whole` (the unoptimised
/// bounded memory), named `option`=N%, resolved as the option resolves them.
std::vector<BudgetRung> standardRungs(int64_t whole, const std::string &option);

/// The greedy's plan for `budget` on the ladder of `rungs` (any order);
/// `peakCap` bounds every plan's peak above the inputs, and `starts` chooses
/// the greedy's starts, as in planGreedy.
absl::StatusOr<MonotonePlan> planMonotone(const RecomputeModel &model, int64_t budget,
                                          int64_t peakCap, std::vector<BudgetRung> rungs,
                                          GreedyStarts starts = GreedyStarts::All);

/// The greedy's plan for a request, on the standard ladder of
/// request.ladderWhole where request.options.monotone (its rungs into
/// `ladder`), else planGreedy's: the greedy and structured planners' plan and
/// the milp planner's first source.
absl::StatusOr<CheckpointPlan> planGreedyOnLadder(const PlanRequest &request, GreedyStarts starts,
                                                  LadderReport *ladder);

} // namespace graphopt
