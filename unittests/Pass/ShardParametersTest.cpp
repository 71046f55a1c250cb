//===- ShardParametersTest.cpp - shard-parameters' plan and rewiring -----===//
//
// What lit's FileCheck lines do not state: keep= holds the gathers with the
// shortest wait between forward and backward first; a parameter gathered
// again leaves nothing of its forward gather to backward (so liveness frees
// it after forward); no whole parameter stays an input; every collective
// names the world size; the outputs share no storage; and the graph passes
// the structural verifier. The run itself needs ranks:
// python/tests/test_distributed.py.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/Collectives.h"
#include "graphopt/Runtime/FreePolicy.h"
#include "graphopt/Runtime/ParameterShards.h"
#include "../TestSupport.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace graphopt;
using namespace graphopt::test;

namespace {

// %a is read first in forward and last in backward (a long wait), %b last in
// forward and first in backward (a short one); backward reads a's transpose,
// a view made in forward. 5 elements each: padded to 6 over 2 ranks.
constexpr const char *kStep = R"(graph @step {
  input %a : f32[5, 1] parameter "a"
  input %b : f32[5] parameter "b"
  input %x : f32[5] user_input
forward:
  %at = aten::t(%a) : f32[1, 5]{strides=[1, 1]}
  %av = aten::view(%at, [5]) : f32[5]
  %h = aten::mul.Tensor(%x, %av) : f32[5]
  %y = aten::mul.Tensor(%h, %b) : f32[5]
  %loss = aten::sum(%y) : f32[]
backward:
  %one = aten::ones_like(%loss) : f32[]
  %gy = aten::expand(%one, [5]) : f32[5]{strides=[0]}
  %gh = aten::mul.Tensor(%gy, %b) : f32[5]
  %gb = aten::mul.Tensor(%gy, %h) : f32[5]
  %gav = aten::mul.Tensor(%gh, %x) : f32[5]
  %gx = aten::mul.Tensor(%gh, %av) : f32[5]
  %ga = aten::view(%gav, [5, 1]) : f32[5, 1]
  output %loss loss
  output %ga gradient "a"
  output %gb gradient "b"
  output %gx user_output
})";

std::unique_ptr<Graph> rewritten(const std::string &pipeline) {
  auto g = parseOrFail(kStep);
  GraphOptimizer optimizer;
  EXPECT_TRUE(optimizer.addPipeline(pipeline).ok());
  auto run = optimizer.run(*g);
  EXPECT_TRUE(run.ok()) << run.status();
  return g;
}

/// The parameters gathered again for backward.
std::set<std::string> gatheredAgain(const Graph &g) {
  std::set<std::string> names;
  for (const Node &n : g.nodes())
    if (n.opName() == "_c10d_functional::all_gather_into_tensor" && n.phase() == Phase::Backward)
      names.insert(parseShardTarget(g.inputs()[n.arg(0).getValue()->index()].target)->parameter);
  return names;
}

TEST(ShardParametersTest, KeepHoldsTheShortestWaitFirst) {
  EXPECT_EQ(gatheredAgain(*rewritten("shard-parameters{world=2}")),
            (std::set<std::string>{"a", "b"}));
  // One gathered buffer's worth (6 floats): b's wait is the shorter.
  EXPECT_EQ(gatheredAgain(*rewritten("shard-parameters{world=2,keep=24}")),
            (std::set<std::string>{"a"}));
  EXPECT_TRUE(gatheredAgain(*rewritten("shard-parameters{world=2,keep=100%}")).empty());
}

TEST(ShardParametersTest, BackwardReadsNothingOfAForwardGatherItGathersAgain) {
  auto g = rewritten("shard-parameters{world=2}");
  // Every value made in forward from a gather (the gather, its wait, cut,
  // view, and the parameter's views t and view) stays in forward.
  std::set<const Value *> fromGather;
  for (const Node &n : g->nodes()) {
    if (n.phase() != Phase::Forward)
      continue;
    bool gathered = n.opName() == "_c10d_functional::all_gather_into_tensor";
    for (unsigned i = 0; i < n.numArgs(); ++i)
      if (n.arg(i).isValue() && fromGather.count(n.arg(i).getValue()) &&
          opEffects(n).isView())
        gathered = true;
    if (n.opName() == "_c10d_functional::wait_tensor" && fromGather.count(n.arg(0).getValue()))
      gathered = true;
    if (gathered)
      for (unsigned o = 0; o < n.numOutputs(); ++o)
        fromGather.insert(n.output(o));
  }
  EXPECT_GE(fromGather.size(), 8u);
  for (const Node &n : g->nodes()) {
    if (n.phase() != Phase::Backward)
      continue;
    for (unsigned i = 0; i < n.numArgs(); ++i) {
      if (!n.arg(i).isValue())
        continue;
      EXPECT_FALSE(fromGather.count(n.arg(i).getValue()))
          << n.describe() << " reads the forward gather's " << n.arg(i).getValue()->name().str();
    }
  }
}

