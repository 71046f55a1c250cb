//===- CheckpointTests.cpp - The recompute model, the greedy planner, the pass ===//
//
// checkpoint's model of a training step (passes/checkpoint/RecomputeModel.h)
// on hand-written graphs: which activations are candidates and why the others
// are never recomputed; the recomputation a set of dropped activations needs
// (clones, where they go, which are shared, which are made twice); the
// rewrite, which must pass the structural verifier; the simulation of a plan
// against the liveness analysis of the rewritten graph; the greedy planner
// against the optimum found by trying every plan; PeakTracker, which the
// greedy planner steers by; and the pass on a zoo graph with measured costs,
// whose measured peak must be within the budget.
//
// Node times come from FlopCost (cost=flops), so every plan here is
// deterministic. The planner=milp tests are in CheckpointPlannerTests.cpp.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/CheckpointPass.h"
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/FlopCost.h"
#include "checkpoint/Planner.h"
#include "checkpoint/RecomputeModel.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Analysis/PeakTracker.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/PassRegistry.h"
#include "../TestSupport.h"
#include "CheckpointTestGraphs.h"
#include "../ZooArchives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <string>
#include <vector>

using namespace graphopt;
using namespace graphopt::test;

namespace {

std::unique_ptr<Graph> parse(const std::string &text) { return parseOrFail(text); }

/// The rank of the node defining %name.
int64_t rankOf(const RecomputeModel &model, llvm::StringRef name) {
  return model.baseline().rank.lookup(valueNamed(model.graph(), name)->definingNode());
}

int32_t candidateNamed(const RecomputeModel &model, llvm::StringRef name) {
  int32_t c = model.candidateOf(valueNamed(model.graph(), name));
  EXPECT_GE(c, 0) << "%" << name.str() << " is not a candidate";
  return c;
}

std::vector<std::string> candidateNames(const RecomputeModel &model) {
  std::vector<std::string> names;
  for (const CheckpointCandidate &c : model.candidates())
    names.push_back(c.storage->name().str());
  return names;
}

std::map<std::string, std::string> exclusions(const RecomputeModel &model) {
  std::map<std::string, std::string> why;
  for (const auto &[v, reason] : model.excluded())
    why[v->name().str()] = reason;
  return why;
}

double secondsOf(const RecomputeModel &model, std::initializer_list<llvm::StringRef> names) {
  double s = 0;
  for (llvm::StringRef n : names)
    s += model.seconds()[rankOf(model, n)];
  return s;
}

// The same step with the backward reading %a before %b.
const char *kChainOwnFirst = R"(graph @chain_own_first {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
forward:
  %xw = aten::mul.Tensor(%x, %w) : f32[256]
  %a = aten::exp(%xw) : f32[256]
  %b = aten::sin(%a) : f32[256]
  %bb = aten::mul.Tensor(%b, %b) : f32[256]
  %loss = aten::sum(%bb) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %big = aten::repeat(%ge, [8]) : f32[2048]
  %s = aten::sum(%big) : f32[]
  %gbb = aten::mul.Tensor(%ge, %s) : f32[256]
  %ca = aten::cos(%a) : f32[256]
  %gca = aten::mul.Tensor(%gbb, %ca) : f32[256]
  %gb1 = aten::mul.Tensor(%gca, %b) : f32[256]
  %gb = aten::mul.Scalar(%gb1, 2) : f32[256]
  %gxw = aten::mul.Tensor(%gb, %a) : f32[256]
  %gxx = aten::mul.Tensor(%gxw, %x) : f32[256]
  %gw = aten::sum(%gxx) : f32[]
  output %loss loss
  output %gw gradient "w"
})";

// Every kind of activation that is never recomputed, beside one that is
// (%ok). Each is read in backward.
const char *kNever = R"(graph @never {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
  input %buf : f32[256] buffer "buf"
forward:
  %ok = aten::cos(%x) : f32[256]
  %h = aten::mul.Tensor(%x, %w) : f32[256]
  %r = aten::relu_(%h) : f32[256]
  %f = aten::exp(%x) : f32[256]
  %fv = aten::view(%f, [16, 16]) : f32[16, 16]
  %fv2 = aten::mul_.Scalar(%fv, 2.0) : f32[16, 16]
  %t = aten::sin(%x) : f32[256]
  %t2 = aten::add_.Scalar(%t, 1) : f32[256]
  %u = aten::cos(%t2) : f32[256]
  %v = aten::sin(%buf) : f32[256]
  %bw = aten::add_.Scalar(%buf, 1) : f32[256]
  %rl = aten::rand_like(%x) : f32[256]
  %n = aten::rand_like(%x) : f32[256]
  %m = aten::mul.Tensor(%x, %n) : f32[256]
  %d, %mask = aten::native_dropout(%x, 0.5, true) : f32[256], bool[256]
  %e, %emask = aten::native_dropout(%x, 0.5, false) : f32[256], bool[256]
  %k, %kmask = aten::native_dropout(%x, 0.25, true) : f32[256], bool[256]
  %ar = _c10d_functional::all_reduce(%x, "sum", "0") : f32[256]
  %z = aten::zeros([256], dtype=f32, device=exec_device) : f32[256]
  %s1 = aten::mul.Tensor(%r, %f) : f32[256]
  %s2 = aten::mul.Tensor(%s1, %u) : f32[256]
  %s3 = aten::mul.Tensor(%s2, %v) : f32[256]
  %s4 = aten::mul.Tensor(%s3, %rl) : f32[256]
  %s5 = aten::mul.Tensor(%s4, %m) : f32[256]
  %s6 = aten::mul.Tensor(%s5, %d) : f32[256]
  %s7 = aten::mul.Tensor(%s6, %e) : f32[256]
  %s8 = aten::mul.Tensor(%s7, %k) : f32[256]
  %s9 = aten::mul.Tensor(%s8, %ar) : f32[256]
  %s10 = aten::mul.Tensor(%s9, %ok) : f32[256]
  %loss = aten::sum(%s10) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %g1 = aten::mul.Tensor(%ge, %r) : f32[256]
  %g2 = aten::mul.Tensor(%g1, %f) : f32[256]
  %g3 = aten::mul.Tensor(%g2, %u) : f32[256]
  %g4 = aten::mul.Tensor(%g3, %v) : f32[256]
  %g5 = aten::mul.Tensor(%g4, %rl) : f32[256]
  %g6 = aten::mul.Tensor(%g5, %m) : f32[256]
  %g7 = aten::mul.Tensor(%g6, %d) : f32[256]
  %g8 = aten::native_dropout_backward(%g7, %mask, 2.0) : f32[256]
  %g9 = aten::mul.Tensor(%g8, %e) : f32[256]
  %g10 = aten::mul.Tensor(%g9, %k) : f32[256]
  %g11 = aten::mul.Tensor(%g10, %ar) : f32[256]
  %g12 = aten::mul.Tensor(%g11, %ok) : f32[256]
  %g13 = aten::mul.Tensor(%g12, %z) : f32[256]
  %gw = aten::sum(%g13) : f32[]
  output %loss loss
  output %gw gradient "w"
})";

