//===- RecomputeSimulationTest.cpp - simulate() is the rewritten graph's liveness ---===//
//
// RecomputeModel::simulate computes a plan's timeline without making the
// rewritten graph (RecomputeSimulation.cpp); simulateByRewrite makes it and
// runs LivenessAnalysis on it. The two must agree on every number the
// planners read, for every plan: here on the zoo's training graphs and the
// pass fuzzer's random steps (views, in-place writes, dropout, multi-output
// and result-less nodes, repeated blocks), with plans of every density,
// shared (hoisted) clones, held values, measured scratch and both bounds.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/FlopCost.h"
#include "checkpoint/RecomputeModel.h"

#include "graphopt/Import/Importer.h"
#include "graphopt/IR/Printer.h"
#include "../TestSupport.h"
#include "../ZooArchives.h" // before RandomGraph.h: its graphopt::testing hides ::testing
#include "CheckpointTestGraphs.h"
#include "graphopt/Testing/RandomGraph.h"

#include <gtest/gtest.h>

#include <random>

using namespace graphopt;
using namespace graphopt::test;

namespace {

/// "" when the two simulations agree, else what differs.
std::string differences(const Simulation &fast, const Simulation &slow) {
  std::string out;
  auto field = [&](const char *name, int64_t a, int64_t b) {
    if (a != b)
      out += absl::StrCat(name, ": ", a, " without rewriting, ", b, " rewritten; ");
  };
  field("peakAboveInputs", fast.peakAboveInputs, slow.peakAboveInputs);
  field("savedActivations", fast.savedActivations, slow.savedActivations);
  field("bounded", fast.bounded, slow.bounded);
  field("peakNode", fast.peakNode, slow.peakNode);
  auto timeline = [&](const char *name, const std::vector<int64_t> &a,
                      const std::vector<int64_t> &b) {
    if (a.size() != b.size()) {
      out += absl::StrCat(name, ": ", a.size(), " ranks against ", b.size(), "; ");
      return;
    }
    for (size_t r = 0; r < a.size(); ++r)
      if (a[r] != b[r]) {
        out += absl::StrCat(name, " at rank ", r, ": ", a[r], " against ", b[r], "; ");
        return;
      }
  };
  timeline("boundedByRank", fast.boundedByRank, slow.boundedByRank);
  timeline("peakAboveInputsByRank", fast.peakAboveInputsByRank, slow.peakAboveInputsByRank);
  return out;
}

/// Plans of `model` to compare on: nothing dropped, each candidate alone (the
/// first 24), random subsets at 10/40/100% with and without every repeat
/// shared, and a plan that holds forward values for its clones.
std::vector<RecomputeSet> plansOf(const RecomputeModel &model, uint64_t seed) {
  std::vector<RecomputeSet> plans{RecomputeSet{}};
  const auto n = static_cast<int32_t>(model.candidates().size());
  for (int32_t c = 0; c < n && c < 24; ++c)
    if (auto set = model.closure({c}); set.ok())
      plans.push_back(std::move(*set));
  std::mt19937_64 random(seed);
  for (unsigned percent : {10u, 40u, 100u})
    for (bool share : {false, true}) {
      PlanState state(model);
      for (int32_t c = 0; c < n; ++c)
        if (random() % 100 < percent)
          (void)state.add(c); // one that cannot be recomputed is left out
      if (share)
        state.hoistEveryRepeat();
      plans.push_back(state.result());
    }
  // Held: the operands of the dropped candidates' producers, where forward made them.
  std::vector<int32_t> dropped;
  std::vector<const Value *> held;
  for (int32_t c = 0; c < n; c += 2) {
    dropped.push_back(c);
    for (const Value *x : model.candidates()[c].storage->definingNode()->operandValues())
      if (x->definingNode() && x->definingNode()->phase() == Phase::Forward &&
          model.baseline().lookup(x)->storage == x && model.candidateOf(x) < 0)
        held.push_back(x);
  }
  if (auto set = model.closure(dropped, held); set.ok())
    plans.push_back(std::move(*set));
  return plans;
}

/// Compares the two simulations on plansOf(model); the first difference fails.
/// Returns how many of the plans compared recompute something.
unsigned expectSameSimulations(const Graph &graph, const std::string &what, uint64_t seed) {
  unsigned withClones = 0;
  std::mt19937_64 random(seed);
  for (BoundedMemory bounded : {BoundedMemory::PeakAboveInputs, BoundedMemory::SavedActivations})
    for (bool withScratch : {false, true}) {
      std::vector<int64_t> scratch;
      if (withScratch)
        for (size_t r = 0; r < graph.numNodes(); ++r)
          scratch.push_back(static_cast<int64_t>(random() % 4096));
      auto model = RecomputeModel::build(graph, estimatedNodeSeconds(graph), scratch, bounded);
      if (!model.ok())
        return withClones; // no backward, or nothing to plan: covered elsewhere
      std::vector<RecomputeSet> plans = plansOf(*model, seed);
      for (size_t p = 0; p < plans.size(); ++p) {
        auto fast = model->simulate(plans[p]);
        auto slow = model->simulateByRewrite(plans[p]);
        EXPECT_EQ(fast.ok(), slow.ok()) << what << ", plan " << p;
        if (!fast.ok() || !slow.ok())
          continue;
        withClones += !plans[p].clones.empty();
        std::string diff = differences(*fast, *slow);
        EXPECT_EQ(diff, "") << what << ", plan " << p << " (" << plans[p].clones.size()
                            << " clones), bound "
                            << (bounded == BoundedMemory::PeakAboveInputs ? "peak" : "saved")
                            << (withScratch ? ", with scratch" : "");
        if (!diff.empty())
          return withClones;
      }
    }
  return withClones;
}

class RecomputeSimulationZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RecomputeSimulationZooTest, AgreesWithTheRewrittenGraphsLiveness) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/" + GetParam() + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_GT(expectSameSimulations(*model->graph, GetParam(), 7), 0u)
      << "no plan recomputed anything: nothing was compared";
}

