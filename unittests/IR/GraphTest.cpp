//===- GraphTest.cpp - Graph, Node, Value, TensorType, Constant -----------===//
#include "TestGraphs.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"

#include <cmath>

using namespace graphopt;
using namespace graphopt::test;

TEST(TensorTypeTest, ContiguousStridesAndBytes) {
  TensorType t = TensorType::contiguous(c10::ScalarType::Float, {2, 3, 4});
  EXPECT_EQ(t.strides, (llvm::SmallVector<int64_t, 4>{12, 4, 1}));
  EXPECT_TRUE(t.isContiguous());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.storageBytes(), 96);

  // A transposed view spans the same storage but is not contiguous.
  TensorType tr(c10::ScalarType::Float, {4, 3}, {1, 4});
  EXPECT_FALSE(tr.isContiguous());
  EXPECT_EQ(tr.storageBytes(), 48);

  // An expanded tensor (stride 0) spans a single element.
  TensorType ex(c10::ScalarType::Double, {5, 7}, {0, 0});
  EXPECT_EQ(ex.storageBytes(), 8);

  TensorType scalar = TensorType::contiguous(c10::ScalarType::Half, {});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.storageBytes(), 2);

  TensorType empty = TensorType::contiguous(c10::ScalarType::Float, {0, 3});
  EXPECT_EQ(empty.storageBytes(), 0);
  EXPECT_FALSE(TensorType().isKnown());
}

TEST(TensorTypeTest, DtypeNamesRoundTrip) {
#define GRAPHOPT_CHECK_DTYPE(_, n)                                                                 \
  EXPECT_EQ(parseDtypeName(dtypeName(c10::ScalarType::n)), c10::ScalarType::n) << #n;
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(GRAPHOPT_CHECK_DTYPE)
#undef GRAPHOPT_CHECK_DTYPE
  EXPECT_EQ(dtypeName(c10::ScalarType::Float), "f32");
  EXPECT_EQ(parseDtypeName("Float"), c10::ScalarType::Float); // c10's own name works too
  EXPECT_FALSE(parseDtypeName("f33").has_value());
}

TEST(ConstantTest, KindsAndEquality) {
  EXPECT_EQ(Constant().kind(), ConstantKind::None);
  EXPECT_EQ(Constant::ofIntList({1, 2}).kind(), ConstantKind::IntList);
  EXPECT_EQ(Constant::ofDevice(c10::Device("cuda:1")).asDevice().index(), 1);
  EXPECT_EQ(Constant::ofInt(1), Constant::ofInt(1));
  EXPECT_NE(Constant::ofInt(1), Constant::ofFloat(1.0)); // int and float differ in promotion
  EXPECT_EQ(Constant::ofFloat(std::nan("")), Constant::ofFloat(std::nan("")));
  EXPECT_NE(Constant::ofFloat(0.0), Constant::ofFloat(-0.0));
  EXPECT_NE(Constant::ofIntList({1, 2}), Constant::ofIntList({1, 2, 3}));
  EXPECT_EQ(Constant::ofBoolList({true, false}), Constant::ofBoolList({true, false}));
  EXPECT_NE(Constant::ofDtype(c10::ScalarType::Float), Constant::ofDtype(c10::ScalarType::Half));
}

TEST(GraphTest, ResolvesOperatorsAndRejectsUnknownOnes) {
  EXPECT_TRUE(resolveOperator("aten::add.Tensor").ok());
  EXPECT_TRUE(resolveOperator("aten::relu").ok());
  auto unknown = resolveOperator("aten::frobnicate");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("aten::frobnicate"), absl::string_view::npos);
  auto badOverload = resolveOperator("aten::add.NoSuchOverload");
  ASSERT_FALSE(badOverload.ok());
  EXPECT_NE(badOverload.status().message().find("aten::add.NoSuchOverload"),
            absl::string_view::npos);
  EXPECT_FALSE(resolveOperator("relu").ok()); // no namespace

  Graph g;
  auto node = g.createNode("aten::nope", {}, {});
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(g.numNodes(), 0u);
}

