//===- RecomputeRelaxationTests.cpp - The relaxation bounds every plan ------===//
//
// RecomputeRelaxation's optimum is a lower bound on the time of every plan
// RecomputeModel can make within a budget, which is what makes planner=milp's
// gap a gap to the optimum. Checked as a property: random plans (drops, and
// forward values held for the clones) on the pass fuzzer's random training
// graphs and on two zoo models, both bounded memories: each plan's point
// satisfies every row of the program at the plan's own simulated memory, at
// no more than the plan's time.
//
//===----------------------------------------------------------------------===//
#include "CheckpointTestGraphs.h"
#include "../ZooArchives.h"
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/LagrangianCut.h"
#include "checkpoint/RecomputeRelaxation.h"

#include "graphopt/Import/Importer.h"
#include "graphopt/Testing/RandomGraph.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace graphopt {
namespace {

/// The forward storages backward does not read that a plan may hold.
std::vector<const Value *> holdable(const RecomputeModel &model) {
  std::vector<const Value *> out;
  const LivenessResult &live = model.baseline();
  for (const ValueLiveness &l : live.values)
    if (l.storage == l.value && l.created >= 0 && l.bytes > 0 &&
        l.value->definingNode()->phase() == Phase::Forward && l.firstBackwardUse < 0 &&
        model.candidateOf(l.value) < 0 && l.freedAfter < static_cast<int64_t>(live.timeline.size()))
      out.push_back(l.value);
  return out;
}

/// Whether `x` satisfies `row` (with a little room for rounding).
bool satisfies(const MilpProblem::Row &row, const std::vector<double> &x) {
  double lhs = 0;
  for (size_t k = 0; k < row.columns.size(); ++k)
    lhs += row.coefficients[k] * x[row.columns[k]];
  return lhs >= row.rhs - 1e-9 * std::max(1.0, std::abs(row.rhs));
}

/// Checks `plan` (completed) against the relaxation; returns false when the
/// plan could not be made (a drop set the closure refuses), true otherwise.
bool checkPlan(const RecomputeModel &model, const RecomputeRelaxation &relaxation,
               CheckpointPlan plan, const std::string &what) {
  if (!completePlan(model, /*budget=*/0, plan).ok())
    return false;
  SCOPED_TRACE(what);
  std::vector<double> x = relaxation.pointOf(plan.recompute, plan.held);
  std::optional<MilpProblem> p = relaxation.problem(plan.predictedBounded);
  EXPECT_TRUE(p.has_value()) << "the program says no plan reaches " << plan.predictedBounded
                             << " bytes; this one does";
  if (!p)
    return true;
  for (size_t r = 0; r < p->rows.size(); ++r)
    EXPECT_TRUE(satisfies(p->rows[r], x))
        << (r + p->memoryRows >= p->rows.size() ? "memory" : "structural") << " row " << r
        << " refuses a plan of " << plan.dropped.size() << " drops and " << plan.held.size()
        << " held values";
  double objective = 0;
  for (size_t i = 0; i < x.size(); ++i)
    objective += p->objective[i] * x[i];
  EXPECT_LE(relaxation.lowerBoundSeconds(objective),
            plan.predictedExtraSeconds * (1 + 1e-9) + 1e-15);
  return true;
}

/// `plans` random plans on `model`: each candidate dropped and each holdable
/// value held with chances that vary plan to plan.
unsigned checkRandomPlans(const RecomputeModel &model, std::mt19937_64 &rng, unsigned plans,
                          const std::string &what) {
  RecomputeRelaxation relaxation(model);
  std::vector<const Value *> values = holdable(model);
  unsigned checked = 0;
  for (unsigned i = 0; i < plans; ++i) {
    const double dropChance = std::uniform_real_distribution<double>(0.05, 1.0)(rng);
    const double holdChance = i % 2 ? std::uniform_real_distribution<double>(0.0, 0.5)(rng) : 0;
    CheckpointPlan plan;
    for (size_t c = 0; c < model.candidates().size(); ++c)
      if (std::bernoulli_distribution(dropChance)(rng))
        plan.dropped.push_back(static_cast<int32_t>(c));
    for (const Value *v : values)
      if (std::bernoulli_distribution(holdChance)(rng))
        plan.held.push_back(v);
    checked += checkPlan(model, relaxation, std::move(plan), what + ", plan " + std::to_string(i));
  }
  return checked;
}

/// Calls `f(model, seed)` for the pass fuzzer's random training graphs of
/// seeds 1 to `seeds` that have something to drop, each bounded both ways.
template <typename F> void forEachRandomModel(uint64_t seeds, F f) {
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    testing::Choices choices(seed);
    auto random = testing::makeRandomGraph(choices);
    ASSERT_TRUE(random.ok()) << random.status().message();
    for (BoundedMemory kind : {BoundedMemory::PeakAboveInputs, BoundedMemory::SavedActivations}) {
      auto model =
          RecomputeModel::build(*random->graph, estimatedNodeSeconds(*random->graph), {}, kind);
      if (!model.ok() || model->candidates().empty())
        continue; // no backward, or nothing to drop
      SCOPED_TRACE("random graph, seed " + std::to_string(seed));
      f(*model, seed);
    }
  }
}

