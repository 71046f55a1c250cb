//===- CheckpointPlannerTests.cpp - checkpoint{planner=milp} against known optima ===//
//
// Hand-made joint graphs with hand-chosen node times, small enough that the
// optimal plan is worked out below each graph: the MILP planner must find it,
// prove it (within kProven of the relaxation's bound) where the bound reaches
// it, and never need more recomputation time than the greedy.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/MilpPlanner.h"
#include "checkpoint/MilpFormulation.h"
#include "checkpoint/MilpProblem.h"

#include "checkpoint/FlopCost.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Testing/RandomGraph.h"

#include <absl/strings/str_cat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>

using namespace graphopt;

namespace {

// Three activations from graph inputs, all live across the peak at %y/%sy:
//   %a 60 bytes, recomputed in 1 s   (60 bytes/s)
//   %b 100 bytes, in 2 s             (50 bytes/s)
//   %c 60 bytes, in 1.5 s            (40 bytes/s)
// Peak above the inputs (rank 7, %sy): a + b + c + three sums + y + sy
//   = 220 + 12 + 256 + 4 = 492 bytes.
constexpr const char *kThree = R"(graph @three {
  input %w : f32[4] parameter "w"
  input %x1 : f32[15] user_input
  input %x2 : f32[25] user_input
  input %x3 : f32[15] user_input
  input %x4 : f32[64] user_input
forward:
  %a = aten::sin(%x1) : f32[15]
  %b = aten::cos(%x2) : f32[25]
  %c = aten::exp(%x3) : f32[15]
  %sa = aten::sum(%a) : f32[]
  %sb = aten::sum(%b) : f32[]
  %sc = aten::sum(%c) : f32[]
  %y = aten::sin(%x4) : f32[64]
  %sy = aten::sum(%y) : f32[]
  %l1 = aten::add.Tensor(%sa, %sb) : f32[]
  %l2 = aten::add.Tensor(%l1, %sc) : f32[]
  %loss = aten::add.Tensor(%l2, %sy) : f32[]
backward:
  %pc = aten::sum(%c) : f32[]
  %pb = aten::sum(%b) : f32[]
  %pa = aten::sum(%a) : f32[]
  %s1 = aten::add.Tensor(%pc, %pb) : f32[]
  %s2 = aten::add.Tensor(%s1, %pa) : f32[]
  %gw = aten::mul.Tensor(%w, %s2) : f32[4]
  output %loss loss
  output %gw gradient "w"
})";

// Shared recomputation: %p and %q are both made from %h (5 s), which forward
// frees before backward; %u (4 s) is made from an input. Each is 64 bytes, and
// the peak needs two of them dropped. %p and %q are first read by the same
// backward node, so their clones go at the same point and share one clone of %h:
//   {p, q}: h + p + q = 5 + 1 + 1 = 7 s   <- optimum
//   {p, u} or {q, u}: 5 + 1 + 4 = 10 s
// The greedy rates u best alone (64 B / 4 s against 64 B / 6 s), takes it,
// then p or q: 10 s.
constexpr const char *kShared = R"(graph @shared {
  input %w : f32[4] parameter "w"
  input %x : f32[16] user_input
  input %z : f32[64] user_input
forward:
  %h = aten::sin(%x) : f32[16]
  %p = aten::cos(%h) : f32[16]
  %q = aten::exp(%h) : f32[16]
  %u = aten::tanh(%x) : f32[16]
  %sp = aten::sum(%p) : f32[]
  %sq = aten::sum(%q) : f32[]
  %su = aten::sum(%u) : f32[]
  %y = aten::sin(%z) : f32[64]
  %sy = aten::sum(%y) : f32[]
  %l1 = aten::add.Tensor(%sp, %sq) : f32[]
  %l2 = aten::add.Tensor(%l1, %su) : f32[]
  %loss = aten::add.Tensor(%l2, %sy) : f32[]
backward:
  %bpq = aten::add.Tensor(%p, %q) : f32[16]
  %bu = aten::sum(%u) : f32[]
  %s1 = aten::sum(%bpq) : f32[]
  %s2 = aten::add.Tensor(%s1, %bu) : f32[]
  %gw = aten::mul.Tensor(%w, %s2) : f32[4]
  output %loss loss
  output %gw gradient "w"
})";

// The same forward, but backward reads %q and %p at different points: the
// closure makes %h at each (never holding one clone between them), so
// {p, q} costs 5 + 1 + 5 + 1 = 12 s and {p, u} or {q, u} 10 s is the optimum.
constexpr const char *kTwoPoints = R"(graph @two_points {
  input %w : f32[4] parameter "w"
  input %x : f32[16] user_input
  input %z : f32[64] user_input