TEST(ShardParametersTest, ShardsReplaceTheWholeParameters) {
  auto g = rewritten("shard-parameters{world=2}");
  for (const GraphInput &in : g->inputs()) {
    if (in.role != InputRole::Parameter)
      continue;
    auto shard = parseShardTarget(in.target);
    ASSERT_TRUE(shard) << in.target;
    EXPECT_EQ(shard->group, "0");
    EXPECT_EQ(in.value->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{3}));
  }
  for (const Node &n : g->nodes()) {
    if (n.opName() == "_c10d_functional::all_gather_into_tensor") {
      EXPECT_EQ(n.arg(1).getConstant().asInt(), 2) << n.describe();
    } else if (n.opName() == "_c10d_functional::reduce_scatter_tensor") {
      EXPECT_EQ(n.arg(2).getConstant().asInt(), 2) << n.describe();
    }
  }
  // The user output is untouched; the gradients are shards.
  EXPECT_EQ(g->outputs()[3].value->name(), "gx");
  EXPECT_EQ(g->outputs()[1].value->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{3}));
  AliasInfo alias(*g);
  const auto &outs = g->outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = i + 1; j < outs.size(); ++j)
      EXPECT_FALSE(alias.mayShareStorage(outs[i].value, outs[j].value))
          << outs[i].value->name().str() << " and " << outs[j].value->name().str();
  EXPECT_TRUE(verifyGraph(*g).ok());
}

TEST(ShardParametersTest, AReduceScatterHoldsItsInputUntilItsWait) {
  // The executor's free policy and liveness keep the whole gradient alive
  // until the wait (the backend holds it that long), not only to the call.
  auto g = rewritten("shard-parameters{world=2}");
  ValueMap<const Node *> lastUser = computeLastUsers(*g);
  unsigned checked = 0;
  for (const Node &n : g->nodes())
    if (n.opName() == "_c10d_functional::reduce_scatter_tensor") {
      const Node *last = lastUser.lookup(n.arg(0).getValue());
      ASSERT_TRUE(last);
      EXPECT_TRUE(isWait(*last)) << n.describe() << ": " << last->describe();
      EXPECT_EQ(last->arg(0).getValue(), n.output(0));
      ++checked;
    }
  EXPECT_EQ(checked, 2u);
}

TEST(ShardParametersTest, TiedParametersAreGatheredOnceWithTiedShards) {
  auto g = parseOrFail(R"(graph @tied {
  input %a : f32[3, 3] parameter "a"
  input %b : f32[3, 3] parameter "b" tied %a
  input %x : f32[2, 3] user_input
forward:
  %h = aten::mm(%x, %a) : f32[2, 3]
  %y = aten::mm(%h, %b) : f32[2, 3]
  %loss = aten::sum(%y) : f32[]
backward:
  %one = aten::ones_like(%y) : f32[2, 3]
  %ht = aten::t(%h) : f32[3, 2]{strides=[1, 3]}
  %gb = aten::mm(%ht, %one) : f32[3, 3]
  %xt = aten::t(%x) : f32[3, 2]{strides=[1, 3]}
  %ga = aten::mm(%xt, %one) : f32[3, 3]
  output %loss loss
  output %ga gradient "a"
  output %gb gradient "b"
})");
  GraphOptimizer optimizer;
  ASSERT_TRUE(optimizer.addPipeline("shard-parameters{world=2}").ok());
  auto run = optimizer.run(*g);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(g->inputs().size(), 3u);
  const GraphInput &owner = g->inputs()[1], &tied = g->inputs()[2];
  EXPECT_EQ(owner.target, "a@shard:0");
  EXPECT_EQ(tied.target, "b@shard:0");
  EXPECT_EQ(g->storageOwner(tied.value), owner.value);
  unsigned gathers = 0, scatters = 0;
  for (const Node &n : g->nodes()) {
    gathers += n.opName() == "_c10d_functional::all_gather_into_tensor";
    scatters += n.opName() == "_c10d_functional::reduce_scatter_tensor";
  }
  EXPECT_EQ(gathers, 1u); // one storage; backward reads neither parameter
  EXPECT_EQ(scatters, 2u); // each gradient its own
  EXPECT_EQ(g->outputs()[1].target, "a@shard:0");
  EXPECT_EQ(g->outputs()[2].target, "b@shard:0");
  EXPECT_TRUE(verifyGraph(*g).ok());
}

TEST(ShardParametersTest, ShardTargetsParseBack) {
  EXPECT_EQ(shardTarget("layer.0.weight", "7"), "layer.0.weight@shard:7");
  auto parsed = parseShardTarget("layer.0.weight@shard:7");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->parameter, "layer.0.weight");
  EXPECT_EQ(parsed->group, "7");
  EXPECT_FALSE(parseShardTarget("layer.0.weight"));
  EXPECT_FALSE(parseShardTarget("@shard:0"));
  EXPECT_FALSE(parseShardTarget("w@shard:"));
  EXPECT_EQ(shardElements(5, 2), 3);
  EXPECT_EQ(shardElements(4, 2), 2);
}

} // namespace