// Three activations live across the backward peak (at %s), of different
// sizes and recomputation costs (FLOP estimates: one per output element):
//   %p  f64[256], 2048 bytes, exp                  256 flops: 8 bytes per flop
//   %q  f32[256], 1024 bytes, sin                  256 flops: 4 bytes per flop
//   %r  f32[256], 1024 bytes, cos + exp + sin      768 flops: 1.3 bytes per flop
const char *kThreeCosts = R"(graph @three_costs {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
  input %xd : f64[256] user_input
forward:
  %p = aten::exp(%xd) : f64[256]
  %q = aten::sin(%x) : f32[256]
  %r1 = aten::cos(%x) : f32[256]
  %r2 = aten::exp(%r1) : f32[256]
  %r = aten::sin(%r2) : f32[256]
  %m = aten::mul.Tensor(%q, %r) : f32[256]
  %mw = aten::mul.Tensor(%m, %w) : f32[256]
  %loss = aten::sum(%mw) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %big = aten::repeat(%ge, [8]) : f32[2048]
  %s = aten::sum(%big) : f32[]
  %g1 = aten::mul.Tensor(%ge, %s) : f32[256]
  %g2 = aten::mul.Tensor(%g1, %q) : f32[256]
  %g3 = aten::mul.Tensor(%g2, %r) : f32[256]
  %pd = aten::sum(%p) : f64[]
  %pf = aten::_to_copy(%pd, dtype=f32) : f32[]
  %g4 = aten::mul.Tensor(%g3, %pf) : f32[256]
  %gw = aten::sum(%g4) : f32[]
  output %loss loss
  output %gw gradient "w"
})";

} // namespace

// --- candidates -------------------------------------------------------------

TEST(RecomputeModelTest, CandidatesAreActivationStoragesWithTheirUses) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  EXPECT_EQ(candidateNames(model), (std::vector<std::string>{"a", "b"}));
  const CheckpointCandidate &a = model.candidates()[candidateNamed(model, "a")];
  EXPECT_EQ(a.bytes, 1024);
  EXPECT_EQ(a.created, 1);
  EXPECT_EQ(a.lastForwardUse, 2);  // %b = sin(%a)
  EXPECT_EQ(a.firstBackwardUse, 12); // %ca
  EXPECT_EQ(a.lastBackwardUse, 14);  // %gxw
  ASSERT_EQ(a.backwardValues.size(), 1u);
  EXPECT_EQ(a.backwardValues[0]->name(), "a");
  // Alone: %xw and %a made again (mul + exp, 256 flops each).
  EXPECT_EQ(a.standaloneNodes, 2u);
  EXPECT_DOUBLE_EQ(a.standaloneSeconds, secondsOf(model, {"xw", "a"}));
  const CheckpointCandidate &b = model.candidates()[candidateNamed(model, "b")];
  EXPECT_EQ(b.firstBackwardUse, 10); // %gb1
  EXPECT_EQ(b.standaloneNodes, 1u);  // sin of the kept %a
  EXPECT_DOUBLE_EQ(b.standaloneSeconds, secondsOf(model, {"b"}));
  // %xw is forward-only (not an activation); %loss is a graph output.
  EXPECT_EQ(model.candidateOf(valueNamed(*g, "xw")), -1);
  EXPECT_EQ(model.candidateOf(valueNamed(*g, "loss")), -1);
  EXPECT_EQ(exclusions(model),
            (std::map<std::string, std::string>{
                {"loss", "a graph output: kept to the end of the step"}}));
  // The unoptimised numbers.
  EXPECT_EQ(model.baseline().inputBytes, 1028);
  EXPECT_EQ(model.baseline().peakBytes, 11280);
  EXPECT_EQ(model.boundedPeak(), 10252);
  EXPECT_EQ(model.boundedMemory(), BoundedMemory::PeakAboveInputs);
}

TEST(RecomputeModelTest, WhatIsNeverRecomputedAndWhy) {
  auto g = parse(kNever);
  ASSERT_TRUE(g);
  // Without RNG state replay (the MILP's model): every dropout mask is kept.
  RecomputeModel model = modelOf(*g, BoundedMemory::PeakAboveInputs, /*replayRngStates=*/false);
  // %z (zeros) is made from nothing and recomputable too; %d is a training
  // dropout whose mask backward keeps: replayed.
  EXPECT_EQ(candidateNames(model), (std::vector<std::string>{"ok", "d", "z"}));
  std::map<std::string, std::string> why = exclusions(model);
  auto reason = [&](const std::string &name) {
    auto it = why.find(name);
    return it == why.end() ? std::string("(a candidate)") : it->second;
  };
  EXPECT_EQ(reason("h"), "written in place by %r = aten::relu_");
  EXPECT_EQ(reason("f"), "written in place by %fv2 = aten::mul_.Scalar");
  EXPECT_EQ(reason("u"), "%u cannot be recomputed: it needs %t2, and aten::add_.Scalar writes its "
                         "argument in place");
  EXPECT_EQ(reason("v"), "%v cannot be recomputed: it reads %buf, which is written in place "
                         "before backward needs it");
  EXPECT_EQ(reason("rl"), "%rl cannot be recomputed: it needs %rl, and aten::rand_like is random: "
                          "a second call would draw differently");
  EXPECT_EQ(reason("m"), "%m cannot be recomputed: it needs %n, and aten::rand_like is random: a "
                         "second call would draw differently");
  EXPECT_EQ(reason("mask"), "%mask cannot be recomputed: it is the mask %d = aten::native_dropout "
                            "drew: a second draw would differ");
  EXPECT_EQ(reason("e"), "%e cannot be recomputed: it needs %e, and aten::native_dropout is "
                         "random: a second call would draw differently");
  EXPECT_EQ(reason("k"), "%k cannot be recomputed: replaying %k = aten::native_dropout needs its "
                         "mask %kmask, which is not kept");
  EXPECT_EQ(reason("ar"), "%ar cannot be recomputed: it needs %ar, and "
                          "_c10d_functional::all_reduce has side effects");
  EXPECT_EQ(reason("loss"), "a graph output: kept to the end of the step");
  EXPECT_EQ(why.size(), 11u);
  for (const auto &[name, text] : why)
    EXPECT_EQ(model.candidateOf(valueNamed(*g, name)), -1) << name;

  // What the model says of single nodes.
  auto nodeOf = [&](llvm::StringRef v) { return valueNamed(*g, v)->definingNode(); };
  EXPECT_EQ(model.whyNotRecomputable(*nodeOf("ok")), "");
  EXPECT_EQ(model.whyNotRecomputable(*nodeOf("d")), ""); // replayable
  EXPECT_EQ(model.whyNotRecomputable(*nodeOf("g")), "it is not a forward node");
  EXPECT_TRUE(isReplayableDropout(*nodeOf("d")));
  EXPECT_FALSE(isReplayableDropout(*nodeOf("e"))); // eval mode
  EXPECT_FALSE(isReplayableDropout(*nodeOf("ok")));
}