forward:
  %h = aten::sin(%x) : f32[16]
  %p = aten::cos(%h) : f32[16]
  %q = aten::exp(%h) : f32[16]
  %u = aten::tanh(%x) : f32[16]
  %sp = aten::sum(%p) : f32[]
  %sq = aten::sum(%q) : f32[]
  %su = aten::sum(%u) : f32[]
  %y = aten::sin(%z) : f32[64]
  %sy = aten::sum(%y) : f32[]
  %l1 = aten::add.Tensor(%sp, %sq) : f32[]
  %l2 = aten::add.Tensor(%l1, %su) : f32[]
  %loss = aten::add.Tensor(%l2, %sy) : f32[]
backward:
  %bu = aten::sum(%u) : f32[]
  %bq = aten::sum(%q) : f32[]
  %bp = aten::sum(%p) : f32[]
  %s1 = aten::add.Tensor(%bu, %bq) : f32[]
  %s2 = aten::add.Tensor(%s1, %bp) : f32[]
  %gw = aten::mul.Tensor(%w, %s2) : f32[4]
  output %loss loss
  output %gw gradient "w"
})";

// The program's memory rows do not see clone temporaries. Dropping %p (the
// cheaper, 1 + 5 s with %h) fits the forward peak, but its clones (%h, then
// %p) run in backward while %t (192 bytes) and %u are live: 388 bytes there,
// over the budget of 332. The planner raises that rank's row by the error and
// solves again: %u alone (8 s), whose clone runs after %t is gone. The greedy
// drops %p first, sees the same simulated peak and adds %u: 14 s.
constexpr const char *kTemporaries = R"(graph @temporaries {
  input %w : f32[4] parameter "w"
  input %x : f32[16] user_input
  input %x2 : f32[16] user_input
  input %z : f32[64] user_input
  input %z2 : f32[48] user_input
forward:
  %h = aten::sin(%x) : f32[16]
  %p = aten::cos(%h) : f32[16]
  %u = aten::tanh(%x2) : f32[16]
  %sp = aten::sum(%p) : f32[]
  %su = aten::sum(%u) : f32[]
  %y = aten::sin(%z) : f32[64]
  %sy = aten::sum(%y) : f32[]
  %l1 = aten::add.Tensor(%sp, %su) : f32[]
  %loss = aten::add.Tensor(%l1, %sy) : f32[]
backward:
  %t = aten::cos(%z2) : f32[48]
  %bp = aten::sum(%p) : f32[]
  %bt = aten::sum(%t) : f32[]
  %bu = aten::sum(%u) : f32[]
  %s1 = aten::add.Tensor(%bp, %bt) : f32[]
  %s2 = aten::add.Tensor(%s1, %bu) : f32[]
  %gw = aten::mul.Tensor(%w, %s2) : f32[4]
  output %loss loss
  output %gw gradient "w"
})";

// native_dropout is replayed from its mask, which stays: dropping %d costs
// %h and the replay (3 + 1 s); dropping %e costs its clone alone (1 s) while
// %d is kept, and %h, the replay and %e (5 s) when both go.
constexpr const char *kDropout = R"(graph @dropout {
  input %w : f32[4] parameter "w"
  input %x : f32[16] user_input
  input %z : f32[64] user_input
forward:
  %h = aten::sin(%x) : f32[16]
  %d, %m = aten::native_dropout(%h, 0.5, true) : f32[16], bool[16]
  %e = aten::exp(%d) : f32[16]
  %se = aten::sum(%e) : f32[]
  %y = aten::sin(%z) : f32[64]
  %sy = aten::sum(%y) : f32[]
  %loss = aten::add.Tensor(%se, %sy) : f32[]
backward:
  %be = aten::mul.Tensor(%e, %d) : f32[16]
  %gd = aten::native_dropout_backward(%be, %m, 2.0) : f32[16]
  %s = aten::sum(%gd) : f32[]
  %gw = aten::mul.Tensor(%w, %s) : f32[4]
  output %loss loss
  output %gw gradient "w"
})";

struct Fixture {
  std::unique_ptr<Graph> graph;
  std::optional<RecomputeModel> model;
};

/// Parses `text` and builds its model, each node's seconds by its first
/// output's name (0.1 s for the others).
Fixture build(const char *text, const std::map<std::string, double> &seconds,
              bool replayRngStates = true) {
  Fixture f;
  auto g = parseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok())
    return f;
  f.graph = std::move(*g);
  std::vector<double> times;
  for (const Node &n : f.graph->nodes()) {
    auto it = seconds.find(n.output(0)->name().str());
    times.push_back(it == seconds.end() ? 0.1 : it->second);
  }
  auto m = RecomputeModel::build(*f.graph, std::move(times), {}, BoundedMemory::PeakAboveInputs,
                                 replayRngStates);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (m.ok())
    f.model.emplace(std::move(*m));
  return f;
}

