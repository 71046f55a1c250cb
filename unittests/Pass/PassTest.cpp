//===- PassTest.cpp - Registry, pipelines, analysis caching, the optimizer ===//
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Support/Bytes.h"

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
    auto r = am.getResult<NodeCount>(g);
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

TEST(PipelineTest, NestsEntriesInBracesBesideOptions) {
  auto p = parsePipeline("liveness, repeat{max-iterations=3, cse, canonicalize{max-rewrites=9}, dce}, x");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 3u);
  const PipelineEntry &r = (*p)[1];
  EXPECT_EQ(r.name, "repeat");
  ASSERT_EQ(r.options.size(), 1u);
  EXPECT_EQ(r.options[0].second, "3");
  ASSERT_EQ(r.nested.size(), 3u);
  EXPECT_EQ(r.nested[1].name, "canonicalize");
  ASSERT_EQ(r.nested[1].options.size(), 1u);
  EXPECT_EQ(r.nested[2].name, "dce");
  EXPECT_EQ(printPipeline(*p), "liveness,repeat{max-iterations=3,cse,canonicalize{max-rewrites=9},dce},x");
}

TEST(PipelineTest, RejectsMalformedPipelinesWithAColumn) {
  for (const char *bad : {"", ",", "a,", "a{", "a{b", "a{b,}", "a{b{}", "a{b=}", "a{b=1", "a b", "a{=1}"}) {
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
  // And the storage roots the output-sharing check asks, before and after.
  EXPECT_EQ(opt.analyses().computations(), 4u);
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
  EXPECT_EQ(opt.passes()[0]->statistics().at("nodes in phase forward").value, 2);
  EXPECT_FALSE(opt.addPipeline("test-count{phase=sideways}").ok());
}

TEST(GraphOptimizerTest, NoPassRunsOnAGraphWithATypeConflict) {
  auto g = smallGraph();
  g->addTypeConflict("node %y = aten::relu: result %y is declared f32[2] but the CPU kernel "
                     "makes f32[3], and a graph output reads it as declared");
  GraphOptimizer opt;
  ASSERT_TRUE(opt.addPipeline("test-count").ok());
  auto r = opt.run(*g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("pass 'test-count' refused @"), absl::string_view::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("node %y = aten::relu"), absl::string_view::npos);
  EXPECT_EQ(opt.passes()[0]->statistics().count("nodes in phase forward"), 0u);
  // An empty pipeline changes nothing and relies on nothing.
  GraphOptimizer none;
  EXPECT_TRUE(none.run(*g).ok());
}

TEST(GraphOptimizerTest, ABrokenGraphIsCaughtAfterThePass) {
  auto g = smallGraph();
  GraphOptimizer lax;
  ASSERT_TRUE(lax.addPipeline("test-break-names").ok());
  auto r = lax.run(*g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("value name is not unique"), absl::string_view::npos);
}

TEST(GraphOptimizerTest, APassThatEditsAndSaysItDidNotFailsInEveryBuild) {
  for (bool verifyEach : {false, true}) {
    auto g = smallGraph();
    OptimizerOptions options;
    options.verifyEach = verifyEach;
    GraphOptimizer opt(options);
    ASSERT_TRUE(opt.addPipeline("test-count,test-silent-edit").ok());
    // test-count caches nothing, but a result cached before must go.
    ASSERT_TRUE(opt.analyses().getResult<NodeCount>(*g).ok());
    auto r = opt.run(*g);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(
                  "pass 'test-silent-edit' failed after test-count: it reported no change but "
                  "edited the graph"),
              absl::string_view::npos)
        << r.status().message();
    EXPECT_FALSE(opt.analyses().isCached<NodeCount>(*g));
  }
}

TEST(AnalysisManagerTest, AResultComputedBeforeAnEditIsNeverServed) {
  auto g = smallGraph();
  AnalysisManager am;
  NodeCount::runs = 0;
  auto before = am.getResult<NodeCount>(*g);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(**before, 2u);
  // An edit nobody reported to the manager.
  ASSERT_TRUE(g->createNode("aten::relu", {Argument::value(g->inputs()[0].value)},
                            {ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2}))})
                  .ok());
  EXPECT_FALSE(am.isCached<NodeCount>(*g));
  EXPECT_EQ(am.getLatestCachedResult<NodeCount>(*g), nullptr);
  auto after = am.getResult<NodeCount>(*g);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(**after, 3u);
  EXPECT_EQ(NodeCount::runs, 2);
  // What a pass preserved is stamped with the graph as the pass left it.
  g->nodes().front().setAttr("note", Constant::ofBool(true));
  am.invalidate(*g, PreservedAnalyses::all());
  EXPECT_TRUE(am.isCached<NodeCount>(*g));
}

