//===- BudgetLadderTests.cpp - Greedy plans monotone in the budget ---------===//
//
// The ladder's promises (BudgetLadder.h), checked on random training graphs
// (the pass fuzzer's generator) at every rung and between rungs: the rungs'
// plans do not depend on the budget asked; over the rungs the extra time only
// grows and the peak only falls as the budget tightens; a budget between
// rungs is no slower than any tighter rung and peaks no higher than any looser
// one; a budget the greedy meets alone, the ladder meets too; and the lower
// bound by which it skips rungs is never above the greedy's time.
//
//===----------------------------------------------------------------------===//
#include "CheckpointTestGraphs.h"
#include "checkpoint/BudgetLadder.h"

#include "graphopt/Pass/PassOption.h"
#include "graphopt/Testing/RandomGraph.h"

#include <gtest/gtest.h>

#include <map>

namespace graphopt {
namespace {

struct Answer {
  int64_t budget;
  bool rung;
  CheckpointPlan plan;
};

/// Every dropped set's plan (RecomputeModel::closure, nothing held): the
/// least simulated peak at which some set meets `bounded`, by bounded memory.
/// Exhaustive, so only for models of a few candidates.
std::map<int64_t, int64_t> leastPeakByBounded(const RecomputeModel &model) {
  std::map<int64_t, int64_t> least;
  const size_t n = model.candidates().size();
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    std::vector<int32_t> dropped;
    for (size_t i = 0; i < n; ++i)
      if (mask >> i & 1)
        dropped.push_back(static_cast<int32_t>(i));
    auto set = model.closure(dropped, {});
    if (!set.ok())
      continue;
    auto sim = model.simulate(*set);
    if (!sim.ok())
      continue;
    auto [it, fresh] = least.try_emplace(sim->bounded, sim->peakAboveInputs);
    if (!fresh)
      it->second = std::min(it->second, sim->peakAboveInputs);
  }
  return least;
}

/// A rung whose peak rose above its looser rung's is a failure unless no plan
/// meets its budget under that peak: on models small enough to try every
/// dropped set, none does.
void expectEveryRiseForced(const RecomputeModel &model, const MonotonePlan &planned,
                           uint64_t seed) {
  constexpr size_t kMaxExhaustiveCandidates = 12;
  const LadderStep *looser = nullptr;
  std::optional<std::map<int64_t, int64_t>> least;
  for (const LadderStep &s : planned.ladder) {
    if (s.how == LadderStep::How::RaisedAboveLooserPeak) {
      ASSERT_NE(looser, nullptr) << "seed " << seed;
      EXPECT_GT(s.plan.predictedPeak, looser->plan.predictedPeak) << "seed " << seed;
      ASSERT_LE(model.candidates().size(), kMaxExhaustiveCandidates)
          << "seed " << seed << ": a rise on a model too large to prove it forced";
      if (!least)
        least = leastPeakByBounded(model);
      for (auto [bounded, peak] : *least)
        EXPECT_FALSE(bounded <= s.rung.target && peak <= looser->plan.predictedPeak)
            << "seed " << seed << ": " << s.rung.name << " peaks at " << s.plan.predictedPeak
            << " above its looser rung's " << looser->plan.predictedPeak
            << ", but dropping a set meets it at bounded " << bounded << ", peak " << peak;
    }
    if (!s.asked)
      looser = &s;
  }
}

TEST(BudgetLadderTest, PlansAreMonotoneInTheBudgetOnRandomGraphs) {
  unsigned checked = 0, fromTighterRung = 0, lowerBoundsPositive = 0, forcedRises = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    testing::Choices choices(seed);
    auto made = testing::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    auto built = RecomputeModel::build(*made->graph, estimatedNodeSeconds(*made->graph), {},
                                       BoundedMemory::SavedActivations);
    if (!built.ok() || built->candidates().empty())
      continue;
    const RecomputeModel &model = *built;
    const int64_t whole = model.boundedPeak();
    std::vector<BudgetRung> rungs = standardRungs(whole, "activations");
    std::vector<Answer> answers;
    std::map<int64_t, std::pair<double, int64_t>> rungPlans; // time and peak by target
    bool ladderRose = false;

    // Loose to tight, rungs and budgets between them.
    for (double share : {90.0, 70.0, 60.0, 50.0, 40.0, 30.0, 25.0, 20.0, 15.0, 10.0, 7.0, 5.0}) {
      int64_t budget = MemoryAmount::percent(share).resolve(whole);
      bool isRung = false;
      for (const BudgetRung &r : rungs)
        isRung |= r.target == budget;
      auto planned = planMonotone(model, budget, kNoPeakCap, rungs);
      ASSERT_TRUE(planned.ok()) << "seed " << seed << ": " << planned.status().message();
      // What the greedy meets alone, the ladder meets.
      auto alone = planGreedy(model, budget);
      ASSERT_TRUE(alone.ok());
      if (alone->meetsBudget) {
        EXPECT_TRUE(planned->plan.meetsBudget) << "seed " << seed << " at " << share << "%";
        // The lower bound that lets the ladder skip rungs is one.
        EXPECT_LE(recomputeLowerBound(model, budget),
                  alone->predictedExtraSeconds * (1 + 1e-9) + 1e-12)
            << "seed " << seed << " at " << share << "%";
        lowerBoundsPositive += recomputeLowerBound(model, budget) > 0;
      }
      if (planned->plan.meetsBudget) {
        EXPECT_LE(planned->plan.predictedBounded, budget);
      }
      fromTighterRung += !planned->from.empty();
      answers.push_back({budget, isRung, planned->plan});
      // The rungs' plans are the same whatever was asked.
      for (const LadderStep &s : planned->ladder) {
        if (s.rung.name == "the budget asked")
          continue;
        auto [it, fresh] = rungPlans.try_emplace(
            s.rung.target, s.plan.predictedExtraSeconds, s.plan.predictedPeak);
        if (!fresh) {
          EXPECT_EQ(it->second.first, s.plan.predictedExtraSeconds) << "seed " << seed;
          EXPECT_EQ(it->second.second, s.plan.predictedPeak) << "seed " << seed;
        }
      }
      // A ladder whose peak rose says so, and counts the rungs where it did;
      // it may rise only where no plan meets the budget under the looser peak.
      EXPECT_EQ(planned->peaksMonotone, planned->rungsPeakRose == 0) << "seed " << seed;
      expectEveryRiseForced(model, *planned, seed);
      forcedRises += planned->rungsPeakRose;
      ladderRose |= !planned->peaksMonotone;
    }
    // Every pair, looser first, among the answers that meet their budget.
    for (size_t i = 0; i < answers.size(); ++i)
      for (size_t j = i + 1; j < answers.size(); ++j) {
        const Answer &loose = answers[i], &tight = answers[j];
        if (!loose.plan.meetsBudget || !tight.plan.meetsBudget)
          continue;
        if (tight.rung) {
          EXPECT_GE(tight.plan.predictedExtraSeconds, loose.plan.predictedExtraSeconds)
              << "seed " << seed << ": budgets " << loose.budget << " and " << tight.budget;
        }
        // The ladder caps each rung at its looser neighbour's peak: a tighter
        // budget peaks no higher than a looser rung, where the ladder's peaks
        // did not have to rise (checked above).
        if (loose.rung && !ladderRose) {
          EXPECT_LE(tight.plan.predictedPeak, loose.plan.predictedPeak)
              << "seed " << seed << ": budgets " << loose.budget << " and " << tight.budget;
        }
      }
    ++checked;
  }
  // Enough graphs had something to plan, and the ladder took a tighter
  // rung's plan somewhere (else the test would not test it).
  EXPECT_GE(checked, 20u);
  EXPECT_GT(fromTighterRung, 0u);
  EXPECT_GT(lowerBoundsPositive, 0u);
  RecordProperty("forced_peak_rises", forcedRises);
}