INSTANTIATE_TEST_SUITE_P(Zoo, RecomputeSimulationZooTest,
                         ::testing::ValuesIn(zooArchives({"train"})), ArchiveName());

TEST(RecomputeSimulationTest, AgreesWithTheRewrittenGraphsLivenessOnRandomSteps) {
  unsigned graphsWithClones = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    graphopt::testing::Choices choices(seed);
    auto made = graphopt::testing::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    graphsWithClones += expectSameSimulations(
        *made->graph, absl::StrCat("seed ", seed, "\n", printGraphToString(*made->graph)),
        seed) > 0;
    if (HasFailure())
      return;
  }
  // Most random steps have activations to drop; a generator that stopped
  // making them would leave this test comparing empty plans.
  EXPECT_GE(graphsWithClones, 250u); // 284 of 300 when written
}

// The checkpoint pass checks the plan it takes on the graph it rewrote
// (simulateRewritten, no copy): the same numbers as the planners' simulation.
TEST(RecomputeSimulationTest, TheRewrittenGraphItselfAgreesWithTheSimulation) {
  unsigned compared = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    graphopt::testing::Choices choices(seed);
    auto made = graphopt::testing::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    Graph &graph = *made->graph;
    auto model = RecomputeModel::build(graph, estimatedNodeSeconds(graph), {},
                                       BoundedMemory::PeakAboveInputs);
    if (!model.ok())
      continue;
    // The densest plan, every repeat shared.
    PlanState state(*model);
    for (int32_t c = 0; c < static_cast<int32_t>(model->candidates().size()); ++c)
      (void)state.add(c); // one that cannot be recomputed is left out
    state.hoistEveryRepeat();
    const RecomputeSet plan = state.result();
    if (plan.clones.empty())
      continue;
    auto fast = model->simulate(plan);
    ASSERT_TRUE(fast.ok()) << fast.status().message();
    NodeMap<int64_t> source;
    auto applied = model->apply(plan, graph, nullptr, &source);
    ASSERT_TRUE(applied.ok()) << applied.status().message();
    auto rewritten = model->simulateRewritten(source);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
    EXPECT_EQ(differences(*fast, *rewritten), "") << "seed " << seed;
    ++compared;
  }
  EXPECT_GE(compared, 60u);
}

} // namespace