TEST(RecomputeModelTest, AGraphWithoutBackwardIsRefused) {
  auto g = parse(R"(graph @infer {
  input %x : f32[4] user_input
forward:
  %a = aten::exp(%x) : f32[4]
  %b = aten::sin(%a) : f32[4]
  output %b user_output
})");
  ASSERT_TRUE(g);
  auto m = RecomputeModel::build(*g, estimatedNodeSeconds(*g), {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_CONTAINS(m.status().message(), "@infer has no backward nodes");
  auto wrong = RecomputeModel::build(*g, {1.0}, {});
  EXPECT_FALSE(wrong.ok());
}

// --- closure -----------------------------------------------------------------

TEST(RecomputeModelTest, ClosureOfOneActivation) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  int32_t a = candidateNamed(model, "a"), b = candidateNamed(model, "b");

  // %b alone: one sin of the kept %a, just before its first backward reader.
  auto onlyB = model.closure({b});
  ASSERT_TRUE(onlyB.ok()) << onlyB.status().message();
  EXPECT_EQ(clonesOf(model, *onlyB), (std::vector<std::string>{"b@gb1"}));
  EXPECT_EQ(onlyB->clones[0].dropout, RecomputeSet::Dropout::None);
  EXPECT_EQ(onlyB->clones[0].before, rankOf(model, "gb1"));
  EXPECT_DOUBLE_EQ(onlyB->seconds, secondsOf(model, {"b"}));
  ASSERT_EQ(onlyB->redirected.size(), 1u);
  EXPECT_EQ(onlyB->redirected[0].value->name(), "b");
  EXPECT_EQ(onlyB->redirected[0].before, rankOf(model, "gb1"));
  EXPECT_EQ(onlyB->redirected[0].until, rankOf(model, "gb1"));

  // %a alone: %xw (freed after forward) and %a, before %ca; one clone of %a
  // for both backward readers (%ca and %gxw).
  auto onlyA = model.closure({a});
  ASSERT_TRUE(onlyA.ok()) << onlyA.status().message();
  EXPECT_EQ(clonesOf(model, *onlyA), (std::vector<std::string>{"xw@ca", "a@ca"}));
  EXPECT_DOUBLE_EQ(onlyA->seconds, secondsOf(model, {"xw", "a"}));
  ASSERT_EQ(onlyA->redirected.size(), 1u);
  EXPECT_EQ(onlyA->redirected[0].before, rankOf(model, "ca"));
  EXPECT_EQ(onlyA->redirected[0].until, rankOf(model, "gxw"));

  EXPECT_TRUE(model.closure({})->clones.empty());
}

TEST(RecomputeModelTest, ClosureOfAChainMakesAValueAtEachPointThatNeedsIt) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  int32_t a = candidateNamed(model, "a"), b = candidateNamed(model, "b");
  // Backward reads %b (rank 10) before %a (rank 12): %b's clone needs %a
  // before %a's own clone exists, so %a (and %xw) are made at rank 10 for it
  // and again at rank 12 for %a's readers, never held from 10 to 12.
  const std::vector<std::string> expected = {"xw@gb1", "a@gb1", "b@gb1", "xw@ca", "a@ca"};
  auto ab = model.closure({a, b});
  ASSERT_TRUE(ab.ok()) << ab.status().message();
  EXPECT_EQ(clonesOf(model, *ab), expected);
  EXPECT_DOUBLE_EQ(ab->seconds, secondsOf(model, {"xw", "a", "b", "xw", "a"}));
  EXPECT_EQ(ab->redirected.size(), 2u);
  // The order the activations are dropped in does not matter.
  auto ba = model.closure({b, a});
  ASSERT_TRUE(ba.ok()) << ba.status().message();
  EXPECT_EQ(clonesOf(model, *ba), expected);
  EXPECT_DOUBLE_EQ(ba->seconds, ab->seconds);

  // PlanState: what dropping %a adds to a plan that drops %b (the repeated
  // %xw and %a included), and what a plan it already holds adds (nothing new).
  PlanState state(model);
  auto alone = state.marginal(a);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->second, 2u);
  ASSERT_TRUE(state.add(b).ok());
  EXPECT_TRUE(state.isDropped(b));
  EXPECT_FALSE(state.isDropped(a));
  auto more = state.marginal(a);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->second, 4u); // xw@gb1, a@gb1, xw@ca, a@ca
  EXPECT_DOUBLE_EQ(more->first, secondsOf(model, {"xw", "a", "xw", "a"}));
  EXPECT_FALSE(state.isDropped(a)); // marginal() changes nothing
  ASSERT_TRUE(state.add(a).ok());
  EXPECT_EQ(clonesOf(model, state.result()), expected);
}

TEST(RecomputeModelTest, AClonedValueIsReadFromItsOwnCloneWhileThatLives) {
  auto g = parse(kChainOwnFirst);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  int32_t a = candidateNamed(model, "a"), b = candidateNamed(model, "b");
  // %a is read first (%ca): its own clone lives until %gxw and %b's clone
  // reads it; %a is made once, for three readers.
  auto set = model.closure({a, b});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(clonesOf(model, *set), (std::vector<std::string>{"xw@ca", "a@ca", "b@gb1"}));
  EXPECT_DOUBLE_EQ(set->seconds, secondsOf(model, {"xw", "a", "b"}));

  ValueMap<Value *> map;
  std::unique_ptr<Graph> copy = g->clone(&map);
  ASSERT_TRUE(model.apply(*set, *copy, &map).ok());
  const Value *a1 = valueNamed(*copy, "a_1");
  ASSERT_TRUE(a1);
  std::set<std::string> readers;
  for (const Use &u : a1->uses())
    if (u.user)
      readers.insert(u.user->output(0)->name().str());
  EXPECT_EQ(readers, (std::set<std::string>{"ca", "b_1", "gxw"}));
}

TEST(RecomputeModelTest, WithRngStateReplayDropoutsWithoutTheirMasksAreCandidates) {
  auto g = parse(kNever);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  // %mask (256 bytes) and %k (1 KiB, its mask not kept) are no larger than
  // the RNG state a replay would keep instead.
  EXPECT_EQ(candidateNames(model), (std::vector<std::string>{"ok", "d", "z"}));
  std::map<std::string, std::string> why = exclusions(model);
  EXPECT_EQ(why["mask"], "the mask of %d = aten::native_dropout: no larger than the RNG state "
                         "(5064 bytes) its replay would keep instead");
  EXPECT_EQ(why["k"], "the output of %k = aten::native_dropout, whose mask is not kept: no "
                      "larger than the RNG state (5064 bytes) its replay would keep instead");
  // Other random operators stay saved.
  EXPECT_EQ(why["e"], "%e cannot be recomputed: it needs %e, and aten::native_dropout is "
                      "random: a second call would draw differently");
  EXPECT_EQ(why.size(), 11u);
}

