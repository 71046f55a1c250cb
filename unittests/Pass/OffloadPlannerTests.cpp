//===- OffloadPlannerTests.cpp - checkpoint's offload: copies, choices, rewrite ===//
//
// The copy engines' timeline on hand-worked cases, the prefetch point, the
// choice on the chain graph of CheckpointTestGraphs.h, and the rewrite: the
// graph with offloads verifies, its host copies count for no device memory,
// and taking the offloads out gives back the graph as it was.
//
//===----------------------------------------------------------------------===//
#include "CheckpointTestGraphs.h"
#include "checkpoint/OffloadPlanner.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"

#include <gtest/gtest.h>

namespace graphopt {
namespace {

using test::modelOf;

// Six nodes of 1 s each; one transfer of `seconds` each way, out after node
// 0, back at node `back`, needed at node 5.
CopySimulation one(double seconds, int64_t back) {
  std::vector<double> nodes(6, 1.0);
  return simulateCopies(nodes, {Transfer{0, back, 5, seconds}});
}

TEST(OffloadPlannerTest, ACopyThatFitsItsWindowCostsNothing) {
  // Out during nodes 1-2 (done at 3 s), back from node 3's start (3 s) to 5 s.
  CopySimulation sim = one(2.0, 3);
  EXPECT_DOUBLE_EQ(sim.stallSeconds, 0);
  EXPECT_EQ(sim.outDoneAt[0], 2); // the buffer is held while nodes 1 and 2 run
}

TEST(OffloadPlannerTest, ACopyBackTooLateStallsTheStep) {
  // Back from node 4's start (4 s): done at 6 s, needed at 5 s.
  CopySimulation sim = one(2.0, 4);
  EXPECT_DOUBLE_EQ(sim.stallSeconds, 1.0);
  EXPECT_DOUBLE_EQ(sim.stall[0], 1.0);
}

TEST(OffloadPlannerTest, TheCopyBackWaitsForTheCopyOut) {
  // Out from 1 s to 4 s; back issued at 2 s can only start at 4 s: done at
  // 7 s, needed at 5 s.
  CopySimulation sim = one(3.0, 2);
  EXPECT_DOUBLE_EQ(sim.stallSeconds, 2.0);
  EXPECT_EQ(sim.outDoneAt[0], 3);
}

TEST(OffloadPlannerTest, OneEngineEachWayQueuesCopies) {
  // Two copies of 1 s back, both issued at node 3 (3 s): the second starts
  // when the first ends (4 s), done at 5 s, needed at node 4 (4 s).
  std::vector<double> nodes(6, 1.0);
  CopySimulation sim =
      simulateCopies(nodes, {Transfer{0, 3, 5, 1.0}, Transfer{0, 3, 4, 1.0}});
  EXPECT_DOUBLE_EQ(sim.stall[0], 0);
  EXPECT_DOUBLE_EQ(sim.stall[1], 1.0);
  EXPECT_DOUBLE_EQ(sim.stallSeconds, 1.0);
}

TEST(OffloadPlannerTest, ThePrefetchPointIsTheLatestThatHidesTheCopy) {
  std::vector<double> nodes = {1, 1, 1, 0.5, 0.5, 1};
  EXPECT_EQ(prefetchPoint(nodes, 0, 5, 1.0), 3);  // nodes 3 and 4
  EXPECT_EQ(prefetchPoint(nodes, 0, 5, 1.5), 2);  // 2, 3, 4
  EXPECT_EQ(prefetchPoint(nodes, 0, 5, 100), 1);  // never before the copy out
  EXPECT_EQ(prefetchPoint(nodes, 0, 5, 0), 5);    // a free copy: at its use
}

TEST(OffloadPlannerTest, OffloadsOnTheChainVerifyAndCountNoDeviceMemory) {
  auto g = parseGraph(test::kChain);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string before = printGraphToString(**g);
  RecomputeModel model = modelOf(**g);
  // A bandwidth at which every copy hides (the estimated node times are
  // nanoseconds: a terabyte a second).
  OffloadPlan plan = planOffloads(model, model.boundedPeak() - 1, 1e12);
  ASSERT_FALSE(plan.offloads.empty());
  EXPECT_DOUBLE_EQ(plan.stallSeconds, 0);
  auto applied = applyOffloads(model, plan, **g);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_TRUE(verifyGraph(**g).ok()) << printGraphToString(**g);
  const std::string with = printGraphToString(**g);
  EXPECT_NE(with.find("graphopt::offload("), std::string::npos);
  EXPECT_NE(with.find("graphopt::reload_wait("), std::string::npos);
  // Its host copies are no device memory: the peak above the inputs falls.
  auto after = LivenessAnalysis::compute(**g);
  ASSERT_TRUE(after.ok());
  EXPECT_LT(after->peakBytes, model.baseline().peakBytes);
  int64_t host = 0;
  for (const ValueLiveness &l : after->values)
    host += l.hostBytes;
  EXPECT_EQ(host, plan.offloadedBytes);
  // And out again: the graph as it was.
  ASSERT_TRUE(removeOffloads(*applied, **g).ok());
  EXPECT_EQ(printGraphToString(**g), before);
}

TEST(OffloadPlannerTest, NothingIsOffloadedWhereRecomputingIsCheaper) {
  auto g = parseGraph(test::kChain);
  ASSERT_TRUE(g.ok());
  RecomputeModel model = modelOf(**g);
  // A byte a second: every copy stalls far longer than recomputing.
  OffloadPlan plan = planOffloads(model, model.boundedPeak() - 1, 1.0);
  EXPECT_TRUE(plan.offloads.empty());
}

} // namespace
} // namespace graphopt
