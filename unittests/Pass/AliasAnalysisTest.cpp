//===- AliasAnalysisTest.cpp - The alias analysis and the legality predicates ===//
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Alias/RewriteLegality.h"

#include "../TestSupport.h"

#include <gtest/gtest.h>

using namespace graphopt;
using graphopt::test::parseOrFail;
using graphopt::test::valueNamed;

namespace {

Node *nodeOf(const Graph &g, llvm::StringRef name) { return valueNamed(g, name)->definingNode(); }

const char *kViews = R"(graph @views {
  input %w : f32[4] parameter "w"
  input %w2 : f32[4] parameter "w2" tied %w
  input %x : f32[8, 4] user_input
forward:
  %big = aten::exp(%x) : f32[8, 4]
  %row = aten::select.int(%big, 0, 1) : f32[4]{offset=4}
  %t = aten::t(%big) : f32[4, 8]{strides=[1, 4]}
  %r1 = aten::relu(%big) : f32[8, 4]
  %m = aten::mul_.Tensor(%row, 2) : f32[4]
  %r2 = aten::relu(%big) : f32[8, 4]
  %a = aten::add.Tensor(%w2, %w) : f32[4]
  %s = aten::sum(%t) : f32[]
  output %s user_output
  output %r2 user_output
  output %a user_output
  output %t user_output
})";

} // namespace

TEST(AliasAnalysisTest, RootsFollowViewsAndTiedInputs) {
  auto g = parseOrFail(kViews);
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  Value *big = valueNamed(*g, "big"), *row = valueNamed(*g, "row"), *t = valueNamed(*g, "t");
  Value *m = valueNamed(*g, "m"), *w = valueNamed(*g, "w"), *w2 = valueNamed(*g, "w2");
  EXPECT_TRUE(aa.ownsStorage(big));
  EXPECT_FALSE(aa.ownsStorage(row));
  ASSERT_EQ(aa.roots(m).size(), 1u);
  EXPECT_EQ(aa.roots(m)[0], big); // an in-place result of a view of %big
  EXPECT_TRUE(aa.mayShareStorage(t, row));
  // A tied input lives in the storage of the input it is tied to.
  EXPECT_EQ(aa.roots(w2)[0], w);
  EXPECT_TRUE(aa.mayShareStorage(w, w2));
  EXPECT_TRUE(aa.isRootedInGraphInput(w2));
  EXPECT_FALSE(aa.isRootedInGraphInput(t));
  // %row spans 16 bytes, but keeps all 128 of %big alive.
  EXPECT_EQ(aa.storageBytesKeptAlive(row), 128);
  llvm::SmallVector<const Value *, 8> views = aa.viewsOf(big);
  EXPECT_TRUE(llvm::is_contained(views, row));
  EXPECT_TRUE(llvm::is_contained(views, t));
  EXPECT_TRUE(llvm::is_contained(views, m));
}

TEST(AliasAnalysisTest, WritesHavePositionsThroughViews) {
  auto g = parseOrFail(kViews);
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  Value *big = valueNamed(*g, "big"), *t = valueNamed(*g, "t"), *x = valueNamed(*g, "x");
  const Node *r1 = nodeOf(*g, "r1"), *r2 = nodeOf(*g, "r2"), *m = nodeOf(*g, "m");
  EXPECT_GE(aa.firstWriteOf(valueNamed(*g, "row")), 0);
  EXPECT_TRUE(aa.writtenBetween(big, aa.rankOf(r1), aa.rankOf(r2)));
  EXPECT_TRUE(aa.writtenBetween(t, aa.rankOf(r1), aa.rankOf(r2))); // another view of it
  EXPECT_FALSE(aa.writtenBetween(big, aa.rankOf(m), aa.rankOf(r2))); // the write itself is not between
  EXPECT_FALSE(aa.writtenBetween(x, -1, 100));
  EXPECT_EQ(aa.firstWriteOf(big), aa.rankOf(m));
  EXPECT_EQ(aa.lastWriteOf(big), aa.rankOf(m));
  // Written through: the written view and its base, not a sibling view.
  EXPECT_TRUE(aa.isWrittenThrough(valueNamed(*g, "row")));
  EXPECT_TRUE(aa.isWrittenThrough(big));
  EXPECT_FALSE(aa.isWrittenThrough(t));
}