TEST(RecomputeModelTest, DropoutIsReplayedFromItsMask) {
  auto g = parse(R"(graph @dropout {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
forward:
  %h = aten::mul.Tensor(%x, %w) : f32[256]
  %d, %mask = aten::native_dropout(%h, 0.2, true) : f32[256], bool[256]
  %dd = aten::mul.Tensor(%d, %d) : f32[256]
  %loss = aten::sum(%dd) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %gd1 = aten::mul.Tensor(%ge, %d) : f32[256]
  %gh = aten::native_dropout_backward(%gd1, %mask, 1.25) : f32[256]
  %gx = aten::mul.Tensor(%gh, %x) : f32[256]
  %gw = aten::sum(%gx) : f32[]
  output %loss loss
  output %gw gradient "w"
})");
  ASSERT_TRUE(g);
  // Without RNG state replay (the MILP's model) the mask is no candidate.
  RecomputeModel model = modelOf(*g, BoundedMemory::PeakAboveInputs, /*replayRngStates=*/false);
  EXPECT_EQ(candidateNames(model), (std::vector<std::string>{"d"}));
  EXPECT_EQ(model.candidateOf(valueNamed(*g, "mask")), -1);
  auto set = model.closure({candidateNamed(model, "d")});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(clonesOf(model, *set), (std::vector<std::string>{"h@gd1", "d@gd1"}));
  EXPECT_EQ(set->clones[0].dropout, RecomputeSet::Dropout::None);
  EXPECT_EQ(set->clones[1].dropout, RecomputeSet::Dropout::Mask);

  ValueMap<Value *> map;
  std::unique_ptr<Graph> copy = g->clone(&map);
  auto added = model.apply(*set, *copy, &map);
  ASSERT_TRUE(added.ok()) << added.status().message();
  EXPECT_EQ(*added, 2u);
  absl::Status st = verifyGraph(*copy);
  EXPECT_TRUE(st.ok()) << st.message();
  const Value *d1 = valueNamed(*copy, "d_1");
  ASSERT_TRUE(d1);
  const Node *replay = d1->definingNode();
  EXPECT_EQ(replay->opName(), "aten::native_dropout_backward");
  EXPECT_EQ(replay->phase(), Phase::Backward);
  EXPECT_EQ(replay->arg(0).getValue()->name(), "h_1");
  EXPECT_EQ(replay->arg(1).getValue(), map.lookup(valueNamed(*g, "mask"))); // the forward mask
  EXPECT_DOUBLE_EQ(replay->arg(2).getConstant().asFloat(), 1.25);
  ASSERT_TRUE(replay->attr(kRecomputeOfAttr));
  EXPECT_EQ(replay->attr(kRecomputeOfAttr)->asString(), "d");
  // No second draw.
  unsigned draws = 0;
  for (const Node &n : copy->nodes())
    draws += n.opName() == "aten::native_dropout";
  EXPECT_EQ(draws, 1u);
}

// --- apply and simulate ----------------------------------------------------------

TEST(RecomputeModelTest, ApplyRewritesACopyThatPassesTheVerifier) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  auto set = model.closure({candidateNamed(model, "a"), candidateNamed(model, "b")});
  ASSERT_TRUE(set.ok()) << set.status().message();

  ValueMap<Value *> map;
  std::unique_ptr<Graph> copy = g->clone(&map);
  NodeMap<int64_t> source;
  auto added = model.apply(*set, *copy, &map, &source);
  ASSERT_TRUE(added.ok()) << added.status().message();
  EXPECT_EQ(*added, 5u);
  EXPECT_EQ(copy->numNodes(), g->numNodes() + 5);
  absl::Status st = verifyGraph(*copy);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(g->numNodes(), 17u); // the model's graph is untouched

  // The clones, in order, each marked with what it recomputes and mapped to
  // its original's rank; the originals keep their ranks.
  std::vector<std::string> order;
  for (const Node &n : copy->nodes()) {
    const Value *out = n.output(0);
    if (const Constant *of = n.attr(kRecomputeOfAttr)) {
      EXPECT_EQ(n.phase(), Phase::Backward);
      order.push_back(of->asString() + "->" + out->name().str());
      EXPECT_EQ(source.lookup(&n), rankOf(model, of->asString()));
    } else {
      EXPECT_EQ(source.lookup(&n), model.baseline().rank.lookup(valueNamed(*g, out->name())->definingNode()));
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"xw->xw_1", "a->a_1", "b->b_1", "xw->xw_2", "a->a_2"}));

  // Forward reads the originals, backward only the clones.
  for (llvm::StringRef name : {"a", "b"}) {
    const Value *v = valueNamed(*copy, name);
    for (const Use &u : v->uses()) {
      if (u.user) {
        EXPECT_EQ(u.user->phase(), Phase::Forward) << "%" << name.str() << " read by "
                                                   << u.user->describe();
      }
    }
  }
  auto operandNames = [&](llvm::StringRef of) {
    std::vector<std::string> names;
    for (const Value *o : valueNamed(*copy, of)->definingNode()->operandValues())
      names.push_back(o->name().str());
    return names;
  };
  EXPECT_EQ(operandNames("gb1"), (std::vector<std::string>{"gbb", "b_1"}));
  EXPECT_EQ(operandNames("ca"), (std::vector<std::string>{"a_2"}));
  EXPECT_EQ(operandNames("gxw"), (std::vector<std::string>{"ga", "a_2"}));
  EXPECT_EQ(operandNames("b_1"), (std::vector<std::string>{"a_1"}));
  EXPECT_EQ(operandNames("bb").front(), "b");
}

TEST(RecomputeModelTest, SimulationOfTheEmptyPlanIsTheBaseline) {
  for (const char *text : {kChain, kChainOwnFirst, kThreeCosts, kNever}) {
    auto g = parse(text);
    ASSERT_TRUE(g);
    for (BoundedMemory bounded : {BoundedMemory::PeakAboveInputs, BoundedMemory::SavedActivations}) {
      RecomputeModel model = modelOf(*g, bounded);
      auto sim = model.simulate(RecomputeSet{});
      ASSERT_TRUE(sim.ok()) << sim.status().message();
      const LivenessResult &base = model.baseline();
      EXPECT_EQ(sim->peakAboveInputs, base.peakBytes - base.inputBytes) << g->name().str();
      EXPECT_EQ(sim->peakNode, base.peakNode) << g->name().str();
      EXPECT_EQ(sim->bounded, model.boundedPeak()) << g->name().str();
      EXPECT_EQ(sim->boundedByRank, std::vector<int64_t>(model.boundedTimeline().begin(),
                                                         model.boundedTimeline().end()));
    }
  }
}

TEST(RecomputeModelTest, SimulationIsTheLivenessOfTheRewrittenGraph) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  int32_t a = candidateNamed(model, "a"), b = candidateNamed(model, "b");
  // Peak above the inputs: 10252 unoptimised, 9228 with %b dropped, 8204
  // with both (test/Checkpoint/chains.test).
  for (auto [dropped, peak] : std::vector<std::pair<std::vector<int32_t>, int64_t>>{
           {{}, 10252}, {{b}, 9228}, {{a, b}, 8204}, {{a}, 9228}}) {
    auto set = model.closure(dropped);
    ASSERT_TRUE(set.ok());
    auto sim = model.simulate(*set);
    ASSERT_TRUE(sim.ok()) << sim.status().message();
    EXPECT_EQ(sim->peakAboveInputs, peak);
    EXPECT_EQ(sim->bounded, peak);
    // The same as the liveness analysis of the rewritten graph.
    ValueMap<Value *> map;
    std::unique_ptr<Graph> copy = g->clone(&map);
    ASSERT_TRUE(model.apply(*set, *copy, &map).ok());
    auto live = LivenessAnalysis::compute(*copy);
    ASSERT_TRUE(live.ok());
    EXPECT_EQ(live->peakBytes - live->inputBytes, peak);
    EXPECT_EQ(sim->peakNode, live->peakNode);
    // Per original rank: the highest of it and the clones before it.
    EXPECT_EQ(*std::max_element(sim->boundedByRank.begin(), sim->boundedByRank.end()), peak);
  }
}

