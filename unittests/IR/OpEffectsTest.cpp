//===- OpEffectsTest.cpp - Operator effects, result spreading, hashing ----===//
#include "graphopt/IR/NodeResults.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/TypeInference.h"

#include <ATen/core/List.h>
#include <ATen/ops/ones.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace graphopt;

namespace {

const OpEffects &effectsOf(const char *name) {
  auto op = resolveOperator(name);
  EXPECT_TRUE(op.ok()) << op.status().message();
  if (!op.ok())
    throw std::runtime_error(name);
  return opEffects(*op);
}

std::vector<unsigned> vec(llvm::ArrayRef<unsigned> a) { return a.vec(); }

std::unique_ptr<Graph> parse(const char *text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok())
    throw std::runtime_error("parse");
  return std::move(*g);
}

const Node &nodeDefining(const Graph &g, llvm::StringRef name) {
  for (const Node &n : g.nodes())
    for (unsigned i = 0; i < n.numOutputs(); ++i)
      if (n.output(i)->name() == name)
        return n;
  throw std::runtime_error(name.str());
}

} // namespace

TEST(OpEffectsTest, InPlaceAddWritesSelfAndReturnsIt) {
  const OpEffects &e = effectsOf("aten::add_.Tensor");
  EXPECT_EQ(vec(e.writes), std::vector<unsigned>{0});
  EXPECT_EQ(vec(e.aliasesOfReturn(0)), std::vector<unsigned>{0});
  EXPECT_TRUE(e.writesArg(0));
  EXPECT_FALSE(e.writesArg(1));
  EXPECT_FALSE(e.isPure());
  EXPECT_FALSE(e.isView());
  EXPECT_FALSE(e.random);
  EXPECT_FALSE(e.sideEffects);
}

TEST(OpEffectsTest, InPlaceReluWritesSelf) {
  const OpEffects &e = effectsOf("aten::relu_");
  EXPECT_EQ(vec(e.writes), std::vector<unsigned>{0});
  EXPECT_EQ(vec(e.aliasesOfReturn(0)), std::vector<unsigned>{0});
  EXPECT_FALSE(e.isPure());
}

TEST(OpEffectsTest, CopyWritesSelfNotSource) {
  const OpEffects &e = effectsOf("aten::copy_");
  EXPECT_EQ(vec(e.writes), std::vector<unsigned>{0});
  EXPECT_FALSE(e.writesArg(1));
  EXPECT_FALSE(e.isPure());
}

TEST(OpEffectsTest, DropoutIsRandomAndNotPure) {
  const OpEffects &e = effectsOf("aten::native_dropout");
  EXPECT_TRUE(e.random);
  EXPECT_FALSE(e.isPure());
  EXPECT_TRUE(e.writes.empty());
  EXPECT_FALSE(e.mayAlias());
  EXPECT_TRUE(effectsOf("aten::bernoulli.p").random);
  EXPECT_FALSE(effectsOf("aten::relu").random);
}

TEST(OpEffectsTest, ViewsAliasTheirInputAndWriteNothing) {
  // aten::_unsafe_view too, although its schema carries no alias annotation.
  for (const char *name :
       {"aten::view", "aten::t", "aten::expand", "aten::split.Tensor", "aten::_unsafe_view"}) {
    const OpEffects &e = effectsOf(name);
    EXPECT_TRUE(e.isView()) << name;
    EXPECT_FALSE(e.isPure()) << name;
    EXPECT_TRUE(e.writes.empty()) << name;
    EXPECT_EQ(vec(e.aliasesOfReturn(0)), std::vector<unsigned>{0}) << name;
  }
}

TEST(OpEffectsTest, MatmulIsPure) {
  const OpEffects &e = effectsOf("aten::mm");
  EXPECT_TRUE(e.isPure());
  EXPECT_FALSE(e.isView());
  EXPECT_FALSE(e.mayAlias());
  EXPECT_TRUE(e.writes.empty());
  EXPECT_TRUE(effectsOf("aten::add.Tensor").isPure());
  // The functional BatchNorm returns new running statistics instead of writing them.
  EXPECT_TRUE(effectsOf("aten::_native_batch_norm_legit_functional").isPure());
}

TEST(OpEffectsTest, ListArgumentsWrittenInPlace) {
  const OpEffects &e = effectsOf("aten::_foreach_add_.List");
  EXPECT_EQ(vec(e.writes), std::vector<unsigned>{0});
  EXPECT_FALSE(e.sideEffects); // it writes, so it is there for what it writes
}

