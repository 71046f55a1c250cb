//===- ReinplaceTest.cpp - the reinplace pass -------------------------------===//
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "../BitwiseRewrite.h"
#include "../PassRun.h"
#include "../TestSupport.h"
#include "../ZooArchives.h"

#include <gtest/gtest.h>

using namespace graphopt;
using namespace graphopt::test;

namespace {

/// Runs `pipeline` on `graph`; returns reinplace's statistic `stat`.
int64_t runCounting(Graph &graph, llvm::StringRef pipeline, const std::string &stat) {
  return statistic(*runPipeline(graph, pipeline), "reinplace", stat);
}

const Node *definingNodeOf(const Graph &g, llvm::StringRef name) {
  for (const Node &n : g.nodes())
    for (unsigned o = 0; o < n.numOutputs(); ++o)
      if (n.output(o)->name() == name)
        return &n;
  return nullptr;
}

} // namespace

// A chain reuses one buffer: each step writes the storage the previous one
// made, and the result of the last is what the graph returns.
TEST(ReinplaceTest, ChainsShareOneStorage) {
  auto g = parseOrFail(R"(graph @g {
  input %x : f32[64] user_input
forward:
  %a = aten::exp(%x) : f32[64]
  %b = aten::mul.Tensor(%a, 2) : f32[64]
  %c = aten::sub.Tensor(%b, %x) : f32[64]
  %d = aten::relu(%c) : f32[64]
  output %d user_output
})");
  auto before = LivenessAnalysis::compute(*g);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(runCounting(*g, "reinplace", "reinplaced nodes"), 3);
  EXPECT_TRUE(verifyGraph(*g).ok());
  EXPECT_EQ(definingNodeOf(*g, "a")->opName(), "aten::exp");
  EXPECT_EQ(definingNodeOf(*g, "b")->opName(), "aten::mul_.Tensor");
  EXPECT_EQ(definingNodeOf(*g, "d")->opName(), "aten::relu_");
  auto roots = storageRoots(g->outputs()[0].value);
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0]->name(), "a");
  auto after = LivenessAnalysis::compute(*g);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->peakBytes - after->inputBytes, 64 * 4);
  EXPECT_LT(after->peakBytes, before->peakBytes);
}

// An in-place write must not reach what a later node reads through a view
// taken before the rewrite made the views share a storage (the reason the
// pass merges what it knows of the old result into its new storage).
TEST(ReinplaceTest, ViewOfARewrittenResultKeepsItsValue) {
  auto g = parseOrFail(R"(graph @g {
  input %x : f32[8] user_input
forward:
  %a = aten::exp(%x) : f32[8]
  %t = aten::tanh(%a) : f32[8]
  %view_t = aten::alias(%t) : f32[8]
  %u = aten::add.Tensor(%t, 1) : f32[8]
  %w = aten::mul.Tensor(%view_t, %u) : f32[8]
  output %w user_output
})");
  std::unique_ptr<Graph> original = g->clone();
  runCounting(*g, "reinplace", "reinplaced nodes");
  EXPECT_EQ(definingNodeOf(*g, "t")->opName(), "aten::tanh_");
  EXPECT_EQ(definingNodeOf(*g, "u")->opName(), "aten::add.Tensor"); // %view_t reads %t later
  WeightStore noWeights;
  expectBitwiseSame(*original, *g, noWeights);
}

// On real joint graphs, after checkpointing: bitwise the same outputs and
// gradients, and a simulated peak that is never higher.
class ReinplaceZooTest : public testing::TestWithParam<std::string> {};

TEST_P(ReinplaceZooTest, LowersNoPeakAndVerifiesBitwise) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importModel(absl::StrCat(zooDir(), "/", GetParam(), ".pt2"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::unique_ptr<Graph> original = model->graph->clone();
  std::unique_ptr<Graph> g = original->clone();
  runCounting(*g, "checkpoint{activations=40%,cost=flops,measure=false}", "reinplaced nodes");
  auto before = LivenessAnalysis::compute(*g);
  ASSERT_TRUE(before.ok());
  EXPECT_GT(runCounting(*g, "reinplace", "reinplaced nodes"), 0);
  auto after = LivenessAnalysis::compute(*g);
  ASSERT_TRUE(after.ok());
  EXPECT_LE(after->peakBytes, before->peakBytes);
  expectBitwiseSame(*original, *g, model->weights);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ReinplaceZooTest,
                         testing::Values("mlp-train", "cnn-train", "resnet18-train", "bert-train",
                                         "gpt2-train", "llama-train", "t5-train"),
                         ArchiveName());
