//===- CpuAllocatorScope.h - graph-opt's CPU allocators, only while it runs -*- C++ -*-===//
//
// graph-opt measures and plans CPU memory through two allocators of its own:
// the planning allocator (CpuMemoryPlan.h), and above it the tracking
// allocator (MemoryProbe.h) that counts what tensors hold and enforces
// --max-memory. Both are made once per process over the CPU allocator in
// place at the time, and leaked (a tensor they made may be freed at any
// time, static destruction included). They are the process's CPU allocator
// (c10::SetCPUAllocator) only while a CpuAllocatorScope lives: in a user's
// Python process the training tensors made outside graph-opt's own calls go
// to the user's allocator, uncounted and unlimited. Scopes nest and may
// overlap across threads; the first installs, the last restores the
// allocator that was there. The executor opens one around preparing and
// running a graph; the graph-opt driver holds one for its whole run.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace graphopt {

class CpuAllocatorScope {
public:
  CpuAllocatorScope();
  ~CpuAllocatorScope();
  CpuAllocatorScope(const CpuAllocatorScope &) = delete;
  CpuAllocatorScope &operator=(const CpuAllocatorScope &) = delete;

  /// Whether graph-opt's allocators are the process's CPU allocator now.
  static bool active();
};

} // namespace graphopt
