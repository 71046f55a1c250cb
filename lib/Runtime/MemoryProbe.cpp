//===- MemoryProbe.cpp - Measuring memory and time per node ---------------===//
#include "graphopt/Runtime/MemoryProbe.h"
#include "graphopt/Runtime/CpuMemoryPlan.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <llvm/ADT/STLExtras.h>

#ifdef GRAPHOPT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace graphopt {

namespace {
TrackingCpuAllocator *gTracker = nullptr;
std::once_flag gInstallOnce;
} // namespace

TrackingCpuAllocator &TrackingCpuAllocator::instance() {
  std::call_once(gInstallOnce, [] {
    // The planning allocator goes beneath the tracker, so that the tracker
    // counts the bytes tensors hold, not the arena a plan reserves.
    // Leaked on purpose: tensors freed during static destruction still call it.
    gTracker = new TrackingCpuAllocator(&CpuMemoryPlan::allocator());
  });
  return *gTracker;
}

c10::DataPtr TrackingCpuAllocator::allocate(size_t nbytes) {
  int64_t limit = limit_.load(), held = current_.load();
  TORCH_CHECK_WITH(OutOfMemoryError,
                   nbytes <= static_cast<uint64_t>(limit) && held <= limit - static_cast<int64_t>(nbytes),
                   "allocating ", nbytes, " bytes would take the CPU memory graph-opt's tensors hold (",
                   held, " bytes) past --max-memory=", limit, " bytes");
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

/// A start and an end event per node of a run, kept across runs (an event is
/// created once, on its first record).
struct CudaNodeEvents {
#ifdef GRAPHOPT_WITH_CUDA
  std::vector<std::pair<c10::cuda::CUDAEvent, c10::cuda::CUDAEvent>> events;
  c10::cuda::CUDAEvent &at(size_t i, bool end) {
    while (events.size() <= i)
      events.emplace_back(c10::cuda::CUDAEvent(cudaEventDefault),
                          c10::cuda::CUDAEvent(cudaEventDefault));
    return end ? events[i].second : events[i].first;
  }
#endif
};

NodeProfiler::NodeProfiler(c10::Device device) : device_(device) {
  if (device_.is_cpu()) {
    cpu_ = &TrackingCpuAllocator::instance();
    return;
  }
  cudaEvents_ = std::make_unique<CudaNodeEvents>();
#ifdef GRAPHOPT_WITH_CUDA
  // "cuda" means the current device: name it, as its stats and streams need.
  if (device_.is_cuda() && !device_.has_index())
    device_ = c10::Device(c10::DeviceType::CUDA, c10::cuda::current_device());
#endif
}

NodeProfiler::~NodeProfiler() = default;

namespace {

#ifdef GRAPHOPT_WITH_CUDA
/// The caching allocator's count of allocated bytes on `device` (current and peak).
c10::CachingAllocator::Stat cudaAllocatedBytes(c10::Device device) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}

c10::cuda::CUDAStream currentStream(c10::Device device) {
  return c10::cuda::getCurrentCUDAStream(device.index() < 0 ? 0 : device.index());
}
#endif

/// Storage bytes of each output, a storage shared by two outputs counted once.
void recordOutputBytes(llvm::ArrayRef<c10::IValue> outputs, NodeProfile &p) {
  llvm::SmallVector<const void *, 2> seen;
  p.outputStorageBytes.assign(outputs.size(), 0);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const c10::IValue &v = outputs[i];
    if (!v.isTensor() || !v.toTensor().defined() || !v.toTensor().has_storage())
      continue;
    const c10::Storage &s = v.toTensor().storage();
    if (llvm::is_contained(seen, s.unsafeGetStorageImpl()))
      continue;
    seen.push_back(s.unsafeGetStorageImpl());
    p.outputStorageBytes[i] = static_cast<int64_t>(s.nbytes());
    p.outputBytes += p.outputStorageBytes[i];
  }
}

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

std::string NodeProfiler::timeSource() const {
  if (cpu_)
    return "host clock (std::chrono::steady_clock) from each node's start to the next's";
  return "CUDA events recorded on the current stream before and after each node";
}