TEST(OpEffectsTest, FusedOptimizersWriteParametersGradientsAndStateButNotSteps) {
  // Nodes of these operators have no results (they return `()`); what they do
  // is all in their writes, which the schema annotates element-wise.
  const OpEffects &adamw = effectsOf("aten::_fused_adamw_");
  // self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs; not state_steps (5).
  EXPECT_EQ(vec(adamw.writes), (std::vector<unsigned>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(adamw.sideEffects);
  EXPECT_FALSE(adamw.mayAlias());
  const OpEffects &sgd = effectsOf("aten::_fused_sgd_");
  EXPECT_EQ(vec(sgd.writes), (std::vector<unsigned>{0, 1, 2}));
  EXPECT_EQ(vec(effectsOf("aten::_foreach_add_.Scalar").writes), std::vector<unsigned>{0});

  auto g = parse(R"(graph @step {
  input %w : f32[2] parameter "w"
  input %s : f32[2] optimizer_state "w.momentum_buffer"
  input %g : f32[2] user_input
optimizer:
  aten::_fused_sgd_([%w], [%g], [%s], weight_decay=0.0, momentum=0.9, lr=0.1, dampening=0.0, nesterov=false, maximize=false, is_first_step=false)
})");
  const Node &n = g->nodes().front();
  EXPECT_EQ(n.numOutputs(), 0u);
  llvm::SmallVector<Value *, 2> written = writtenValues(n);
  ASSERT_EQ(written.size(), 3u);
  EXPECT_EQ(written[0]->name(), "w");
  EXPECT_EQ(written[1]->name(), "g");
  EXPECT_EQ(written[2]->name(), "s");
  EXPECT_TRUE(writesGraphInput(n));
  EXPECT_TRUE(hasExternalEffect(n));
  EXPECT_FALSE(isPure(n));
  EXPECT_EQ(vec(mutatedGraphInputs(*g)), (std::vector<unsigned>{0, 1, 2}));
}

TEST(OpEffectsTest, SideEffects) {
  EXPECT_TRUE(effectsOf("aten::_assert_async").sideEffects);
  EXPECT_TRUE(effectsOf("aten::_assert_async.msg").sideEffects);
  EXPECT_FALSE(effectsOf("aten::_assert_async").isPure());
  EXPECT_TRUE(effectsOf("aten::_print").sideEffects);
  // Collectives, where this build of LibTorch registers them.
  for (const char *name : {"_c10d_functional::all_reduce", "_c10d_functional::wait_tensor",
                           "_c10d_functional::all_gather_into_tensor"})
    if (auto op = resolveOperator(name); op.ok())
      EXPECT_TRUE(opEffects(*op).sideEffects) << name;
  EXPECT_FALSE(effectsOf("aten::mm").sideEffects);
}

TEST(OpEffectsTest, WaitTensorReturnsItsArgument) {
  auto op = resolveOperator("_c10d_functional::wait_tensor");
  if (!op.ok())
    GTEST_SKIP() << "this LibTorch registers no functional collectives";
  const OpEffects &e = opEffects(*op);
  ASSERT_EQ(e.returnAliases.size(), 1u);
  EXPECT_EQ(vec(e.returnAliases[0]), (std::vector<unsigned>{0}));
  EXPECT_FALSE(e.mayWrite());
  // The collective itself makes a new tensor.
  EXPECT_FALSE(effectsOf("_c10d_functional::all_reduce").mayAlias());
}

TEST(OpEffectsTest, OperatorsHoldingScriptObjectsAreRefused) {
  // torch.distributed's in-place collectives take a ProcessGroup and return a Work.
  auto op = resolveOperator("c10d::allreduce_");
  if (op.ok())
    FAIL() << "c10d::allreduce_ resolved";
  if (absl::IsNotFound(op.status()))
    GTEST_SKIP() << "this LibTorch registers no c10d operators";
  EXPECT_TRUE(absl::IsInvalidArgument(op.status()));
  const std::string message(op.status().message());
  for (const char *part : {"c10d::allreduce_", "ProcessGroup", "_c10d_functional::all_reduce"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

TEST(OpEffectsTest, BatchNormWritesRunningStatsOnlyWhenTraining) {
  const OpEffects &e = effectsOf("aten::batch_norm");
  EXPECT_TRUE(e.writes.empty());
  EXPECT_EQ(vec(e.writesWhenTraining), (std::vector<unsigned>{3, 4}));
  EXPECT_EQ(e.trainingArg, 5);
  EXPECT_FALSE(e.isPure());
  // native_batch_norm writes them too (its schema does not say so; SchemaInfo does).
  EXPECT_EQ(vec(effectsOf("aten::native_batch_norm").writesWhenTraining), (std::vector<unsigned>{3, 4}));
  auto g = parse(R"(graph @bn {
  input %x : f32[2, 3] user_input
  input %m : f32[3] buffer "bn.running_mean"
  input %v : f32[3] buffer "bn.running_var"
  %train = aten::batch_norm(%x, None, None, %m, %v, true, 0.1, 1e-05, false) : f32[2, 3]
  %eval = aten::batch_norm(%x, None, None, %m, %v, false, 0.1, 1e-05, false) : f32[2, 3]
  output %train user_output
  output %eval user_output
})");
  const Node &train = nodeDefining(*g, "train");
  const Node &eval = nodeDefining(*g, "eval");
  EXPECT_TRUE(writesArgument(train, 3));
  EXPECT_TRUE(writesArgument(train, 4));
  EXPECT_FALSE(writesArgument(train, 0));
  EXPECT_FALSE(writesArgument(eval, 3));
  EXPECT_EQ(writtenValues(train).size(), 2u);
  EXPECT_TRUE(writtenValues(eval).empty());
  EXPECT_TRUE(hasExternalEffect(train));
  EXPECT_FALSE(hasExternalEffect(eval));
}

TEST(OpEffectsTest, WritesToGraphInputsAreExternalEffects) {
  auto g = parse(R"(graph @writes {
  input %buf : f32[2, 2] buffer "buf"
  input %x : f32[2, 2] user_input
  %tmp = aten::mul.Tensor(%x, 2) : f32[2, 2]
  %a = aten::copy_(%tmp, %x) : f32[2, 2]
  %flat = aten::view(%buf, [4]) : f32[4]
  %b = aten::add_.Scalar(%flat, 1) : f32[4]
  %c = aten::copy_(%x, %tmp) : f32[2, 2]
  output %a user_output
  output %b user_output
  output %c user_output
})");
  const Node &intoTemp = nodeDefining(*g, "a");
  const Node &throughView = nodeDefining(*g, "b");
  const Node &intoInput = nodeDefining(*g, "c");
  EXPECT_FALSE(hasExternalEffect(intoTemp)); // writes only a value of the graph
  EXPECT_FALSE(isPure(intoTemp));
  EXPECT_TRUE(writesGraphInput(throughView)); // %flat is a view of %buf
  EXPECT_TRUE(hasExternalEffect(intoInput));
  EXPECT_TRUE(isPure(nodeDefining(*g, "tmp")));
  EXPECT_EQ(vec(mutatedGraphInputs(*g)), (std::vector<unsigned>{0, 1}));

  // Storage roots follow views and in-place results back to the input.
  const Value *b = throughView.output();
  auto roots = storageRoots(b);
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0]->name(), "buf");
  auto aliased = aliasedOperands(throughView, 0);
  ASSERT_EQ(aliased.size(), 1u);
  EXPECT_EQ(aliased[0]->name(), "flat");
  EXPECT_TRUE(aliasedOperands(nodeDefining(*g, "tmp"), 0).empty());
}