// --- typed, keyed, preservable analyses ---------------------------------------

namespace {

/// A base analysis, and one computed from it (it asks the manager for it).
struct BaseCount {
  static llvm::StringRef analysisName() { return "base-count"; }
  using Result = size_t;
  static inline int runs = 0;
  static absl::StatusOr<size_t> run(const Graph &g) {
    ++runs;
    return g.numNodes();
  }
};
struct Derived {
  static llvm::StringRef analysisName() { return "derived"; }
  using Result = size_t;
  struct Options {
    size_t factor = 1;
    std::string cacheKey() const { return std::to_string(factor); }
  };
  static inline int runs = 0;
  static absl::StatusOr<size_t> run(const Graph &g, AnalysisManager &am, const Options &o) {
    ++runs;
    auto base = am.getResult<BaseCount>(g);
    if (!base.ok())
      return base.status();
    return **base * o.factor;
  }
};
/// Unrelated to the others.
struct Other {
  static llvm::StringRef analysisName() { return "other"; }
  using Result = int;
  static absl::StatusOr<int> run(const Graph &) { return 7; }
};

} // namespace

TEST(AnalysisManagerTest, OptionsArePartOfTheKey) {
  auto g = smallGraph();
  AnalysisManager am;
  Derived::runs = 0;
  auto one = am.getResult<Derived>(*g, {1});
  auto three = am.getResult<Derived>(*g, {3});
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(**one, 2u);
  EXPECT_EQ(**three, 6u);
  EXPECT_EQ(Derived::runs, 2);
  auto again = am.getResult<Derived>(*g, {3});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *three);
  EXPECT_EQ(Derived::runs, 2);
  EXPECT_TRUE(am.isCached<Derived>(*g, {1}));
  EXPECT_FALSE(am.isCached<Derived>(*g, {2}));
  EXPECT_EQ(*am.getLatestCachedResult<Derived>(*g), 6u);
}

TEST(AnalysisManagerTest, ResultsBelongToOneGraphNotAnAddress) {
  auto g = smallGraph();
  AnalysisManager am;
  ASSERT_TRUE(am.getResult<BaseCount>(*g).ok());
  EXPECT_TRUE(am.isCached<BaseCount>(*g));
  auto copy = g->clone();
  EXPECT_NE(copy->uid(), g->uid());
  EXPECT_FALSE(am.isCached<BaseCount>(*copy));
  // A graph made where a destroyed one lived is another graph.
  uint64_t oldUid = g->uid();
  g.reset();
  auto fresh = smallGraph();
  EXPECT_NE(fresh->uid(), oldUid);
  EXPECT_FALSE(am.isCached<BaseCount>(*fresh));
}

TEST(AnalysisManagerTest, InvalidationFollowsPreservationAndDependants) {
  auto g = smallGraph();
  AnalysisManager am;
  ASSERT_TRUE(am.getResult<Derived>(*g, {2}).ok()); // computes BaseCount too
  ASSERT_TRUE(am.getResult<Other>(*g).ok());
  ASSERT_EQ(am.numCached(), 3u);

  am.invalidate(*g, PreservedAnalyses::all());
  EXPECT_EQ(am.numCached(), 3u);

  // Derived preserved, but what it was computed from is not: both go.
  am.invalidate(*g, PreservedAnalyses::none().preserve<Derived>().preserve<Other>());
  EXPECT_FALSE(am.isCached<BaseCount>(*g));
  EXPECT_FALSE(am.isCached<Derived>(*g, {2}));
  EXPECT_TRUE(am.isCached<Other>(*g));

  // The base preserved, the derived one not: only the derived one goes.
  ASSERT_TRUE(am.getResult<Derived>(*g, {2}).ok());
  am.invalidate(*g, PreservedAnalyses::none().preserve<BaseCount>());
  EXPECT_TRUE(am.isCached<BaseCount>(*g));
  EXPECT_FALSE(am.isCached<Derived>(*g, {2}));
  EXPECT_FALSE(am.isCached<Other>(*g));
}