std::set<std::string> droppedNames(const RecomputeModel &model, const CheckpointPlan &plan) {
  std::set<std::string> names;
  for (int32_t c : plan.dropped)
    names.insert(model.candidates()[c].storage->name().str());
  return names;
}

/// The planner proved its plan optimal: within 0.01% of the relaxation's
/// bound (what is left is the bound's tie-breaks, RecomputeRelaxation.h).
::testing::AssertionResult proven(const CheckpointPlan &plan) {
  if (plan.solverStatus.rfind("optimal", 0) == 0 && plan.gap >= 0 && plan.gap <= 1e-4)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "status \"" << plan.solverStatus << "\", gap "
                                       << plan.gap << ", bound " << plan.lowerBoundSeconds;
}

std::set<std::string> cloneNames(const CheckpointPlan &plan) {
  std::set<std::string> names;
  for (const RecomputeSet::Clone &c : plan.recompute.clones)
    names.insert(c.original->output(0)->name().str());
  return names;
}

const std::map<std::string, double> kThreeSeconds = {{"a", 1.0}, {"b", 2.0}, {"c", 1.5}};
const std::map<std::string, double> kSharedSeconds = {
    {"h", 5.0}, {"p", 1.0}, {"q", 1.0}, {"u", 4.0}};

TEST(CheckpointPlannerTest, ThreeActivationsPeakAsWorkedOut) {
  Fixture f = build(kThree, kThreeSeconds);
  ASSERT_TRUE(f.model);
  EXPECT_EQ(f.model->boundedPeak(), 492);
  std::set<std::string> candidates;
  for (const CheckpointCandidate &c : f.model->candidates())
    candidates.insert(c.storage->name().str());
  EXPECT_EQ(candidates, (std::set<std::string>{"a", "b", "c"}));
}

// 60 bytes to free: %a is the cheapest that frees enough and the best ratio,
// so both planners drop it alone.
TEST(CheckpointPlannerTest, MilpAgreesWithTheGreedyWhereTheRatioIsRight) {
  Fixture f = build(kThree, kThreeSeconds);
  ASSERT_TRUE(f.model);
  const int64_t budget = 492 - 60;
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_TRUE(milp->meetsBudget);
  EXPECT_LE(milp->predictedBounded, budget);
  EXPECT_EQ(droppedNames(*f.model, *milp), (std::set<std::string>{"a"}));
  EXPECT_EQ(droppedNames(*f.model, *greedy), (std::set<std::string>{"a"}));
  EXPECT_EQ(cloneNames(*milp), (std::set<std::string>{"a"}));
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 1.0);
  EXPECT_EQ(milp->planner, "milp");
  EXPECT_TRUE(proven(*milp));
  EXPECT_NEAR(milp->lowerBoundSeconds, 1.0, 1e-5);
  EXPECT_GT(milp->solveSeconds, 0);
}

// 100 bytes to free: the ratio step takes %a (best ratio) and then %b, 3 s;
// the optimum is %b alone, 2 s. The MILP finds it; the greedy too, by undoing
// the drop of %a once %b made it unneeded.
TEST(CheckpointPlannerTest, MilpAndTheGreedysUndoFindTheKnapsackOptimum) {
  Fixture f = build(kThree, kThreeSeconds);
  ASSERT_TRUE(f.model);
  const int64_t budget = 492 - 100;
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_TRUE(milp->meetsBudget);
  EXPECT_TRUE(greedy->meetsBudget);
  EXPECT_EQ(droppedNames(*f.model, *milp), (std::set<std::string>{"b"}));
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 2.0);
  EXPECT_TRUE(proven(*milp));
  EXPECT_EQ(droppedNames(*f.model, *greedy), (std::set<std::string>{"b"}));
  EXPECT_DOUBLE_EQ(greedy->predictedExtraSeconds, 2.0);
  EXPECT_EQ(greedy->kept, 1u); // %a, dropped first
  EXPECT_DOUBLE_EQ(milp->greedyExtraSeconds, 2.0);
}