TEST(AliasAnalysisTest, WrittenGraphInputsGoThroughViews) {
  // The executor copies exactly these inputs before a run: %p written
  // through a slice of it, %v directly; %x only read.
  auto g = parseOrFail(R"(graph @writes {
  input %x : f32[4] user_input
  input %p : f32[8] parameter "p"
  input %v : f32[4] buffer "v"
forward:
  %s = aten::slice.Tensor(%p, 0, 0, 4) : f32[4]
  %a = aten::add_.Tensor(%s, %x) : f32[4]
  %b = aten::mul_.Tensor(%v, 2) : f32[4]
  %c = aten::add.Tensor(%a, %b) : f32[4]
  output %c user_output
})");
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  llvm::SmallVector<unsigned, 4> inputs = aa.writtenGraphInputs();
  EXPECT_EQ(std::vector<unsigned>(inputs.begin(), inputs.end()), (std::vector<unsigned>{1, 2}));
  llvm::SmallVector<const Value *, 2> written = aa.rootsWrittenBy(*nodeOf(*g, "a"));
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0], valueNamed(*g, "p"));
  EXPECT_TRUE(aa.rootsWrittenBy(*nodeOf(*g, "c")).empty());
}

TEST(AliasAnalysisTest, ReadsAndOutputs) {
  auto g = parseOrFail(kViews);
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  Value *big = valueNamed(*g, "big");
  EXPECT_TRUE(aa.isLastReader(big, *nodeOf(*g, "s"))); // through %t
  EXPECT_FALSE(aa.isLastReader(big, *nodeOf(*g, "r2")));
  EXPECT_TRUE(aa.reachesGraphOutput(big));          // %t is returned
  EXPECT_TRUE(aa.reachesGraphOutput(valueNamed(*g, "row")));
  EXPECT_FALSE(aa.reachesGraphOutput(valueNamed(*g, "r1")));
  EXPECT_EQ(aa.readsOf(*nodeOf(*g, "a"), valueNamed(*g, "w")), 2u); // %w2 and %w
  // No two outputs share storage; returning a second view of %big makes a pair.
  EXPECT_TRUE(outputsSharingStorage(*g).empty());
  g->addOutput(valueNamed(*g, "m"), OutputRole::UserOutput);
  std::set<std::pair<unsigned, unsigned>> pairs = outputsSharingStorage(*g);
  EXPECT_EQ(pairs, (std::set<std::pair<unsigned, unsigned>>{{3, 4}}));
}

TEST(AliasAnalysisTest, NoteReplacedMovesWhatLivedInTheOldStorage) {
  auto g = parseOrFail(R"(graph @merge {
  input %x : f32[4] user_input
forward:
  %a = aten::exp(%x) : f32[4]
  %b = aten::exp(%x) : f32[4]
  %v = aten::view(%b, [2, 2]) : f32[2, 2]
  %s = aten::sum(%v) : f32[]
  output %s user_output
  output %v user_output
})");
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  Value *a = valueNamed(*g, "a"), *b = valueNamed(*g, "b"), *v = valueNamed(*g, "v");
  EXPECT_FALSE(aa.reachesGraphOutput(a));
  b->replaceAllUsesWith(a);
  aa.noteReplaced(b, a);
  ASSERT_TRUE(g->eraseNode(b->definingNode()).ok());
  ASSERT_EQ(aa.roots(v).size(), 1u);
  EXPECT_EQ(aa.roots(v)[0], a); // the view now lives in %a
  EXPECT_TRUE(aa.reachesGraphOutput(a)); // and is returned
  EXPECT_TRUE(aa.isLastReader(a, *nodeOf(*g, "s")));
  // A node made after the snapshot is followed through its definition.
  auto t = g->createNode("aten::t", {Argument::value(v)},
                         {ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2, 2}))});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(aa.roots((*t)->output())[0], a);
}

TEST(RewriteLegalityTest, MergesNeverJoinTwoGraphOutputs) {
  auto g = parseOrFail(R"(graph @grads {
  input %g : f32[8, 4] user_input
forward:
  %gb1 = aten::sum.dim_IntList(%g, [0]) : f32[4]
  %gb2 = aten::sum.dim_IntList(%g, [0]) : f32[4]
  %gb3 = aten::sum.dim_IntList(%g, [0]) : f32[4]
  %v1 = aten::view(%g, [32]) : f32[32]
  %v2 = aten::view(%g, [32]) : f32[32]
  %r1 = aten::rand_like(%g) : f32[8, 4]
  %r2 = aten::rand_like(%g) : f32[8, 4]
  output %gb1 user_output
  output %gb2 user_output
  output %gb3 user_output
  output %v1 user_output
  output %v2 user_output
  output %r1 user_output
  output %r2 user_output
})");
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  EXPECT_EQ(whyNotMergeable(aa, *nodeOf(*g, "gb1"), *nodeOf(*g, "gb2")),
            "two graph outputs would share storage");
  EXPECT_EQ(whyNotMergeable(aa, *nodeOf(*g, "v1"), *nodeOf(*g, "v2")), ""); // one base already
  EXPECT_EQ(whyNotMergeable(aa, *nodeOf(*g, "r1"), *nodeOf(*g, "r2")), "random op");
  g->setOutputValue(2, valueNamed(*g, "gb1")); // %gb3 is no longer returned
  AliasInfo after(*g);
  EXPECT_EQ(whyNotMergeable(after, *nodeOf(*g, "gb2"), *nodeOf(*g, "gb3")), "");
}

