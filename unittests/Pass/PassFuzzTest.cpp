//===- PassFuzzTest.cpp - Every shipped pipeline on random training graphs -===//
//
// The seeded property test of the pass fuzzer (docs/Robustness.md): random
// well-typed training graphs (Testing/RandomGraph.h), each checked as
// Testing/PassProperty.h says (the libFuzzer target fuzz-passes checks the
// same). The graph and pipeline of a failure are printed, ready to be a lit
// regression test; the run ends with the graphs per second, the features
// generated and the refusals by reason.
//
// GRAPHOPT_PASS_FUZZ_GRAPHS sets how many graphs (default 400; make test runs 500, make check 3000 more), and
// GRAPHOPT_PASS_FUZZ_SEED the first seed.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Testing/PassProperty.h"
#include "graphopt/Testing/RandomGraph.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

using namespace graphopt;
using namespace graphopt::testing;

namespace {

uint64_t envNumber(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

/// The floors every fuzz run holds: at least this share of the graphs
/// rewritten and verified by each pipeline, and at most this share whose
/// reference PyTorch itself does not run (each printed).
constexpr double kVerifiedFloor = 0.95, kUnrunnableCeiling = 0.001;

constexpr const char *kVerdictNames[] = {"verified", "refused", "budget unreachable",
                                         "unrunnable", "failed"};
constexpr size_t kNumVerdicts = std::size(kVerdictNames);

struct Tally {
  std::array<uint64_t, kNumFeatures> featureGraphs{};
  /// [pipeline][verdict]: graphs.
  std::vector<std::array<uint64_t, kNumVerdicts>> perPipeline =
      std::vector<std::array<uint64_t, kNumVerdicts>>(shippedPipelines().size());
  std::vector<uint64_t> unrunnableSeeds;
  std::map<std::string, unsigned> refusals;
  unsigned refusedGraphs = 0, budgetRefusedGraphs = 0, failures = 0, rewrites = 0, unrunnable = 0;

  void print(uint64_t graphs, double seconds) const {
    std::cout << "pass fuzzer: " << graphs << " graphs x " << shippedPipelines().size()
              << " pipelines in " << seconds << " s (" << graphs / seconds << " graphs/s), "
              << rewrites << " rewrites verified, " << refusedGraphs
              << " graphs refused by some pipeline, " << budgetRefusedGraphs
              << " with a checkpoint budget no plan reaches, " << unrunnable
              << " generated steps PyTorch does not run\n";
    std::cout << "features (graphs holding each):\n";
    for (size_t f = 0; f < kNumFeatures; ++f)
      std::cout << "  " << featureName(static_cast<Feature>(f)).str() << ": " << featureGraphs[f]
                << "\n";
    std::cout << "per pipeline (graphs):\n";
    for (size_t p = 0; p < perPipeline.size(); ++p) {
      std::cout << "  " << shippedPipelines()[p].pipeline << ":";
      for (size_t v = 0; v < kNumVerdicts; ++v)
        std::cout << " " << kVerdictNames[v] << " " << perPipeline[p][v];
      std::cout << "\n";
    }
    for (uint64_t seed : unrunnableSeeds)
      std::cout << "  unrunnable reference: seed " << seed << "\n";
    std::cout << "refusals by reason:\n";
    for (const auto &[reason, n] : refusals)
      std::cout << "  " << n << "  " << reason << "\n";
  }
};

} // namespace

TEST(PassFuzzTest, EveryPipelineRefusesClearlyOrVerifiesBitwise) {
  const uint64_t graphs = envNumber("GRAPHOPT_PASS_FUZZ_GRAPHS", 400);
  const uint64_t firstSeed = envNumber("GRAPHOPT_PASS_FUZZ_SEED", 1);
  // GRAPHOPT_PASS_FUZZ_SHOW_REFUSED=1 prints each refused graph (to tune the generator).
  const bool showRefused = envNumber("GRAPHOPT_PASS_FUZZ_SHOW_REFUSED", 0) != 0;
  Tally tally;
  auto start = std::chrono::steady_clock::now();

  for (uint64_t seed = firstSeed; seed < firstSeed + graphs && tally.failures < 5; ++seed) {
    Choices choices(seed);
    auto made = makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << "seed " << seed << ": " << made.status().message();
    const Graph &g = *made->graph;
    for (size_t f = 0; f < kNumFeatures; ++f)
      tally.featureGraphs[f] += made->features[f] > 0;
    PropertyOutcome outcome = checkShippedPipelines(g, seed);
    for (const std::string &failure : outcome.failures) {
      ++tally.failures;
      ADD_FAILURE() << "seed " << seed << ", " << failure << "\n" << printGraphToString(g);
    }
    for (const auto &[pipeline, message] : outcome.refusals) {
      ++tally.refusals[absl::StrCat(pipeline, ": ", refusalReason(message))];
      if (showRefused)
        std::cout << "refused, seed " << seed << ", -passes='" << pipeline << "': " << message
                  << "\n" << printGraphToString(g);
    }
    for (size_t p = 0; p < outcome.verdicts.size() && p < tally.perPipeline.size(); ++p)
      ++tally.perPipeline[p][static_cast<size_t>(outcome.verdicts[p])];
    if (outcome.unrunnable)
      tally.unrunnableSeeds.push_back(seed);
    tally.rewrites += outcome.rewrites;
    tally.refusedGraphs += outcome.refused;
    tally.budgetRefusedGraphs += outcome.budgetUnreachable;
    tally.unrunnable += outcome.unrunnable;
  }

  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  tally.print(graphs, seconds);
  for (size_t f = 0; f < kNumFeatures; ++f)
    EXPECT_GT(tally.featureGraphs[f], 0u)
        << "never generated: " << featureName(static_cast<Feature>(f)).str();
  EXPECT_LE(tally.refusedGraphs * 5, graphs) << "more than 20% of the graphs were refused";
  for (size_t p = 0; p < tally.perPipeline.size(); ++p)
    EXPECT_GE(static_cast<double>(tally.perPipeline[p][0]), kVerifiedFloor * graphs)
        << shippedPipelines()[p].pipeline << ": fewer than 95% of the graphs rewritten and verified";
  EXPECT_LE(static_cast<double>(tally.unrunnable), kUnrunnableCeiling * graphs)
      << "more than 0.1% of the generated steps do not run in PyTorch: they test nothing";
}

/// One parameter, one matmul: the add-optimizer reference tests' step.
constexpr const char *kMatmulStep = R"(graph @step {
  input %w : f32[4, 4] parameter "w"
  input %x : f32[4, 4] user_input
forward:
  %h = aten::mm(%x, %w) : f32[4, 4]
  %loss = aten::sum(%h) : f32[]
backward:
  %one = aten::ones_like(%loss) : f32[]
  %gh = aten::expand(%one, [4, 4]) : f32[4, 4]{strides=[0, 0]}
  %xt = aten::t(%x) : f32[4, 4]{strides=[1, 4]}
  %gw = aten::mm(%xt, %gh) : f32[4, 4]
  output %loss loss
  output %gw gradient "w"
})";

