//===- LivenessTest.cpp - The simulated timeline against the measured one -===//
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Analysis/MeasuredScratch.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"
#include "../ZooArchives.h"

#include <absl/strings/str_replace.h>
#include <gtest/gtest.h>

using namespace graphopt;
using namespace graphopt::test;

/// The liveness of the value called `name`.
static const ValueLiveness &named(const LivenessResult &r, llvm::StringRef name) {
  for (const ValueLiveness &l : r.values)
    if (l.value->name() == name)
      return l;
  throw std::runtime_error("no value %" + name.str());
}

TEST(LivenessTest, ViewsShareStorageAndKindsFollowUse) {
  auto g = parseGraph(R"(graph @g {
  input %w : f32[4, 4] parameter "w"
  input %x : f32[2, 4] user_input
forward:
  %wt = aten::t(%w) : f32[4, 4]{strides=[1, 4]}
  %h = aten::mm(%x, %wt) : f32[2, 4]
  %r = aten::relu(%h) : f32[2, 4]
  %loss = aten::sum(%r) : f32[]
backward:
  %g = aten::threshold_backward(%r, %r, 0) : f32[2, 4]
  %gt = aten::t(%g) : f32[4, 2]{strides=[1, 4]}
  %gw = aten::mm(%gt, %x) : f32[4, 4]
  output %loss loss
  output %gw gradient "w"
})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto r = LivenessAnalysis::compute(**g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto find = [&](llvm::StringRef name) -> const ValueLiveness & { return named(*r, name); };
  EXPECT_EQ(find("wt").bytes, 0);                       // a view of %w
  EXPECT_EQ(find("wt").storage->name(), "w");
  EXPECT_EQ(find("gt").storage->name(), "g");
  EXPECT_EQ(find("w").kind, MemoryKind::Param);
  EXPECT_EQ(find("r").kind, MemoryKind::Act);           // made in forward, used in backward
  EXPECT_EQ(find("h").kind, MemoryKind::Other);         // forward only
  EXPECT_EQ(find("gw").kind, MemoryKind::Grad);
  EXPECT_EQ(find("r").lastForwardUse, 3);
  EXPECT_EQ(find("r").firstBackwardUse, 4);
  EXPECT_EQ(find("h").freedAfter, 2);                   // after relu
  EXPECT_EQ(find("g").freedAfter, 6);                   // its view %gt is read by the last mm
  int64_t sum = 0;
  for (int64_t b : r->breakdown)
    sum += b;
  EXPECT_EQ(sum, r->peakBytes);
  EXPECT_EQ(r->inputBytes, 64 + 32);
}

class LivenessZooTest : public testing::TestWithParam<std::string> {};

// The measured peak of one executor run, after a warm-up run.
int64_t measuredPeak(ImportedModel &model) {
  NodeProfiler profiler(c10::Device(c10::DeviceType::CPU));
  Executor executor(*model.graph, model.weights);
  profiler.attach(executor);
  EXPECT_TRUE(executor.run(model.exampleInputs).ok()); // warm-up
  profiler.beginRun();
  EXPECT_TRUE(executor.run(model.exampleInputs).ok());
  return profiler.runPeakBytes();
}

int64_t sumOf(const LivenessResult &r) {
  int64_t sum = 0;
  for (int64_t b : r.breakdown)
    sum += b;
  return sum;
}

// From the graph alone, the simulation sees what the graph holds between
// operators, not an operator's internal scratch memory (oneDNN's reordered
// weights and workspaces). So the graph-only peak is a lower bound of the
// measured one. How far below depends on the kernels oneDNN picks for the
// machine's CPU: 0.92 of the measured peak on resnet18-train on one machine,
// 0.45 on another (larger convolution workspaces), so no ratio is asserted
// here; with the scratch measured the two agree (the next test).
TEST_P(LivenessZooTest, GraphOnlyPeakBoundsTheMeasuredPeakFromBelow) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/" + GetParam() + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto r = LivenessAnalysis::compute(*model->graph);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(sumOf(*r), r->peakBytes); // the breakdown adds up exactly
  EXPECT_EQ(r->breakdown[static_cast<int>(MemoryKind::Scratch)], 0);

  double simulated = static_cast<double>(r->peakBytes - r->inputBytes);
  double measured = static_cast<double>(measuredPeak(*model));
  EXPECT_LE(simulated, measured) << "simulated " << simulated << " bytes, measured " << measured;
  EXPECT_GT(simulated, 0);
}

// With the operators' scratch memory measured per node (separate runs) and
// added to the timeline, the simulated peak is within 5% of the executor's
// measured peak on every tiny zoo training graph. What this checks beyond the
// measurement itself is the graph-level part: which values are alive together
// at each node, and so where the peak falls and how high it is.
TEST_P(LivenessZooTest, WithMeasuredScratchPeakIsWithinFivePercent) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/" + GetParam() + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  AnalysisManager analyses;
  ExecutionContext context;
  context.weights = &model->weights;
  context.inputs = model->exampleInputs;
  analyses.setExecutionContext(context);
  auto scratch = analyses.getResult<MeasuredScratchAnalysis>(*model->graph);
  ASSERT_TRUE(scratch.ok()) << scratch.status().message();
  EXPECT_EQ((*scratch)->runs, 2u);
  auto r = analyses.getResult<LivenessAnalysis>(*model->graph, {LivenessAnalysis::Scratch::Measured});
  // The measurement, the storage roots and liveness: the measurement was
  // served from the cache.
  EXPECT_EQ(analyses.computations(), 3u);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)->scratch.size(), model->graph->numNodes());
  EXPECT_EQ(sumOf(**r), (*r)->peakBytes);

  double simulated = static_cast<double>((*r)->peakBytes - (*r)->inputBytes);
  double measured = static_cast<double>(measuredPeak(*model));
  EXPECT_NEAR(simulated / measured, 1.0, 0.05) << "simulated " << simulated << " bytes, measured " << measured;
}

