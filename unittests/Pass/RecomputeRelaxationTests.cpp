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
#include "checkpoint/RecomputeRelaxation.h"

#include "graphopt/Import/Importer.h"
#include "graphopt/Testing/RandomGraph.h"

#include <gtest/gtest.h>

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

TEST(RecomputeRelaxationTest, TheBoundHoldsForRandomPlansOnRandomGraphs) {
  std::mt19937_64 rng(7);
  unsigned models = 0, checked = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    testing::Choices choices(seed);
    auto random = testing::makeRandomGraph(choices);
    ASSERT_TRUE(random.ok()) << random.status().message();
    for (BoundedMemory kind : {BoundedMemory::PeakAboveInputs, BoundedMemory::SavedActivations}) {
      auto model =
          RecomputeModel::build(*random->graph, estimatedNodeSeconds(*random->graph), {}, kind);
      if (!model.ok() || model->candidates().empty())
        continue; // no backward, or nothing to drop
      ++models;
      checked += checkRandomPlans(*model, rng, 6, "random graph, seed " + std::to_string(seed));
    }
  }
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

} // namespace
} // namespace graphopt
