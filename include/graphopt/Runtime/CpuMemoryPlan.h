//===- CpuMemoryPlan.h - One arena for a run's CPU buffers -------*- C++ -*-===//
//
// A training step allocates and frees the same buffers, of the same sizes, in
// the same order every step. On the CPU, c10's default allocator hands large
// blocks to glibc, which maps them fresh from the kernel and unmaps them on
// free: every step pays the page faults and zeroing of its whole working set
// again (a third of a ResNet-18 step on a 2-core machine).
//
// A CpuMemoryPlan belongs to one executor and plans its runs' memory the way
// an ahead-of-time compiler does, from an allocation trace instead of shapes:
//   1. Record: the first run allocates as usual, and the plan records each
//      allocation of kMinBytes and up made by the running thread (its size,
//      and when it was allocated and freed, as positions in the sequence of
//      allocations and frees).
//   2. Plan: the blocks allocated and freed within the run get offsets in one
//      arena, greedy by size (largest first, each at the lowest offset where
//      no block live at the same time sits), so that blocks whose lifetimes
//      do not overlap share memory. Blocks still live when the run ended (its
//      outputs) are not planned.
//   3. Replay: later runs take the arena once and serve the k-th allocation
//      from its planned offset when its size is the recorded one and no other
//      block sharing that memory is still in use (a tensor held longer than in
//      the recording, by a hook or a caller). Otherwise the allocation falls
//      back to the allocator beneath, and from the first size mismatch on the
//      rest of the run does; the next run records again (at most kMaxRecords
//      times, then the plan stays off).
// The arena is freed when the plan is destroyed and no block of it is in use.
//
// The process-wide allocator (installed once, beneath MemoryProbe's tracking
// allocator, so measured memory counts the bytes tensors hold) serves the plan
// of the run in progress on the thread that started it; every other
// allocation, and every thread but that one, goes to the allocator beneath as
// if it were not there. Its DataPtr context is the data pointer, as oneDNN's
// raw_allocate requires.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "graphopt/Runtime/CpuAllocatorScope.h"

#include <c10/core/Allocator.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace graphopt {

class CpuMemoryPlan {
public:
  /// Smallest allocation the plan places; smaller ones go to the allocator
  /// beneath (glibc serves them from its bins without page faults).
  static constexpr size_t kMinBytes = 16 * 1024;
  /// Runs recorded before the plan gives up on a run that never replays.
  static constexpr int kMaxRecords = 3;

  /// The planning allocator, made once per process over the CPU allocator
  /// in place then. A plan takes effect only where it is the process's CPU
  /// allocator (beneath the tracker): inside a CpuAllocatorScope.
  static c10::Allocator &allocator();

  CpuMemoryPlan();
  ~CpuMemoryPlan();
  CpuMemoryPlan(const CpuMemoryPlan &) = delete;
  CpuMemoryPlan &operator=(const CpuMemoryPlan &) = delete;

  /// Makes `plan` serve the calling thread's CPU allocations until destroyed.
  /// A scope opened while another plan's is active does nothing.
  class RunScope {
  public:
    explicit RunScope(CpuMemoryPlan &plan);
    ~RunScope();
    RunScope(const RunScope &) = delete;
    RunScope &operator=(const RunScope &) = delete;

  private:
    CpuAllocatorScope hooks_; ///< the planning allocator in place meanwhile
    CpuMemoryPlan *plan_ = nullptr;
  };

  struct Stats {
    int64_t arenaBytes = 0;    ///< the arena's size, 0 before the first plan
    int64_t plannedPeakBytes = 0; ///< highest sum of planned blocks live at once
    int64_t plannedBlocks = 0;
    int64_t served = 0;    ///< allocations served from the arena, all runs
    int64_t fellBack = 0;  ///< planned allocations of a replaying run that went beneath
    int64_t records = 0;   ///< runs recorded
    bool off = false;      ///< gave up after kMaxRecords recordings
  };
  Stats stats() const;

  struct State; ///< shared with the blocks in use (defined in the .cpp)

private:
  std::shared_ptr<State> state_;
};

} // namespace graphopt
