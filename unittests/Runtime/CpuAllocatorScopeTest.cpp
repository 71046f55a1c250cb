//===- CpuAllocatorScopeTest.cpp - graph-opt's allocators only while it runs ===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

using namespace graphopt;

// A library caller (the Python binding) keeps its own CPU allocator: graph-opt's
// tracking and planning allocators are the process's only while the executor
// prepares and runs, and tensors the caller makes before and after are neither
// counted nor limited.
TEST(CpuAllocatorScopeTest, GraphOptsAllocatorsServeOnlyItsOwnRuns) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[256, 256] user_input
  %y = aten::relu(%x) : f32[256, 256]
  %z = aten::mul.Tensor(%y, 2) : f32[256, 256]
  %s = aten::sum(%z) : f32[]
  output %s user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_FALSE(CpuAllocatorScope::active());
  c10::Allocator *users = c10::GetCPUAllocator();
  TrackingCpuAllocator &tracker = TrackingCpuAllocator::instance();
  ASSERT_NE(users, &tracker);

  // The caller's tensors: not counted, even past a limit graph-opt holds.
  int64_t before = tracker.currentBytes();
  tracker.setLimit(1 << 20);
  at::Tensor mine = at::empty({1024, 1024}); // 4 MiB, over the limit
  EXPECT_EQ(tracker.currentBytes(), before);

  WeightStore weights;
  ExecutionOptions options;
  options.planCpuMemory = true;
  Executor ex(**g, weights, options);
  std::vector<c10::Allocator *> seen;
  ex.addHooks({[&](const Node &) { seen.push_back(c10::GetCPUAllocator()); }, nullptr});
  ASSERT_TRUE(ex.run({at::ones({256, 256})}).ok());
  ASSERT_EQ(seen.size(), 3u);
  for (c10::Allocator *a : seen)
    EXPECT_EQ(a, &tracker);

  // After the run: the caller's allocator again.
  EXPECT_FALSE(CpuAllocatorScope::active());
  EXPECT_EQ(c10::GetCPUAllocator(), users);
  at::Tensor after = at::empty({1024, 1024});
  EXPECT_EQ(tracker.currentBytes(), before);
  tracker.setLimit(std::numeric_limits<int64_t>::max());

  // Scopes nest: the outer one keeps the hooks in place past the inner.
  {
    CpuAllocatorScope outer;
    {
      CpuAllocatorScope inner;
      EXPECT_EQ(c10::GetCPUAllocator(), &tracker);
    }
    EXPECT_TRUE(CpuAllocatorScope::active());
    EXPECT_EQ(c10::GetCPUAllocator(), &tracker);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), users);
}
