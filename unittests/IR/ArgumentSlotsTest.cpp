//===- ArgumentSlotsTest.cpp - One way to fill an operator's arguments ----===//
#include "graphopt/IR/SchemaUtils.h"

#include <gtest/gtest.h>

using namespace graphopt;

namespace {
const c10::FunctionSchema &schemaOf(const char *name) {
  auto op = resolveOperator(name);
  EXPECT_TRUE(op.ok()) << op.status().message();
  return op->schema();
}
} // namespace

TEST(ArgumentSlotsTest, FillsPositionalNamedAndDefaults) {
  Graph g;
  Value *x = g.addInput("x", ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2, 3})),
                        InputRole::UserInput);
  // aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)
  ArgumentSlots slots(schemaOf("aten::sum.dim_IntList"));
  slots.set(*slots.positional(), Argument::value(x));
  slots.set(*slots.named("dim"), Argument::constant(Constant::ofIntList({1})));
  auto args = slots.finish();
  ASSERT_TRUE(args.ok()) << args.status().message();
  ASSERT_EQ(args->size(), 4u);
  EXPECT_EQ((*args)[0].getValue(), x);
  EXPECT_EQ((*args)[1].getConstant(), Constant::ofIntList({1}));
  EXPECT_EQ((*args)[2].getConstant(), Constant::ofBool(false)); // default
  EXPECT_TRUE((*args)[3].getConstant().isNone());               // keyword-only default
}

TEST(ArgumentSlotsTest, CoercesConstantsWhereLossless) {
  // aten::leaky_relu(Tensor self, Scalar negative_slope=0.01): an int Scalar stays an int;
  // aten::dropout(Tensor input, float p, bool train): 1 -> 1.0.
  ArgumentSlots slots(schemaOf("aten::dropout"));
  Graph g;
  Value *x = g.addInput("x", ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2})),
                        InputRole::UserInput);
  slots.set(*slots.positional(), Argument::value(x));
  slots.set(*slots.positional(), Argument::constant(Constant::ofInt(1)));
  slots.set(*slots.positional(), Argument::constant(Constant::ofBool(true)));
  auto args = slots.finish();
  ASSERT_TRUE(args.ok()) << args.status().message();
  EXPECT_EQ((*args)[1].getConstant(), Constant::ofFloat(1.0));
}

TEST(ArgumentSlotsTest, ErrorsSayWhatIsWrong) {
  {
    ArgumentSlots slots(schemaOf("aten::relu"));
    ASSERT_TRUE(slots.positional().ok());
    auto extra = slots.positional();
    ASSERT_FALSE(extra.ok());
    EXPECT_EQ(extra.status().message(),
              "too many positional arguments for aten::relu; its schema is aten::relu(Tensor self) -> Tensor");
  }
  {
    ArgumentSlots slots(schemaOf("aten::add.Tensor"));
    EXPECT_FALSE(slots.positional().ok() && slots.positional().ok() && slots.positional().ok())
        << "alpha is keyword-only";
  }
  {
    ArgumentSlots slots(schemaOf("aten::add.Tensor"));
    Graph g;
    Value *x = g.addInput("x", ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {2})),
                          InputRole::UserInput);
    slots.set(*slots.positional(), Argument::value(x));
    auto twice = slots.named("self");
    ASSERT_FALSE(twice.ok());
    EXPECT_EQ(twice.status().message(), "argument 'self' given twice");
    auto unknown = slots.named("beta");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(std::string(unknown.status().message()).find("aten::add.Tensor has no argument named 'beta'"),
              std::string::npos);
    auto missing = slots.finish();
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(std::string(missing.status().message()).find("missing argument 'other' of aten::add.Tensor"),
              std::string::npos);
  }
}