namespace {
/// Adds a dead node (a change) and preserves what it is told to.
class AddNodePass : public OptimizationPass {
public:
  explicit AddNodePass(PreservedAnalyses preserved) : preserved_(std::move(preserved)) {}
  llvm::StringRef name() const override { return "add-node"; }
  llvm::StringRef description() const override { return "test"; }
  absl::StatusOr<bool> transform(Graph &g, AnalysisManager &) override {
    auto n = g.createNode("aten::relu", {Argument::value(g.inputs()[0].value)},
                          {ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2}))});
    if (!n.ok())
      return n.status();
    return true;
  }
  PreservedAnalyses preservedAnalyses() const override { return preserved_; }

private:
  PreservedAnalyses preserved_;
};
} // namespace

TEST(GraphOptimizerTest, APassThatPreservesAnAnalysisLeavesItCached) {
  auto g = smallGraph();
  GraphOptimizer keeps;
  keeps.addPass(std::make_unique<AddNodePass>(PreservedAnalyses::none().preserve<BaseCount>()));
  ASSERT_TRUE(keeps.analyses().getResult<Derived>(*g, {1}).ok());
  ASSERT_TRUE(keeps.run(*g).ok());
  EXPECT_TRUE(keeps.analyses().isCached<BaseCount>(*g));
  EXPECT_FALSE(keeps.analyses().isCached<Derived>(*g, {1}));

  GraphOptimizer drops;
  drops.addPass(std::make_unique<AddNodePass>(PreservedAnalyses::none()));
  ASSERT_TRUE(drops.analyses().getResult<Derived>(*g, {1}).ok());
  ASSERT_TRUE(drops.run(*g).ok());
  EXPECT_FALSE(drops.analyses().isCached<BaseCount>(*g));
  // Only what the output-sharing check computed after the change is cached.
  EXPECT_EQ(drops.analyses().numCached(), 1u);
  EXPECT_TRUE(drops.analyses().isCached<StorageRootsAnalysis>(*g));
}

TEST(GraphOptimizerTest, EachRunReportsItsOwnStatistics) {
  auto g = smallGraph();
  GraphOptimizer opt;
  ASSERT_TRUE(opt.addPipeline("liveness,test-count").ok());
  ASSERT_TRUE(opt.run(*g).ok());
  int64_t peak = opt.passes()[0]->statistics().at("peak bytes (simulated)").value;
  ASSERT_TRUE(opt.run(*g).ok());
  EXPECT_EQ(opt.passes()[0]->statistics().at("peak bytes (simulated)").value, peak);
  EXPECT_TRUE(opt.passes()[0]->statistics().at("peak bytes (simulated)").gauge);
  // A second run of the pipeline counts its own nodes, not both runs' (the
  // rounds of repeat{} are one run).
  EXPECT_EQ(opt.passes()[1]->statistics().at("nodes in phase all").value, 2);
}

// --- typed options ---------------------------------------------------------------

namespace {
enum class Mode { Fast, Exact };
class OptionsPass : public OptimizationPass {
public:
  llvm::StringRef name() const override { return "opts"; }
  llvm::StringRef description() const override { return "test"; }
  PassOption<bool> flag{this, "flag", "a flag", false};
  PassOption<int64_t> count{this, "count", "a count", 3};
  PassOption<double> ratio{this, "ratio", "a ratio", 0.5};
  PassOption<Mode> mode{this, "mode", "a mode", Mode::Fast, {{"fast", Mode::Fast}, {"exact", Mode::Exact}}};
  PassOption<MemoryAmount> budget{this, "budget", "memory", MemoryAmount::percent(100)};
};
} // namespace

