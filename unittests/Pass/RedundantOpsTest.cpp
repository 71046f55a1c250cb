//===- RedundantOpsTest.cpp - cse, dce, repeat and the peak tracker -------===//
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Analysis/PeakTracker.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "../BitwiseRewrite.h"
#include "../PassRun.h"
#include "../ZooArchives.h"

#include <gtest/gtest.h>

#include <random>

using namespace graphopt;
using namespace graphopt::test;

namespace {

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  auto g = parseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

} // namespace

TEST(PeakTrackerTest, AgreesWithATimelineEditedByHand) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> bytes(0, 1000);
  for (int64_t size : {1, 2, 7, 64, 301}) {
    std::vector<int64_t> timeline(size);
    for (int64_t &t : timeline)
      t = bytes(rng);
    PeakTracker tracker(timeline);
    for (int edit = 0; edit < 200; ++edit) {
      std::uniform_int_distribution<int64_t> rank(-2, size + 2);
      int64_t a = rank(rng), b = rank(rng), delta = bytes(rng) - 500;
      tracker.add(a, b, delta);
      for (int64_t i = std::max<int64_t>(a, 0); i <= std::min(b, size - 1); ++i)
        timeline[i] += delta;
      ASSERT_EQ(tracker.peak(), *std::max_element(timeline.begin(), timeline.end()));
      int64_t probe = std::uniform_int_distribution<int64_t>(0, size - 1)(rng);
      ASSERT_EQ(tracker.at(probe), timeline[probe]);
    }
  }
  EXPECT_EQ(PeakTracker({}).peak(), 0);
}

TEST(CSETest, MergesEqualCallsAndRewiresOutputs) {
  auto g = parse(R"(graph @g {
  input %x : f32[4] user_input
forward:
  %a = aten::exp(%x) : f32[4]
  %b = aten::exp(%x) : f32[4]
  %c = aten::add.Tensor(%a, %b) : f32[4]
  output %c user_output
  output %b user_output
})");
  auto opt = runPipeline(*g, "cse");
  EXPECT_EQ(statistic(*opt, "cse", "merged"), 1);
  EXPECT_EQ(g->numNodes(), 2u);
  const Node &add = g->nodes().back();
  EXPECT_EQ(add.arg(0).getValue(), add.arg(1).getValue());
  EXPECT_EQ(g->outputs()[1].value->name(), "a");
}

TEST(CSETest, KeepsRandomWrittenAndSideEffectingCallsApart) {
  auto g = parse(R"(graph @g {
  input %x : f32[4] user_input
forward:
  %r1 = aten::bernoulli.p(%x, 0.5) : f32[4]
  %r2 = aten::bernoulli.p(%x, 0.5) : f32[4]
  %a = aten::exp(%x) : f32[4]
  %w = aten::add_.Scalar(%x, 1) : f32[4]
  %b = aten::exp(%x) : f32[4]
  output %r1 user_output
  output %r2 user_output
  output %a user_output
  output %b user_output
})");
  size_t before = g->numNodes();
  auto opt = runPipeline(*g, "cse");
  EXPECT_EQ(g->numNodes(), before);
  EXPECT_EQ(statistic(*opt, "cse", "refused: random op"), 1);
  EXPECT_EQ(statistic(*opt, "cse", "refused: an operand is written in place between them"), 1);
}

// The peak cse predicts after its merges (a segment tree edited per merge)
// is the peak liveness computes on the graph it leaves, on real graphs where
// merges cross phases and move storages' lifetimes (across-phases=true
// accepts merges that raise the peak, so both directions are exercised).
class CSEZooTest : public testing::TestWithParam<std::string> {};

TEST_P(CSEZooTest, PredictedPeakIsLivenessPeakAndVerifiesBitwise) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importModel(absl::StrCat(zooDir(), "/", GetParam(), ".pt2"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::unique_ptr<Graph> original = model->graph->clone();
  for (const char *pipeline : {"cse{across-phases=true}", "cse"}) {
    std::unique_ptr<Graph> g = original->clone();
    auto opt = runPipeline(*g, pipeline);
    auto liveness = LivenessAnalysis::compute(*g);
    ASSERT_TRUE(liveness.ok()) << liveness.status().message();
    EXPECT_EQ(statistic(*opt, "cse", "simulated peak bytes after"), liveness->peakBytes) << pipeline;
    if (llvm::StringRef(pipeline) == "cse")
      EXPECT_LE(liveness->peakBytes, statistic(*opt, "cse", "simulated peak bytes before"));
    EXPECT_GT(statistic(*opt, "cse", "merged"), 0) << pipeline;
  }
  std::unique_ptr<Graph> g = original->clone();
  runPipeline(*g, "repeat{cse,dce}");
  expectBitwiseSame(*original, *g, model->weights);
}

INSTANTIATE_TEST_SUITE_P(Zoo, CSEZooTest,
                         testing::Values("mlp-train", "cnn-train", "resnet18-train", "bert-train",
                                         "gpt2-train", "llama-train", "t5-train"),
                         ArchiveName());

TEST(DCETest, RemovesDeadChainsAndKeepsEffects) {
  auto g = parse(R"(graph @g {
  input %x : f32[4] user_input
  input %unused : f32[4] user_input
forward:
  %a = aten::exp(%x) : f32[4]
  %b = aten::relu(%a) : f32[4]
  %r = aten::rand_like(%x) : f32[4]
  %w = aten::add_.Scalar(%x, 1) : f32[4]
  %c = aten::sin(%x) : f32[4]
  output %c user_output
})");
  auto opt = runPipeline(*g, "dce");
  EXPECT_EQ(statistic(*opt, "dce", "removed nodes"), 2); // %b, then %a
  EXPECT_EQ(g->numNodes(), 3u);
  EXPECT_EQ(g->inputs().size(), 2u);                     // reported, kept
  EXPECT_EQ(statistic(*opt, "dce", "unused inputs kept"), 1);
  runPipeline(*g, "dce{inputs=true}");
  EXPECT_EQ(g->inputs().size(), 1u);
}

TEST(RepeatTest, RunsToAFixpointAndPrintsItsNestedPipeline) {
  auto g = parse(R"(graph @g {
  input %x : f32[4] user_input
forward:
  %a = aten::exp(%x) : f32[4]
  %b = aten::exp(%x) : f32[4]
  %d = aten::sin(%b) : f32[4]
  output %a user_output
})");
  GraphOptimizer opt;
  ASSERT_TRUE(opt.addPipeline("repeat{max-iterations=4,cse{commutative=false},dce}").ok());
  EXPECT_EQ(opt.pipelineText(), "repeat{max-iterations=4,cse{commutative=false},dce}");
  auto changed = opt.run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(g->numNodes(), 1u);
  EXPECT_EQ(statistic(opt, "repeat", "rounds"), 2);
  // Nested timings follow their group's row, one level deeper.
  ASSERT_GE(opt.timings().size(), 5u);
  EXPECT_EQ(opt.timings()[0].pass, "repeat");
  EXPECT_EQ(opt.timings()[0].depth, 0u);
  EXPECT_EQ(opt.timings()[1].depth, 1u);

  GraphOptimizer bad;
  absl::Status st = bad.addPipeline("cse{dce}");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("runs no nested passes"), std::string::npos) << st.message();
}
