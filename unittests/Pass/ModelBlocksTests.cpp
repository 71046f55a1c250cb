//===- ModelBlocksTests.cpp - Blocks from module paths, and their interiors -===//
#include "CheckpointTestGraphs.h"
#include "checkpoint/ModelBlocks.h"

#include "graphopt/IR/Parser.h"

#include <absl/strings/str_cat.h>
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

/// Stages of blocks without module paths: stage k has `counts[k]` blocks of
/// six nodes on f32[`sizes[k]`] (h = in * w, a = exp, b = sin, c = cos,
/// d = tanh, e = d + in: the residual), a slice between stages. Only e
/// passes from one block to the next. `stem`: p = x + x first, the same
/// operator and type as a block's last node.
std::string stagesOfBlocks(const std::vector<int> &counts, const std::vector<int> &sizes,
                           bool stem = false) {
  std::string t = absl::StrCat("graph @stages {\n  input %w : f32[] parameter \"w\"\n"
                               "  input %x : f32[", sizes[0], "] user_input\nforward:\n");
  std::string in = "x";
  if (stem) {
    absl::StrAppend(&t, "  %p = aten::add.Tensor(%x, %x) : f32[", sizes[0], "]\n");
    in = "p";
  }
  std::vector<std::string> saved;
  int block = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const std::string type = absl::StrCat("f32[", sizes[k], "]");
    if (k > 0) {
      absl::StrAppend(&t, "  %s", k, " = aten::slice.Tensor(%", in, ", 0, 0, ", sizes[k],
                      ") : ", type, "\n");
      in = absl::StrCat("s", k);
    }
    for (int i = 0; i < counts[k]; ++i, ++block) {
      const std::string b = absl::StrCat(block);
      absl::StrAppend(&t, "  %h", b, " = aten::mul.Tensor(%", in, ", %w) : ", type, "\n",
                      "  %a", b, " = aten::exp(%h", b, ") : ", type, "\n",
                      "  %b", b, " = aten::sin(%a", b, ") : ", type, "\n",
                      "  %c", b, " = aten::cos(%b", b, ") : ", type, "\n",
                      "  %d", b, " = aten::tanh(%c", b, ") : ", type, "\n",
                      "  %e", b, " = aten::add.Tensor(%d", b, ", %", in, ") : ", type, "\n");
      saved.push_back(absl::StrCat("a", b));
      in = absl::StrCat("e", b);
    }
  }
  absl::StrAppend(&t, "  %loss = aten::sum(%", in, ") : f32[]\nbackward:\n",
                  "  %g = aten::ones_like(%loss) : f32[]\n");
  // Backward reads every a (its sum, times g): enough to make them saved.
  std::string total = "g";
  for (size_t i = 0; i < saved.size(); ++i) {
    absl::StrAppend(&t, "  %r", i, " = aten::sum(%", saved[i], ") : f32[]\n", "  %t", i,
                    " = aten::mul.Tensor(%", total, ", %r", i, ") : f32[]\n");
    total = absl::StrCat("t", i);
  }
  absl::StrAppend(&t, "  output %loss loss\n  output %", total, " gradient \"w\"\n}\n");
  return t;
}

/// Each block as the names of its nodes' first outputs.
std::vector<std::vector<std::string>> blockContents(const RecomputeModel &model,
                                                    const ModelBlocks &blocks) {
  std::vector<std::vector<std::string>> contents(blocks.names.size());
  for (size_t r = 0; r < blocks.blockOfRank.size(); ++r)
    if (blocks.blockOfRank[r] >= 0)
      contents[blocks.blockOfRank[r]].push_back(model.nodeAt(r)->output(0)->name().str());
  return contents;
}

TEST(ModelBlocksTest, RepeatedShapesAreBlocksWithoutModulePaths) {
  // The stem's add repeats with a block's last add: the run starts there, and
  // the blocks are cut one node later, where only the residual e crosses.
  auto graph = parsed(stagesOfBlocks({4}, {256}, /*stem=*/true).c_str());
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  ModelBlocks blocks = findBlocks(model);
  EXPECT_TRUE(blocks.fromShapes);
  ASSERT_EQ(blocks.names.size(), 4u);
  auto contents = blockContents(model, blocks);
  for (int b = 0; b < 4; ++b)
    EXPECT_EQ(contents[b],
              (std::vector<std::string>{absl::StrCat("h", b), absl::StrCat("a", b),
                                        absl::StrCat("b", b), absl::StrCat("c", b),
                                        absl::StrCat("d", b), absl::StrCat("e", b)}))
        << "block " << b;
  EXPECT_EQ(blocks.names[0], "repeat 0.0 (from %h0)");
  // The per-block start's interiors: everything but e, of which only a is saved.
  EXPECT_EQ(interiorNames(model), (std::vector<std::string>{"a0", "a1", "a2", "a3"}));
}

TEST(ModelBlocksTest, EachShapeIsARunOfItsOwn) {
  auto graph = parsed(stagesOfBlocks({2, 3}, {256, 128}).c_str());
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  ModelBlocks blocks = findBlocks(model);
  ASSERT_EQ(blocks.names.size(), 5u);
  auto contents = blockContents(model, blocks);
  // In forward order: the 128-element run, found first (it covers more), comes second.
  EXPECT_EQ(contents[0].front(), "h0");
  EXPECT_EQ(contents[1].front(), "h1");
  EXPECT_EQ(contents[2].front(), "h2");
  EXPECT_EQ(contents[4].back(), "e4");
  EXPECT_EQ(blocks.names[2], "repeat 0.0 (from %h2)");
  EXPECT_EQ(blocks.names[0], "repeat 1.0 (from %h0)");
}

