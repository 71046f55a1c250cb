//===- MemoryProbe.h - Measuring memory and time per node ---------*- C++ -*-===//
//
// CPU: a tracking c10::Allocator, installed with c10::SetCPUAllocator, that
// forwards to the allocator it replaces and counts current and peak bytes
// exactly (thread safe; its DataPtr context equals the data pointer, as
// oneDNN's raw_allocate requires; the null pointer of a zero-byte allocation
// is accepted by its deleter). CUDA: the caching allocator's device stats
// (current and peak allocated bytes, peak reset per node). Times: on the
// CPU the host clock from a node's start (before its arguments are gathered)
// to the next node's start, so the values it frees count too (the last node
// ends when it returns; endRun fills these in); on CUDA the node's kernels,
// timed with CUDA events on the current stream and read once the run is
// over (endRun), so timing adds no synchronization.
//
// NodeProfiler hooks an Executor and records, per node: time, bytes live
// before it, the peak during it, the bytes of its outputs and the level it
// left (so the scratch memory it held only while running). profileRuns is
// the one loop that runs a graph N times under a NodeProfiler.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Runtime/Executor.h"

#include <c10/core/Allocator.h>
#include <llvm/ADT/STLFunctionalExtras.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace graphopt {

class TrackingCpuAllocator final : public c10::Allocator {
public:
  /// The tracker, made once per process over the planning allocator. It is
  /// the process's CPU allocator only inside a CpuAllocatorScope.
  static TrackingCpuAllocator &instance();

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return &deleteFn; }
  void copy_data(void *dest, const void *src, std::size_t count) const override;

  /// Refuses (c10::OutOfMemoryError, which the executor reports at the node
  /// that asked) an allocation that would take the bytes it tracks past
  /// `bytes`: graph-opt's --max-memory, enforced while graphs run.
  void setLimit(int64_t bytes) { limit_.store(bytes); }
  int64_t limit() const { return limit_.load(); }

  int64_t currentBytes() const { return current_.load(); }
  int64_t peakBytes() const { return peak_.load(); }
  /// Starts a new peak window at the current level.
  void resetPeak() { peak_.store(current_.load()); }

private:
  explicit TrackingCpuAllocator(c10::Allocator *underlying) : underlying_(underlying) {}
  static void deleteFn(void *ptr);
  void release(void *ptr);

  c10::Allocator *underlying_;
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> limit_{std::numeric_limits<int64_t>::max()};
  std::mutex mutex_;
  /// Live allocations: pointer -> (size, the underlying DataPtr that frees it).
  std::unordered_map<void *, std::pair<size_t, c10::DataPtr>> live_;
};

struct NodeProfile {
  const Node *node = nullptr;
  double seconds = 0;
  double start = 0;        ///< seconds from the start of the run to the node's start
  int64_t bytesBefore = 0; ///< live when the node starts
  int64_t peakBytes = 0;   ///< highest level while it runs
  int64_t outputBytes = 0; ///< storage of its tensor outputs (shared storage counted once)
  int64_t bytesAfter = 0;  ///< live when it returns, before anything is freed
  /// Storage bytes of each output (0 for a non-tensor, or a storage an
  /// earlier output of the node already counted).
  llvm::SmallVector<int64_t, 1> outputStorageBytes;

  /// Memory the operator held only while it ran (workspaces, reordered
  /// copies): its peak above both the level before it and the level it left.
  int64_t scratchBytes() const { return std::max<int64_t>(0, peakBytes - std::max(bytesBefore, bytesAfter)); }
};

/// Records a NodeProfile per node of every run of an Executor it is attached to.
class NodeProfiler {
public:
  /// On CPU installs the tracking allocator; on CUDA uses the caching allocator's stats.
  explicit NodeProfiler(c10::Device device);
  ~NodeProfiler();
  /// Adds the profiler's hooks to `executor` (beside any others it has).
  void attach(Executor &executor);

  const std::vector<NodeProfile> &profiles() const { return profiles_; }
  /// Highest live bytes seen across the last run, relative to the start of the run.
  int64_t runPeakBytes() const { return runPeak_; }
  /// Call before each run: clears profiles and starts a new peak window.
  void beginRun();
  /// Call after each run: completes the times (on CUDA, waits for the
  /// device and reads the events).
  void endRun();
  /// What the hooks themselves cost per node (a before and an after, with
  /// no operator between), on the host: the share of each CPU node time that
  /// is the profiler's. Clears the profiles.
  double hookSeconds(const Node &anyNode, unsigned reps = 200);
  /// The device it measures ("cuda" resolved to the current device).
  c10::Device device() const { return device_; }
  /// How time and memory are measured on this device, for reports.
  std::string timeSource() const;
  std::string memorySource() const;

private:
  void before(const Node &node);
  void after(llvm::ArrayRef<c10::IValue> outputs);
  int64_t currentBytes() const;
  int64_t peakBytes() const;
  void resetPeak();

  c10::Device device_;
  TrackingCpuAllocator *cpu_ = nullptr;
  std::vector<NodeProfile> profiles_;
  int64_t runBase_ = 0;
  int64_t runPeak_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point runStart_;
  /// CUDA: a start and an end event per node of the run.
  std::unique_ptr<struct CudaNodeEvents> cudaEvents_;
};

/// Waits until `device` has finished its queued work (nothing on the CPU).
void synchronizeDevice(c10::Device device);

/// What profileRuns hands its callback after each run.
struct ProfiledRun {
  unsigned index = 0;   ///< 0 for the first run
  double seconds = 0;   ///< wall time of the run (Executor::run)
  const ExecutionResult *result = nullptr;
  const NodeProfiler *profiler = nullptr; ///< this run's per-node profiles and peak
};

/// Runs `graph` `runs` times on one Executor (prepared before the first
/// measured window, so weights moved to the device are not counted) with a
/// NodeProfiler attached, starting a new profile before each run and calling
/// `onRun` after it. Stops at the first error, from a run or from `onRun`,
/// and returns it.
/// `beforeRun`, if given, is called before each run (with its index), outside
/// the measured window and with the previous run's results gone.
absl::Status profileRuns(const Graph &graph, WeightStore &weights,
                         llvm::ArrayRef<at::Tensor> inputs, const ExecutionOptions &options,
                         unsigned runs, llvm::function_ref<absl::Status(const ProfiledRun &)> onRun,
                         llvm::function_ref<absl::Status(unsigned)> beforeRun = nullptr);

} // namespace graphopt
