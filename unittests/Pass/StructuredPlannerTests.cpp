//===- StructuredPlannerTests.cpp - Ladders per block, one rung each --------===//
#include "CheckpointTestGraphs.h"
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/ModelBlocks.h"
#include "checkpoint/StructuredPlanner.h"

#include "graphopt/IR/Parser.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace graphopt {
namespace {

using test::modelOf;

/// A chain of `ops.size()` blocks `layers.i`: h = in * w, a = op(h), b = sin(a),
/// the next block's input b, then a loss. Backward reads every a (interiors:
/// read in forward by their own block only) and every b but the last
/// (boundaries: read by the next block). At FLOP prices every elementwise op
/// costs the same: dropping b alone reruns sin (one op), dropping a alone
/// reruns op and the mul before it (h is never saved): two.
std::string chainOfBlocks(const std::vector<std::string> &ops) {
  const size_t n = ops.size();
  std::string t = "graph @blocks {\n  input %w : f32[] parameter \"w\"\n"
                  "  input %x : f32[256] user_input\nforward:\n";
  for (size_t i = 0; i < n; ++i) {
    const std::string in = i == 0 ? "x" : absl::StrCat("b", i - 1);
    absl::StrAppend(&t, "  %h", i, " = aten::mul.Tensor(%", in, ", %w) {module = \"layers.", i,
                    ".fc\"} : f32[256]\n");
    absl::StrAppend(&t, "  %a", i, " = aten::", ops[i], "(%h", i, ") {module = \"layers.", i,
                    ".act\"} : f32[256]\n");
    absl::StrAppend(&t, "  %b", i, " = aten::sin(%a", i, ") {module = \"layers.", i,
                    ".out\"} : f32[256]\n");
  }
  absl::StrAppend(&t, "  %loss = aten::sum(%b", n - 1, ") {module = \"head\"} : f32[]\n",
                  "backward:\n  %g = aten::ones_like(%loss) : f32[]\n",
                  "  %gb", n - 1, " = aten::expand(%g, [256]) : f32[256]{strides=[0]}\n");
  for (size_t j = n; j-- > 0;) {
    const std::string in = j == 0 ? "x" : absl::StrCat("b", j - 1);
    absl::StrAppend(&t, "  %c", j, " = aten::cos(%a", j, ") : f32[256]\n", "  %ga", j,
                    " = aten::mul.Tensor(%gb", j, ", %c", j, ") : f32[256]\n", "  %gh", j,
                    " = aten::mul.Tensor(%ga", j, ", %a", j, ") : f32[256]\n");
    if (j > 0)
      absl::StrAppend(&t, "  %gb", j - 1, " = aten::mul.Tensor(%gh", j, ", %w) : f32[256]\n");
    absl::StrAppend(&t, "  %gwe", j, " = aten::mul.Tensor(%gh", j, ", %", in, ") : f32[256]\n",
                    "  %gw", j, " = aten::sum(%gwe", j, ") : f32[]\n");
  }
  std::string total = "gw0";
  for (size_t j = 1; j < n; ++j) {
    absl::StrAppend(&t, "  %gs", j, " = aten::add.Tensor(%", total, ", %gw", j, ") : f32[]\n");
    total = absl::StrCat("gs", j);
  }
  absl::StrAppend(&t, "  output %loss loss\n  output %", total, " gradient \"w\"\n}\n");
  return t;
}

std::unique_ptr<Graph> parsed(const std::string &text) {
  auto g = parseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

int64_t peakRankOf(const RecomputeModel &model) {
  auto timeline = model.boundedTimeline();
  return std::max_element(timeline.begin(), timeline.end()) - timeline.begin();
}

std::set<std::string> dropNames(const RecomputeModel &model, const StructuredChoice &choice) {
  std::set<std::string> names;
  for (const auto &[c, why] : choice.drops)
    names.insert(model.candidates()[c].storage->name().str());
  return names;
}

const StructuredChoice *withRule(const std::vector<StructuredChoice> &choices, BoundaryRule rule) {
  for (const StructuredChoice &c : choices)
    if (c.boundaries == rule)
      return &c;
  return nullptr;
}

constexpr double kOp = 256 / kNominalFlopsPerSecond; // one elementwise op on f32[256]
constexpr size_t kNoClonesLimit = 1 << 20;

TEST(StructuredPlannerTest, IdenticalBlocksAreOneClass) {
  auto graph = parsed(chainOfBlocks({"exp", "exp", "exp", "exp"}));
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  auto choices = structuredChoices(model, BoundedMemory::SavedActivations, peakRankOf(model),
                                   1024, kNoClonesLimit);
  ASSERT_FALSE(choices.empty());
  EXPECT_EQ(choices[0].blocks, 4u);
  // The last block saves no boundary (its b is read by the loss only): its
  // operators match, its candidates do not, so it is ordered on its own.
  EXPECT_EQ(choices[0].classes, 2u);

  auto other = parsed(chainOfBlocks({"exp", "exp", "tanh", "exp"}));
  RecomputeModel otherModel = modelOf(*other, BoundedMemory::SavedActivations);
  auto otherChoices = structuredChoices(otherModel, BoundedMemory::SavedActivations,
                                        peakRankOf(otherModel), 1024, kNoClonesLimit);
  ASSERT_FALSE(otherChoices.empty());
  EXPECT_EQ(otherChoices[0].classes, 3u); // tanh's block is a class of its own
}

TEST(StructuredPlannerTest, EachRuleFindsItsOptimum) {
  auto graph = parsed(chainOfBlocks({"exp", "exp", "exp", "exp"}));
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  // Two activations' bytes: the cheapest way is two boundaries (one op each).
  auto choices = structuredChoices(model, BoundedMemory::SavedActivations, peakRankOf(model),
                                   2 * 1024, kNoClonesLimit);
  const StructuredChoice *free = withRule(choices, BoundaryRule::Free);
  const StructuredChoice *apart = withRule(choices, BoundaryRule::NotNeighbours);
  const StructuredChoice *kept = withRule(choices, BoundaryRule::Kept);
  // Free and not-neighbours both reach two boundaries at two ops; a choice
  // equal to one made before is left out.
  ASSERT_NE(free, nullptr);
  EXPECT_EQ(free->drops.size(), 2u);
  EXPECT_NEAR(free->seconds, 2 * kOp, 1e-15);
  EXPECT_GE(free->freedAtPeak, 2 * 1024);
  for (const std::string &name : dropNames(model, *free))
    EXPECT_EQ(name[0], 'b') << name;
  if (apart) {
    EXPECT_EQ(dropNames(model, *apart), (std::set<std::string>{"b0", "b2"}));
    EXPECT_NEAR(apart->seconds, 2 * kOp, 1e-15);
  } else {
    EXPECT_EQ(dropNames(model, *free), (std::set<std::string>{"b0", "b2"}));
  }
  // Keeping the boundaries: two interiors, two ops each.
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->drops.size(), 2u);
  EXPECT_NEAR(kept->seconds, 4 * kOp, 1e-15);
  for (const std::string &name : dropNames(model, *kept))
    EXPECT_EQ(name[0], 'a') << name;
}

TEST(StructuredPlannerTest, NeighboursNeverBothDropABoundary) {
  auto graph = parsed(chainOfBlocks({"exp", "exp", "exp", "exp", "exp", "exp"}));
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  // More than every other boundary frees: the not-neighbours choice takes
  // interiors for the rest rather than a neighbour's boundary.
  for (int64_t need : {3 * 1024, 4 * 1024, 6 * 1024}) {
    auto choices = structuredChoices(model, BoundedMemory::SavedActivations, peakRankOf(model),
                                     need, kNoClonesLimit);
    const StructuredChoice *apart = withRule(choices, BoundaryRule::NotNeighbours);
    if (!apart) // left out as equal to the free choice
      apart = withRule(choices, BoundaryRule::Free);
    ASSERT_NE(apart, nullptr);
    std::set<std::string> names = dropNames(model, *apart);
    for (int i = 0; i + 1 < 6; ++i)
      EXPECT_FALSE(names.count(absl::StrCat("b", i)) && names.count(absl::StrCat("b", i + 1)))
          << "need " << need << ": b" << i << " and b" << i + 1;
    EXPECT_GE(apart->freedAtPeak, need);
  }
}

TEST(StructuredPlannerTest, ChoicesOverTheCloneLimitAreLeftOut) {
  auto graph = parsed(chainOfBlocks({"exp", "exp", "exp", "exp"}));
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  EXPECT_TRUE(structuredChoices(model, BoundedMemory::SavedActivations, peakRankOf(model),
                                2 * 1024, /*maxClones=*/1)
                  .empty());
}

TEST(StructuredPlannerTest, PlannerMeetsTheBudgetAndSaysWhy) {
  auto graph = parsed(chainOfBlocks({"exp", "exp", "exp", "exp"}));
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  const int64_t budget = model.boundedPeak() - 3 * 1024;
  auto plan = planGreedy(model, budget, kNoPeakCap, GreedyStarts::Structured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->meetsBudget);
  EXPECT_EQ(plan->planner, "structured");
  EXPECT_EQ(plan->solverStatus, "from the structured choice");
  ASSERT_FALSE(plan->why.empty());
  EXPECT_NE(plan->why.begin()->second.find("structured: rung"), std::string::npos)
      << plan->why.begin()->second;
  // Never slower than the flat greedy here: the boundaries are the cheapest drops.
  auto flat = planGreedy(model, budget);
  ASSERT_TRUE(flat.ok());
  EXPECT_LE(plan->predictedExtraSeconds, flat->predictedExtraSeconds + 1e-15);
}

TEST(StructuredPlannerTest, WithoutBlocksItIsTheFlatGreedy) {
  std::string text = chainOfBlocks({"exp", "exp"});
  for (size_t at; (at = text.find("layers.")) != std::string::npos;)
    text.replace(at, 7, "first");
  auto graph = parsed(text);
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  ASSERT_TRUE(findBlocks(model).names.empty());
  const int64_t budget = model.boundedPeak() - 1024;
  auto plan = planGreedy(model, budget, kNoPeakCap, GreedyStarts::Structured);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto flat = planGreedy(model, budget);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(plan->solverStatus, "no repeated blocks: the flat greedy");
  EXPECT_EQ(plan->dropped, flat->dropped);
}

} // namespace
} // namespace graphopt