// The in-place writes PyTorch refuses (the pass fuzzer's generator asks, so
// that every step it makes runs): a partial overlap, a self-overlapping
// written tensor, a parameter written through a view; a full overlap runs.
TEST(RewriteLegalityTest, SaysWhichInPlaceWritesPyTorchRefuses) {
  auto g = parseOrFail(R"(graph @writes {
  input %w : f32[2, 2] parameter "w"
  input %x : f32[2, 2] user_input
  input %y : f32[2] user_input
forward:
  %a = aten::exp(%x) : f32[2, 2]
  %at = aten::t(%a) : f32[2, 2]{strides=[1, 2]}
  %aa = aten::alias(%a) : f32[2, 2]
  %row = aten::slice.Tensor(%a, 0, 0, 1) : f32[1, 2]
  %row2 = aten::slice.Tensor(%a, 0, 1, 2) : f32[1, 2]{offset=2}
  %e = aten::expand(%y, [2, 2]) : f32[2, 2]{strides=[0, 1]}
  %wt = aten::t(%w) : f32[2, 2]{strides=[1, 2]}
  %loss = aten::sum(%a) : f32[]
  output %loss loss
})");
  ASSERT_TRUE(g);
  AliasInfo aa(*g, AliasFacts::RootsOnly);
  auto why = [&](const char *written, const char *operand) {
    const char *w = whyPyTorchRefusesWrite(aa, *valueNamed(*g, written), *valueNamed(*g, operand));
    return std::string(w ? w : "");
  };
  EXPECT_EQ(why("a", "at"), "an operand overlaps the written tensor in part");
  EXPECT_EQ(why("a", "a"), "");
  EXPECT_EQ(why("a", "aa"), ""); // the same bytes, the same layout
  EXPECT_EQ(why("row", "row2"), ""); // one storage, bytes apart
  EXPECT_EQ(why("e", "x"), "the written tensor overlaps itself (a stride of 0)");
  EXPECT_EQ(why("wt", "x"),
            "the written tensor is a parameter or a view of one (a leaf that requires grad)");
  EXPECT_EQ(whyPyTorchRefusesWrites(aa, *nodeOf(*g, "a")), nullptr); // writes nothing
}

TEST(RewriteLegalityTest, InPlaceWritesNeverKeepALargerBaseAlive) {
  auto g = parseOrFail(R"(graph @base {
  input %x : f32[1024] user_input
forward:
  %big = aten::exp(%x) : f32[1024]
  %s = aten::slice.Tensor(%big, 0, 0, 4) : f32[4]
  %r = aten::mul.Tensor(%s, 2) : f32[4]
  %c = aten::cos(%r) : f32[4]
  %va = aten::alias(%c) : f32[4]
  %d = aten::sigmoid(%va) : f32[4]
  output %d user_output
})");
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  EXPECT_STREQ(whyNotWritableInPlace(aa, *nodeOf(*g, "r"), *valueNamed(*g, "s")),
               "first operand is a view of a larger storage");
  EXPECT_EQ(whyNotWritableInPlace(aa, *nodeOf(*g, "d"), *valueNamed(*g, "va")), nullptr);
  EXPECT_STREQ(whyNotWritableInPlace(aa, *nodeOf(*g, "big"), *valueNamed(*g, "x")),
               "first operand is a graph input or a view of one");
}

