//===- TypeInferenceTest.cpp - Output types from meta / CPU stand-ins -----===//
#include "TestGraphs.h"

#include "graphopt/IR/IValueConversion.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/IR/Verifier.h"

using namespace graphopt;
using namespace graphopt::test;

namespace {
ValueType typed(c10::ScalarType dtype, llvm::ArrayRef<int64_t> sizes) {
  return ValueType::ofTensor(TensorType::contiguous(dtype, sizes));
}
} // namespace

TEST(TypeInferenceTest, InfersShapesDtypesAndStrides) {
  Graph g;
  Value *x = g.addInput("x", f32({8, 16}), InputRole::UserInput);
  Value *w = g.addInput("w", f32({32, 16}), InputRole::Parameter, "w");
  Node *t = unwrap(g.createNode("aten::t", {Argument::value(w)}, {ValueType::unknownTensor()}));
  Node *mm = unwrap(g.createNode("aten::mm", {Argument::value(x), Argument::value(t->output())},
                                 {ValueType::unknownTensor()}));
  Node *toHalf = unwrap(g.createNode(
      "aten::_to_copy",
      {Argument::value(mm->output()), Argument::constant(Constant::ofDtype(c10::kHalf)),
       Argument::constant(Constant::none()), Argument::constant(Constant::none()),
       Argument::constant(Constant::none()), Argument::constant(Constant::ofBool(false)),
       Argument::constant(Constant::none())},
      {ValueType::unknownTensor()}));
  ASSERT_TRUE(inferTypes(g).ok()) << inferTypes(g).message();
  // A transpose is a view with swapped strides, as PyTorch makes it.
  EXPECT_EQ(t->output()->tensorType(), TensorType(c10::kFloat, {16, 32}, {1, 16}));
  EXPECT_EQ(mm->output()->tensorType(), TensorType::contiguous(c10::kFloat, {8, 32}));
  EXPECT_EQ(toHalf->output()->tensorType().dtype, c10::kHalf);
  EXPECT_TRUE(verifyGraph(g).ok());
}

TEST(TypeInferenceTest, MultipleAndListResultsAndWrappedNumbers) {
  Graph g;
  Value *x = g.addInput("x", f32({6, 4}), InputRole::UserInput);
  Node *split = unwrap(g.createNode(
      "aten::split.Tensor",
      {Argument::value(x), Argument::constant(Constant::ofInt(2)), Argument::constant(Constant::ofInt(0))},
      {ValueType::unknownTensor(), ValueType::unknownTensor(), ValueType::unknownTensor()}));
  Node *maxDim = unwrap(g.createNode(
      "aten::max.dim",
      {Argument::value(x), Argument::constant(Constant::ofInt(1)), Argument::constant(Constant::ofBool(false))},
      {ValueType::unknownTensor(), ValueType::unknownTensor()}));
  // i64 tensor + a float wrapped number promotes to the default float dtype.
  Value *idx = g.addInput("idx", typed(c10::kLong, {3}), InputRole::UserInput);
  Node *add = unwrap(g.createNode(
      "aten::add.Tensor",
      {Argument::value(idx), Argument::constant(Constant::ofFloat(0.5)), Argument::constant(Constant::ofInt(1))},
      {ValueType::unknownTensor()}));
  ASSERT_TRUE(inferTypes(g).ok()) << inferTypes(g).message();
  // The third part of x's rows starts 4 rows (16 elements) into x's storage.
  TensorType third(c10::kFloat, {2, 4}, {4, 1});
  third.storageOffset = 16;
  EXPECT_EQ(split->output(2)->tensorType(), third);
  EXPECT_EQ(split->output(0)->tensorType().storageOffset, 0);
  EXPECT_EQ(maxDim->output(1)->tensorType().dtype, c10::kLong);
  EXPECT_EQ(maxDim->output(0)->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{6}));
  EXPECT_EQ(add->output()->tensorType().dtype, c10::kFloat);
}

TEST(TypeInferenceTest, FallsBackToCpuWhereMetaKernelIsMissing) {
  // convolution's meta kernel is registered from Python only.
  Graph g;
  Value *x = g.addInput("x", f32({2, 3, 8, 8}), InputRole::UserInput);
  Value *w = g.addInput("w", f32({4, 3, 3, 3}), InputRole::Parameter, "w");
  auto C = [](Constant c) { return Argument::constant(std::move(c)); };
  Node *conv = unwrap(g.createNode(
      "aten::convolution",
      {Argument::value(x), Argument::value(w), C(Constant::none()), C(Constant::ofIntList({2, 2})),
       C(Constant::ofIntList({1, 1})), C(Constant::ofIntList({1, 1})), C(Constant::ofBool(false)),
       C(Constant::ofIntList({0, 0})), C(Constant::ofInt(1))},
      {ValueType::unknownTensor()}));
  ASSERT_TRUE(inferNodeTypes(*conv).ok()) << inferNodeTypes(*conv).message();
  EXPECT_EQ(conv->output()->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{2, 4, 4, 4}));
}