// --- the greedy planner --------------------------------------------------------

namespace {

/// Every subset of the candidates: the cheapest recomputation (seconds) whose
/// simulated bounded memory meets `budget`; -1 when none does.
double bestPossible(const RecomputeModel &model, int64_t budget, std::vector<int32_t> *best) {
  const size_t n = model.candidates().size();
  double bestSeconds = -1;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    std::vector<int32_t> dropped;
    for (size_t c = 0; c < n; ++c)
      if (mask & (1u << c))
        dropped.push_back(static_cast<int32_t>(c));
    auto set = model.closure(dropped);
    if (!set.ok())
      continue;
    auto sim = model.simulate(*set);
    if (!sim.ok() || sim->bounded > budget)
      continue;
    if (bestSeconds < 0 || set->seconds < bestSeconds) {
      bestSeconds = set->seconds;
      *best = dropped;
    }
  }
  return bestSeconds;
}

std::set<std::string> droppedNames(const RecomputeModel &model, const CheckpointPlan &plan) {
  std::set<std::string> names;
  for (int32_t c : plan.dropped)
    names.insert(model.candidates()[c].storage->name().str());
  return names;
}

} // namespace

TEST(GreedyPlannerTest, TheRatioChoiceIsTheOptimumOnThreeActivations) {
  auto g = parse(kThreeCosts);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  EXPECT_EQ(candidateNames(model), (std::vector<std::string>{"p", "q", "r"}));
  const int64_t peak = model.boundedPeak();
  struct Case {
    int64_t freed;
    std::set<std::string> dropped;
  };
  // 2048 bytes: %p alone (256 flops), not %q + %r (1024). 3072: %p and %q
  // (512), not %p and %r (1024). 4096: all three.
  for (const Case &c : {Case{2048, {"p"}}, Case{3072, {"p", "q"}}, Case{4096, {"p", "q", "r"}},
                        Case{1, {"p"}}, Case{0, {}}}) {
    const int64_t budget = peak - c.freed;
    auto plan = planGreedy(model, budget);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_TRUE(plan->meetsBudget) << "budget " << budget;
    EXPECT_EQ(droppedNames(model, *plan), c.dropped) << "budget " << budget;
    EXPECT_EQ(plan->planner, "greedy");
    EXPECT_LE(plan->predictedPeak, budget);
    EXPECT_EQ(plan->predictedBounded, plan->predictedPeak);
    EXPECT_DOUBLE_EQ(plan->predictedExtraSeconds, plan->recompute.seconds);
    EXPECT_EQ(plan->gap, -1);
    EXPECT_EQ(plan->solverStatus, "");
    // The plan is what its dropped set rewrites to.
    auto sim = model.simulate(plan->recompute);
    ASSERT_TRUE(sim.ok());
    EXPECT_EQ(sim->peakAboveInputs, plan->predictedPeak);
    // And the cheapest of all plans that meet the budget.
    std::vector<int32_t> best;
    double bestSeconds = bestPossible(model, budget, &best);
    ASSERT_GE(bestSeconds, 0);
    EXPECT_DOUBLE_EQ(plan->predictedExtraSeconds, bestSeconds) << "budget " << budget;
  }
}

TEST(GreedyPlannerTest, AnUnmeetableBudgetGivesTheLeastItReaches) {
  auto g = parse(kThreeCosts);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g);
  // Dropping all three is the least there is.
  auto all = model.closure({0, 1, 2});
  ASSERT_TRUE(all.ok());
  auto least = model.simulate(*all);
  ASSERT_TRUE(least.ok());
  for (int64_t budget : {least->bounded - 1, int64_t{0}}) {
    auto plan = planGreedy(model, budget);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_FALSE(plan->meetsBudget);
    EXPECT_GT(plan->predictedBounded, budget);
    EXPECT_EQ(plan->predictedBounded, least->bounded);
  }
  // Exactly the least: met.
  auto plan = planGreedy(model, least->bounded);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->meetsBudget);
}

TEST(GreedyPlannerTest, AnActivationBudgetBoundsTheSavedActivations) {
  auto g = parse(kThreeCosts);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g, BoundedMemory::SavedActivations);
  // Saved activations at their highest: %p, %q, %r and the loss.
  EXPECT_EQ(model.boundedPeak(), 2048 + 1024 + 1024 + 4);
  auto plan = planGreedy(model, 1028 + 4);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->meetsBudget);
  EXPECT_EQ(droppedNames(model, *plan), (std::set<std::string>{"p", "q"}));
  EXPECT_EQ(plan->predictedBounded, 1024 + 4);
  EXPECT_EQ(plan->predictedActivations, 1024 + 4);
  // The loss (a graph output) stays: 4 bytes is the least.
  auto none = planGreedy(model, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->meetsBudget);
  EXPECT_EQ(none->predictedBounded, 4);
}

// activations= with budget= too: the saved activations within 1032 bytes
// need %p and %q dropped; the peak above the inputs (at %big, with %r live)
// is then still over a cap that only dropping %r as well meets.
TEST(GreedyPlannerTest, APeakCapOnSavedActivationsIsMetToo) {
  auto g = parse(kThreeCosts);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g, BoundedMemory::SavedActivations);
  const int64_t budget = 1028 + 4;
  auto loose = planGreedy(model, budget);
  ASSERT_TRUE(loose.ok()) << loose.status().message();
  ASSERT_TRUE(loose->meetsBudget);
  EXPECT_EQ(droppedNames(model, *loose), (std::set<std::string>{"p", "q"}));
  auto all = model.closure({0, 1, 2});
  ASSERT_TRUE(all.ok());
  auto least = model.simulate(*all);
  ASSERT_TRUE(least.ok());
  ASSERT_LT(least->peakAboveInputs, loose->predictedPeak); // the cap below binds

  auto capped = planGreedy(model, budget, least->peakAboveInputs);
  ASSERT_TRUE(capped.ok()) << capped.status().message();
  EXPECT_TRUE(capped->meetsBudget);
  EXPECT_EQ(droppedNames(model, *capped), (std::set<std::string>{"p", "q", "r"}));
  EXPECT_LE(capped->predictedBounded, budget);
  EXPECT_EQ(capped->predictedPeak, least->peakAboveInputs);
  auto sim = model.simulate(capped->recompute);
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(sim->peakAboveInputs, capped->predictedPeak);

  // A cap no plan meets: unmet, though the saved activations are within theirs.
  auto under = planGreedy(model, budget, least->peakAboveInputs - 1);
  ASSERT_TRUE(under.ok());
  EXPECT_FALSE(under->meetsBudget);
  EXPECT_LE(under->predictedBounded, budget);
  EXPECT_GT(under->predictedPeak, least->peakAboveInputs - 1);
  // A cap the plan already meets changes nothing.
  auto same = planGreedy(model, budget, loose->predictedPeak);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->meetsBudget);
  EXPECT_EQ(droppedNames(model, *same), droppedNames(model, *loose));
}