TEST(GraphTest, BuilderRecordsUsesAndNames) {
  ReluAddGraph t;
  EXPECT_EQ(t.g.numNodes(), 2u);
  EXPECT_EQ(t.g.numValues(), 3u);
  EXPECT_EQ(t.relu->opName(), "aten::relu");
  EXPECT_EQ(t.add->opName(), "aten::add.Tensor");
  EXPECT_EQ(t.relu->output()->name(), "relu"); // derived from the operator
  EXPECT_EQ(t.add->output()->name(), "sum");
  EXPECT_EQ(t.x->uses().size(), 2u);
  EXPECT_EQ(t.add->output()->uses().size(), 1u); // the graph output
  EXPECT_EQ(t.add->output()->uses()[0].user, nullptr);
  EXPECT_EQ(t.relu->output()->definingNode(), t.relu);
  EXPECT_TRUE(t.x->isGraphInput());
  EXPECT_TRUE(verifyGraph(t.g).ok()) << verifyGraph(t.g).message();
}

TEST(GraphTest, UniqueNames) {
  Graph g;
  EXPECT_EQ(g.uniqueName("a"), "a");
  g.addInput("a", f32({1}), InputRole::UserInput);
  EXPECT_EQ(g.uniqueName("a"), "a_1");
  Value *a1 = g.addInput("a", f32({1}), InputRole::UserInput);
  EXPECT_EQ(a1->name(), "a_1");
  EXPECT_EQ(g.addInput("a", f32({1}), InputRole::UserInput)->name(), "a_2");
  EXPECT_EQ(g.uniqueName("weird name/1"), "weird_name_1");
  EXPECT_EQ(g.uniqueName(""), "v");
  a1->setName("b");
  EXPECT_EQ(g.countName("a_1"), 0u);
  EXPECT_EQ(g.countName("b"), 1u);
  EXPECT_EQ(g.uniqueName("a_1"), "a_1");
}

TEST(GraphTest, ReplaceAllUsesCoversArgumentsListsAndOutputs) {
  Graph g;
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  Value *y = g.addInput("y", f32({2}), InputRole::UserInput);
  Node *cat = unwrap(g.createNode(
      "aten::cat", {Argument::list({x, x, y}), Argument::constant(Constant::ofInt(0))}, {f32({6})}));
  Node *relu = unwrap(g.createNode("aten::relu", {Argument::value(x)}, {f32({2})}));
  g.addOutput(x, OutputRole::UserOutput);
  g.addOutput(cat->output(), OutputRole::UserOutput);
  EXPECT_EQ(x->uses().size(), 4u);

  x->replaceAllUsesWith(y);
  EXPECT_FALSE(x->hasUses());
  EXPECT_EQ(y->uses().size(), 5u);
  EXPECT_EQ(cat->arg(0).getList()[0], y);
  EXPECT_EQ(cat->arg(0).getList()[1], y);
  EXPECT_EQ(relu->arg(0).getValue(), y);
  EXPECT_EQ(g.outputs()[0].value, y);
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
}

TEST(GraphTest, SetArgKeepsUseListsRight) {
  ReluAddGraph t;
  t.add->setArg(1, Argument::value(t.relu->output()));
  EXPECT_EQ(t.x->uses().size(), 1u);
  EXPECT_EQ(t.relu->output()->uses().size(), 2u);
  EXPECT_TRUE(verifyGraph(t.g).ok());
}