std::string NodeProfiler::memorySource() const {
  if (cpu_)
    return "tracking CPU allocator (every tensor allocation, exact bytes)";
  return "CUDA caching allocator statistics (allocated bytes, peak reset per node)";
}

void NodeProfiler::beginRun() {
  profiles_.clear();
  resetPeak();
  runBase_ = currentBytes();
  runPeak_ = 0;
  runStart_ = std::chrono::steady_clock::now();
}

void NodeProfiler::endRun() {
  if (cpu_) {
    for (size_t i = 0; i + 1 < profiles_.size(); ++i)
      profiles_[i].seconds = profiles_[i + 1].start - profiles_[i].start;
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  if (profiles_.empty())
    return;
  synchronizeDevice(device_);
  const c10::cuda::CUDAEvent &first = cudaEvents_->at(0, false);
  for (size_t i = 0; i < profiles_.size(); ++i) {
    profiles_[i].start = first.elapsed_time(cudaEvents_->at(i, false)) / 1000.0;
    profiles_[i].seconds = cudaEvents_->at(i, false).elapsed_time(cudaEvents_->at(i, true)) / 1000.0;
  }
#endif
}

void NodeProfiler::before(const Node &node) {
  NodeProfile p;
  p.node = &node;
  p.bytesBefore = currentBytes() - runBase_;
  profiles_.push_back(p);
  resetPeak();
#ifdef GRAPHOPT_WITH_CUDA
  if (!cpu_) {
    cudaEvents_->at(profiles_.size() - 1, false).record(currentStream(device_));
    return;
  }
#endif
  start_ = std::chrono::steady_clock::now();
}

void NodeProfiler::after(llvm::ArrayRef<c10::IValue> outputs) {
  NodeProfile &p = profiles_.back();
#ifdef GRAPHOPT_WITH_CUDA
  if (!cpu_)
    cudaEvents_->at(profiles_.size() - 1, true).record(currentStream(device_));
#endif
  if (cpu_) {
    // Until it returns; endRun extends this to the next node's start.
    auto now = std::chrono::steady_clock::now();
    p.seconds = std::chrono::duration<double>(now - start_).count();
    p.start = std::chrono::duration<double>(start_ - runStart_).count();
  }
  p.peakBytes = peakBytes() - runBase_;
  p.bytesAfter = currentBytes() - runBase_;
  runPeak_ = std::max(runPeak_, p.peakBytes);
  recordOutputBytes(outputs, p);
}

void NodeProfiler::attach(Executor &executor) {
  ExecutionHooks hooks;
  hooks.before = [this](const Node &node) { before(node); };
  hooks.after = [this](const Node &, llvm::ArrayRef<c10::IValue> outputs) { after(outputs); };
  executor.addHooks(std::move(hooks));
}

double NodeProfiler::hookSeconds(const Node &node, unsigned reps) {
  // Median of batches, so one preempted batch does not count.
  constexpr unsigned kBatches = 9;
  std::vector<double> perPair;
  for (unsigned b = 0; b < kBatches; ++b) {
    beginRun();
    auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < reps; ++i) {
      before(node);
      after({});
    }
    perPair.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                      reps);
  }
  profiles_.clear();
  std::nth_element(perPair.begin(), perPair.begin() + kBatches / 2, perPair.end());
  return perPair[kBatches / 2];
}

void synchronizeDevice(c10::Device device) {
#ifdef GRAPHOPT_WITH_CUDA
  if (device.is_cuda())
    c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

absl::Status profileRuns(const Graph &graph, WeightStore &weights,
                         llvm::ArrayRef<at::Tensor> inputs, const ExecutionOptions &options,
                         unsigned runs, llvm::function_ref<absl::Status(const ProfiledRun &)> onRun,
                         llvm::function_ref<absl::Status(unsigned)> beforeRun) {
  NodeProfiler profiler(options.device);
  Executor executor(graph, weights, options);
  profiler.attach(executor);
  if (absl::Status st = executor.prepare(); !st.ok())
    return st;
  for (unsigned i = 0; i < runs; ++i) {
    if (beforeRun)
      if (absl::Status st = beforeRun(i); !st.ok())
        return st;
    profiler.beginRun();
    auto start = std::chrono::steady_clock::now();
    auto result = executor.run(inputs);
    if (result.ok())
      profiler.endRun();
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