// The saved activations peak where %m reads %q and %r in forward (the
// backward does not read the loss: no activation but %p, %q, %r). Dropped, an
// activation stops counting over its whole life, its forward reads included,
// and all three can go.
TEST(GreedyPlannerTest, AnActivationPeakInForwardIsLoweredToo) {
  std::string text = kThreeCosts;
  const std::string ones = "%g = aten::ones_like(%loss) : f32[]";
  text.replace(text.find(ones), ones.size(),
               "%g = aten::scalar_tensor(1.0, dtype=f32, layout=strided, device=exec_device) : f32[]");
  auto g = parse(text);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g, BoundedMemory::SavedActivations);
  EXPECT_EQ(model.boundedPeak(), 4096);
  EXPECT_EQ(model.baseline().lookup(valueNamed(*g, "q"))->lastForwardUse, rankOf(model, "m"));
  for (auto [budget, dropped] : std::vector<std::pair<int64_t, std::set<std::string>>>{
           {2048, {"p"}}, {1024, {"p", "q"}}, {0, {"p", "q", "r"}}}) {
    auto plan = planGreedy(model, budget);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_TRUE(plan->meetsBudget) << "budget " << budget << ": reached " << plan->predictedBounded;
    EXPECT_EQ(droppedNames(model, *plan), dropped) << "budget " << budget;
    EXPECT_LE(plan->predictedActivations, budget);
  }
}

// A residual chain %h1 -> %h2 -> %h3 -> %h4, every link saved for backward,
// which reads %h4 first and the rest in reverse, after %big. With all four
// dropped and every repeat shared (the relaxation's start), the clone of %h4
// at the start of backward makes the chain before it and holds %h1-%h3
// across %big. Keeping %h3 instead (and dropping %z, off the chain, to stay
// within the saved activations) cuts the chain there: the peak falls under a
// cap the shared plan is over, for less recomputation than making the
// shared clones later (each link then rebuilt from %x where it is read).
const char *kResidualChain = R"(graph @residual_chain {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
forward:
  %h1 = aten::sin(%x) : f32[256]
  %h2 = aten::cos(%h1) : f32[256]
  %h3 = aten::exp(%h2) : f32[256]
  %h4 = aten::tanh(%h3) : f32[256]
  %z = aten::cos(%x) : f32[256]
  %hz = aten::mul.Tensor(%h4, %z) : f32[256]
  %hw = aten::mul.Tensor(%hz, %w) : f32[256]
  %loss = aten::sum(%hw) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %g4 = aten::mul.Tensor(%ge, %h4) : f32[256]
  %big = aten::repeat(%g4, [8]) : f32[2048]
  %s = aten::sum(%big) : f32[]
  %g3a = aten::mul.Tensor(%g4, %s) : f32[256]
  %g3 = aten::mul.Tensor(%g3a, %h3) : f32[256]
  %g2 = aten::mul.Tensor(%g3, %h2) : f32[256]
  %g1 = aten::mul.Tensor(%g2, %h1) : f32[256]
  %gz = aten::mul.Tensor(%g1, %z) : f32[256]
  %gw = aten::sum(%gz) : f32[]
  output %loss loss
  output %gw gradient "w"
})";

TEST(GreedyPlannerTest, ASharedChainOverTheCapIsCutWhereThatCostsLess) {
  auto g = parse(kResidualChain);
  ASSERT_TRUE(g);
  RecomputeModel model = modelOf(*g, BoundedMemory::SavedActivations);
  const std::vector<int32_t> chain = {candidateNamed(model, "h1"), candidateNamed(model, "h2"),
                                      candidateNamed(model, "h3"), candidateNamed(model, "h4")};
  const int64_t budget = 1024 + 4; // %z (or one link) and the loss
  const int64_t cap = 12 * 1024;
  const double node = 256 / kNominalFlopsPerSecond; // each link, and %z
  // Every repeat shared, no cap: each link made once, all held across %big.
  auto shared = planGreedyFrom(model, budget, chain, {}, "start", {kNoPeakCap, true, false});
  ASSERT_TRUE(shared.ok() && *shared) << shared.status().message();
  EXPECT_TRUE((*shared)->meetsBudget);
  EXPECT_DOUBLE_EQ((*shared)->predictedExtraSeconds, 4 * node);
  ASSERT_GT((*shared)->predictedPeak, cap);
  // Under the cap, the shared clones made later: each link rebuilt from %x
  // where it is read (4 + 1 + 1 + 1 links with the sharing that fits).
  auto lowered = planGreedyFrom(model, budget, chain, {}, "start", {cap, true, false});
  ASSERT_TRUE(lowered.ok() && *lowered) << lowered.status().message();
  EXPECT_TRUE((*lowered)->meetsBudget);
  EXPECT_LE((*lowered)->predictedPeak, cap);
  EXPECT_DOUBLE_EQ((*lowered)->predictedExtraSeconds, 7 * node);
  // The chain cut at %h3 (the latest link the shared clones read at the
  // peak), %z dropped instead: as fast as sharing everything, under the cap.
  auto cut = planGreedyFrom(model, budget, chain, {}, "start", {cap, true, true});
  ASSERT_TRUE(cut.ok() && *cut) << cut.status().message();
  EXPECT_TRUE((*cut)->meetsBudget);
  EXPECT_LE((*cut)->predictedBounded, budget);
  EXPECT_LE((*cut)->predictedPeak, cap);
  EXPECT_EQ(droppedNames(model, **cut), (std::set<std::string>{"h1", "h2", "h4", "z"}));
  EXPECT_DOUBLE_EQ((*cut)->predictedExtraSeconds, 4 * node);
  auto sim = model.simulate((*cut)->recompute);
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(sim->peakAboveInputs, (*cut)->predictedPeak);
  // Nothing over the cap: nothing kept.
  auto uncapped = planGreedyFrom(model, budget, chain, {}, "start", {kNoPeakCap, true, true});
  ASSERT_TRUE(uncapped.ok() && *uncapped);
  EXPECT_EQ(droppedNames(model, **uncapped), (std::set<std::string>{"h1", "h2", "h3", "h4"}));
}

// --- PeakTracker -------------------------------------------------------------------

TEST(PeakTrackerTest, PeakRankIsTheFirstRankHoldingThePeak) {
  PeakTracker t(std::vector<int64_t>{1, 5, 3, 5, 2});
  EXPECT_EQ(t.size(), 5);
  EXPECT_EQ(t.peak(), 5);
  EXPECT_EQ(t.peakRank(), 1);
  t.add(0, 1, -1); // 0 4 3 5 2
  EXPECT_EQ(t.peak(), 5);
  EXPECT_EQ(t.peakRank(), 3);
  t.add(3, 3, -3); // 0 4 3 2 2
  EXPECT_EQ(t.peak(), 4);
  EXPECT_EQ(t.peakRank(), 1);
  t.add(2, 4, 2); // 0 4 5 4 4
  EXPECT_EQ(t.peakRank(), 2);
  t.add(1, 1, 1); // 0 5 5 4 4: a tie goes to the first
  EXPECT_EQ(t.peak(), 5);
  EXPECT_EQ(t.peakRank(), 1);
  EXPECT_EQ(t.at(0), 0);
  EXPECT_EQ(t.at(2), 5);
  EXPECT_EQ(t.at(4), 4);
  t.add(-10, 100, 1); // clamped to the timeline: 1 6 6 5 5
  EXPECT_EQ(t.at(0), 1);
  EXPECT_EQ(t.at(4), 5);
  EXPECT_EQ(t.peakRank(), 1);
  t.add(3, 2, 100); // an empty range: nothing
  EXPECT_EQ(t.peak(), 6);
  t.add(0, 4, -10); // all negative: -9 -4 -4 -5 -5
  EXPECT_EQ(t.peak(), -4);
  EXPECT_EQ(t.peakRank(), 1);

  PeakTracker empty(llvm::ArrayRef<int64_t>{});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(empty.peak(), 0);
  EXPECT_EQ(empty.peakRank(), -1);
  empty.add(0, 3, 7);
  EXPECT_EQ(empty.peak(), 0);

  PeakTracker one(std::vector<int64_t>{7});
  EXPECT_EQ(one.peakRank(), 0);
  one.add(0, 0, -7);
  EXPECT_EQ(one.peak(), 0);
  EXPECT_EQ(one.peakRank(), 0);
}