TEST(RewriteLegalityTest, OneRuleForErasingAndRecomputing) {
  auto g = parseOrFail(R"(graph @ops {
  input %x : f32[4] user_input
  input %buf : f32[4] buffer "buf"
forward:
  %e = aten::exp(%x) : f32[4]
  %r = aten::rand_like(%x) : f32[4]
  %d, %mask = aten::native_dropout(%x, 0.5, true) : f32[4], bool[4]
  %w = aten::add_.Tensor(%buf, %x) : f32[4]
  output %e user_output
  output %r user_output
  output %d user_output
})");
  ASSERT_TRUE(g);
  EXPECT_EQ(whyNotErasable(*nodeOf(*g, "e")), nullptr);
  EXPECT_STREQ(whyNotErasable(*nodeOf(*g, "r")), "random op");
  EXPECT_STREQ(whyNotErasable(*nodeOf(*g, "w")), "writes in place");
  EXPECT_STREQ(whyNotMovable(*nodeOf(*g, "w")), "writes in place");
  EXPECT_EQ(whyNotRecomputable(*nodeOf(*g, "e")), "");
  EXPECT_EQ(whyNotRecomputable(*nodeOf(*g, "d")), ""); // replayed from its mask
  EXPECT_TRUE(isReplayableDropout(*nodeOf(*g, "d")));
  EXPECT_NE(whyNotRecomputable(*nodeOf(*g, "r")).find("is random"), std::string::npos);
  EXPECT_NE(whyNotRecomputable(*nodeOf(*g, "w")).find("writes its argument in place"),
            std::string::npos);
}

TEST(GraphEditEpochTest, EveryKindOfEditMovesIt) {
  auto g = parseOrFail(kViews);
  ASSERT_TRUE(g);
  uint64_t e = g->editEpoch();
  auto moved = [&] {
    bool m = g->editEpoch() != e;
    e = g->editEpoch();
    return m;
  };
  Node *r1 = nodeOf(*g, "r1");
  r1->setAttr("k", Constant::ofBool(true));
  EXPECT_TRUE(moved());
  r1->removeAttr("k");
  EXPECT_TRUE(moved());
  r1->setPhase(Phase::Backward);
  EXPECT_TRUE(moved());
  r1->output()->setName("renamed");
  EXPECT_TRUE(moved());
  r1->output()->setType(r1->output()->type());
  EXPECT_TRUE(moved());
  r1->setArg(0, Argument::value(valueNamed(*g, "x")));
  EXPECT_TRUE(moved());
  ASSERT_TRUE(g->eraseNode(r1).ok());
  EXPECT_TRUE(moved());
  g->addOutput(valueNamed(*g, "big"), OutputRole::UserOutput);
  EXPECT_TRUE(moved());
  g->eraseOutput(g->outputs().size() - 1);
  EXPECT_TRUE(moved());
  (void)g->nodes().begin()->describe(); // reading is not an edit
  (void)g->allValues();
  EXPECT_FALSE(moved());
}

// Storage offsets: two halves of one buffer are one storage but do not
// overlap, so writing one in place is no write between reads of the other.
TEST(AliasAnalysisTest, WritesToAnotherPartOfTheStorageDoNotCount) {
  auto g = parseOrFail(R"(graph @halves {
  input %x : f32[8] user_input
forward:
  %buf = aten::exp(%x) : f32[8]
  %lo = aten::slice.Tensor(%buf, 0, 0, 4) : f32[4]
  %hi = aten::slice.Tensor(%buf, 0, 4, 8) : f32[4]{offset=4}
  %mid = aten::slice.Tensor(%buf, 0, 2, 6) : f32[4]{offset=2}
  %a = aten::sin(%lo) : f32[4]
  %w = aten::mul_.Tensor(%hi, 2) : f32[4]{offset=4}
  %b = aten::cos(%lo) : f32[4]
  %c = aten::cos(%mid) : f32[4]
  %s = aten::add.Tensor(%b, %c) : f32[4]
  output %a user_output
  output %s user_output
})");
  ASSERT_TRUE(g);
  AliasInfo aa(*g);
  Value *lo = valueNamed(*g, "lo"), *hi = valueNamed(*g, "hi"), *mid = valueNamed(*g, "mid");
  Value *buf = valueNamed(*g, "buf");
  EXPECT_EQ(AliasInfo::byteRange(hi), std::make_pair(int64_t(16), int64_t(32)));
  EXPECT_TRUE(aa.mayShareStorage(lo, hi));
  EXPECT_FALSE(aa.mayOverlap(lo, hi));
  EXPECT_TRUE(aa.mayOverlap(mid, hi));
  EXPECT_TRUE(aa.mayOverlap(buf, lo));
  int64_t before = aa.rankOf(nodeOf(*g, "a")), after = aa.rankOf(nodeOf(*g, "b"));
  EXPECT_FALSE(aa.writtenBetween(lo, before, after)); // %hi's bytes only
  EXPECT_TRUE(aa.writtenBetween(mid, before, after));  // its upper half is %hi's lower
  EXPECT_TRUE(aa.writtenBetween(buf, before, after));
  // The storage as a whole is still written there.
  EXPECT_EQ(aa.firstWriteOf(lo), aa.rankOf(nodeOf(*g, "w")));
}
