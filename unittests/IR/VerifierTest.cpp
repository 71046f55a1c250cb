//===- VerifierTest.cpp - One test per verifier rule ----------------------===//
//
// Each test breaks a valid graph in one way and checks the verifier reports
// exactly that problem, naming the node (or input/output) at fault.
//
//===----------------------------------------------------------------------===//
#include "TestGraphs.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Verifier.h"

using namespace graphopt;
using namespace graphopt::test;

namespace {

/// The single diagnostic the graph must produce; fails the test otherwise.
std::string onlyDiagnostic(const Graph &g) {
  auto diags = collectVerifierDiagnostics(g);
  EXPECT_EQ(diags.size(), 1u);
  if (diags.size() != 1)
    for (const auto &d : diags)
      ADD_FAILURE() << "diagnostic: " << d.message;
  return diags.empty() ? "" : diags.front().message;
}

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

} // namespace

TEST(VerifierTest, ValidGraphPasses) {
  ReluAddGraph t;
  EXPECT_TRUE(collectVerifierDiagnostics(t.g).empty());
  EXPECT_TRUE(verifyGraph(t.g).ok());
}

TEST(VerifierTest, DefinitionBeforeUse) {
  ReluAddGraph t;
  ASSERT_TRUE(t.add->moveBefore(t.relu).ok());
  auto diags = collectVerifierDiagnostics(t.g);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].node, t.add);
  EXPECT_CONTAINS(diags[0].message, "node %sum = aten::add.Tensor");
  EXPECT_CONTAINS(diags[0].message, "uses %relu before its definition");
}

TEST(VerifierTest, DanglingUseOfAnotherGraphsValue) {
  ReluAddGraph t;
  ReluAddGraph other;
  t.add->setArg(1, Argument::value(other.x));
  auto diags = collectVerifierDiagnostics(t.g);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_CONTAINS(diags[0].message, "node %sum = aten::add.Tensor");
  EXPECT_CONTAINS(diags[0].message, "not a value of this graph (dangling use)");
}

TEST(VerifierTest, ArgumentCountMatchesSchema) {
  Graph g;
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  // aten::add.Tensor has three arguments (self, other, alpha); give two.
  Node *n = g.createNode(unwrap(resolveOperator("aten::add.Tensor")),
                         {Argument::value(x), Argument::value(x)}, {f32({2})});
  auto diags = collectVerifierDiagnostics(g);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].node, n);
  EXPECT_CONTAINS(diags[0].message, "has 2 arguments but the schema of aten::add.Tensor has 3");
}

TEST(VerifierTest, ArgumentKindMatchesSchema) {
  Graph g;
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  // An int list where a Tensor is expected.
  g.createNode(unwrap(resolveOperator("aten::add.Tensor")),
               {Argument::value(x), Argument::constant(Constant::ofIntList({1, 2})),
                Argument::constant(Constant::ofInt(1))},
               {f32({2})}, Phase::Forward, {"y"});
  EXPECT_CONTAINS(onlyDiagnostic(g),
                  "node %y = aten::add.Tensor: argument 'other' (Tensor) expects a tensor value "
                  "(or a number), got a constant of kind int list");
  // A number is fine: a wrapped number, as torch.export writes aten::add.Tensor(%x, 1).
  Graph ok;
  Value *a = ok.addInput("a", f32({2}), InputRole::UserInput);
  ok.createNode(unwrap(resolveOperator("aten::add.Tensor")),
                {Argument::value(a), Argument::constant(Constant::ofFloat(1.5)),
                 Argument::constant(Constant::ofInt(1))},
                {f32({2})});
  EXPECT_TRUE(verifyGraph(ok).ok()) << verifyGraph(ok).message();
}

TEST(VerifierTest, ScalarArgumentKind) {
  Graph g;
  Value *x = g.addInput("x", f32({2, 3}), InputRole::UserInput);
  // A tensor where `int dim` is expected, and a string where bool is expected.
  g.createNode(unwrap(resolveOperator("aten::_log_softmax")),
               {Argument::value(x), Argument::value(x), Argument::constant(Constant::ofString("no"))},
               {f32({2, 3})}, Phase::Forward, {"y"});
  auto diags = collectVerifierDiagnostics(g);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_CONTAINS(diags[0].message, "argument 'dim' (int) expects a constant of type int");
  EXPECT_CONTAINS(diags[1].message, "argument 'half_to_float' (bool)");
}

TEST(VerifierTest, TensorListElementsMustBeTensors) {
  Graph g;
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  Node *size = unwrap(g.createNode("aten::sym_size.int",
                                   {Argument::value(x), Argument::constant(Constant::ofInt(0))},
                                   {ValueType::ofScalar(ValueKind::Int)}));
  // aten::cat takes Tensor[]: None and scalars are not allowed in it.
  g.createNode(unwrap(resolveOperator("aten::cat")),
               {Argument::list({x, nullptr}), Argument::constant(Constant::ofInt(0))}, {f32({4})},
               Phase::Forward, {"c1"});
  g.createNode(unwrap(resolveOperator("aten::cat")),
               {Argument::list({x, size->output()}), Argument::constant(Constant::ofInt(0))},
               {f32({4})}, Phase::Forward, {"c2"});
  auto diags = collectVerifierDiagnostics(g);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_CONTAINS(diags[0].message, "node %c1 = aten::cat: argument 'tensors'");
  EXPECT_CONTAINS(diags[1].message, "node %c2 = aten::cat: argument 'tensors'");
}