TEST(PeakTrackerTest, AgreesWithTheTimelineUnderRandomRangeAdds) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 70);
    std::vector<int64_t> timeline(n);
    for (int64_t &b : timeline)
      b = static_cast<int64_t>(rng() % 8); // small values: many ties
    PeakTracker t(timeline);
    for (int step = 0; step < 40; ++step) {
      int64_t first = static_cast<int64_t>(rng() % (n + 4)) - 2;
      int64_t last = static_cast<int64_t>(rng() % (n + 4)) - 2;
      int64_t bytes = static_cast<int64_t>(rng() % 9) - 4;
      t.add(first, last, bytes);
      for (int64_t r = std::max<int64_t>(first, 0); r <= std::min<int64_t>(last, n - 1); ++r)
        timeline[r] += bytes;
      auto it = std::max_element(timeline.begin(), timeline.end()); // the first maximum
      ASSERT_EQ(t.peak(), *it) << "trial " << trial << " step " << step;
      ASSERT_EQ(t.peakRank(), it - timeline.begin()) << "trial " << trial << " step " << step;
      int64_t r = static_cast<int64_t>(rng() % n);
      ASSERT_EQ(t.at(r), timeline[r]);
    }
  }
}

// --- the pass ----------------------------------------------------------------

namespace {

std::unique_ptr<CheckpointPass> checkpointPass(const PassOptions &options, absl::Status *status) {
  auto pass = PassRegistry::instance().create("checkpoint");
  EXPECT_TRUE(pass.ok());
  *status = (*pass)->setOptions(options);
  return std::unique_ptr<CheckpointPass>(static_cast<CheckpointPass *>(pass->release()));
}

} // namespace

TEST(CheckpointPassTest, OptionsNeedABudget) {
  struct Case {
    PassOptions options;
    const char *message; // "" when valid
  };
  for (const Case &c : std::initializer_list<Case>{
           {{}, "give peak= (the whole step's peak"},
           {{{"cost", "flops"}}, "give peak= (the whole step's peak"},
           {{{"peak", "6GiB"}}, ""},
           {{{"peak", "80%"}, {"activations", "50%"}}, ""},
           {{{"peak", "6GiB"}, {"budget", "50%"}}, "give peak= (the whole step's peak) or budget="},
           {{{"peak", "6GiB"}, {"activations", "50%"}, {"planner", "milp"}},
            "planner=milp plans for one bound: give peak= or activations=, not both"},
           {{{"activations", "30%"}, {"peak", "6GiB"}, {"planner", "torch"}},
            "without budget= or peak="},
           {{{"budget", "50%"}, {"activations", "50%"}}, ""},
           {{{"budget", "50%"}, {"activations", "50%"}, {"planner", "milp"}},
            "planner=milp plans for one bound: give budget= or activations=, not both"},
           {{{"activations", "1GiB"}}, ""}, // bytes, as graph_opt.partitioner(memory_budget=) gives
           {{{"budget", "50%"}, {"planner", "foo"}},
            "option 'planner' must be greedy, milp, structured or torch, got 'foo'"},
           {{{"activations", "30%"}, {"planner", "torch"}}, ""},
           {{{"budget", "50%"}, {"planner", "torch"}}, "planner=torch runs torch.compile's partitioner"},
           {{{"activations", "30%"}, {"budget", "50%"}, {"planner", "torch"}},
            "give activations= as a share up to 100% (activations=30%), without budget="},
           {{{"activations", "1GiB"}, {"planner", "torch"}}, "give activations= as a share"},
           {{{"activations", "150%"}, {"planner", "torch"}}, "give activations= as a share"},
           {{{"budget", "50%"}, {"time-limit", "0"}}, "time-limit must be positive seconds"},
           {{{"budget", "1.5GiB"}}, ""},
           {{{"budget", "60%"}, {"cost", "flops"}, {"measure", "false"}}, ""},
           {{{"activations", "50%"}}, ""},
       }) {
    absl::Status st;
    auto pass = checkpointPass(c.options, &st);
    if (std::string(c.message).empty()) {
      EXPECT_TRUE(st.ok()) << st.message();
      continue;
    }
    EXPECT_FALSE(st.ok());
    EXPECT_CONTAINS(st.message(), c.message);
    EXPECT_CONTAINS(st.message(), "pass 'checkpoint'");
  }
}

TEST(CheckpointPassTest, RewritesTheGraphAndReportsThePlan) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  absl::Status st;
  auto pass = checkpointPass({{"budget", "8204"}, {"cost", "flops"}, {"measure", "false"}}, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  AnalysisManager analyses;
  auto changed = pass->transform(*g, analyses);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_TRUE(verifyGraph(*g).ok());
  // %a's own clone is hoisted to %b's recomputation and shared: 3 clones, not 5.
  EXPECT_EQ(g->numNodes(), 17u + 3u);
  ASSERT_TRUE(pass->outcome().has_value());
  const CheckpointPass::Outcome &o = *pass->outcome();
  EXPECT_EQ(o.graph, "chain");
  EXPECT_EQ(o.planner, "greedy");
  EXPECT_EQ(o.budgetBytes, 8204);
  EXPECT_EQ(o.baselinePeak, 10252);
  EXPECT_EQ(o.predictedPeak, 8204);
  EXPECT_EQ(o.measuredPeak, -1);
  EXPECT_EQ(o.nodesAdded, 3u);
  EXPECT_EQ(o.planAttempts, 1u);
  EXPECT_TRUE(o.changed);
  std::map<std::string, std::string> decisions;
  for (const CheckpointPass::Activation &a : o.activations)
    decisions[a.name] = a.decision;
  EXPECT_EQ(decisions, (std::map<std::string, std::string>{
                           {"a", "recomputed"}, {"b", "recomputed"}, {"loss", "never"}}));
}

