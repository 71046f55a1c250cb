//===- SimulatedWorldTest.cpp - Ranks as threads, and the cross-rank check -===//
//
// The pass fuzzer runs data-parallel and shard-parameters on a world of two
// ranks simulated in one process (Testing/SimulatedWorld.h): a rewritten step
// computes on every rank what torch.distributed would, a rank whose peer
// never reaches a collective gets an error instead of a hang, and the check
// with each rank on its own inputs fails a step that never reduces across
// ranks (which the verifier, every rank on the same inputs, cannot see).
//
//===----------------------------------------------------------------------===//
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "graphopt/Testing/SimulatedWorld.h"
#include "../TestSupport.h"

#include <ATen/Context.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include <gtest/gtest.h>

namespace graphopt {
namespace {

using testing::SimulatedWorld;
using test::parseOrFail;

constexpr const char *kStep = R"(graph @step {
  input %w : f32[4, 4] parameter "w"
  input %b : f32[4] parameter "b"
  input %x : f32[3, 4] user_input
forward:
  %h = aten::mm(%x, %w) : f32[3, 4]
  %y = aten::add.Tensor(%h, %b) : f32[3, 4]
  %loss = aten::sum(%y) : f32[]
backward:
  %ones = aten::ones_like(%y, pin_memory=false) : f32[3, 4]
  %xt = aten::t(%x) : f32[4, 3]{strides=[1, 4]}
  %gw = aten::mm(%xt, %ones) : f32[4, 4]
  %gb = aten::sum.dim_IntList(%ones, [0]) : f32[4]
  output %loss loss
  output %gw gradient "w"
  output %gb gradient "b"
}
)";

std::unique_ptr<Graph> rewrite(const Graph &g, const char *pipeline) {
  std::unique_ptr<Graph> out = g.clone();
  GraphOptimizer optimizer;
  EXPECT_TRUE(optimizer.addPipeline(pipeline).ok());
  auto run = optimizer.run(*out);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return out;
}

/// `rewritten` on a world of two, each rank on its own inputs, agrees with
/// `original` as checkAcrossRanks holds it (gradients averaged over the ranks).
void expectEveryRankAgrees(const Graph &original, const Graph &rewritten, const char *what) {
  SimulatedWorld world(2);
  std::vector<std::string> found(2);
  auto statuses = world.run([&](int rank) {
    found[rank] = testing::checkAcrossRanks(original, rewritten, 7, rank, 2);
    return absl::OkStatus();
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << statuses[rank].message();
    EXPECT_EQ(found[rank], "") << what << ", rank " << rank;
  }
}

TEST(SimulatedWorldTest, DataParallelAndShardsAverageEachRanksGradients) {
  auto g = parseOrFail(kStep);
  ASSERT_TRUE(g);
  for (const char *pipeline : {"data-parallel{world=2,bucket=16}", "shard-parameters{world=2}"})
    expectEveryRankAgrees(*g, *rewrite(*g, pipeline), pipeline);
}

// A step that returns its parameters themselves (w read in forward, v only in
// backward): shard-parameters used to refuse it ("the whole parameter exists
// on no rank"); each is now returned as a view of its forward gather, the
// same values on every rank.
TEST(SimulatedWorldTest, AParameterTheStepReturnsComesBackGathered) {
  auto g = parseOrFail(R"(graph @returns {
  input %w : f32[4, 4] parameter "w"
  input %v : f32[3] parameter "v"
  input %x : f32[3, 4] user_input
forward:
  %h = aten::mm(%x, %w) : f32[3, 4]
  %loss = aten::sum(%h) : f32[]
backward:
  %ones = aten::ones_like(%h, pin_memory=false) : f32[3, 4]
  %xt = aten::t(%x) : f32[4, 3]{strides=[1, 4]}
  %gw = aten::mm(%xt, %ones) : f32[4, 4]
  %gv = aten::mul.Tensor(%v, 2.0) : f32[3]
  output %loss loss
  output %gw gradient "w"
  output %gv gradient "v"
  output %w user_output
  output %v user_output
}
)");
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> rewritten = rewrite(*g, "shard-parameters{world=2}");
  int returned = 0;
  for (const GraphOutput &o : rewritten->outputs())
    if (o.role == OutputRole::UserOutput) {
      ASSERT_NE(o.value->definingNode(), nullptr);
      EXPECT_EQ(o.value->definingNode()->opName(), "aten::alias");
      ++returned;
    }
  EXPECT_EQ(returned, 2);
  expectEveryRankAgrees(*g, *rewritten, "shard-parameters{world=2}");
}

// The step as it was, with no reduction: each rank's gradient is its own,
// not the mean, and the check says so.
TEST(SimulatedWorldTest, AStepThatNeverReducesFailsTheCrossRankCheck) {
  auto g = parseOrFail(kStep);
  ASSERT_TRUE(g);
  SimulatedWorld world(2);
  std::vector<std::string> found(2);
  world.run([&](int rank) {
    found[rank] = testing::checkAcrossRanks(*g, *g, 7, rank, 2);
    return absl::OkStatus();
  });
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_NE(found[rank].find("is not the mean of the ranks' gradients"), std::string::npos)
        << found[rank];
}

