//===- StandInsTest.cpp - Stand-ins are made, refused or bounded, never abort ===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty_strided.h>

#include <gtest/gtest.h>

using namespace graphopt;

namespace {

std::unique_ptr<Graph> parse(const std::string &inputs) {
  std::string text = "graph @g {\n" + inputs + "forward:\n}\n";
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

} // namespace

TEST(StandInsTest, OverlappingAndBroadcastStridesAreViewsOfTheirSpan) {
  auto g = parse("  input %x : f32[4, 8]{strides=[1, 1]} user_input\n"
                 "  input %w : f32[4, 8]{strides=[0, 1]} parameter \"w\"\n");
  auto inputs = makeExampleInputs(*g, 0);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  ASSERT_EQ(inputs->size(), 1u);
  EXPECT_EQ((*inputs)[0].strides(), (c10::IntArrayRef{1, 1}));
  EXPECT_EQ((*inputs)[0].storage().nbytes(), 11u * 4); // span (3 + 7 + 1) elements
  WeightStore weights;
  auto made = fillMissingWeights(*g, weights, 0);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(*made, 1u);
  const at::Tensor *w = weights.lookup("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->strides(), (c10::IntArrayRef{0, 1}));
  // Every row reads the same 8 numbers.
  EXPECT_TRUE(w->select(0, 0).equal(w->select(0, 3)));
}

TEST(StandInsTest, DenseStandInsAreUnchangedByTheSpanPath) {
  // The stand-in values of dense tensors are what they were before
  // overlapping strides had their own path: the same seed, the same numbers.
  auto g = parse("  input %x : f32[2, 3]{strides=[1, 2]} user_input\n");
  at::Tensor x = makeExampleInputs(*g, 7).value()[0];
  at::Tensor expected = at::empty_strided({2, 3}, {1, 2});
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  expected.normal_(0, 1, gen);
  EXPECT_TRUE(x.equal(expected));
}

TEST(StandInsTest, QuantizedDtypesAreRefusedByName) {
  auto g = parse("  input %q : QInt8[4] user_input\n");
  auto inputs = makeExampleInputs(*g, 0);
  ASSERT_FALSE(inputs.ok());
  EXPECT_EQ(inputs.status().message(),
            "cannot make a stand-in for %q (QInt8): the executor makes no tensors of this dtype");
}

TEST(StandInsTest, Float8IsDrawnInF32ThenRounded) {
  auto g = parse("  input %x : f8e4m3fn[16] user_input\n");
  auto inputs = makeExampleInputs(*g, 0);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ((*inputs)[0].scalar_type(), c10::ScalarType::Float8_e4m3fn);
  EXPECT_GT((*inputs)[0].to(c10::kFloat).abs().sum().item<float>(), 0.0f);
}

TEST(StandInsTest, TheByteLimitIsCheckedBeforeAnythingIsMade) {
  auto g = parse("  input %x : f32[1000] user_input\n  input %w : f32[1000] parameter \"w\"\n");
  auto inputs = makeExampleInputs(*g, 0, /*maxBytes=*/2000);
  ASSERT_FALSE(inputs.ok());
  EXPECT_EQ(inputs.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(inputs.status().message().find("the stand-in inputs would take 3.91 KiB, more than "
                                           "--max-memory=1.95 KiB"),
            std::string::npos)
      << inputs.status().message();
  EXPECT_FALSE(makeExampleInputs(*g, 0, 3999).ok());
  EXPECT_TRUE(makeExampleInputs(*g, 0, 4000).ok());
  WeightStore weights;
  EXPECT_FALSE(fillMissingWeights(*g, weights, 0, 3999).ok());
  EXPECT_FALSE(weights.contains("w")); // nothing was made
  // An allocation the system refuses is an error too, not std::bad_alloc.
  auto huge = parse("  input %x : f32[100000, 1000000] user_input\n");
  auto made = makeExampleInputs(*huge, 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("cannot make a stand-in for %x (f32)"), std::string::npos);
}