// 120 bytes to free, with %b at 1.8 s and %c at 1.2 s: the ratio order takes
// %a (60 B/s), then %b (56 B/s against %c's 50), 2.8 s, and neither is
// unneeded after; the optimum is %a and %c, 2.2 s. The knapsack start (the
// bytes at the peak chosen together) finds it, and its plan is kept.
TEST(CheckpointPlannerTest, TheKnapsackStartBeatsTheRatioOrder) {
  Fixture f = build(kThree, {{"a", 1.0}, {"b", 1.8}, {"c", 1.2}});
  ASSERT_TRUE(f.model);
  const int64_t budget = 492 - 120;
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_TRUE(greedy->meetsBudget);
  EXPECT_EQ(droppedNames(*f.model, *greedy), (std::set<std::string>{"a", "c"}));
  EXPECT_DOUBLE_EQ(greedy->predictedExtraSeconds, 2.2);
  EXPECT_EQ(greedy->solverStatus, "from a knapsack start");
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 2.2);
}

/// A chain of `n` relus, backward reading each: `%p{k} = relu(%p{k-1})`,
/// `%g{k} = mul(%g{k-1}, %p{n-1-k})`.
std::string reluChain(int n) {
  std::string text = "graph @relus {\n  input %p0 : f32[16,16] user_input\nforward:\n";
  for (int k = 1; k <= n; ++k)
    text += absl::StrCat("  %p", k, " = aten::relu(%p", k - 1, ") : f32[16,16]\n");
  text += absl::StrCat("  %loss = aten::sum(%p", n, ") : f32[]\nbackward:\n");
  std::string g = absl::StrCat("p", n);
  for (int k = 1; k <= n; ++k) {
    text += absl::StrCat("  %g", k, " = aten::mul.Tensor(%", g, ", %p", n + 1 - k,
                         ") : f32[16,16]\n");
    g = absl::StrCat("g", k);
  }
  return text + absl::StrCat("  output %loss loss\n  output %", g, " gradient \"p0\"\n}\n");
}

// A start given up at the clone limit (on a long chain the knapsack drops
// runs of activations, each rebuilt from the chain's start) is remembered
// with the model, and a later start holding its drops is given up without
// dropping them again; the plans are those a fresh model gives.
TEST(CheckpointPlannerTest, AGivenUpStartIsRememberedAndPlansAreUnchanged) {
  const std::string text = reluChain(250);
  auto modelOf = [](const Graph &g) {
    return RecomputeModel::build(g, std::vector<double>(g.numNodes(), 1e-5), {},
                                 BoundedMemory::SavedActivations);
  };
  auto g = parseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto model = modelOf(**g);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_TRUE(givenUpStartsOf(*model).empty());
  const int64_t whole = model->boundedPeak();
  for (int64_t budget : {whole / 2, whole * 3 / 10, whole / 2}) {
    auto planned = planGreedy(*model, budget);
    ASSERT_TRUE(planned.ok()) << planned.status().message();
    EXPECT_FALSE(givenUpStartsOf(*model).empty()) << "budget " << budget;
    auto fresh = modelOf(**g);
    ASSERT_TRUE(fresh.ok());
    auto alone = planGreedy(*fresh, budget);
    ASSERT_TRUE(alone.ok()) << alone.status().message();
    EXPECT_EQ(droppedNames(*model, *planned), droppedNames(*fresh, *alone)) << "budget " << budget;
    EXPECT_EQ(planned->predictedExtraSeconds, alone->predictedExtraSeconds);
    EXPECT_EQ(planned->predictedBounded, alone->predictedBounded);
  }
}

// The chain bound by which a start is given up without making its clones:
// on a chain with every activation dropped, each one's own clone remakes
// every activation before it (1 + 2 + ... + n), and on random training
// steps it never exceeds the clones the drops really need.
TEST(CheckpointPlannerTest, TheChainBoundIsExactOnAChainAndNeverAboveTheClones) {
  constexpr int kRelus = 250;
  auto chain = parseGraph(reluChain(kRelus));
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  auto model = RecomputeModel::build(**chain, std::vector<double>((*chain)->numNodes(), 1e-5), {},
                                     BoundedMemory::SavedActivations);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::vector<int32_t> all(model->candidates().size());
  std::iota(all.begin(), all.end(), 0);
  ASSERT_EQ(all.size(), static_cast<size_t>(kRelus));
  EXPECT_EQ(chainClonesAtLeast(*model, all), static_cast<size_t>(kRelus * (kRelus + 1) / 2));
  PlanState every(*model);
  for (int32_t c : all)
    ASSERT_TRUE(every.add(c).ok());
  EXPECT_GE(every.cloneCount(), chainClonesAtLeast(*model, all));

  unsigned bounded = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    graphopt::testing::Choices choices(seed);
    auto made = graphopt::testing::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status().message();
    auto m = RecomputeModel::build(*made->graph, estimatedNodeSeconds(*made->graph), {},
                                   BoundedMemory::SavedActivations);
    if (!m.ok())
      continue;
    std::mt19937_64 random(seed);
    for (unsigned percent : {30u, 70u, 100u}) {
      PlanState state(*m);
      for (int32_t c = 0; c < static_cast<int32_t>(m->candidates().size()); ++c)
        if (random() % 100 < percent)
          (void)state.add(c); // one refused is left out, as the bound assumes none is
      const size_t bound = chainClonesAtLeast(*m, state.dropped());
      EXPECT_LE(bound, state.cloneCount()) << "seed " << seed << ", " << percent << "%";
      bounded += bound > 0;
    }
  }
  EXPECT_GE(bounded, 50u); // random steps without in-place writes are bounded
}

