//===- EditingTest.cpp - The rewrite API: insertion points, cloneNode, -----===//
//===- replaceUsesWithIf, comesBefore, moveBefore, removeUse ---------------===//
#include "TestGraphs.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"

using namespace graphopt;
using namespace graphopt::test;

namespace graphopt {
/// Reaches the IR's private low-level edits (befriended in Graph.h).
class IRTestAccess {
public:
  static bool removeUse(Value *v, const Use &u) { return v->removeUse(u); }
};
} // namespace graphopt

namespace {

/// A tiny training step: forward x -> h = relu(x) -> loss = sum(h);
/// backward g = mul(h, h) (a use of h) -> output.
struct TrainGraph {
  Graph g{"train"};
  Value *x;
  Node *relu, *sum, *mul, *neg;

  TrainGraph() {
    x = g.addInput("x", f32({2, 3}), InputRole::UserInput);
    relu = unwrap(g.createNode("aten::relu", {Argument::value(x)}, {f32({2, 3})}, Phase::Forward,
                               {"h"}));
    sum = unwrap(g.createNode("aten::sum", {Argument::value(relu->output()),
                                            Argument::constant(Constant::none())},
                              {f32({})}, Phase::Forward, {"loss"}));
    mul = unwrap(g.createNode(
        "aten::mul.Tensor", {Argument::value(relu->output()), Argument::value(relu->output())},
        {f32({2, 3})}, Phase::Backward, {"g"}));
    neg = unwrap(g.createNode("aten::neg", {Argument::value(mul->output())}, {f32({2, 3})},
                              Phase::Backward, {"gn"}));
    g.addOutput(sum->output(), OutputRole::Loss);
    g.addOutput(neg->output(), OutputRole::UserOutput);
    g.addOutput(relu->output(), OutputRole::UserOutput);
  }
};

} // namespace

TEST(EditingTest, InsertionPointGivesThePhase) {
  TrainGraph t;
  // Before a backward node: backward.
  Node *a = unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})},
                                  InsertionPoint::before(t.mul)));
  EXPECT_EQ(a->phase(), Phase::Backward);
  EXPECT_EQ(&*std::next(a->getIterator()), t.mul);
  // Before a forward node: forward.
  Node *b = unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})},
                                  InsertionPoint::before(t.sum)));
  EXPECT_EQ(b->phase(), Phase::Forward);
  // At the end: the last node's phase.
  Node *c = unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})},
                                  InsertionPoint::atEnd(t.g)));
  EXPECT_EQ(c->phase(), Phase::Backward);
  EXPECT_EQ(&t.g.nodes().back(), c);
  // Explicit phase wins.
  Node *d = unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})},
                                  InsertionPoint::atEnd(t.g, Phase::Optimizer)));
  EXPECT_EQ(d->phase(), Phase::Optimizer);
  // An empty graph: forward.
  Graph empty;
  Value *y = empty.addInput("y", f32({2}), InputRole::UserInput);
  Node *e = unwrap(empty.createNode("aten::relu", {Argument::value(y)}, {f32({2})},
                                    InsertionPoint::atEnd(empty)));
  EXPECT_EQ(e->phase(), Phase::Forward);
  // An insertion point in another graph is an error.
  auto bad = empty.createNode("aten::relu", {Argument::value(y)}, {f32({2})},
                              InsertionPoint::before(t.mul));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("another graph"), std::string::npos);
  EXPECT_EQ(empty.numNodes(), 1u);
  EXPECT_TRUE(verifyGraph(t.g).ok()) << verifyGraph(t.g).message();
}