// A step that does not run on a rank's inputs (an assertion that fails on
// them) leaves nothing to compare: the check says so rather than passing (it
// once returned success, and the fuzzer counted such a case verified).
TEST(SimulatedWorldTest, AStepThatDoesNotRunOnARanksInputsIsNotAPass) {
  auto g = parseOrFail(R"(graph @step {
  input %w : f32[4] parameter "w"
  input %ok : bool[] user_input
forward:
  aten::_assert_async.msg(%ok, "never holds on the stand-ins")
  %loss = aten::sum(%w) : f32[]
backward:
  %one = aten::ones_like(%loss) : f32[]
  %gw = aten::expand(%one, [4]) : f32[4]{strides=[0]}
  output %loss loss
  output %gw gradient "w"
}
)");
  ASSERT_TRUE(g);
  testing::AcrossRanksReference reference = testing::referenceAcrossRanks(*g, 7, 2);
  EXPECT_NE(reference.unrunnable.find("does not run on rank 0's inputs"), std::string::npos)
      << reference.unrunnable;
  std::string found = testing::checkAcrossRanks(*g, *g, 7, 0, 2, reference);
  EXPECT_NE(found.find("nothing compared"), std::string::npos) << found;
}

// Gradients of 3e38 on every rank: their mean is 3e38, their float sum is
// inf. Both rewrites divide each rank's share before the sum (found by
// fuzz-passes under ASan: the sum overflowed, and the mean came back inf), and
// the cross-rank check takes its reference mean in double.
TEST(SimulatedWorldTest, TheMeanOfLargeGradientsDoesNotOverflow) {
  auto g = parseOrFail(R"(graph @big {
  input %w : f32[4] parameter "w"
  input %x : f32[4] user_input
forward:
  %y = aten::mul.Tensor(%x, %w) : f32[4]
  %loss = aten::sum(%y) : f32[]
backward:
  %ones = aten::ones_like(%w, pin_memory=false) : f32[4]
  %gw = aten::mul.Scalar(%ones, 3.0e38) : f32[4]
  output %loss loss
  output %gw gradient "w"
}
)");
  ASSERT_TRUE(g);
  SimulatedWorld world(2);
  for (const char *pipeline : {"data-parallel{world=2}", "shard-parameters{world=2}"}) {
    std::unique_ptr<Graph> rewritten = rewrite(*g, pipeline);
    std::vector<std::string> found(2);
    std::vector<bool> verified(2, false);
    auto statuses = world.run([&](int rank) -> absl::Status {
      WeightStore weights;
      if (auto filled = fillMissingWeights(*g, weights, 7); !filled.ok())
        return filled.status();
      auto inputs = makeExampleInputs(*g, 7);
      if (!inputs.ok())
        return inputs.status();
      VerifierOptions bitwise;
      bitwise.bitwise = true;
      auto report = verifyRewrite(*g, *rewritten, weights, *inputs, bitwise);
      if (!report.ok())
        return report.status();
      verified[rank] = report->passed;
      found[rank] = testing::checkAcrossRanks(*g, *rewritten, 7, rank, 2);
      return absl::OkStatus();
    });
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(statuses[rank].ok()) << statuses[rank].message();
      EXPECT_TRUE(verified[rank]) << pipeline << ", rank " << rank;
      EXPECT_EQ(found[rank], "") << pipeline << ", rank " << rank;
    }
  }
}

// Rank 1 returns without running the step: rank 0's wait for its first
// collective is an error naming it, not a hang.
TEST(SimulatedWorldTest, ACollectiveAPeerNeverIssuesIsAnError) {
  auto g = parseOrFail(kStep);
  ASSERT_TRUE(g);
  std::unique_ptr<Graph> rewritten = rewrite(*g, "data-parallel{world=2}");
  SimulatedWorld world(2);
  std::string error;
  auto statuses = world.run([&](int rank) -> absl::Status {
    if (rank == 1)
      return absl::OkStatus();
    WeightStore weights;
    if (auto filled = fillMissingWeights(*rewritten, weights, 0); !filled.ok())
      return filled.status();
    auto inputs = makeExampleInputs(*rewritten, 0);
    if (!inputs.ok())
      return inputs.status();
    auto ran = Executor(*rewritten, weights).run(*inputs);
    if (!ran.ok())
      error = std::string(ran.status().message());
    return absl::OkStatus();
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].message();
  EXPECT_NE(error.find("waits for rank 1, which returned without issuing it"), std::string::npos)
      << error;
}

// Every rank draws the random numbers it would draw alone: the generator's
// state is the rank's own across the hand-over at each collective (rank 1
// seeds and draws while rank 0 waits in the all_reduce).
TEST(SimulatedWorldTest, EachRankDrawsItsOwnRandomNumbers) {
  SimulatedWorld world(2);
  std::vector<at::Tensor> after(2), expected(2);
  auto statuses = world.run([&](int rank) {
    at::manual_seed(100 + rank);
    (void)at::rand({4});
    std::vector<at::Tensor> one{at::ones({1})};
    c10d::resolve_process_group("0")->allreduce(one)->wait();
    EXPECT_EQ(one[0].item<float>(), 2.0f);
    after[rank] = at::rand({4});
    return absl::OkStatus();
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << statuses[rank].message();
    at::manual_seed(100 + rank);
    (void)at::rand({4});
    EXPECT_TRUE(at::equal(after[rank], at::rand({4}))) << "rank " << rank;
  }
}

} // namespace
} // namespace graphopt