// A value two clones at one point read is made once there. Better still is
// to hold %h itself (64 bytes) for the clones and drop all three: %p and %q
// rerun from it, %u from the input: 1 + 1 + 4 = 6 s against {p, q} with %h
// made again (7 s). The ratio order alone cannot hold a value backward does
// not read (10 s); the relaxation's start does, in the default planner as in
// planner=milp, whose bound proves it optimal.
TEST(CheckpointPlannerTest, SharedRecomputationIsPaidOnceAndHoldingBeatsIt) {
  Fixture f = build(kShared, kSharedSeconds);
  ASSERT_TRUE(f.model);
  const int64_t peak = f.model->boundedPeak();
  const int64_t budget = peak - 128;
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_TRUE(milp->meetsBudget);
  EXPECT_EQ(droppedNames(*f.model, *milp), (std::set<std::string>{"p", "q", "u"}));
  ASSERT_EQ(milp->held.size(), 1u);
  EXPECT_EQ(milp->held[0]->name(), "h");
  EXPECT_EQ(cloneNames(*milp), (std::set<std::string>{"p", "q", "u"}));
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 6.0);
  EXPECT_TRUE(proven(*milp));
  EXPECT_EQ(milp->solverStatus, "optimal: the greedy's plan");
  EXPECT_DOUBLE_EQ(greedy->predictedExtraSeconds, 6.0);
  EXPECT_EQ(greedy->solverStatus, "from the relaxation's cut");
  ASSERT_EQ(greedy->held.size(), 1u);
  EXPECT_EQ(greedy->held[0]->name(), "h");
  // The priced cuts' bound: no plan is faster, none claimed above 6 s.
  EXPECT_GT(greedy->lowerBoundSeconds, 0);
  EXPECT_LE(greedy->lowerBoundSeconds, 6.0 + 1e-9);
  // Without holding: {p, q} and one shared clone of %h, 7 s.
  CheckpointPlan pq;
  for (size_t c = 0; c < f.model->candidates().size(); ++c)
    if (f.model->candidates()[c].storage->name() != "u")
      pq.dropped.push_back(static_cast<int32_t>(c));
  ASSERT_TRUE(completePlan(*f.model, budget, pq).ok());
  EXPECT_TRUE(pq.meetsBudget);
  EXPECT_EQ(cloneNames(pq), (std::set<std::string>{"h", "p", "q"}));
  EXPECT_EQ(pq.recompute.clones.size(), 3u);
  EXPECT_DOUBLE_EQ(pq.predictedExtraSeconds, 7.0);
  auto ratioOrder = planGreedyFrom(*f.model, budget, {}, {}, "");
  ASSERT_TRUE(ratioOrder.ok() && *ratioOrder);
  EXPECT_DOUBLE_EQ((*ratioOrder)->predictedExtraSeconds, 10.0);
}

// A value two points need is made at each: {p, q} with %h made again costs
// 12 s, and without holding the optimum is {p, u} or {q, u}, 10 s. Holding %h
// makes it 6 s again, as above.
TEST(CheckpointPlannerTest, RecomputationAtTwoPointsIsPaidTwice) {
  Fixture f = build(kTwoPoints, kSharedSeconds);
  ASSERT_TRUE(f.model);
  const int64_t budget = f.model->boundedPeak() - 128;
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  EXPECT_TRUE(milp->meetsBudget);
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 6.0);
  EXPECT_TRUE(proven(*milp));
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_DOUBLE_EQ(greedy->predictedExtraSeconds, 6.0); // the relaxation's start
  auto ratioOrder = planGreedyFrom(*f.model, budget, {}, {}, "");
  ASSERT_TRUE(ratioOrder.ok() && *ratioOrder);
  EXPECT_DOUBLE_EQ((*ratioOrder)->predictedExtraSeconds, 10.0);
  EXPECT_EQ(droppedNames(*f.model, **ratioOrder).count("u"), 1u);
  // Both p and q: %h at both points, 12 s, as the closure makes it.
  CheckpointPlan both;
  for (size_t c = 0; c < f.model->candidates().size(); ++c)
    if (f.model->candidates()[c].storage->name() != "u")
      both.dropped.push_back(static_cast<int32_t>(c));
  ASSERT_TRUE(completePlan(*f.model, budget, both).ok());
  EXPECT_DOUBLE_EQ(both.predictedExtraSeconds, 12.0);
  EXPECT_EQ(both.recompute.clones.size(), 4u);
}