// simulate() rewrites one copy of the graph and restores it (RecomputeModel.h):
// a plan simulated after others gives what a model that never simulated
// anything gives, and the clone count a plan state reports is its clones'.
TEST(BudgetLadderTest, SimulationsRestoreTheirCopyOfTheGraph) {
  unsigned compared = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    testing::Choices choices(seed);
    auto made = testing::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    auto seconds = estimatedNodeSeconds(*made->graph);
    auto model = RecomputeModel::build(*made->graph, seconds, {}, BoundedMemory::SavedActivations);
    if (!model.ok() || model->candidates().empty())
      continue;
    std::vector<RecomputeSet> sets;
    for (double share : {50.0, 10.0}) {
      auto plan = planGreedy(*model, MemoryAmount::percent(share).resolve(model->boundedPeak()));
      ASSERT_TRUE(plan.ok());
      sets.push_back(plan->recompute);
    }
    PlanState state(*model);
    for (int32_t c = 0; c < static_cast<int32_t>(model->candidates().size()); ++c)
      (void)state.add(c);
    EXPECT_EQ(state.cloneCount(), state.result().clones.size()) << "seed " << seed;
    sets.push_back(state.result());
    for (const RecomputeSet &set : sets) {
      auto fresh = RecomputeModel::build(*made->graph, seconds, {}, BoundedMemory::SavedActivations);
      ASSERT_TRUE(fresh.ok());
      auto once = fresh->simulate(set);
      auto again = model->simulate(set);
      ASSERT_EQ(once.ok(), again.ok()) << "seed " << seed;
      if (!once.ok())
        continue;
      EXPECT_EQ(once->peakAboveInputs, again->peakAboveInputs) << "seed " << seed;
      EXPECT_EQ(once->bounded, again->bounded) << "seed " << seed;
      EXPECT_EQ(once->boundedByRank, again->boundedByRank) << "seed " << seed;
      EXPECT_EQ(once->peakAboveInputsByRank, again->peakAboveInputsByRank) << "seed " << seed;
      ++compared;
    }
    EXPECT_EQ(made->graph->numNodes(), model->graph().numNodes());
  }
  EXPECT_GE(compared, 20u);
}

} // namespace
} // namespace graphopt
