//===- MemoryProbe.cpp - Measuring memory and time per node ---------------===//
#include "graphopt/Runtime/MemoryProbe.h"

#include <c10/core/CPUAllocator.h>
#include <llvm/ADT/DenseSet.h>

#ifdef GRAPHOPT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace graphopt {

namespace {
TrackingCpuAllocator *gTracker = nullptr;
std::once_flag gInstallOnce;
} // namespace

TrackingCpuAllocator &TrackingCpuAllocator::install() {
  std::call_once(gInstallOnce, [] {
    // Leaked on purpose: tensors freed during static destruction still call it.
    gTracker = new TrackingCpuAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(gTracker, /*priority=*/100);
  });
  return *gTracker;
}

c10::DataPtr TrackingCpuAllocator::allocate(size_t nbytes) {
  c10::DataPtr inner = underlying_->allocate(nbytes);
  void *ptr = inner.get();
  if (!ptr) // zero bytes: nothing to track, a null pointer to delete
    return c10::DataPtr(nullptr, nullptr, &deleteFn, c10::Device(c10::DeviceType::CPU));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.emplace(ptr, std::make_pair(nbytes, std::move(inner)));
  }
  int64_t now = current_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  // The context is the data pointer itself (oneDNN's raw_allocate checks it).
  return c10::DataPtr(ptr, ptr, &deleteFn, c10::Device(c10::DeviceType::CPU));
}

void TrackingCpuAllocator::deleteFn(void *ptr) {
  if (ptr && gTracker)
    gTracker->release(ptr);
}

void TrackingCpuAllocator::release(void *ptr) {
  c10::DataPtr inner;
  size_t nbytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end())
      return;
    nbytes = it->second.first;
    inner = std::move(it->second.second);
    live_.erase(it);
  }
  current_.fetch_sub(static_cast<int64_t>(nbytes));
  // `inner` goes out of scope here and frees through the underlying allocator.
}

void TrackingCpuAllocator::copy_data(void *dest, const void *src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

// --- NodeProfiler ------------------------------------------------------------

NodeProfiler::NodeProfiler(c10::Device device) : device_(device) {
  if (device_.is_cpu())
    cpu_ = &TrackingCpuAllocator::install();
}

namespace {

#ifdef GRAPHOPT_WITH_CUDA
/// The caching allocator's count of allocated bytes on `device` (current and peak).
c10::CachingAllocator::Stat cudaAllocatedBytes(c10::Device device) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
#endif

} // namespace

int64_t NodeProfiler::currentBytes() const {
  if (cpu_)
    return cpu_->currentBytes();
#ifdef GRAPHOPT_WITH_CUDA
  return cudaAllocatedBytes(device_).current;
#else
  return 0;
#endif
}

int64_t NodeProfiler::peakBytes() const {
  if (cpu_)
    return cpu_->peakBytes();
#ifdef GRAPHOPT_WITH_CUDA
  return cudaAllocatedBytes(device_).peak;
#else
  return 0;
#endif
}

void NodeProfiler::resetPeak() {
  if (cpu_) {
    cpu_->resetPeak();
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index() < 0 ? 0 : device_.index());
#endif
}

void NodeProfiler::beginRun() {
  profiles_.clear();
  resetPeak();
  runBase_ = currentBytes();
  runPeak_ = 0;
}

void NodeProfiler::attach(Executor &executor) {
  ExecutionHooks hooks;
  hooks.before = [this](const Node &node) {
#ifdef GRAPHOPT_WITH_CUDA
    if (device_.is_cuda())
      c10::cuda::device_synchronize();
#endif
    NodeProfile p;
    p.node = &node;
    p.bytesBefore = currentBytes() - runBase_;
    profiles_.push_back(p);
    resetPeak();
    start_ = std::chrono::steady_clock::now();
  };
  hooks.after = [this](const Node &node, llvm::ArrayRef<c10::IValue> outputs) {
#ifdef GRAPHOPT_WITH_CUDA
    if (device_.is_cuda())
      c10::cuda::device_synchronize();
#endif
    NodeProfile &p = profiles_.back();
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    p.peakBytes = peakBytes() - runBase_;
    p.bytesAfter = currentBytes() - runBase_;
    runPeak_ = std::max(runPeak_, p.peakBytes);
    llvm::DenseSet<const void *> seen;
    for (const c10::IValue &v : outputs) {
      if (!v.isTensor() || !v.toTensor().defined() || !v.toTensor().has_storage())
        continue;
      const c10::Storage &s = v.toTensor().storage();
      if (seen.insert(s.unsafeGetStorageImpl()).second)
        p.outputBytes += static_cast<int64_t>(s.nbytes());
    }
  };
  executor.addHooks(std::move(hooks));
}

absl::Status profileRuns(const Graph &graph, WeightStore &weights,
                         llvm::ArrayRef<at::Tensor> inputs, const ExecutionOptions &options,
                         unsigned runs, llvm::function_ref<absl::Status(const ProfiledRun &)> onRun) {
  NodeProfiler profiler(options.device);
  Executor executor(graph, weights, options);
  profiler.attach(executor);
  if (absl::Status st = executor.prepare(); !st.ok())
    return st;
  for (unsigned i = 0; i < runs; ++i) {
    profiler.beginRun();
    auto start = std::chrono::steady_clock::now();
    auto result = executor.run(inputs);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok())
      return result.status();
    ProfiledRun run;
    run.index = i;
    run.seconds = seconds;
    run.result = &*result;
    run.profiler = &profiler;
    if (absl::Status st = onRun(run); !st.ok())
      return st;
  }
  return absl::OkStatus();
}

} // namespace graphopt
