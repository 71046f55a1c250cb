//===- ModelBlocksTests.cpp - Blocks from module paths, and their interiors -===//
#include "CheckpointTestGraphs.h"
#include "checkpoint/ModelBlocks.h"

#include "graphopt/IR/Parser.h"

#include <gtest/gtest.h>

namespace graphopt {
namespace {

using test::modelOf;

// Two blocks `layers.0` and `layers.1` (h = in * w, a = exp(h), b = sin(a)),
// then a loss in `head`. Saved for backward: %a0 and %a1 (read in forward
// only inside their block) and %b0 (read by layers.1: a boundary).
constexpr const char *kTwoBlocks = R"(graph @blocks {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
forward:
  %h0 = aten::mul.Tensor(%x, %w) {module = "layers.0.fc1"} : f32[256]
  %a0 = aten::exp(%h0) {module = "layers.0.act"} : f32[256]
  %b0 = aten::sin(%a0) {module = "layers.0.fc2"} : f32[256]
  %h1 = aten::mul.Tensor(%b0, %w) {module = "layers.1.fc1"} : f32[256]
  %a1 = aten::exp(%h1) {module = "layers.1.act"} : f32[256]
  %b1 = aten::sin(%a1) {module = "layers.1.fc2"} : f32[256]
  %loss = aten::sum(%b1) {module = "head"} : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %c1 = aten::cos(%a1) {module = "layers.1.fc2"} : f32[256]
  %ga1 = aten::mul.Tensor(%ge, %c1) : f32[256]
  %gh1 = aten::mul.Tensor(%ga1, %a1) : f32[256]
  %gb0 = aten::mul.Tensor(%gh1, %w) : f32[256]
  %gw1e = aten::mul.Tensor(%gh1, %b0) : f32[256]
  %gw1 = aten::sum(%gw1e) : f32[]
  %c0 = aten::cos(%a0) : f32[256]
  %ga0 = aten::mul.Tensor(%gb0, %c0) : f32[256]
  %gh0 = aten::mul.Tensor(%ga0, %a0) : f32[256]
  %gw0e = aten::mul.Tensor(%gh0, %x) : f32[256]
  %gw0 = aten::sum(%gw0e) : f32[]
  %gw = aten::add.Tensor(%gw1, %gw0) : f32[]
  output %loss loss
  output %gw gradient "w"
})";

std::unique_ptr<Graph> parsed(const char *text) {
  auto g = parseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(*g);
}

std::vector<std::string> interiorNames(const RecomputeModel &model) {
  std::vector<std::string> names;
  for (int32_t c : blockInteriors(model, findBlocks(model)))
    names.push_back(model.candidates()[c].storage->name().str());
  return names;
}

TEST(ModelBlocksTest, IndexedModulesAreBlocksAndNumberedNamesAreNot) {
  auto graph = parsed(kTwoBlocks);
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  ModelBlocks blocks = findBlocks(model);
  // fc1/fc2 are numbered names, not repetitions: the blocks are the layers.
  EXPECT_EQ(blocks.names, (std::vector<std::string>{"layers.0", "layers.1"}));
  EXPECT_EQ(blocks.blockOfRank[0], 0); // %h0
  EXPECT_EQ(blocks.blockOfRank[5], 1); // %b1
  EXPECT_EQ(blocks.blockOfRank[6], -1); // %loss, in head
  EXPECT_EQ(blocks.blockOfRank[7], -1); // %g: no module
}

TEST(ModelBlocksTest, InteriorsLeaveWhatCrossesABoundarySaved) {
  auto graph = parsed(kTwoBlocks);
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  EXPECT_EQ(interiorNames(model), (std::vector<std::string>{"a0", "a1"}));
}

TEST(ModelBlocksTest, AGraphWithoutIndicesHasNoBlocks) {
  std::string text = kTwoBlocks;
  for (auto [from, to] : {std::pair<std::string, std::string>{"layers.0.", "first."},
                          {"layers.1.", "second."}})
    for (size_t at; (at = text.find(from)) != std::string::npos;)
      text.replace(at, from.size(), to);
  auto graph = parsed(text.c_str());
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  EXPECT_TRUE(findBlocks(model).names.empty());
  EXPECT_TRUE(interiorNames(model).empty());
}

TEST(ModelBlocksTest, OneIndexAloneIsNoRepetition) {
  std::string text = kTwoBlocks;
  for (size_t at; (at = text.find("layers.1.")) != std::string::npos;)
    text.replace(at, 9, "tail.");
  auto graph = parsed(text.c_str());
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  EXPECT_TRUE(findBlocks(model).names.empty());
}

} // namespace
} // namespace graphopt