TEST(TypeInferenceTest, ReportsOperatorErrorsWithTheNode) {
  Graph g;
  Value *a = g.addInput("a", f32({2, 3}), InputRole::UserInput);
  Value *b = g.addInput("b", f32({4, 5}), InputRole::UserInput);
  Node *mm = unwrap(g.createNode("aten::mm", {Argument::value(a), Argument::value(b)},
                                 {ValueType::unknownTensor()}, Phase::Forward, {"bad"}));
  absl::Status st = inferNodeTypes(*mm);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node %bad = aten::mm"), absl::string_view::npos) << st.message();
  EXPECT_NE(st.message().find("cannot be multiplied"), absl::string_view::npos) << st.message();
  EXPECT_FALSE(mm->output()->type().isKnown()); // left unknown
}

TEST(TypeInferenceTest, ANodeWithoutResultsHasNothingToInfer) {
  // _foreach_add_.Scalar returns `()`: the node has no outputs, inference
  // succeeds (it runs the operator on stand-ins, never on the real tensors)
  // and inferTypes skips it.
  Graph g;
  Value *s = g.addInput("s", f32({}), InputRole::OptimizerState, "w.step");
  Node *add = unwrap(g.createNode("aten::_foreach_add_.Scalar",
                                  {Argument::list({s}), Argument::constant(Constant::ofInt(1))}, {},
                                  Phase::Optimizer));
  EXPECT_EQ(add->numOutputs(), 0u);
  EXPECT_TRUE(inferNodeTypes(*add).ok()) << inferNodeTypes(*add).message();
  EXPECT_TRUE(inferTypes(g).ok());
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  // Given a result it does not have, the verifier says so.
  Node *bad = unwrap(g.createNode("aten::_foreach_add_.Scalar",
                                  {Argument::list({s}), Argument::constant(Constant::ofInt(1))},
                                  {f32({})}, Phase::Optimizer, {"oops"}));
  absl::Status st = verifyGraph(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("oops"), absl::string_view::npos) << st.message();
  (void)bad;
}

TEST(TypeInferenceTest, NeedsKnownOperandTypes) {
  Graph g;
  Value *a = g.addInput("a", ValueType::unknownTensor(), InputRole::UserInput);
  Node *relu = unwrap(g.createNode("aten::relu", {Argument::value(a)}, {ValueType::unknownTensor()}));
  absl::Status st = inferNodeTypes(*relu);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("operand %a has no type"), absl::string_view::npos) << st.message();
}

TEST(IValueConversionTest, RoundTripsEveryConstantKind) {
  const Constant constants[] = {
      Constant::none(), Constant::ofBool(true), Constant::ofInt(-3), Constant::ofFloat(0.25),
      Constant::ofString("floor"), Constant::ofIntList({1, 2}), Constant::ofFloatList({0.5}),
      Constant::ofBoolList({true, false}), Constant::ofDtype(c10::kBFloat16),
      Constant::ofLayout(c10::kStrided), Constant::ofMemoryFormat(c10::MemoryFormat::ChannelsLast),
      Constant::ofDevice(c10::Device("cuda:1"))};
  const c10::TypePtr types[] = {
      c10::NoneType::get(), c10::BoolType::get(), c10::IntType::get(), c10::FloatType::get(),
      c10::StringType::get(), c10::ListType::ofInts(), c10::ListType::ofFloats(),
      c10::ListType::ofBools(), c10::ScalarTypeType::get(), c10::LayoutType::get(),
      c10::MemoryFormatType::get(), c10::DeviceObjType::get()};
  for (size_t i = 0; i < std::size(constants); ++i) {
    auto back = constantFromIValue(constantToIValue(constants[i]), types[i]);
    ASSERT_TRUE(back.has_value()) << i;
    EXPECT_EQ(*back, constants[i]) << i;
  }
  // Schema defaults: `ScalarType? dtype=None`, `int[1] dim=[]`, `Scalar alpha=1`.
  auto sum = unwrap(resolveOperator("aten::sum.dim_IntList"));
  EXPECT_EQ(schemaDefault(sum.schema().arguments()[3]), Constant::none());
  auto add = unwrap(resolveOperator("aten::add.Tensor"));
  EXPECT_EQ(schemaDefault(add.schema().arguments()[2]), Constant::ofInt(1));
  EXPECT_FALSE(schemaDefault(add.schema().arguments()[0]).has_value());
}

