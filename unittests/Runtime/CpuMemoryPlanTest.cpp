//===- CpuMemoryPlanTest.cpp - The arena plan of a run's CPU buffers ------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/CpuMemoryPlan.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <gtest/gtest.h>

#include <thread>

using namespace graphopt;

namespace {

constexpr int64_t kFloats16K = 16 * 1024 / 4; // one 16 KiB block of floats

at::Tensor block(int64_t kib, float fill = 0) { return at::full({kib * 1024 / 4}, fill); }

/// a (16K) and c (16K) never live at once, b (32K) spans both: the plan puts a
/// and c at the same offset, 48K in all.
void threeBlocks() {
  at::Tensor a = block(16, 1), b = block(32, 2);
  a.reset();
  at::Tensor c = block(16, 3);
  c.reset();
  b.reset();
}

} // namespace

TEST(CpuMemoryPlanTest, RecordsThenServesEveryBlockFromOnePackedArena) {
  CpuMemoryPlan plan;
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  CpuMemoryPlan::Stats s = plan.stats();
  EXPECT_EQ(s.records, 1);
  EXPECT_EQ(s.plannedBlocks, 3);
  EXPECT_EQ(s.plannedPeakBytes, 48 * 1024);
  EXPECT_EQ(s.arenaBytes, 48 * 1024); // a and c share their memory
  EXPECT_EQ(s.served, 0);

  for (int run = 1; run <= 3; ++run) {
    CpuMemoryPlan::RunScope scope(plan);
    threeBlocks();
  }
  s = plan.stats();
  EXPECT_EQ(s.served, 9);
  EXPECT_EQ(s.fellBack, 0);
  EXPECT_EQ(s.records, 1);
}

TEST(CpuMemoryPlanTest, BlocksOfOneArenaThatLiveAtOnceNeverShareMemory) {
  CpuMemoryPlan plan;
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  const void *aPtr = nullptr, *cPtr = nullptr;
  {
    CpuMemoryPlan::RunScope run(plan);
    at::Tensor a = block(16, 1), b = block(32, 2);
    aPtr = a.data_ptr();
    a.reset();
    at::Tensor c = block(16, 3);
    cPtr = c.data_ptr();
    EXPECT_TRUE(at::equal(b, at::full({2 * kFloats16K}, 2.f)));
  }
  EXPECT_EQ(aPtr, cPtr) << "a and c were planned at one offset";
}

TEST(CpuMemoryPlanTest, ATensorHeldLongerThanRecordedMakesTheOthersFallBack) {
  CpuMemoryPlan plan;
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  at::Tensor kept;
  {
    CpuMemoryPlan::RunScope run(plan);
    at::Tensor a = block(16, 1), b = block(32, 2);
    kept = a; // outlives its recorded lifetime
    a.reset();
    at::Tensor c = block(16, 3); // planned where `kept` still is
    EXPECT_NE(c.data_ptr(), kept.data_ptr());
  }
  EXPECT_TRUE(at::equal(kept, at::full({kFloats16K}, 1.f))) << "c overwrote a tensor in use";
  CpuMemoryPlan::Stats s = plan.stats();
  EXPECT_EQ(s.served, 2);
  EXPECT_EQ(s.fellBack, 1);
  kept.reset();
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  EXPECT_EQ(plan.stats().records, 1) << "a held tensor is not a divergence";
  EXPECT_EQ(plan.stats().served, 5);
}

TEST(CpuMemoryPlanTest, ADifferentSequenceIsRecordedAgainThenGivenUp) {
  CpuMemoryPlan plan;
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  for (int i = 0; i < 4 * CpuMemoryPlan::kMaxRecords && !plan.stats().off; ++i) {
    CpuMemoryPlan::RunScope run(plan);
    // Sizes that change every run never match the recording.
    at::Tensor x = block(16 + 4 * (i + 1), 5);
    x.reset();
    threeBlocks();
  }
  CpuMemoryPlan::Stats s = plan.stats();
  EXPECT_EQ(s.records, CpuMemoryPlan::kMaxRecords);
  EXPECT_TRUE(s.off);
  const int64_t served = s.served;
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  EXPECT_EQ(plan.stats().served, served) << "a plan that is off serves nothing";
}