TEST(NodeResultsTest, OnlyALoneTensorListSpreads) {
  auto unbind = resolveOperator("aten::unbind.int");
  ASSERT_TRUE(unbind.ok());
  EXPECT_TRUE(returnsTensorList(unbind->schema()));
  EXPECT_EQ(returnIndexOfOutput(unbind->schema(), 2), 0u);
  torch::jit::Stack stack{c10::IValue(c10::List<at::Tensor>({at::ones({1}), at::ones({1}), at::ones({1})}))};
  llvm::SmallVector<c10::IValue, 4> outs;
  spreadResults(unbind->schema(), stack, outs);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_TRUE(outs[2].isTensor());

  // Several returns, lists among them: one output per return, lists kept whole.
  auto adam = resolveOperator("aten::_fused_adam");
  ASSERT_TRUE(adam.ok());
  EXPECT_FALSE(returnsTensorList(adam->schema()));
  EXPECT_EQ(returnIndexOfOutput(adam->schema(), 2), 2u);
  torch::jit::Stack lists;
  for (size_t i = 0; i < adam->schema().returns().size(); ++i)
    lists.emplace_back(c10::List<at::Tensor>({at::ones({1}), at::ones({1})}));
  outs.clear();
  spreadResults(adam->schema(), lists, outs);
  ASSERT_EQ(outs.size(), adam->schema().returns().size());
  EXPECT_TRUE(outs[0].isTensorList());

  auto dropout = resolveOperator("aten::native_dropout");
  ASSERT_TRUE(dropout.ok());
  EXPECT_FALSE(returnsTensorList(dropout->schema()));
  EXPECT_EQ(returnIndexOfOutput(dropout->schema(), 1), 1u);
}

