//===- Pt2WriterTest.cpp - The .pt2 writer on graphs the zoo does not have ---===//
//
// The pass fuzzer's random training steps (Testing/RandomGraph.h: views, in-place
// writes to activations and to inputs, random and multi-output operators, tied
// parameters, aliasing outputs) go through the writer and back through the importer:
// every graph reads back printing the same .gir, and so does the whole archive with
// weights. The zoo's round trips are python/tools/roundtrip_zoo.py.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Export/Pt2Writer.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Support/FileIO.h"
#include "graphopt/Testing/RandomGraph.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

using namespace graphopt;
namespace gt = graphopt::testing;

namespace {

TEST(Pt2WriterTest, RandomTrainingStepsReadBackTheSame) {
  std::array<unsigned, gt::kNumFeatures> seen{};
  for (uint64_t seed = 0; seed < 60; ++seed) {
    gt::Choices choices(seed);
    auto made = gt::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status();
    const Graph &g = *made->graph;
    for (size_t f = 0; f < gt::kNumFeatures; ++f)
      seen[f] += made->features[f] != 0;
    auto json = serializeExportedProgram(g);
    ASSERT_TRUE(json.ok()) << "seed " << seed << ": " << json.status();
    auto back = importProgramJson(*json, WeightStore(), g.name(), "test");
    ASSERT_TRUE(back.ok()) << "seed " << seed << ": " << back.status();
    EXPECT_EQ(printGraphToString(*back->graph), printGraphToString(g)) << "seed " << seed;
  }
  for (size_t f = 0; f < gt::kNumFeatures; ++f)
    EXPECT_GT(seen[f], 0u) << gt::featureName(static_cast<gt::Feature>(f)).str()
                           << " never generated";
}

TEST(Pt2WriterTest, ArchiveWithWeightsReadsBackTheSame) {
  // The first seed whose graph has tied parameters: they must come back tied and
  // sharing one storage.
  absl::StatusOr<gt::RandomGraph> made = absl::NotFoundError("no graph with a tie");
  for (uint64_t seed = 0; seed < 100; ++seed) {
    gt::Choices choices(seed);
    made = gt::makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << made.status();
    if (made->features[static_cast<size_t>(gt::Feature::TiedInput)])
      break;
  }
  ASSERT_TRUE(made->features[static_cast<size_t>(gt::Feature::TiedInput)]);
  const Graph &g = *made->graph;
  WeightStore weights;
  ASSERT_TRUE(fillMissingWeights(g, weights, /*seed=*/1).ok());
  auto bytes = writePt2Archive(g, weights, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("pt2-writer-test", dir));
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, "step.pt2");
  ASSERT_TRUE(writeFileAtomically(path, *bytes).ok());
  auto back = importModel(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(printGraphToString(*back->graph), printGraphToString(g));
  for (const GraphInput &in : back->graph->inputs())
    if (in.tiedTo) {
      const GraphInput &owner = back->graph->inputs()[in.tiedTo->index()];
      EXPECT_TRUE(back->weights.lookup(in.target)->is_alias_of(*back->weights.lookup(owner.target)))
          << in.target << " is tied to " << owner.target << " but does not share its storage";
    }
  for (const GraphInput &in : g.inputs()) {
    if (in.role == InputRole::UserInput || in.tiedTo)
      continue;
    const at::Tensor *want = weights.lookup(in.target);
    const at::Tensor *got = back->weights.lookup(in.target);
    if (!want) // optimizer state without a weight is written as zeros
      continue;
    ASSERT_NE(got, nullptr) << in.target;
    EXPECT_TRUE(want->equal(*got)) << in.target;
  }
  llvm::sys::fs::remove_directories(dir);
}

TEST(Pt2WriterTest, InputWithoutAWeightIsAnError) {
  gt::Choices choices(3);
  auto made = gt::makeRandomGraph(choices);
  ASSERT_TRUE(made.ok());
  bool hasWeightInput = false;
  for (const GraphInput &in : made->graph->inputs())
    hasWeightInput |= in.role == InputRole::Parameter;
  ASSERT_TRUE(hasWeightInput);
  auto bytes = writePt2Archive(*made->graph, WeightStore(), {});
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(std::string(bytes.status().message()).find("has no weight"), std::string::npos)
      << bytes.status();
}

} // namespace