TEST(EditingTest, CloneNodeRemapsNamesPhaseAndAttributes) {
  TrainGraph t;
  t.relu->setAttr("module", Constant::ofString("layer1"));
  ValueMap<Value *> map(t.g);
  Node *clone = unwrap(t.g.cloneNode(*t.relu, map, InsertionPoint::before(t.mul)));
  markRecomputeOf(*clone, *t.relu->output());
  EXPECT_EQ(clone->phase(), Phase::Backward);
  EXPECT_EQ(clone->output()->name(), "h_1");
  EXPECT_EQ(clone->arg(0).getValue(), t.x); // unmapped, of this graph: as is
  EXPECT_EQ(map.lookup(t.relu->output()), clone->output());
  ASSERT_NE(clone->attr("module"), nullptr);
  EXPECT_EQ(clone->attr("module")->asString(), "layer1");
  ASSERT_NE(clone->attr(kRecomputeOfAttr), nullptr);
  EXPECT_EQ(clone->attr(kRecomputeOfAttr)->asString(), "h");
  EXPECT_EQ(clone->output()->type(), t.relu->output()->type());

  // Mapped operands are replaced: clone mul with h -> h_1.
  Node *mul2 = unwrap(t.g.cloneNode(*t.mul, map, InsertionPoint::atEnd(t.g)));
  EXPECT_EQ(mul2->arg(0).getValue(), clone->output());
  EXPECT_EQ(mul2->arg(1).getValue(), clone->output());
  EXPECT_EQ(mul2->output()->name(), "g_1");
  EXPECT_EQ(clone->output()->uses().size(), 2u);
  EXPECT_TRUE(verifyGraph(t.g).ok()) << verifyGraph(t.g).message();

  // Into another graph: an unmapped operand of the source graph is an error.
  Graph other("other");
  Value *ox = other.addInput("x", f32({2, 3}), InputRole::UserInput);
  ValueMap<Value *> crossMap;
  auto bad = other.cloneNode(*t.relu, crossMap, InsertionPoint::atEnd(other));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("%x belongs to another graph"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(other.numNodes(), 0u);
  EXPECT_FALSE(t.x->uses().empty());
  // Mapped, it works.
  crossMap[t.x] = ox;
  Node *moved = unwrap(other.cloneNode(*t.relu, crossMap, InsertionPoint::atEnd(other)));
  EXPECT_EQ(moved->arg(0).getValue(), ox);
  EXPECT_EQ(moved->output()->name(), "h"); // free in that graph
  EXPECT_EQ(moved->phase(), Phase::Forward);
}

TEST(EditingTest, ReplaceUsesWithIfOnlyTouchesSelectedUses) {
  TrainGraph t;
  ValueMap<Value *> map(t.g);
  Node *clone = unwrap(t.g.cloneNode(*t.relu, map, InsertionPoint::before(t.mul)));
  Value *h = t.relu->output();
  // Only backward uses (graph outputs have a null user and are kept).
  unsigned n = h->replaceUsesWithIf(clone->output(), [](const Use &u) {
    return u.user && u.user->phase() == Phase::Backward;
  });
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(t.mul->arg(0).getValue(), clone->output());
  EXPECT_EQ(t.mul->arg(1).getValue(), clone->output());
  EXPECT_EQ(t.sum->arg(0).getValue(), h);
  EXPECT_EQ(t.g.outputs()[2].value, h);
  EXPECT_EQ(h->uses().size(), 2u); // sum and the graph output
  EXPECT_TRUE(verifyGraph(t.g).ok()) << verifyGraph(t.g).message();
  // Only the graph output.
  n = h->replaceUsesWithIf(clone->output(), [](const Use &u) { return u.user == nullptr; });
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(t.g.outputs()[2].value, clone->output());

  // One element of a list argument.
  Graph g;
  Value *a = g.addInput("a", f32({2}), InputRole::UserInput);
  Value *b = g.addInput("b", f32({2}), InputRole::UserInput);
  Node *cat = unwrap(g.createNode("aten::cat", {Argument::list({a, a}), Argument::constant(Constant::ofInt(0))},
                                  {f32({4})}));
  g.addOutput(cat->output(), OutputRole::UserOutput);
  n = a->replaceUsesWithIf(b, [](const Use &u) { return u.elemIndex == 1; });
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(cat->arg(0).getList()[0], a);
  EXPECT_EQ(cat->arg(0).getList()[1], b);
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  // Not a value of this graph, or itself: nothing.
  EXPECT_EQ(a->replaceUsesWithIf(a, [](const Use &) { return true; }), 0u);
  EXPECT_EQ(a->replaceUsesWithIf(t.x, [](const Use &) { return true; }), 0u);
}

TEST(EditingTest, ComesBeforeFollowsInsertionsMovesAndErasures) {
  TrainGraph t;
  auto order = [&] {
    std::vector<Node *> nodes;
    for (Node &n : t.g.nodes())
      nodes.push_back(&n);
    for (size_t i = 0; i < nodes.size(); ++i)
      for (size_t j = 0; j < nodes.size(); ++j)
        EXPECT_EQ(nodes[i]->comesBefore(nodes[j]), i < j) << i << " " << j;
  };
  order();
  EXPECT_TRUE(t.relu->comesBefore(t.neg));
  EXPECT_FALSE(t.neg->comesBefore(t.relu));
  EXPECT_FALSE(t.relu->comesBefore(t.relu));
  // Insert in the middle, at the end.
  unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})},
                        InsertionPoint::before(t.sum)));
  order();
  unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})},
                        InsertionPoint::atEnd(t.g)));
  order();
  // Move.
  Node *late = &t.g.nodes().back();
  ASSERT_TRUE(late->moveBefore(t.relu).ok());
  EXPECT_TRUE(late->comesBefore(t.relu));
  order();
  ASSERT_TRUE(late->moveBefore(nullptr).ok());
  EXPECT_TRUE(t.neg->comesBefore(late));
  order();
  // Erase.
  ASSERT_TRUE(t.g.eraseNode(late).ok());
  order();
  // Nodes of another graph are never before.
  ReluAddGraph other;
  EXPECT_FALSE(t.relu->comesBefore(other.add));
  EXPECT_FALSE(t.relu->comesBefore(nullptr));
}