// An explicit device is passed as written; only the symbolic execution device
// becomes the device the graph runs on (no GPU is needed to name cuda:0).
TEST(IValueConversionTest, ExplicitDevicesStayTheExecutionDeviceIsReplaced) {
  Graph g;
  Value *x = g.addInput("x", f32({2, 3}), InputRole::UserInput);
  auto copyTo = [&](Constant device) {
    auto op = unwrap(resolveOperator("aten::_to_copy"));
    std::vector<Argument> args;
    for (const c10::Argument &a : op.schema().arguments())
      args.push_back(a.name() == "self"     ? Argument::value(x)
                     : a.name() == "device" ? Argument::constant(device)
                                            : Argument::constant(*schemaDefault(a)));
    return g.createNode(op, args, {f32({2, 3})});
  };
  Node *explicitCpu = copyTo(Constant::ofDevice(c10::Device("cpu")));
  Node *symbolic = copyTo(Constant::ofExecutionDevice());
  Node *explicitCuda1 = copyTo(Constant::ofDevice(c10::Device("cuda:1")));
  unsigned deviceArg = 0;
  while (explicitCpu->schema().arguments()[deviceArg].name() != "device")
    ++deviceArg;
  auto valueOf = [](const Value *) -> absl::StatusOr<c10::IValue> { return c10::IValue(); };
  c10::Device cuda0("cuda:0"), cpu("cpu");
  auto deviceOf = [&](Node *n, DeviceConstants replace = DeviceConstants::ExecutionDeviceOnly) {
    auto v = argumentToIValue(*n, deviceArg, valueOf, cpu, cuda0, replace);
    EXPECT_TRUE(v.ok()) << v.status().message();
    return v.ok() && v->isDevice() ? v->toDevice() : c10::Device(c10::DeviceType::Meta);
  };
  EXPECT_EQ(deviceOf(explicitCpu), cpu);
  EXPECT_EQ(deviceOf(symbolic), cuda0);
  EXPECT_EQ(deviceOf(explicitCuda1), c10::Device("cuda:1"));
  // Type inference computes everything on one stand-in device.
  EXPECT_EQ(deviceOf(explicitCpu, DeviceConstants::All), cuda0);

  // The execution device is a device constant that remembers the model's device.
  Constant exec = Constant::ofExecutionDevice();
  EXPECT_EQ(exec.kind(), ConstantKind::Device);
  EXPECT_TRUE(exec.isExecutionDevice());
  EXPECT_FALSE(Constant::ofDevice(cpu).isExecutionDevice());
  EXPECT_EQ(exec.asDevice(), cpu);
  EXPECT_NE(exec, Constant::ofDevice(cpu));
  EXPECT_EQ(Constant::ofExecutionDevice(cuda0).asDevice(), cuda0);
  EXPECT_NE(Constant::ofExecutionDevice(cuda0), exec);
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
}

// Outputs of a copy to the execution device are typed on the model's device.
TEST(TypeInferenceTest, ExecutionDeviceTypesOnTheModelsDevice) {
  Graph g;
  Value *x = g.addInput("x", f32({2, 3}), InputRole::UserInput);
  auto op = unwrap(resolveOperator("aten::_to_copy"));
  auto make = [&](Constant device) {
    std::vector<Argument> args;
    for (const c10::Argument &a : op.schema().arguments())
      args.push_back(a.name() == "self"     ? Argument::value(x)
                     : a.name() == "device" ? Argument::constant(device)
                                            : Argument::constant(*schemaDefault(a)));
    Node *n = g.createNode(op, args, {ValueType::unknownTensor()});
    EXPECT_TRUE(inferNodeTypes(*n).ok());
    return n->output()->tensorType().device;
  };
  EXPECT_EQ(make(Constant::ofExecutionDevice()), c10::Device("cpu"));
  EXPECT_EQ(make(Constant::ofExecutionDevice(c10::Device("cuda:0"))), c10::Device("cuda:0"));
  EXPECT_EQ(make(Constant::ofDevice(c10::Device("cuda:1"))), c10::Device("cuda:1"));
}
