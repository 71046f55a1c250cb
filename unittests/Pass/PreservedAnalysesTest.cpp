//===- PreservedAnalysesTest.cpp - Analyses that survive a pass, and claims checked -===//
//
// The alias facts are cached analyses (AliasAnalysis, StorageRootsAnalysis);
// dce, cse, canonicalize and reinplace preserve the storage roots, and under
// --verify-each a preservation claim is checked against a fresh result.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Pass/GraphOptimizer.h"

#include "../ZooArchives.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <algorithm>

using namespace graphopt;
using graphopt::test::zooDir;

namespace {

std::unique_ptr<Graph> parse(const char *text) {
  auto g = parseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

/// Two equal fresh results, a view of the first returned.
const char *kTwoRelus = R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %b = aten::relu(%x) : f32[2, 3]
  %v = aten::t(%a) : f32[3, 2]
  %s = aten::sum(%b, dtype=None) : f32[]
  output %v user_output
  output %s user_output
})";

/// Moves %a's readers to %b without telling the cached roots, erases %a's
/// node, and says the roots were preserved: a wrong claim.
class WrongClaimPass : public OptimizationPass {
public:
  llvm::StringRef name() const override { return "wrong-claim"; }
  llvm::StringRef description() const override { return "test"; }
  absl::StatusOr<bool> transform(Graph &g, AnalysisManager &) override {
    Value *a = nullptr, *b = nullptr;
    for (Node &n : g.nodes())
      if (n.numOutputs() == 1 && n.output()->name() == "a")
        a = n.output();
      else if (n.numOutputs() == 1 && n.output()->name() == "b")
        b = n.output();
    a->replaceAllUsesWith(b);
    if (absl::Status st = g.eraseNode(a->definingNode()); !st.ok())
      return st;
    return true;
  }
  PreservedAnalyses preservedAnalyses() const override {
    return PreservedAnalyses::none().preserve<StorageRootsAnalysis>();
  }
};

absl::StatusOr<bool> runWithVerifyEach(Graph &g, std::unique_ptr<OptimizationPass> pass,
                                       bool verifyEach) {
  OptimizerOptions options;
  options.verifyEach = verifyEach;
  GraphOptimizer opt(options);
  opt.addPass(std::move(pass));
  return opt.run(g);
}

/// An optimizer for `pipeline` under --verify-each (kept for its cache), and its run on `g`.
struct VerifiedRun {
  std::unique_ptr<GraphOptimizer> opt;
  absl::StatusOr<bool> changed = false;
};
VerifiedRun runVerifyingEach(Graph &g, const char *pipeline) {
  OptimizerOptions options;
  options.verifyEach = true;
  VerifiedRun run{std::make_unique<GraphOptimizer>(options)};
  if (absl::Status st = run.opt->addPipeline(pipeline); !st.ok())
    run.changed = st;
  else
    run.changed = run.opt->run(g);
  return run;
}

} // namespace

TEST(PreservedAnalysesTest, AWrongClaimIsCaughtUnderVerifyEach) {
  auto g = parse(kTwoRelus);
  ASSERT_TRUE(g);
  auto r = runWithVerifyEach(*g, std::make_unique<WrongClaimPass>(), /*verifyEach=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("said it preserved analysis 'storage-roots'"),
            absl::string_view::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("%v lives in %b, not erased value"), absl::string_view::npos)
      << r.status().message();
}

TEST(PreservedAnalysesTest, ACorrectClaimPassesTheCheckAndKeepsTheResult) {
  // cse merges %b into %a (told to the roots), dce and canonicalize find
  // nothing; the roots computed before cse are the ones cached at the end.
  auto g = parse(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %b = aten::relu(%x) : f32[2, 3]
  %v = aten::t(%b) : f32[3, 2]
  %w = aten::neg(%v) : f32[3, 2]
  output %w user_output
})");
  ASSERT_TRUE(g);
  VerifiedRun run = runVerifyingEach(*g, "cse,dce");
  ASSERT_TRUE(run.changed.ok()) << run.changed.status().message();
  EXPECT_TRUE(*run.changed);
  ASSERT_TRUE(run.opt->analyses().isCached<StorageRootsAnalysis>(*g));
  const AliasInfo *roots = run.opt->analyses().getCachedResult<StorageRootsAnalysis>(*g);
  // %v now views %a: the kept roots followed the merge.
  for (const Node &n : g->nodes())
    if (n.output()->name() == "v")
      EXPECT_EQ(roots->roots(n.output())[0]->name(), "a");
}

TEST(PreservedAnalysesTest, PassesThatChangeNothingShareOneAliasAnalysis) {
  // Nothing to merge, fold or erase: cse's alias facts serve canonicalize.
  auto g = parse(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %n = aten::neg(%a) : f32[2, 3]
  output %n user_output
})");
  ASSERT_TRUE(g);
  GraphOptimizer opt;
  ASSERT_TRUE(opt.addPipeline("cse,canonicalize,dce,cse").ok());
  auto r = opt.run(*g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(*r);
  // The storage roots, liveness (cse asks it) and the alias facts, once each.
  EXPECT_EQ(opt.analyses().computations(), 3u);
}

TEST(PreservedAnalysesTest, DceKeepsTheStorageRoots) {
  auto g = parse(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %dead = aten::neg(%a) : f32[2, 3]
  %v = aten::t(%a) : f32[3, 2]
  output %v user_output
})");
  ASSERT_TRUE(g);
  VerifiedRun run = runVerifyingEach(*g, "dce");
  ASSERT_TRUE(run.changed.ok()) << run.changed.status().message();
  EXPECT_TRUE(*run.changed);
  // Computed for the output check before dce, kept after it (and checked
  // against a fresh one, which the manager does not count).
  EXPECT_EQ(run.opt->analyses().computations(), 1u);
  EXPECT_TRUE(run.opt->analyses().isCached<StorageRootsAnalysis>(*g));
}

// On real training graphs, every claim the redundant-op passes and reinplace
// make holds (verify-each checks each against a fresh result).
class PreservedZooTest : public ::testing::TestWithParam<const char *> {};

TEST_P(PreservedZooTest, ClaimsHoldOnTheZoo) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importModel(absl::StrCat(zooDir(), "/", GetParam(), ".pt2"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  VerifiedRun run = runVerifyingEach(*model->graph, "repeat{cse,canonicalize,dce},reinplace");
  ASSERT_TRUE(run.changed.ok()) << run.changed.status().message();
}

INSTANTIATE_TEST_SUITE_P(Zoo, PreservedZooTest,
                         ::testing::Values("mlp-train", "cnn-train", "bert-train", "gpt2-train",
                                           "t5-train"),
                         [](const auto &info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });
