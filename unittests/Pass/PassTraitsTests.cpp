//===- PassTraitsTests.cpp - What a pass declares reaches the places that ask ===//
//
// A pass declares once, in its class, whether it runs inside torch.compile and
// the pipelines the pass fuzzer checks it in (PassTraits.h); the registry
// keeps it. Here passes are registered at run time, as a pass from outside
// this repository would be, and nothing else is changed: each is listed, its
// pipelines are fuzzed, and a wrong rewrite in one is caught.
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Testing/PassProperty.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <algorithm>

using namespace graphopt;
using namespace graphopt::testing;

namespace {

// Two parameters of one shape: two gradients a wrong pass can merge.
const char *kTwoParameters = R"(graph @two {
  input %w1 : f32[4] parameter "w1"
  input %w2 : f32[4] parameter "w2"
  input %x : f32[4] user_input
forward:
  %a = aten::mul.Tensor(%x, %w1) : f32[4]
  %b = aten::mul.Tensor(%a, %w2) : f32[4]
  %loss = aten::sum(%b) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [4]) : f32[4]{strides=[0]}
  %gw2 = aten::mul.Tensor(%ge, %a) : f32[4]
  %ga = aten::mul.Tensor(%ge, %w2) : f32[4]
  %gw1 = aten::mul.Tensor(%ga, %x) : f32[4]
  output %loss loss
  output %gw1 gradient "w1"
  output %gw2 gradient "w2"
})";

class NoChangePass : public OptimizationPass {
public:
  llvm::StringRef name() const override { return "test-traits-no-change"; }
  llvm::StringRef description() const override { return "test only: changes nothing"; }
};

bool hasPipeline(const std::vector<PipelineCase> &pipelines, llvm::StringRef text) {
  return std::any_of(pipelines.begin(), pipelines.end(),
                     [&](const PipelineCase &pc) { return pc.pipeline == text; });
}

} // namespace

TEST(PassTraitsTest, APassRegisteredWithItsTraitsIsListedAndFuzzed) {
  PassRegistry &registry = PassRegistry::instance();
  // A pass that changes nothing, and one whose rewrite is wrong (the hidden
  // test pass that makes two gradients one value), each declaring a pipeline.
  registry.add({"test-traits-no-change", "test only: changes nothing",
                [] { return std::make_unique<NoChangePass>(); }, /*hidden=*/false,
                PassTraits{/*insideCompile=*/true, "", {{"test-traits-no-change"}}}});
  registry.add({"test-traits-merge-outputs", "test only: make two gradient outputs one value",
                [] { return *PassRegistry::instance().create("test-merge-outputs"); },
                /*hidden=*/false, PassTraits{false, "", {{"test-traits-merge-outputs"}}}});
  const std::vector<PipelineCase> pipelines = shippedPipelines();
  const PassRegistry::Entry *listed = registry.find("test-traits-no-change");
  const bool insideCompile = listed && listed->traits.insideCompile;
  const std::vector<const PassRegistry::Entry *> entries = registry.entries();
  const bool inEntries = std::any_of(entries.begin(), entries.end(), [](const auto *e) {
    return e->name == "test-traits-no-change";
  });
  auto graph = parseGraph(kTwoParameters, "two.gir");
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  PropertyOutcome outcome = checkShippedPipelines(**graph, /*seed=*/1);
  ASSERT_TRUE(registry.remove("test-traits-no-change"));
  ASSERT_TRUE(registry.remove("test-traits-merge-outputs"));

  EXPECT_TRUE(insideCompile);
  EXPECT_TRUE(inEntries);
  EXPECT_TRUE(hasPipeline(pipelines, "test-traits-no-change"));
  EXPECT_TRUE(hasPipeline(pipelines, "test-traits-merge-outputs"));
  EXPECT_EQ(outcome.verdicts.size(), pipelines.size());
  std::vector<std::string> caught;
  for (const std::string &failure : outcome.failures) {
    EXPECT_EQ(failure.rfind("-passes='test-traits-merge-outputs'", 0), 0u) << failure;
    caught.push_back(failure);
  }
  EXPECT_FALSE(caught.empty()) << "the wrong rewrite was not caught";
  // Gone again once removed.
  EXPECT_FALSE(hasPipeline(shippedPipelines(), "test-traits-no-change"));
  EXPECT_EQ(registry.find("test-traits-no-change"), nullptr);
}

// The shipped passes declare what the fuzzer and torch.compile used to list
// apart (lib/Testing's kPipelines, joint.py's _PLANNING_PASSES).
TEST(PassTraitsTest, TheShippedPassesDeclareWhereTheyRun) {
  PassRegistry &registry = PassRegistry::instance();
  for (const char *name : {"cse", "canonicalize", "dce", "repeat", "checkpoint", "liveness"}) {
    ASSERT_NE(registry.find(name), nullptr) << name;
    EXPECT_TRUE(registry.find(name)->traits.insideCompile) << name;
  }
  for (const char *name : {"reinplace", "profile", "add-optimizer", "data-parallel"})
    EXPECT_FALSE(registry.find(name)->traits.insideCompile) << name;
  EXPECT_NE(registry.find("reinplace")->traits.notInsideCompile.find("Inductor"),
            std::string::npos);
  const std::vector<PipelineCase> pipelines = shippedPipelines();
  for (const char *pipeline : {"repeat{cse,canonicalize,dce}", "reinplace", "add-optimizer",
                               "checkpoint{activations=30%,cost=flops,unmet=closest}",
                               "data-parallel{world=2,bucket=256}", "shard-parameters{world=2}"})
    EXPECT_TRUE(hasPipeline(pipelines, pipeline)) << pipeline;
  EXPECT_EQ(pipelines.size(), 12u);
}