TEST(EditingTest, MoveBeforeRejectsMisuse) {
  TrainGraph t;
  std::string before = printGraphToString(t.g);
  // Before itself: a no-op.
  EXPECT_TRUE(t.mul->moveBefore(t.mul).ok());
  EXPECT_EQ(printGraphToString(t.g), before);
  // Before a node of another graph: an error, nothing changes.
  ReluAddGraph other;
  absl::Status st = t.mul->moveBefore(other.add);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another graph"), std::string::npos);
  EXPECT_EQ(printGraphToString(t.g), before);
  EXPECT_EQ(other.g.numNodes(), 2u);
  EXPECT_TRUE(verifyGraph(t.g).ok());
  EXPECT_TRUE(verifyGraph(other.g).ok());
  // Already in place: nothing changes.
  EXPECT_TRUE(t.mul->moveBefore(t.neg).ok());
  EXPECT_TRUE(t.neg->moveBefore(nullptr).ok());
  EXPECT_EQ(printGraphToString(t.g), before);
}

TEST(EditingTest, RemoveUseOfAMissingUseCorruptsNothing) {
  TrainGraph t;
  Value *h = t.relu->output();
  size_t uses = h->uses().size();
  EXPECT_FALSE(IRTestAccess::removeUse(h, {t.neg, 0, 0})); // neg does not read h
  EXPECT_EQ(h->uses().size(), uses);
  EXPECT_EQ(t.g.useListInconsistencies(), 1u);
  auto st = verifyGraph(t.g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("use lists were found inconsistent 1 time"), std::string::npos)
      << st.message();
  // A value with no uses at all.
  Graph g;
  Value *lonely = g.addInput("y", f32({2}), InputRole::UserInput);
  EXPECT_FALSE(IRTestAccess::removeUse(lonely, {nullptr, 0, 0}));
  EXPECT_TRUE(lonely->uses().empty());
  // A recorded use is removed.
  EXPECT_TRUE(IRTestAccess::removeUse(h, {t.mul, 1, 0}));
  EXPECT_EQ(h->uses().size(), uses - 1);
}

TEST(EditingTest, NodesRangeHelpers) {
  TrainGraph t;
  const Graph &cg = t.g;
  EXPECT_EQ(&cg.nodes().front(), t.relu);
  EXPECT_EQ(&cg.nodes().back(), t.neg);
  EXPECT_FALSE(cg.nodes().empty());
  EXPECT_TRUE(Graph().nodes().empty());
  size_t n = 0;
  for (const Node &node : llvm::reverse(cg.nodes()))
    n += node.numOutputs() > 0;
  EXPECT_EQ(n, 4u);
}