TEST(RecomputeRelaxationTest, TheBoundHoldsForRandomPlansOnRandomGraphs) {
  std::mt19937_64 rng(7);
  unsigned models = 0, checked = 0;
  forEachRandomModel(300, [&](const RecomputeModel &model, uint64_t seed) {
    ++models;
    checked += checkRandomPlans(model, rng, 6, "random graph, seed " + std::to_string(seed));
  });
  EXPECT_GT(models, 100u);
  EXPECT_GT(checked, 500u);
}

TEST(RecomputeRelaxationTest, TheBoundHoldsForRandomPlansOnZooModels) {
  ASSERT_FALSE(test::zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  std::mt19937_64 rng(11);
  for (const char *archive : {"t5-train", "llama-train"}) {
    auto imported = importPt2(test::zooDir() + "/" + archive + ".pt2");
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    for (BoundedMemory kind : {BoundedMemory::PeakAboveInputs, BoundedMemory::SavedActivations}) {
      RecomputeModel model = test::modelOf(*imported->graph, kind);
      EXPECT_GE(checkRandomPlans(model, rng, 8, archive), 8u) << archive;
    }
  }
}

/// The memory rows of `p` (the last memoryRows rows).
llvm::ArrayRef<MilpProblem::Row> memoryRowsOf(const MilpProblem &p) {
  return llvm::ArrayRef<MilpProblem::Row>(p.rows).take_back(p.memoryRows);
}

bool sameRow(const MilpProblem::Row &a, const MilpProblem::Row &b) {
  return a.columns == b.columns && a.coefficients == b.coefficients && a.rhs == b.rhs;
}

// Where the program is too large (RecomputeRelaxation::problem with a limit
// on its coefficients), it keeps the memory rows furthest over the budget:
// each one the full program's, none left out higher than one kept, and its
// Lagrangian bound still under the greedy's plan. Without a limit it is the
// full program, row for row.
TEST(RecomputeRelaxationTest, APartialProgramKeepsTheRowsFurthestOverAndStillBounds) {
  std::mt19937_64 rng(5);
  unsigned partials = 0, bounded = 0;
  forEachRandomModel(150, [&](const RecomputeModel &model, uint64_t) {
    const int64_t budget = static_cast<int64_t>(
        static_cast<double>(model.boundedPeak()) *
        std::uniform_real_distribution<double>(0.2, 0.9)(rng));
    RecomputeRelaxation relaxation(model);
    std::optional<MilpProblem> full = relaxation.problem(budget);
    if (!full || full->memoryRows < 2)
      return;
    bool partial = true;
    std::optional<MilpProblem> same =
        relaxation.problem(budget, std::numeric_limits<size_t>::max(), partial);
    ASSERT_TRUE(same.has_value());
    EXPECT_FALSE(partial);
    ASSERT_EQ(same->rows.size(), full->rows.size());
    for (size_t r = 0; r < full->rows.size(); ++r)
      EXPECT_TRUE(sameRow(same->rows[r], full->rows[r])) << "row " << r;

    size_t nonzeros = 0;
    for (const MilpProblem::Row &row : memoryRowsOf(*full))
      nonzeros += row.columns.size();
    std::optional<MilpProblem> part = relaxation.problem(budget, nonzeros / 2, partial);
    ASSERT_TRUE(part.has_value());
    EXPECT_TRUE(partial);
    EXPECT_GE(part->memoryRows, 1u);
    EXPECT_LT(part->memoryRows, full->memoryRows);
    EXPECT_EQ(part->rows.size() - part->memoryRows, full->rows.size() - full->memoryRows);
    double lowestKept = std::numeric_limits<double>::infinity();
    std::vector<uint8_t> kept(full->memoryRows, 0);
    for (const MilpProblem::Row &row : memoryRowsOf(*part)) {
      lowestKept = std::min(lowestKept, row.rhs);
      bool found = false;
      for (size_t r = 0; r < full->memoryRows && !found; ++r)
        if (!kept[r] && sameRow(row, memoryRowsOf(*full)[r]))
          kept[r] = found = true;
      EXPECT_TRUE(found) << "a kept row the full program does not have";
    }
    for (size_t r = 0; r < full->memoryRows; ++r)
      if (!kept[r])
        EXPECT_LE(memoryRowsOf(*full)[r].rhs, lowestKept) << "a higher row left out";
    ++partials;

    auto plan = planGreedy(model, budget);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    if (!plan->meetsBudget)
      return;
    const double bound = relaxation.lowerBoundSeconds(boundByLagrangianCuts(
        *part, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()));
    EXPECT_LE(bound, plan->predictedExtraSeconds * (1 + 1e-9) + 1e-15);
    ++bounded;
  });
  EXPECT_GT(partials, 50u);
  EXPECT_GT(bounded, 30u);
}

} // namespace
} // namespace graphopt
