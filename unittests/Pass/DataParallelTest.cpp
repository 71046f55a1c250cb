//===- DataParallelTest.cpp - data-parallel's buckets and rewiring --------===//
//
// What lit's FileCheck lines do not state: one bucket per dtype, a gradient
// output named twice (tied parameters) averaged once, backward readers keep
// the local gradient, a gradient that is a graph input left alone, and the
// rewritten graph passes the structural verifier with its outputs sharing no
// storage. The run itself needs ranks: python/tests/test_distributed.py.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "../TestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using namespace graphopt;
using namespace graphopt::test;

namespace {

// Two f32 gradients and one f64, one f32 gradient output twice (for two
// parameters), one
// read again in backward, and a gradient that is a graph input.
constexpr const char *kStep = R"(graph @step {
  input %a : f32[8] parameter "a"
  input %b : f32[8] parameter "b"
  input %c : f64[8] parameter "c"
  input %d : f32[8] parameter "d"
  input %e : f32[8] parameter "e"
  input %x : f32[8] user_input
forward:
  %ya = aten::mul.Tensor(%x, %a) : f32[8]
  %yb = aten::mul.Tensor(%ya, %b) : f32[8]
  %loss = aten::sum(%yb) : f32[]
backward:
  %one = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%one, [8]) : f32[8]{strides=[0]}
  %gb = aten::mul.Tensor(%ge, %ya) : f32[8]
  %ga = aten::mul.Tensor(%gb, %x) : f32[8]
  %again = aten::mul.Tensor(%ga, %gb) : f32[8]
  %gc = aten::_to_copy(%again, dtype=f64) : f64[8]
  output %loss loss
  output %ga gradient "a"
  output %gb gradient "b"
  output %ga gradient "e"
  output %gc gradient "c"
  output %x gradient "d"
})";

unsigned countOp(const Graph &g, llvm::StringRef op) {
  unsigned n = 0;
  for (const Node &node : g.nodes())
    n += node.opName() == op;
  return n;
}

std::unique_ptr<Graph> rewritten(const std::string &pipeline) {
  auto g = parseOrFail(kStep);
  GraphOptimizer optimizer;
  EXPECT_TRUE(optimizer.addPipeline(pipeline).ok());
  auto run = optimizer.run(*g);
  EXPECT_TRUE(run.ok()) << run.status();
  return g;
}

TEST(DataParallelTest, OneBucketPerDtypeAndEachGradientOnce) {
  auto g = rewritten("data-parallel{world=2}");
  // f32: %gb and %ga (once, though two outputs name it); f64: %gc.
  EXPECT_EQ(countOp(*g, "_c10d_functional::all_reduce"), 2u);
  EXPECT_EQ(countOp(*g, "_c10d_functional::wait_tensor"), 2u);
  // The f32 bucket splits back into two gradients, the f64 one into one.
  std::vector<unsigned> splits;
  for (const Node &n : g->nodes())
    if (n.opName() == "aten::split_with_sizes_copy")
      splits.push_back(n.numOutputs());
  std::sort(splits.begin(), splits.end());
  EXPECT_EQ(splits, (std::vector<unsigned>{1, 2}));
  // Both outputs of the tied gradient read the same averaged value.
  const auto &outs = g->outputs();
  EXPECT_EQ(outs[1].value, outs[3].value);
  EXPECT_NE(outs[1].value->name(), "ga");
  // The gradient that is a graph input is left alone.
  EXPECT_EQ(outs[5].value->name(), "x");
  EXPECT_TRUE(verifyGraph(*g).ok());
}

TEST(DataParallelTest, BackwardReadsTheLocalGradient) {
  auto g = rewritten("data-parallel{world=2}");
  const Node *again = nullptr;
  for (const Node &n : g->nodes())
    if (n.label() == "again")
      again = &n;
  ASSERT_NE(again, nullptr) << "the rewrite lost %again";
  EXPECT_EQ(again->arg(0).getValue()->name(), "ga");
  EXPECT_EQ(again->arg(1).getValue()->name(), "gb");
}

TEST(DataParallelTest, OutputsShareNoStorage) {
  auto g = rewritten("data-parallel{world=2,bucket=1GiB}");
  AliasInfo alias(*g);
  const auto &outs = g->outputs();
  for (size_t i = 1; i < outs.size(); ++i)
    for (size_t j = i + 1; j < outs.size(); ++j)
      if (outs[i].value != outs[j].value)
        EXPECT_FALSE(alias.mayShareStorage(outs[i].value, outs[j].value))
            << outs[i].value->name().str() << " and " << outs[j].value->name().str();
}

TEST(DataParallelTest, SmallBucketsCloseEarly) {
  // 32 bytes per f32 gradient: a 32-byte bucket holds one.
  auto g = rewritten("data-parallel{world=2,bucket=32}");
  EXPECT_EQ(countOp(*g, "_c10d_functional::all_reduce"), 3u);
}

} // namespace

// The storage the rewrite assumes, asked of AliasInfo: a gradient output that
// is a view of another, or one the optimizer reads through a view, is refused
// with the values named (averaging each alone would break the aliasing, or
// leave the reader on the local gradient).
TEST(DataParallelTest, GradientsSharingStorageOrReadThroughAViewAreRefused) {
  struct Case {
    const char *tail, *expected;
  };
  for (const Case &c : {
           Case{"  %gv = aten::view(%ga, [8]) : f32[8]\n  output %gv gradient \"b\"\n",
                "gradient %ga of 'a' and gradient %gv of 'b' share storage"},
           Case{"  output %gb gradient \"b\"\noptimizer:\n"
                "  %seen = aten::alias(%ga) : f32[8]\n"
                "  %a_new = aten::sub_.Tensor(%a, %seen) : f32[8]\n",
                "the optimizer reads gradient %ga of 'a' through the view %seen"},
       }) {
    std::string text = absl::StrCat(R"(graph @step {
  input %a : f32[8] parameter "a"
  input %b : f32[8] parameter "b"
  input %x : f32[8] user_input
forward:
  %ya = aten::mul.Tensor(%x, %a) : f32[8]
  %yb = aten::mul.Tensor(%ya, %b) : f32[8]
  %loss = aten::sum(%yb) : f32[]
backward:
  %one = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%one, [8]) : f32[8]{strides=[0]}
  %gb = aten::mul.Tensor(%ge, %ya) : f32[8]
  %ga = aten::mul.Tensor(%gb, %x) : f32[8]
  output %loss loss
  output %ga gradient "a"
)", c.tail, "}\n");
    auto g = parseOrFail(text);
    ASSERT_TRUE(g);
    GraphOptimizer optimizer;
    ASSERT_TRUE(optimizer.addPipeline("data-parallel{world=2}").ok());
    auto run = optimizer.run(*g);
    ASSERT_FALSE(run.ok()) << c.expected;
    EXPECT_NE(run.status().message().find(c.expected), std::string::npos) << run.status().message();
  }
}