// The fuzzer's check of add-optimizer holds it to torch.optim.AdamW, not to
// its own output (the reference once was the graph after the pass, so a
// broken update could not fail): the pass as shipped agrees, and the same
// update with its learning rate scaled by 1.5 (test-perturb-update) does not.
TEST(PassFuzzTest, TheOptimizerStepIsHeldToTorchOptim) {
  auto g = parseGraph(kMatmulStep);
  ASSERT_TRUE(g.ok()) << g.status().message();
  WeightStore weights;
  ASSERT_TRUE(fillMissingWeights(**g, weights, 0).ok());
  std::vector<at::Tensor> inputs = makeExampleInputs(**g, 0).value();
  for (const char *pipeline : {"add-optimizer", "add-optimizer,test-perturb-update"}) {
    std::unique_ptr<Graph> step = (*g)->clone();
    GraphOptimizer optimizer;
    ASSERT_TRUE(optimizer.addPipeline(pipeline).ok());
    ASSERT_TRUE(optimizer.run(*step).ok());
    std::string bad = checkAdamWStep(**g, *step, weights, inputs);
    if (llvm::StringRef(pipeline) == "add-optimizer")
      EXPECT_EQ(bad, "");
    else
      EXPECT_NE(bad.find("parameter 'w' after 1 steps of add-optimizer differs"),
                std::string::npos)
          << bad;
  }
}

// Settings other than the defaults are held to the same settings of
// torch.optim's kernels, over several steps: SGD's momentum only shows from
// the second step (the first copies the gradient into the buffer), so a
// reference at another momentum agrees after one step and not after three.
TEST(PassFuzzTest, TheOptimizerIsHeldToItsOwnSettingsOverSeveralSteps) {
  auto g = parseGraph(kMatmulStep);
  ASSERT_TRUE(g.ok()) << g.status().message();
  WeightStore weights;
  ASSERT_TRUE(fillMissingWeights(**g, weights, 0).ok());
  std::vector<at::Tensor> inputs = makeExampleInputs(**g, 0).value();
  std::unique_ptr<Graph> step = (*g)->clone();
  GraphOptimizer optimizer;
  ASSERT_TRUE(optimizer.addPipeline("add-optimizer{kind=sgd,lr=0.05,momentum=0.5}").ok());
  ASSERT_TRUE(optimizer.run(*step).ok());
  AddOptimizerPass::Hyperparameters asked;
  asked.kind = AddOptimizerPass::Kind::Sgd;
  asked.lr = 0.05;
  asked.momentum = 0.5;
  asked.weightDecay = 0;
  EXPECT_EQ(checkOptimizerSteps(**g, *step, asked, weights, inputs, 3), "");
  AddOptimizerPass::Hyperparameters other = asked;
  other.momentum = 0.9;
  EXPECT_EQ(checkOptimizerSteps(**g, *step, other, weights, inputs, 1), "");
  EXPECT_NE(checkOptimizerSteps(**g, *step, other, weights, inputs, 3)
                .find("parameter 'w' after 3 steps of add-optimizer differs"),
            std::string::npos);
}

