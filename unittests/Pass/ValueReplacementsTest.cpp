//===- ValueReplacementsTest.cpp - The equal values a pipeline replaced -===//
//
// cse's merges and canonicalize's folds come back from a run as a value
// (ValueReplacements): chains followed, the given graph's values only.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Pass/ValueReplacements.h"

#include "../TestSupport.h"

#include <gtest/gtest.h>

#include <map>

using namespace graphopt;
using graphopt::test::parseOrFail;
using graphopt::test::valueNamed;

namespace {

std::map<std::string, std::string> replacedBy(const char *pipeline, Graph &graph) {
  GraphOptimizer optimizer;
  EXPECT_TRUE(optimizer.addPipeline(pipeline).ok());
  auto changed = optimizer.run(graph);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  std::map<std::string, std::string> out;
  if (const ValueReplacements *r = optimizer.analyses().replacementsIfAny(graph))
    for (const auto &[old, now] : r->composed())
      out[old] = now;
  return out;
}

} // namespace

TEST(ValueReplacementsTest, CseMergesAndCanonicalizeFoldsComeBackChained) {
  // %b merges into %a (cse); %t2 = t(t(%a)) folds to %a (canonicalize), and
  // %u = t(t(%b)) merged into %t2's pair first, so it is read as %a too.
  auto g = parseOrFail(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %b = aten::relu(%x) : f32[2, 3]
  %t1 = aten::t(%a) : f32[3, 2]
  %t2 = aten::t(%t1) : f32[2, 3]
  %s1 = aten::t(%b) : f32[3, 2]
  %u = aten::t(%s1) : f32[2, 3]
  %y = aten::add.Tensor(%t2, %u, alpha=1) : f32[2, 3]
  output %y user_output
})");
  ASSERT_TRUE(g);
  auto replaced = replacedBy("cse,canonicalize,dce", *g);
  EXPECT_EQ(replaced["b"], "a");
  EXPECT_EQ(replaced["u"], "a");
  EXPECT_EQ(replaced["t2"], "a");
  EXPECT_EQ(replaced.count("a"), 0u);
  EXPECT_EQ(replaced.count("y"), 0u);
}

TEST(ValueReplacementsTest, NothingMergedNothingReported) {
  auto g = parseOrFail(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %b = aten::sigmoid(%x) : f32[2, 3]
  %y = aten::add.Tensor(%a, %b, alpha=1) : f32[2, 3]
  output %y user_output
})");
  ASSERT_TRUE(g);
  EXPECT_TRUE(replacedBy("cse,canonicalize,dce", *g).empty());
}

TEST(ValueReplacementsTest, ValuesTheRunMadeAreLeftOutEvenUnderAReusedName) {
  auto g = parseOrFail(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::relu(%x) : f32[2, 3]
  %b = aten::relu(%x) : f32[2, 3]
  %c = aten::sigmoid(%x) : f32[2, 3]
  output %a user_output
  output %b user_output
  output %c user_output
})");
  ASSERT_TRUE(g);
  ValueReplacements record;
  record.begin(*g);
  Value *a = valueNamed(*g, "a"), *b = valueNamed(*g, "b"), *c = valueNamed(*g, "c");
  record.note(*b, *a);
  // A value made after begin(), given the name "b" (a name free again), then
  // replaced: it is no value of the given graph, and does not stand for %b.
  Argument x = Argument::value(g->inputs()[0].value);
  auto made = g->createNode("aten::relu", {x}, {c->type()});
  auto other = g->createNode("aten::sigmoid", {x}, {c->type()});
  ASSERT_TRUE(made.ok() && other.ok());
  (*made)->output(0)->setName("b");
  record.note(*(*made)->output(0), *c);
  // And a given value replaced by one the run made: left out too.
  record.note(*c, *(*other)->output(0));
  auto composed = record.composed();
  ASSERT_EQ(composed.size(), 1u);
  EXPECT_EQ(composed[0], std::make_pair(std::string("b"), std::string("a")));
}