// Over every budget the two planners meet, the MILP's time is never more.
TEST(CheckpointPlannerTest, MilpNeverNeedsMoreTimeThanTheGreedy) {
  const std::map<std::string, double> temporariesSeconds = {{"h", 5.0}, {"p", 1.0}, {"u", 8.0}};
  for (auto [text, seconds] : {std::make_pair(kThree, kThreeSeconds),
                               std::make_pair(kShared, kSharedSeconds),
                               std::make_pair(kTwoPoints, kSharedSeconds),
                               std::make_pair(kTemporaries, temporariesSeconds)}) {
    Fixture f = build(text, seconds);
    ASSERT_TRUE(f.model);
    const int64_t peak = f.model->boundedPeak();
    for (int64_t cut = 0; cut <= 240; cut += 4) {
      auto milp = planMilp(*f.model, peak - cut, MilpOptions{});
      ASSERT_TRUE(milp.ok()) << milp.status().message();
      auto greedy = planGreedy(*f.model, peak - cut);
      ASSERT_TRUE(greedy.ok()) << greedy.status().message();
      SCOPED_TRACE(::testing::Message() << f.graph->name().str() << ", budget " << peak - cut);
      if (greedy->meetsBudget) {
        EXPECT_TRUE(milp->meetsBudget);
      }
      if (milp->meetsBudget && greedy->meetsBudget) {
        EXPECT_LE(milp->predictedExtraSeconds, greedy->predictedExtraSeconds + 1e-9);
      }
      if (milp->meetsBudget) {
        EXPECT_LE(milp->predictedBounded, peak - cut);
        EXPECT_LE(milp->lowerBoundSeconds, milp->predictedExtraSeconds + 1e-9);
        // The default planner's bound (priced cuts) is one on milp's plan too.
        EXPECT_LE(greedy->lowerBoundSeconds, milp->predictedExtraSeconds + 1e-9);
      }
    }
  }
}

// 300 bytes to free, 220 droppable: no plan; the plan says so, with the least
// memory a plan reaches (all three dropped: 492 - 220).
TEST(CheckpointPlannerTest, InfeasibleBudgetIsReportedUnmet) {
  Fixture f = build(kThree, kThreeSeconds);
  ASSERT_TRUE(f.model);
  auto milp = planMilp(*f.model, 492 - 300, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  EXPECT_FALSE(milp->meetsBudget);
  EXPECT_EQ(milp->planner, "milp");
  EXPECT_EQ(milp->solverStatus, "infeasible");
  EXPECT_EQ(milp->predictedBounded, 492 - 220);
}

TEST(CheckpointPlannerTest, CloneTemporariesOverTheBudgetTightenTheProgram) {
  Fixture f = build(kTemporaries, {{"h", 5.0}, {"p", 1.0}, {"u", 8.0}});
  ASSERT_TRUE(f.model);
  ASSERT_EQ(f.model->boundedPeak(), 396); // p + u + sp + su + y + sy, at %sy
  const int64_t budget = 332;
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  EXPECT_TRUE(milp->meetsBudget);
  EXPECT_LE(milp->predictedBounded, budget);
  EXPECT_EQ(droppedNames(*f.model, *milp), (std::set<std::string>{"u"}));
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 8.0);
  // The relaxation leaves the temporaries out too: its bound is %p's 6 s, so
  // the 8 s plan is not proven.
  EXPECT_NEAR(milp->lowerBoundSeconds, 6.0, 1e-5);
  EXPECT_NEAR(milp->gap, 0.25, 1e-5);
  EXPECT_EQ(milp->solverStatus.rfind("the bound not reached: ", 0), 0u) << milp->solverStatus;
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_TRUE(greedy->meetsBudget);
  // The ratio step drops %p, then %u (14 s); %p is then undone: %u alone fits.
  EXPECT_DOUBLE_EQ(greedy->predictedExtraSeconds, 8.0);
  EXPECT_EQ(greedy->kept, 1u);
  // Dropping %p alone is what the program chooses without the simulation.
  CheckpointMilp program(*f.model);
  std::vector<int32_t> p;
  for (size_t c = 0; c < f.model->candidates().size(); ++c)
    if (f.model->candidates()[c].storage->name() == "p")
      p.push_back(static_cast<int32_t>(c));
  std::vector<int64_t> modelled = program.modelledTimeline({p, {}});
  EXPECT_LE(*std::max_element(modelled.begin(), modelled.end()), budget);
  CheckpointPlan onlyP;
  onlyP.dropped = p;
  ASSERT_TRUE(completePlan(*f.model, budget, onlyP).ok());
  EXPECT_EQ(onlyP.predictedBounded, 388);
}

