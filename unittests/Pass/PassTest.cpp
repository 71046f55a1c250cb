//===- PassTest.cpp - Registry, pipelines, analysis caching, the optimizer ===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Pass/PassRegistry.h"

#include <gtest/gtest.h>

using namespace graphopt;

namespace {

std::unique_ptr<Graph> smallGraph() {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[2] user_input
  %a = aten::relu(%x) : f32[2]
  %b = aten::neg(%a) : f32[2]
  output %b user_output
})");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

/// Counts nodes; how often it runs shows what the cache does.
struct NodeCount {
  static llvm::StringRef analysisName() { return "node-count"; }
  using Result = size_t;
  static inline int runs = 0;
  static absl::StatusOr<size_t> run(const Graph &g) {
    ++runs;
    return g.numNodes();
  }
};

/// Reads the analysis; if asked to, adds a dead node (a change).
class UsesCountPass : public OptimizationPass {
public:
  explicit UsesCountPass(bool change) : change_(change) {}
  llvm::StringRef name() const override { return change_ ? "erase-last" : "read-count"; }
  llvm::StringRef description() const override { return "test"; }
  absl::Status analyze(const Graph &g, AnalysisManager &am) override {
    auto r = am.get<NodeCount>(g);
    if (!r.ok())
      return r.status();
    seen = **r;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> transform(Graph &g, AnalysisManager &) override {
    if (!change_)
      return false;
    // Add a dead node: the graph changes, the analysis must be recomputed.
    auto n = g.createNode("aten::relu", {Argument::value(g.inputs()[0].value)},
                          {ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2}))});
    if (!n.ok())
      return n.status();
    return true;
  }
  size_t seen = 0;

private:
  bool change_;
};

} // namespace

TEST(PassRegistryTest, CreatesByNameAndListsTheKnownOnesOnError) {
  auto pass = PassRegistry::instance().create("test-count");
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  EXPECT_EQ((*pass)->name(), "test-count");
  auto missing = PassRegistry::instance().create("no-such-pass");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("unknown pass 'no-such-pass'; known passes:"),
            absl::string_view::npos);
  // Test-only passes are registered but not listed.
  bool listed = false;
  for (const auto *e : PassRegistry::instance().entries())
    listed |= e->name == "test-count";
  EXPECT_FALSE(listed);
  bool hiddenListed = false;
  for (const auto *e : PassRegistry::instance().entries(/*includeHidden=*/true))
    hiddenListed |= e->name == "test-count";
  EXPECT_TRUE(hiddenListed);
}

TEST(PipelineTest, ParsesAndPrintsBackTheSameForm) {
  auto p = parsePipeline(" liveness , cse,checkpoint{budget=60%, mode = greedy} ");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[2].name, "checkpoint");
  ASSERT_EQ((*p)[2].options.size(), 2u);
  EXPECT_EQ((*p)[2].options[0], (std::pair<std::string, std::string>{"budget", "60%"}));
  EXPECT_EQ((*p)[2].options[1].second, "greedy");
  std::string printed = printPipeline(*p);
  EXPECT_EQ(printed, "liveness,cse,checkpoint{budget=60%,mode=greedy}");
  auto again = parsePipeline(printed);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(printPipeline(*again), printed);
}

TEST(PipelineTest, RejectsMalformedPipelinesWithAColumn) {
  for (const char *bad : {"", ",", "a,", "a{", "a{b}", "a{b=}", "a{b=1", "a b", "a{=1}"}) {
    auto p = parsePipeline(bad);
    EXPECT_FALSE(p.ok()) << "'" << bad << "' parsed";
    if (!p.ok()) {
      EXPECT_NE(p.status().message().find("pipeline column"), absl::string_view::npos) << bad;
    }
  }
}

TEST(AnalysisManagerTest, CachesUntilAPassChangesTheGraph) {
  auto g = smallGraph();
  NodeCount::runs = 0;
  GraphOptimizer opt;
  auto reader1 = std::make_unique<UsesCountPass>(false);
  auto changer = std::make_unique<UsesCountPass>(true);
  auto reader2 = std::make_unique<UsesCountPass>(false);
  UsesCountPass *r1 = reader1.get(), *r2 = reader2.get();
  opt.addPass(std::move(reader1));
  opt.addPass(std::make_unique<UsesCountPass>(false)); // served from the cache
  opt.addPass(std::move(changer));                     // invalidates
  opt.addPass(std::move(reader2));                     // recomputes
  auto changed = opt.run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(r1->seen, 2u);
  EXPECT_EQ(r2->seen, 3u);
  EXPECT_EQ(NodeCount::runs, 2); // once before the change, once after
  EXPECT_EQ(opt.analyses().computations(), 2u);
  EXPECT_EQ(opt.pipelineText(), "read-count,read-count,erase-last,read-count");
}

TEST(GraphOptimizerTest, BuildsFromTextAndReportsTheFailingPass) {
  auto g = smallGraph();
  GraphOptimizer opt;
  ASSERT_TRUE(opt.addPipeline("test-count{phase=forward},test-fail").ok());
  EXPECT_EQ(opt.pipelineText(), "test-count{phase=forward},test-fail");
  auto r = opt.run(*g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pass 'test-fail' failed after test-count: deliberate failure"),
            absl::string_view::npos)
      << r.status().message();
  EXPECT_EQ(opt.passes()[0]->statistics().at("nodes in phase forward"), 2);
  EXPECT_FALSE(opt.addPipeline("test-count{phase=sideways}").ok());
}

TEST(GraphOptimizerTest, VerifyEachCatchesASilentBreakage) {
  auto g = smallGraph();
  GraphOptimizer lax;
  ASSERT_TRUE(lax.addPipeline("test-break-names").ok());
  EXPECT_TRUE(lax.run(*g).ok()); // it claimed no change, so nothing verified it

  auto g2 = smallGraph();
  OptimizerOptions strict;
  strict.verifyEach = true;
  GraphOptimizer checked(strict);
  ASSERT_TRUE(checked.addPipeline("test-break-names").ok());
  auto r = checked.run(*g2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("value name is not unique"), absl::string_view::npos);
}