TEST(PassOptionTest, ParsesValidatesAndPrintsBack) {
  OptionsPass p;
  EXPECT_TRUE(p.options().empty()); // all defaults
  ASSERT_TRUE(p.setOptions({{"mode", "exact"}, {"budget", "1.5GiB"}, {"flag", "true"}, {"ratio", "0.25"}}).ok());
  EXPECT_TRUE(p.flag);
  EXPECT_EQ(p.mode.get(), Mode::Exact);
  EXPECT_EQ(p.budget.get().byteValue(), int64_t(3) << 29);
  // Declaration order, non-default only, and it parses back to the same.
  PassOptions printed = p.options();
  EXPECT_EQ(printed, (PassOptions{{"flag", "true"}, {"ratio", "0.25"}, {"mode", "exact"}, {"budget", "1536MiB"}}));
  OptionsPass q;
  ASSERT_TRUE(q.setOptions(printed).ok());
  EXPECT_EQ(q.options(), printed);

  auto error = [](const PassOptions &o) {
    OptionsPass r;
    absl::Status st = r.setOptions(o);
    return std::string(st.message());
  };
  EXPECT_EQ(error({{"mode", "slow"}}), "pass 'opts': option 'mode' must be fast or exact, got 'slow'");
  EXPECT_EQ(error({{"count", "x"}}), "pass 'opts': option 'count' must be an integer, got 'x'");
  EXPECT_EQ(error({{"flag", "maybe"}}), "pass 'opts': option 'flag' must be true or false, got 'maybe'");
  EXPECT_NE(error({{"budget", "12 parsecs"}}).find("pass 'opts': option 'budget' '12 parsecs': unknown unit 'parsecs'"),
            std::string::npos)
      << error({{"budget", "12 parsecs"}});
  EXPECT_NE(error({{"colour", "red"}}).find("pass 'opts' has no option 'colour'; it has: flag=true|false"),
            std::string::npos);
}

namespace {
class OptionalOptionsPass : public OptimizationPass {
public:
  llvm::StringRef name() const override { return "optional-opts"; }
  llvm::StringRef description() const override { return "test"; }
  PassOption<std::optional<double>> rate{this, "rate", "unset: the pass decides", std::nullopt};
};
} // namespace

TEST(PassOptionTest, AnOptionalOptionTellsGivenFromLeftOut) {
  OptionalOptionsPass p;
  EXPECT_FALSE(p.rate.get().has_value());
  EXPECT_TRUE(p.options().empty());
  EXPECT_EQ(p.rate.printDefault(), "unset");
  EXPECT_EQ(p.rate.accepts(), "a number");
  // Given, even with the value the pass would pick itself, it prints back.
  ASSERT_TRUE(p.setOptions({{"rate", "0"}}).ok());
  ASSERT_TRUE(p.rate.get().has_value());
  EXPECT_EQ(*p.rate.get(), 0.0);
  EXPECT_EQ(p.options(), (PassOptions{{"rate", "0"}}));
  // Setting options again starts from the defaults.
  ASSERT_TRUE(p.setOptions({}).ok());
  EXPECT_FALSE(p.rate.get().has_value());
  OptionalOptionsPass q;
  EXPECT_EQ(std::string(q.setOptions({{"rate", "fast"}}).message()),
            "pass 'optional-opts': option 'rate' must be a number, got 'fast'");
}

TEST(PassOptionTest, MemoryAmountsParseInOnePlace) {
  auto bytes = [](const char *s) {
    auto m = MemoryAmount::parse(s);
    EXPECT_TRUE(m.ok()) << s << ": " << m.status().message();
    return m.ok() ? m->resolve(1000) : -1;
  };
  EXPECT_EQ(bytes("4096"), 4096);
  EXPECT_EQ(bytes("4096B"), 4096);
  EXPECT_EQ(bytes("2GiB"), int64_t(2) << 30);
  EXPECT_EQ(bytes("1.5 GB"), 1500000000);
  EXPECT_EQ(bytes("512KiB"), 512 * 1024);
  EXPECT_EQ(bytes("60%"), 600);
  EXPECT_EQ(bytes("12.5%"), 125);
  for (const char *bad : {"", "%", "-1GiB", "2 parsecs", "GiB", "1e400", "abc%"})
    EXPECT_FALSE(MemoryAmount::parse(bad).ok()) << bad;
  EXPECT_EQ(MemoryAmount::parse("60%")->str(), "60%");
  EXPECT_EQ(MemoryAmount::parse("2GiB")->str(), "2GiB");
  EXPECT_EQ(MemoryAmount::parse("1000")->str(), "1000");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(int64_t(3) << 30), "3.00 GiB");
}