// A result that may alias either of two operands (one alias set in its
// schema) keeps both storages alive while it is: liveness asks AliasInfo for
// every root. (It once followed only the first aliased operand, so %q was
// freed after %y was made while %y may still live in it.)
TEST(LivenessTest, AValueWithTwoRootsKeepsBothAlive) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[64] user_input
forward:
  %p = aten::exp(%x) : f32[64]
  %q = aten::sin(%x) : f32[64]
  %y = graphopt_test::either(%p, %q) : f32[64]
  %c = aten::cos(%x) : f32[64]
  %s = aten::sum(%y) : f32[]
  output %s user_output
  output %c user_output
})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto r = LivenessAnalysis::compute(**g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto find = [&](llvm::StringRef name) -> const ValueLiveness & { return named(*r, name); };
  EXPECT_EQ(find("y").bytes, 0); // in its roots' storage
  EXPECT_EQ(find("p").freedAfter, 4); // after %s, %y's last reader
  EXPECT_EQ(find("q").freedAfter, 4);
  // Both are live while %c is made: 3 x 256 bytes beside the input.
  EXPECT_GE(r->peakBytes - r->inputBytes, 3 * 256);
}

TEST(LivenessTest, MeasuringScratchWithoutAModelToRunIsAClearError) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[2, 4] user_input
forward:
  %r = aten::relu(%x) : f32[2, 4]
  output %r user_output
})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  AnalysisManager analyses;
  auto scratch = analyses.getResult<MeasuredScratchAnalysis>(**g);
  ASSERT_FALSE(scratch.ok());
  EXPECT_NE(std::string(scratch.status().message()).find("no weights and example inputs"), std::string::npos)
      << scratch.status().message();

  auto pass = PassRegistry::instance().create("liveness");
  ASSERT_TRUE(pass.ok());
  ASSERT_TRUE((*pass)->setOptions({{"scratch", "measured"}}).ok());
  absl::Status st = (*pass)->analyze(**g, analyses);
  EXPECT_NE(std::string(st.message()).find("liveness{scratch=measured}: measuring operator scratch"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE((*pass)->setOptions({{"scratch", "sometimes"}}).ok());
  EXPECT_FALSE((*pass)->setOptions({{"budget", "1"}}).ok());
}

// The measured scratch lands on the node that holds it, and the timeline and
// peak grow by exactly that.
TEST(LivenessTest, ScratchAddsToItsNodeOnly) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4, 4] user_input
forward:
  %a = aten::relu(%x) : f32[4, 4]
  %b = aten::relu(%a) : f32[4, 4]
  %c = aten::relu(%b) : f32[4, 4]
  output %c user_output
})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto plain = LivenessAnalysis::compute(**g);
  auto withScratch = LivenessAnalysis::compute(**g, {0, 1000, 0});
  ASSERT_TRUE(plain.ok() && withScratch.ok());
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(withScratch->timeline[i] - plain->timeline[i], i == 1 ? 1000 : 0);
  EXPECT_EQ(withScratch->peakNode, 1);
  EXPECT_EQ(withScratch->peakBytes, plain->timeline[1] + 1000);
  EXPECT_EQ(withScratch->breakdown[static_cast<int>(MemoryKind::Scratch)], 1000);
  EXPECT_EQ(sumOf(*withScratch), withScratch->peakBytes);
  EXPECT_FALSE(LivenessAnalysis::compute(**g, {1, 2}).ok()); // one per node, or none
}

INSTANTIATE_TEST_SUITE_P(Zoo, LivenessZooTest, testing::ValuesIn(zooArchives({"train"})),
                         ArchiveName());

// Tied inputs (one storage under two parameter names) are counted once: in the
// input bytes, and so in the peak and the breakdown.
TEST(LivenessTest, TiedInputsAreCountedOnce) {
  const char *text = R"(graph @g {
  input %wte : f32[16, 8] parameter "wte.weight"
  input %head : f32[16, 8] parameter "lm_head.weight"TIE
forward:
  %b = aten::add.Tensor(%wte, %head) : f32[16, 8]
  output %b user_output
})";
  auto untied = parseGraph(absl::StrReplaceAll(text, {{"TIE", ""}}));
  auto tied = parseGraph(absl::StrReplaceAll(text, {{"TIE", " tied %wte"}}));
  ASSERT_TRUE(untied.ok()) << untied.status().message();
  ASSERT_TRUE(tied.ok()) << tied.status().message();
  auto a = LivenessAnalysis::compute(**untied);
  auto b = LivenessAnalysis::compute(**tied);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->inputBytes - b->inputBytes, 16 * 8 * 4);
  EXPECT_EQ(a->peakBytes - b->peakBytes, 16 * 8 * 4);
  EXPECT_EQ(b->breakdown[static_cast<int>(MemoryKind::Param)], 16 * 8 * 4);
  EXPECT_EQ(sumOf(*b), b->peakBytes);
  EXPECT_EQ(b->lookup((*tied)->inputs()[1].value)->storage, (*tied)->inputs()[0].value);
}