TEST(CheckpointPlannerTest, DropoutIsReplayedAndItsMaskKept) {
  // The MILP's model: masks are kept (no RNG state replay).
  Fixture f = build(kDropout, {{"h", 3.0}, {"d", 1.0}, {"e", 1.0}}, /*replayRngStates=*/false);
  ASSERT_TRUE(f.model);
  std::set<std::string> candidates;
  for (const CheckpointCandidate &c : f.model->candidates())
    candidates.insert(c.storage->name().str());
  EXPECT_EQ(candidates, (std::set<std::string>{"d", "e"})); // not the mask %m
  const int64_t peak = f.model->boundedPeak();

  auto one = planMilp(*f.model, peak - 64, MilpOptions{});
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_TRUE(one->meetsBudget);
  EXPECT_EQ(droppedNames(*f.model, *one), (std::set<std::string>{"e"}));
  EXPECT_DOUBLE_EQ(one->predictedExtraSeconds, 1.0);

  auto both = planMilp(*f.model, peak - 128, MilpOptions{});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_TRUE(both->meetsBudget);
  EXPECT_EQ(droppedNames(*f.model, *both), (std::set<std::string>{"d", "e"}));
  EXPECT_EQ(cloneNames(*both), (std::set<std::string>{"h", "d", "e"}));
  EXPECT_DOUBLE_EQ(both->predictedExtraSeconds, 5.0);
  unsigned replayed = 0;
  for (const RecomputeSet::Clone &c : both->recompute.clones)
    replayed += c.dropout == RecomputeSet::Dropout::Mask;
  EXPECT_EQ(replayed, 1u);
}

// The program itself: one column per candidate and per (node, point) a
// clone may need; memory rows only where the timeline is over the budget.
TEST(CheckpointPlannerTest, FormulationHasTheColumnsWorkedOut) {
  Fixture f = build(kShared, kSharedSeconds);
  ASSERT_TRUE(f.model);
  CheckpointMilp milp(*f.model);
  EXPECT_EQ(milp.numCandidates(), 3u);
  EXPECT_EQ(milp.numNodeColumns(), 4u); // h, p, q at %bpq; u at %bu
  EXPECT_EQ(milp.maxHops(), -1);
  const int64_t peak = f.model->boundedPeak();
  auto none = milp.problem(peak, {});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->memoryRows, 0u);
  auto some = milp.problem(peak - 128, {});
  ASSERT_TRUE(some);
  EXPECT_GE(some->memoryRows, 1u);
  EXPECT_FALSE(milp.problem(peak - 200, {})); // 192 bytes of candidates in all
  // Dropping %p and %q: 128 bytes less wherever both are out of use.
  std::vector<int32_t> pq;
  for (size_t c = 0; c < f.model->candidates().size(); ++c)
    if (f.model->candidates()[c].storage->name() != "u")
      pq.push_back(static_cast<int32_t>(c));
  std::vector<int64_t> modelled = milp.modelledTimeline({pq, {}});
  EXPECT_EQ(*std::max_element(modelled.begin(), modelled.end()), peak - 128);

  CheckpointMilp two(*build(kTwoPoints, kSharedSeconds).model);
  EXPECT_EQ(two.numNodeColumns(), 5u); // h at %bq and at %bp
}

// A chain: %b = sin(%a), both saved; backward reads %b first. With both
// dropped, %b's clone needs %a before %a's own clone exists: %a is made at
// %b's point too, one hop through a dropped candidate.
constexpr const char *kChain = R"(graph @chain {
  input %w : f32[4] parameter "w"
  input %x : f32[16] user_input
  input %z : f32[64] user_input
forward:
  %a = aten::exp(%x) : f32[16]
  %b = aten::sin(%a) : f32[16]
  %sb = aten::sum(%b) : f32[]
  %y = aten::sin(%z) : f32[64]
  %sy = aten::sum(%y) : f32[]
  %loss = aten::add.Tensor(%sb, %sy) : f32[]
backward:
  %gb = aten::sum(%b) : f32[]
  %ga = aten::sum(%a) : f32[]
  %s = aten::add.Tensor(%gb, %ga) : f32[]
  %gw = aten::mul.Tensor(%w, %s) : f32[4]
  output %loss loss
  output %gw gradient "w"
})";