TEST(VerifierTest, OutputCountMatchesSchema) {
  Graph g;
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  g.createNode(unwrap(resolveOperator("aten::relu")), {Argument::value(x)}, {f32({2}), f32({2})},
               Phase::Forward, {"y"});
  EXPECT_CONTAINS(onlyDiagnostic(g), "node %y = aten::relu: has 2 outputs but aten::relu returns 1");
}

TEST(VerifierTest, OutputKindMatchesSchema) {
  Graph g;
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  // aten::sym_size.int returns an int, not a tensor.
  g.createNode(unwrap(resolveOperator("aten::sym_size.int")),
               {Argument::value(x), Argument::constant(Constant::ofInt(0))}, {f32({})},
               Phase::Forward, {"n"});
  EXPECT_CONTAINS(onlyDiagnostic(g), "output %n is a tensor but the schema returns SymInt");
}

TEST(VerifierTest, TypesPresent) {
  Graph g;
  Value *x = g.addInput("x", ValueType::unknownTensor(), InputRole::UserInput);
  g.createNode(unwrap(resolveOperator("aten::relu")), {Argument::value(x)},
               {ValueType::unknownTensor()}, Phase::Forward, {"y"});
  auto diags = collectVerifierDiagnostics(g);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].node, nullptr);
  EXPECT_CONTAINS(diags[0].message, "graph input %x has no type");
  EXPECT_CONTAINS(diags[1].message, "node %y = aten::relu: output %y has no type");
}

TEST(VerifierTest, StridesMatchRank) {
  Graph g;
  TensorType bad = TensorType::contiguous(c10::ScalarType::Float, {2, 3});
  bad.strides.pop_back();
  g.addInput("x", ValueType::ofTensor(bad), InputRole::UserInput);
  EXPECT_CONTAINS(onlyDiagnostic(g), "graph input %x: 2 sizes but 1 strides");
}

TEST(VerifierTest, UniqueValueNames) {
  ReluAddGraph t;
  t.add->output()->setName("relu");
  EXPECT_CONTAINS(onlyDiagnostic(t.g), "output %relu: value name is not unique");
}

TEST(VerifierTest, PhasesInOrder) {
  ReluAddGraph t;
  t.relu->setPhase(Phase::Backward); // forward add after a backward node
  EXPECT_CONTAINS(onlyDiagnostic(t.g), "node %sum = aten::add.Tensor: phase forward after phase "
                                       "backward: phases must appear in order");
  t.add->setPhase(Phase::Optimizer);
  EXPECT_TRUE(verifyGraph(t.g).ok());
}

TEST(VerifierTest, ParameterNeedsTarget) {
  Graph g;
  g.addInput("w", f32({2}), InputRole::Parameter);
  EXPECT_CONTAINS(onlyDiagnostic(g), "graph input %w is a parameter but names no target");
}

TEST(VerifierTest, OutputRolesNameInputsOfTheRightRole) {
  Graph g;
  Value *w = g.addInput("w", f32({2}), InputRole::Parameter, "fc.weight");
  Value *b = g.addInput("b", f32({2}), InputRole::Buffer, "bn.running_mean");
  Value *x = g.addInput("x", f32({2}), InputRole::UserInput);
  g.addOutput(w, OutputRole::Gradient, "fc.weight");         // fine
  g.addOutput(b, OutputRole::BufferMutation, "bn.running_mean"); // fine
  g.addOutput(x, OutputRole::InputGradient, "x");            // fine
  g.addOutput(w, OutputRole::Gradient, "bn.running_mean");   // a buffer, not a parameter
  g.addOutput(b, OutputRole::BufferMutation, "fc.weight");   // a parameter, not a buffer
  g.addOutput(w, OutputRole::Gradient, "nowhere");           // no such input
  g.addOutput(x, OutputRole::InputGradient, "w");            // a parameter, not a user input
  auto diags = collectVerifierDiagnostics(g);
  ASSERT_EQ(diags.size(), 4u);
  EXPECT_CONTAINS(diags[0].message, "graph output 3 (gradient) %w names 'bn.running_mean', which "
                                    "is not a parameter input");
  EXPECT_CONTAINS(diags[1].message, "graph output 4 (buffer_mutation)");
  EXPECT_CONTAINS(diags[2].message, "names 'nowhere'");
  EXPECT_CONTAINS(diags[3].message, "graph output 6 (input_gradient) %x names 'w', which is not a "
                                    "user input");
}

TEST(VerifierTest, StatusListsEveryViolation) {
  ReluAddGraph t;
  t.add->output()->setName("relu");
  t.relu->setPhase(Phase::Backward);
  absl::Status st = verifyGraph(t.g);
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "graph @relu_add has 2 verifier errors");
  EXPECT_CONTAINS(st.message(), "value name is not unique");
  EXPECT_CONTAINS(st.message(), "phases must appear in order");
}

TEST(VerifierTest, ALossIsOneNumber) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4] user_input
forward:
  %y = aten::relu(%x) : f32[4]
  %s = aten::sum(%y) : f32[]
  output %y loss
  output %s loss
}
)", "loss.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_CONTAINS(onlyDiagnostic(**g), "graph output 0 (loss) %y has 4 elements; a loss is one number");
}

TEST(VerifierTest, TensorsTogetherMustBeCountable) {
  // Each is valid; together their bytes pass 2^62, which no analysis could sum.
  auto g = parseGraph(R"(graph @g {
  input %a : u8[4611686018427387904] user_input
  input %b : u8[4611686018427387904] user_input
forward:
  output %a user_output
}
)", "huge.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_CONTAINS(onlyDiagnostic(**g), "the graph's tensors together take more than 2^62 bytes (%b passes it)");
}