// Blocks of repeated shapes whose first node has no result (an assertion, as
// a Hugging Face Llama's export has: aten::_assert_tensor_metadata) and with a node of two results (sort):
// blocks are named from such a node without reading a result it lacks.
// (repeatedBlocks once built the name from output(0): SIGSEGV.)
constexpr const char *kBlocksWithoutResults = R"(graph @blocks {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
forward:
  %p = aten::add.Tensor(%x, %x) : f32[256]
  aten::_assert_tensor_metadata(%p, [256], [1], dtype=f32)
  %h0 = aten::mul.Tensor(%p, %w) : f32[256]
  %a0 = aten::exp(%h0) : f32[256]
  %s0, %i0 = aten::sort(%a0, 0, false) : f32[256], i64[256]
  %c0 = aten::cos(%s0) : f32[256]
  %d0 = aten::tanh(%c0) : f32[256]
  %e0 = aten::add.Tensor(%d0, %p) : f32[256]
  aten::_assert_tensor_metadata(%e0, [256], [1], dtype=f32)
  %h1 = aten::mul.Tensor(%e0, %w) : f32[256]
  %a1 = aten::exp(%h1) : f32[256]
  %s1, %i1 = aten::sort(%a1, 0, false) : f32[256], i64[256]
  %c1 = aten::cos(%s1) : f32[256]
  %d1 = aten::tanh(%c1) : f32[256]
  %e1 = aten::add.Tensor(%d1, %e0) : f32[256]
  aten::_assert_tensor_metadata(%e1, [256], [1], dtype=f32)
  %h2 = aten::mul.Tensor(%e1, %w) : f32[256]
  %a2 = aten::exp(%h2) : f32[256]
  %s2, %i2 = aten::sort(%a2, 0, false) : f32[256], i64[256]
  %c2 = aten::cos(%s2) : f32[256]
  %d2 = aten::tanh(%c2) : f32[256]
  %e2 = aten::add.Tensor(%d2, %e1) : f32[256]
  aten::_assert_tensor_metadata(%e2, [256], [1], dtype=f32)
  %h3 = aten::mul.Tensor(%e2, %w) : f32[256]
  %a3 = aten::exp(%h3) : f32[256]
  %s3, %i3 = aten::sort(%a3, 0, false) : f32[256], i64[256]
  %c3 = aten::cos(%s3) : f32[256]
  %d3 = aten::tanh(%c3) : f32[256]
  %e3 = aten::add.Tensor(%d3, %e2) : f32[256]
  %loss = aten::sum(%e3) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ra0 = aten::sum(%a0) : f32[]
  %rs0 = aten::sum(%s0) : f32[]
  %p0 = aten::mul.Tensor(%ra0, %rs0) : f32[]
  %t0 = aten::mul.Tensor(%g, %p0) : f32[]
  %ra1 = aten::sum(%a1) : f32[]
  %rs1 = aten::sum(%s1) : f32[]
  %p1 = aten::mul.Tensor(%ra1, %rs1) : f32[]
  %t1 = aten::mul.Tensor(%t0, %p1) : f32[]
  %ra2 = aten::sum(%a2) : f32[]
  %rs2 = aten::sum(%s2) : f32[]
  %p2 = aten::mul.Tensor(%ra2, %rs2) : f32[]
  %t2 = aten::mul.Tensor(%t1, %p2) : f32[]
  %ra3 = aten::sum(%a3) : f32[]
  %rs3 = aten::sum(%s3) : f32[]
  %p3 = aten::mul.Tensor(%ra3, %rs3) : f32[]
  %t3 = aten::mul.Tensor(%t2, %p3) : f32[]
  output %loss loss
  output %t3 gradient "w"
}
)";

TEST(ModelBlocksTest, BlocksMayStartOnANodeWithoutResults) {
  auto graph = parsed(kBlocksWithoutResults);
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  ModelBlocks blocks = findBlocks(model);
  ASSERT_EQ(blocks.names.size(), 4u);
  for (size_t b = 0; b < 4; ++b) {
    EXPECT_EQ(blocks.names[b], absl::StrCat("repeat 0.", b, " (from aten::_assert_tensor_metadata)"));
    std::vector<std::string> labels;
    for (size_t r = 0; r < blocks.blockOfRank.size(); ++r)
      if (blocks.blockOfRank[r] == static_cast<int32_t>(b))
        labels.push_back(model.nodeAt(r)->label());
    EXPECT_EQ(labels, (std::vector<std::string>{"aten::_assert_tensor_metadata", absl::StrCat("h", b),
                                                absl::StrCat("a", b), absl::StrCat("s", b),
                                                absl::StrCat("c", b), absl::StrCat("d", b),
                                                absl::StrCat("e", b)}))
        << "block " << b;
  }
}

TEST(ModelBlocksTest, ModulePathsComeBeforeShapes) {
  // kTwoBlocks' blocks are three nodes: too short for shapes, found from paths.
  auto graph = parsed(kTwoBlocks);
  RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
  EXPECT_FALSE(findBlocks(model).fromShapes);
  EXPECT_TRUE(repeatedBlocks(model).names.empty());
}

TEST(ModelBlocksTest, NoRepeatNoBlocks) {
  // One block, or blocks whose shapes all differ, repeat nothing.
  for (auto [counts, sizes] :
       {std::pair<std::vector<int>, std::vector<int>>{{1}, {256}}, {{1, 1, 1}, {256, 128, 64}}}) {
    auto graph = parsed(stagesOfBlocks(counts, sizes).c_str());
    RecomputeModel model = modelOf(*graph, BoundedMemory::SavedActivations);
    EXPECT_TRUE(findBlocks(model).names.empty()) << counts.size() << " stages";
  }
}

} // namespace
} // namespace graphopt