TEST(CheckpointPassTest, AnUnmeetableBudgetLeavesTheGraphAsItWas) {
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  absl::Status st;
  auto pass = checkpointPass({{"budget", "8000"}, {"cost", "flops"}, {"measure", "false"}}, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  AnalysisManager analyses;
  auto changed = pass->transform(*g, analyses);
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_CONTAINS(changed.status().message(), "cannot be met");
  EXPECT_CONTAINS(changed.status().message(), "(8204 bytes)");
  EXPECT_EQ(g->numNodes(), 17u);
  for (const Node &n : g->nodes())
    EXPECT_FALSE(n.attr(kRecomputeOfAttr));
}

// peak= is budget= with the inputs' bytes added: the same plan, and a
// refusal that states the least reachable peak with the inputs.
TEST(CheckpointPassTest, PeakIsTheBudgetWithTheInputs) {
  auto run = [](const PassOptions &options) {
    auto g = parse(kChain);
    EXPECT_TRUE(g);
    absl::Status st;
    auto pass = checkpointPass(options, &st);
    EXPECT_TRUE(st.ok()) << st.message();
    AnalysisManager analyses;
    auto changed = pass->transform(*g, analyses);
    return std::make_tuple(std::move(g), std::move(pass), changed.status());
  };
  auto [byBudget, budgetPass, budgetStatus] =
      run({{"budget", "8204"}, {"cost", "flops"}, {"measure", "false"}});
  ASSERT_TRUE(budgetStatus.ok()) << budgetStatus.message();
  const CheckpointPass::Outcome &b = *budgetPass->outcome();
  EXPECT_GT(b.inputBytes, 0);
  EXPECT_EQ(b.stepPeakBound, -1);
  const int64_t whole = 8204 + b.inputBytes;
  auto [byPeak, peakPass, peakStatus] =
      run({{"peak", std::to_string(whole)}, {"cost", "flops"}, {"measure", "false"}});
  ASSERT_TRUE(peakStatus.ok()) << peakStatus.message();
  const CheckpointPass::Outcome &p = *peakPass->outcome();
  EXPECT_EQ(p.stepPeakBound, whole);
  EXPECT_EQ(p.budgetBytes, 8204);
  EXPECT_EQ(p.predictedPeak, b.predictedPeak);
  EXPECT_EQ(p.inputBytes, b.inputBytes);
  EXPECT_EQ(printGraphToString(*byPeak), printGraphToString(*byBudget));
  EXPECT_EQ(p.budgetText, "peak=" + std::to_string(whole));

  auto [unmet, unmetPass, unmetStatus] =
      run({{"peak", std::to_string(8000 + b.inputBytes)}, {"cost", "flops"}, {"measure", "false"}});
  EXPECT_EQ(unmetStatus.code(), absl::StatusCode::kOutOfRange);
  EXPECT_CONTAINS(unmetStatus.message(), "of the whole step's peak");
  EXPECT_CONTAINS(unmetStatus.message(), "(" + std::to_string(whole) + " bytes)");
  EXPECT_EQ(unmet->numNodes(), 17u);
}

// cost=profile and measure=true on a zoo training graph (dropout active):
// the rewritten step's measured peak above the inputs is within the budget
// (the pass plans again, tighter, when it is not).
TEST(CheckpointPassTest, MeasuredPeakIsWithinTheBudget) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  for (const char *archive : {"gpt2-train", "bert-train"}) {
    auto model = importPt2(zooDir() + "/" + archive + ".pt2");
    ASSERT_TRUE(model.ok()) << model.status().message();
    AnalysisManager analyses;
    ExecutionContext context;
    context.weights = &model->weights;
    context.inputs = model->exampleInputs;
    analyses.setExecutionContext(context);
    absl::Status st;
    auto pass = checkpointPass({{"budget", "90%"}}, &st); // cost=profile, measure=true
    ASSERT_TRUE(st.ok()) << st.message();
    auto changed = pass->transform(*model->graph, analyses);
    ASSERT_TRUE(changed.ok()) << archive << ": " << changed.status().message();
    EXPECT_TRUE(*changed) << archive;
    absl::Status verified = verifyGraph(*model->graph);
    EXPECT_TRUE(verified.ok()) << verified.message();
    ASSERT_TRUE(pass->outcome().has_value());
    const CheckpointPass::Outcome &o = *pass->outcome();
    EXPECT_CONTAINS(o.costSource, "profile: ");
    EXPECT_GT(o.budgetBytes, 0);
    EXPECT_LE(o.predictedPeak, o.budgetBytes) << archive;
    EXPECT_GE(o.measuredPeak, 0) << archive;
    EXPECT_LE(o.measuredPeak, o.budgetBytes) << archive;
    EXPECT_GT(o.measuredBaselinePeak, o.budgetBytes) << archive;
    EXPECT_GT(o.measuredSeconds, 0);
    EXPECT_GE(o.planAttempts, 1u);
    // every plan made was measured, and the one applied measured last
    ASSERT_EQ(o.measuredPlanPeaks.size(), o.planAttempts) << archive;
    EXPECT_EQ(o.measuredPlanPeaks.back(), o.measuredPeak) << archive;
  }
}

namespace {

/// A planner of a test's own: it drops every candidate, each with its own clone.
class DropEverythingPlanner : public Planner {
public:
  llvm::StringRef name() const override { return "test-drop-everything"; }
  absl::StatusOr<CheckpointPlan> plan(const PlanRequest &request, LadderReport *) const override {
    CheckpointPlan plan;
    plan.planner = "test-drop-everything";
    for (size_t c = 0; c < request.model.candidates().size(); ++c)
      plan.dropped.push_back(static_cast<int32_t>(c));
    if (absl::Status st = completePlan(request.model, request.target, plan); !st.ok())
      return st;
    return plan;
  }
};

} // namespace

// planner= names whatever is registered (Planner.h): a planner added by name,
// here at run time, is listed, chosen and run with no other change; taken
// out, it is an unknown name again.
TEST(PlannerRegistryTest, APlannerRegisteredByNameIsWhatPlannerRuns) {
  PlannerRegistry &registry = PlannerRegistry::instance();
  for (const char *name : {"greedy", "milp", "structured", "torch"})
    EXPECT_NE(registry.find(name), nullptr) << name;
  EXPECT_EQ(registry.find("test-drop-everything"), nullptr);
  registry.add({"test-drop-everything", "drops every candidate",
                std::make_unique<DropEverythingPlanner>()});
  EXPECT_CONTAINS(registry.namesText(), "structured, test-drop-everything or torch");
  auto g = parse(kChain);
  ASSERT_TRUE(g);
  absl::Status st;
  auto pass = checkpointPass({{"budget", "100%"},
                              {"planner", "test-drop-everything"},
                              {"cost", "flops"},
                              {"measure", "false"}},
                             &st);
  ASSERT_TRUE(st.ok()) << st.message();
  AnalysisManager analyses;
  auto changed = pass->transform(*g, analyses);
  ASSERT_TRUE(registry.remove("test-drop-everything"));
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_TRUE(verifyGraph(*g).ok());
  const CheckpointPass::Outcome &o = *pass->outcome();
  EXPECT_EQ(o.planner, "test-drop-everything");
  std::map<std::string, std::string> decisions;
  for (const CheckpointPass::Activation &a : o.activations)
    decisions[a.name] = a.decision;
  EXPECT_EQ(decisions["a"], "recomputed");
  EXPECT_EQ(decisions["b"], "recomputed");
  checkpointPass({{"budget", "100%"}, {"planner", "test-drop-everything"}}, &st);
  EXPECT_CONTAINS(std::string(st.message()), "must be greedy, milp, structured or torch");
}