TEST(NodeResultsTest, TypeInferenceSpreadsALoneTensorList) {
  auto g = parse(R"(graph @split {
  input %x : f32[4, 3] user_input
  %a, %b = aten::split.Tensor(%x, 2) : ?, ?
  output %a user_output
  output %b user_output
})");
  ASSERT_TRUE(inferTypes(*g).ok());
  const Node &split = nodeDefining(*g, "a");
  EXPECT_EQ(llvm::ArrayRef<int64_t>(split.output(0)->tensorType().sizes).vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(llvm::ArrayRef<int64_t>(split.output(1)->tensorType().sizes).vec(), (std::vector<int64_t>{2, 3}));
}

TEST(HashingTest, EqualConstantsHashEqual) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<Constant, Constant>> equal = {
      {Constant::none(), Constant::none()},
      {Constant::ofInt(3), Constant::ofInt(3)},
      {Constant::ofFloat(nan), Constant::ofFloat(nan)},
      {Constant::ofFloat(0.5), Constant::ofFloat(0.5)},
      {Constant::ofString("mean"), Constant::ofString("mean")},
      {Constant::ofIntList({1, 2}), Constant::ofIntList({1, 2})},
      {Constant::ofFloatList({1.0, nan}), Constant::ofFloatList({1.0, nan})},
      {Constant::ofBoolList({true, false}), Constant::ofBoolList({true, false})},
      {Constant::ofDtype(at::kFloat), Constant::ofDtype(at::kFloat)},
      {Constant::ofDevice(c10::Device("cuda:1")), Constant::ofDevice(c10::Device("cuda:1"))},
  };
  for (const auto &[a, b] : equal) {
    ASSERT_TRUE(a == b);
    EXPECT_EQ(hash_value(a), hash_value(b)) << constantKindName(a.kind()).str();
  }
  std::vector<std::pair<Constant, Constant>> different = {
      {Constant::ofInt(1), Constant::ofFloat(1.0)}, // kinds differ
      {Constant::ofInt(1), Constant::ofInt(2)},
      {Constant::ofFloat(0.0), Constant::ofFloat(-0.0)}, // bit patterns differ
      {Constant::ofIntList({1, 2}), Constant::ofIntList({2, 1})},
      {Constant::ofString("mean"), Constant::ofString("sum")},
      {Constant::ofDtype(at::kFloat), Constant::ofDtype(at::kHalf)},
      {Constant::ofDevice(c10::Device("cuda:0")), Constant::ofDevice(c10::Device("cuda:1"))},
      {Constant::none(), Constant::ofBool(false)},
  };
  for (const auto &[a, b] : different) {
    ASSERT_FALSE(a == b);
    EXPECT_NE(hash_value(a), hash_value(b)) << constantKindName(a.kind()).str();
  }
}

TEST(HashingTest, ArgumentsHashByValueIdentityAndConstant) {
  auto g = parse(R"(graph @args {
  input %x : f32[2] user_input
  input %y : f32[2] user_input
  %s = aten::add.Tensor(%x, %y) : f32[2]
  output %s user_output
})");
  Value *x = g->inputs()[0].value, *y = g->inputs()[1].value;
  Argument ax = Argument::value(x), ax2 = Argument::value(x), ay = Argument::value(y);
  EXPECT_TRUE(sameArgument(ax, ax2));
  EXPECT_EQ(hash_value(ax), hash_value(ax2));
  EXPECT_FALSE(sameArgument(ax, ay));
  EXPECT_NE(hash_value(ax), hash_value(ay));

  Argument c1 = Argument::constant(Constant::ofInt(1)), c1b = Argument::constant(Constant::ofInt(1));
  EXPECT_TRUE(sameArgument(c1, c1b));
  EXPECT_EQ(hash_value(c1), hash_value(c1b));
  EXPECT_NE(hash_value(c1), hash_value(Argument::constant(Constant::ofInt(2))));

  Argument l1 = Argument::list({x, nullptr, y}), l2 = Argument::list({x, nullptr, y});
  Argument l3 = Argument::list({y, nullptr, x});
  EXPECT_TRUE(sameArgument(l1, l2));
  EXPECT_EQ(hash_value(l1), hash_value(l2));
  EXPECT_FALSE(sameArgument(l1, l3));
  EXPECT_NE(hash_value(l1), hash_value(l3));
  EXPECT_FALSE(sameArgument(ax, Argument::list({x})));
}
