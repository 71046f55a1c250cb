//===- CpuAllocatorScope.cpp - graph-opt's CPU allocators, only while it runs ---===//
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <c10/core/CPUAllocator.h>

#include <mutex>

namespace graphopt {

namespace {
std::mutex gMutex;
int gDepth = 0;
c10::Allocator *gSaved = nullptr;
// c10::SetCPUAllocator replaces the allocator only at a priority at least the
// current one's; graph-opt's and the restored one use the same.
constexpr uint8_t kPriority = 100;
} // namespace

CpuAllocatorScope::CpuAllocatorScope() {
  // Made before installing, over the allocator in place (the user's).
  TrackingCpuAllocator &tracker = TrackingCpuAllocator::instance();
  std::lock_guard<std::mutex> lock(gMutex);
  if (gDepth++ == 0) {
    gSaved = c10::GetCPUAllocator();
    c10::SetCPUAllocator(&tracker, kPriority);
  }
}

CpuAllocatorScope::~CpuAllocatorScope() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (--gDepth == 0) {
    c10::SetCPUAllocator(gSaved, kPriority);
    gSaved = nullptr;
  }
}

bool CpuAllocatorScope::active() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gDepth > 0;
}

} // namespace graphopt