// A gradient whose square overflows float32 (inputs of 1e24): torch.optim's
// exp_avg_sq is inf there and the parameter only decays; the reference does
// the same in the parameter's dtype (it once worked in double and expected a
// full step: fuzz-passes under ASan reported the correct pass as wrong).
TEST(PassFuzzTest, TheOptimizerReferenceOverflowsWhereTorchOptimDoes) {
  auto g = parseGraph(kMatmulStep);
  ASSERT_TRUE(g.ok()) << g.status().message();
  WeightStore weights;
  ASSERT_TRUE(fillMissingWeights(**g, weights, 0).ok());
  std::vector<at::Tensor> inputs = makeExampleInputs(**g, 0).value();
  inputs[0].fill_(1e24);
  std::unique_ptr<Graph> step = (*g)->clone();
  GraphOptimizer optimizer;
  ASSERT_TRUE(optimizer.addPipeline("add-optimizer").ok());
  ASSERT_TRUE(optimizer.run(*step).ok());
  EXPECT_EQ(checkAdamWStep(**g, *step, weights, inputs), "");
}

// Two inputs of fuzz-passes whose graphs PyTorch refused (an in-place add
// whose operand was a transpose of the written tensor: a partial overlap), of
// 224 such inputs of the 2026-12-03 ASan run (0.57% of its graphs), and
// seeded graphs that wrote a parameter through a view (autograd refuses an
// in-place write to a leaf that requires grad). The generator follows both of
// PyTorch's rules now: each graph runs, and none writes a parameter.
TEST(PassFuzzTest, GeneratedStepsFollowPyTorchsInPlaceRules) {
  for (std::vector<uint8_t> bytes :
       {std::vector<uint8_t>{0x01, 0x01, 0xc1},
        std::vector<uint8_t>{0x2a, 0x40, 0xff, 0xff, 0xff, 0x2a, 0x3c, 0xff, 0xff, 0xff, 0xff,
                             0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}) {
    Choices choices(bytes);
    auto made = makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    PropertyOutcome outcome = checkShippedPipelines(*made->graph, bytes.size());
    EXPECT_FALSE(outcome.unrunnable) << printGraphToString(*made->graph);
    EXPECT_TRUE(outcome.failures.empty());
  }
  // Of seeds 7..2006, 15 graphs wrote a parameter before the rule; 65052
  // and 123861 did in a copy of a repeated block (whose input became a view
  // of a parameter) before the copies were checked too.
  std::vector<uint64_t> seeds = {65052, 123861};
  for (uint64_t seed = 7; seed < 2007; ++seed)
    seeds.push_back(seed);
  for (uint64_t seed : seeds) {
    Choices choices(seed);
    auto made = makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    const Graph &g = *made->graph;
    const AliasInfo alias(g, AliasFacts::RootsOnly);
    for (const Node &n : g.nodes())
      for (const Value *root : alias.rootsWrittenBy(n))
        EXPECT_FALSE(root->isGraphInput() &&
                     g.inputs()[root->index()].role == InputRole::Parameter)
            << "seed " << seed << ": " << n.describe() << " writes a parameter";
  }
}

// Replays an input of the libFuzzer target fuzz-passes in this (uninstrumented)
// build: GRAPHOPT_PASS_FUZZ_INPUT=<crash file> prints the graph its bytes make
// and checks it as fuzz-passes does, so that a failure can become a lit test.
TEST(PassFuzzTest, ReplaysAFuzzPassesInput) {
  const char *path = std::getenv("GRAPHOPT_PASS_FUZZ_INPUT");
  if (!path || !*path)
    GTEST_SKIP() << "set GRAPHOPT_PASS_FUZZ_INPUT to a fuzz-passes input";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  Choices choices(bytes);
  auto made = makeRandomGraph(choices);
  ASSERT_TRUE(made.ok()) << made.status().message();
  std::cout << printGraphToString(*made->graph);
  PropertyOutcome outcome = checkShippedPipelines(*made->graph, /*seed=*/bytes.size());
  if (outcome.unrunnable)
    std::cout << "unrunnable: PyTorch does not run this graph (it tests no pass)\n";
  for (const std::string &failure : outcome.failures)
    ADD_FAILURE() << failure;
}