// Past the column bound, chains are cut at fewer hops: the plan that needs
// the cut chain has no columns any more (its drops may not coexist).
TEST(CheckpointPlannerTest, ChainsAreCutPastTheColumnBound) {
  Fixture f = build(kChain, {{"a", 2.0}, {"b", 1.0}});
  ASSERT_TRUE(f.model);
  CheckpointMilp full(*f.model);
  EXPECT_EQ(full.maxHops(), -1);
  EXPECT_EQ(full.numNodeColumns(), 3u); // b and a at %gb, a at %ga
  CheckpointMilp cut(*f.model, /*maxColumns=*/2);
  EXPECT_EQ(cut.maxHops(), 0);
  EXPECT_EQ(cut.numNodeColumns(), 2u);

  auto both = f.model->closure({0, 1});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->clones.size(), 3u);
  EXPECT_DOUBLE_EQ(both->seconds, 5.0);
  EXPECT_FALSE(full.columnsOf({0, 1}, *both).empty());
  EXPECT_TRUE(cut.columnsOf({0, 1}, *both).empty());

  // The budget needs both dropped. Made as above, 5 s; with %a's own clone
  // hoisted to %b's point (held from there, shared by %b's clone and %ga),
  // 3 s, and the budget still fits: the optimum, as the greedy finds too.
  EXPECT_EQ(full.numHoistColumns(), 1u);
  const int64_t budget = f.model->boundedPeak() - 128;
  auto milp = planMilp(*f.model, budget, MilpOptions{});
  ASSERT_TRUE(milp.ok()) << milp.status().message();
  auto greedy = planGreedy(*f.model, budget);
  ASSERT_TRUE(greedy.ok()) << greedy.status().message();
  EXPECT_TRUE(milp->meetsBudget);
  EXPECT_EQ(milp->dropped.size(), 2u);
  EXPECT_EQ(milp->hoists, 1u);
  EXPECT_EQ(milp->recompute.clones.size(), 2u);
  EXPECT_DOUBLE_EQ(milp->predictedExtraSeconds, 3.0);
  EXPECT_DOUBLE_EQ(greedy->predictedExtraSeconds, 3.0);
  EXPECT_TRUE(proven(*milp));
}

} // namespace

// The planner and its solver program (graph-opt-milp) exchange files: what is
// written reads back the same, and a damaged file is refused naming it.
TEST(MilpExchangeTest, RequestsAndSolutionsRoundTripAndDamageIsRefused) {
  std::string dir = ::testing::TempDir();
  MilpRequest request;
  request.problem.objective = {0.5, 1.0, 0.25};
  request.problem.upper = {1, 0, 1};
  request.problem.rows = {{{0, 2}, {64, 32}, 48}, {{1}, {1}, 0}};
  request.problem.memoryRows = 1;
  request.start = {1, 0, 0};
  request.seconds = 2.5;
  request.preprocess = true;
  std::string path = dir + "/milp-request";
  ASSERT_EQ(writeMilpRequest(path, request), "");
  MilpRequest back;
  ASSERT_EQ(readMilpRequest(path, back), "");
  EXPECT_EQ(back.problem.objective, request.problem.objective);
  EXPECT_EQ(back.problem.upper, request.problem.upper);
  ASSERT_EQ(back.problem.rows.size(), 2u);
  EXPECT_EQ(back.problem.rows[0].columns, request.problem.rows[0].columns);
  EXPECT_EQ(back.problem.rows[0].coefficients, request.problem.rows[0].coefficients);
  EXPECT_EQ(back.problem.rows[0].rhs, 48);
  EXPECT_EQ(back.problem.memoryRows, 1u);
  EXPECT_EQ(back.start, request.start);
  EXPECT_EQ(back.seconds, 2.5);
  EXPECT_TRUE(back.preprocess);

  MilpSolution solution{true, {1, 0, 1}, 0.125, "time limit", 0.875};
  std::string solved = dir + "/milp-solution";
  ASSERT_EQ(writeMilpSolution(solved, solution), "");
  MilpSolution read;
  ASSERT_EQ(readMilpSolution(solved, read), "");
  EXPECT_TRUE(read.found);
  EXPECT_EQ(read.columns, solution.columns);
  EXPECT_EQ(read.gap, 0.125);
  EXPECT_EQ(read.status, "time limit");
  EXPECT_EQ(read.bound, 0.875);

  // Truncated, or a column index past the program: refused, naming the file.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  EXPECT_NE(readMilpRequest(path, back).find(path), std::string::npos);
  request.problem.rows[1].columns = {7};
  ASSERT_EQ(writeMilpRequest(path, request), "");
  EXPECT_NE(readMilpRequest(path, back).find("damaged"), std::string::npos);
  EXPECT_NE(readMilpSolution(dir + "/no-such-solution", read).find("no-such-solution"),
            std::string::npos);
}