TEST(CpuMemoryPlanTest, OnlyTheRunningThreadAndOnlyInsideARunAreServed) {
  CpuMemoryPlan plan;
  { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
  threeBlocks(); // outside a run
  {
    CpuMemoryPlan::RunScope run(plan);
    std::thread other([] { threeBlocks(); });
    other.join();
  }
  EXPECT_EQ(plan.stats().served, 0);
}

TEST(CpuMemoryPlanTest, ANestedScopeOfAnotherPlanDoesNothing) {
  CpuMemoryPlan outer, inner;
  {
    CpuMemoryPlan::RunScope a(outer);
    CpuMemoryPlan::RunScope b(inner);
    threeBlocks();
  }
  EXPECT_EQ(outer.stats().plannedBlocks, 3);
  EXPECT_EQ(inner.stats().records, 0);
}

TEST(CpuMemoryPlanTest, ArenaOutlivesItsPlanWhileATensorUsesIt) {
  at::Tensor kept;
  {
    CpuMemoryPlan plan;
    { CpuMemoryPlan::RunScope run(plan); threeBlocks(); }
    CpuMemoryPlan::RunScope run(plan);
    at::Tensor a = block(16, 7);
    kept = a;
  } // the plan is gone; `kept` still points into its arena
  EXPECT_TRUE(at::equal(kept, at::full({kFloats16K}, 7.f)));
  kept.fill_(8);
  EXPECT_TRUE(at::equal(kept, at::full({kFloats16K}, 8.f)));
}

// The executor's runs: the second and later are served from the plan, give
// bitwise the first run's results, and the memory probe above the plan sees
// the same bytes as before it.
TEST(CpuMemoryPlanTest, ExecutorRunsReplayWithIdenticalResultsAndMeasurements) {
  auto g = parseGraph(R"(graph @chain {
  input %w : f32[64, 64] parameter "w"
  input %x : f32[64, 64] user_input
  %a = aten::mm(%x, %w) : f32[64, 64]
  %b = aten::relu(%a) : f32[64, 64]
  %c = aten::mm(%b, %w) : f32[64, 64]
  %d = aten::relu(%c) : f32[64, 64]
  %e = aten::mul.Tensor(%d, %d) : f32[64, 64]
  output %e user_output
})",
                      "chain.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(**g, w, 0).ok());
  NodeProfiler profiler(c10::Device(c10::DeviceType::CPU));
  Executor ex(**g, w);
  ASSERT_NE(ex.memoryPlan(), nullptr);
  profiler.attach(ex);
  std::vector<at::Tensor> inputs = makeExampleInputs(**g, 0).value();
  std::vector<std::vector<int64_t>> before;
  std::vector<at::Tensor> outputs;
  for (int run = 0; run < 3; ++run) {
    profiler.beginRun();
    auto r = ex.run(inputs);
    profiler.endRun();
    ASSERT_TRUE(r.ok()) << r.status().message();
    outputs.push_back(r->outputs[0]);
    std::vector<int64_t> levels;
    for (const NodeProfile &p : profiler.profiles())
      levels.push_back(p.bytesBefore), levels.push_back(p.peakBytes), levels.push_back(p.bytesAfter);
    before.push_back(levels);
  }
  EXPECT_TRUE(at::equal(outputs[0], outputs[1]));
  EXPECT_TRUE(at::equal(outputs[0], outputs[2]));
  EXPECT_EQ(before[0], before[1]);
  EXPECT_EQ(before[0], before[2]);
  CpuMemoryPlan::Stats s = ex.memoryPlan()->stats();
  EXPECT_EQ(s.records, 1);
  EXPECT_EQ(s.plannedBlocks, 4); // a, b, c, d; e is an output
  EXPECT_EQ(s.served, 8);
  EXPECT_EQ(s.fellBack, 0);
  EXPECT_EQ(s.arenaBytes, 2 * 64 * 64 * 4); // two tiles live at once at most

  ExecutionOptions off;
  off.planCpuMemory = false;
  EXPECT_EQ(Executor(**g, w, off).memoryPlan(), nullptr);
}