TEST(GraphTest, EraseRefusesNodesWithUsers) {
  ReluAddGraph t;
  absl::Status st = t.g.eraseNode(t.relu);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("%relu"), absl::string_view::npos);
  EXPECT_NE(st.message().find("%sum = aten::add.Tensor"), absl::string_view::npos);
  EXPECT_EQ(t.g.numNodes(), 2u); // unchanged

  // Once the user is gone the node can go, and its operand loses the use.
  t.g.eraseOutput(0);
  ASSERT_TRUE(t.g.eraseNode(t.add).ok());
  EXPECT_EQ(t.x->uses().size(), 1u);
  ASSERT_TRUE(t.g.eraseNode(t.relu).ok());
  EXPECT_FALSE(t.x->hasUses());
  EXPECT_EQ(t.g.numNodes(), 0u);
  EXPECT_EQ(t.g.countName("relu"), 0u);
  EXPECT_TRUE(t.g.eraseInput(0).ok());
  EXPECT_TRUE(t.g.inputs().empty());
}

TEST(GraphTest, ValueIdsAreUniqueAndNeverReused) {
  ReluAddGraph t;
  EXPECT_EQ(t.x->id(), 0u);
  EXPECT_EQ(t.relu->output()->id(), 1u);
  EXPECT_EQ(t.add->output()->id(), 2u);
  EXPECT_EQ(t.g.valueIdBound(), 3u);
  // Erasing frees no id for reuse: a vector indexed by ids stays valid.
  t.g.eraseOutput(0);
  ASSERT_TRUE(t.g.eraseNode(t.add).ok());
  Node *again = unwrap(t.g.createNode("aten::relu", {Argument::value(t.x)}, {f32({2, 3})}));
  EXPECT_EQ(again->output()->id(), 3u);
  EXPECT_EQ(t.g.valueIdBound(), 4u);
}

TEST(GraphTest, EraseInputRefusesWhileUsed) {
  ReluAddGraph t;
  EXPECT_FALSE(t.g.eraseInput(0).ok());
  EXPECT_EQ(t.g.inputs().size(), 1u);
}

TEST(GraphTest, InsertBeforeAndMove) {
  ReluAddGraph t;
  Node *neg = unwrap(t.g.createNode("aten::neg", {Argument::value(t.x)}, {f32({2, 3})},
                                    Phase::Forward, {"neg"}, /*insertBefore=*/t.relu));
  EXPECT_EQ(&t.g.nodes().front(), neg);
  ASSERT_TRUE(neg->moveBefore(nullptr).ok());
  EXPECT_EQ(&t.g.nodes().back(), neg);
  ASSERT_TRUE(t.add->moveBefore(t.relu).ok()); // now add reads relu before it is defined
  EXPECT_FALSE(verifyGraph(t.g).ok());
  ASSERT_TRUE(t.relu->moveBefore(t.add).ok());
  EXPECT_TRUE(verifyGraph(t.g).ok());
}

TEST(GraphTest, CloneIsDeepAndIdentical) {
  ReluAddGraph t;
  ValueMap<Value *> map(t.g);
  auto copy = t.g.clone(&map);
  EXPECT_EQ(printGraphToString(*copy), printGraphToString(t.g));
  EXPECT_TRUE(verifyGraph(*copy).ok());
  ASSERT_NE(map.lookup(t.x), nullptr);
  EXPECT_NE(map.lookup(t.x), t.x);
  EXPECT_EQ(map.lookup(t.x)->graph(), copy.get());
  // Editing the copy leaves the original alone.
  copy->nodes().front().output()->setName("renamed");
  EXPECT_EQ(t.relu->output()->name(), "relu");
  EXPECT_EQ(t.x->uses().size(), 2u);
}

TEST(GraphTest, MultiOutputAndListReturningNodes) {
  Graph g;
  Value *x = g.addInput("x", f32({6}), InputRole::UserInput);
  // aten::split.Tensor returns Tensor[]: any number of outputs.
  Node *split = unwrap(g.createNode(
      "aten::split.Tensor",
      {Argument::value(x), Argument::constant(Constant::ofInt(2)), Argument::constant(Constant::ofInt(0))},
      {f32({2}), f32({2}), f32({2})}, Phase::Forward, {"part", "part", "part"}));
  EXPECT_EQ(split->numOutputs(), 3u);
  EXPECT_EQ(split->output(1)->name(), "part_1");
  EXPECT_EQ(split->output(2)->index(), 2u);
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
}
