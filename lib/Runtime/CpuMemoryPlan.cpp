//===- CpuMemoryPlan.cpp - One arena for a run's CPU buffers --------------===//
#include "graphopt/Runtime/CpuMemoryPlan.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <unordered_map>

namespace graphopt {

namespace {

constexpr size_t kAlignment = 64; // c10's CPU alignment

size_t alignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

/// One recorded allocation: its size and its lifetime as positions in the
/// run's sequence of allocations and frees (free -1: still live at the end).
struct Request {
  size_t bytes = 0;
  int64_t allocEvent = 0;
  int64_t freeEvent = -1;
};

/// A plan laid out in one block of memory, shared by the blocks in use in it
/// so that it outlives its plan while a tensor still points into it.
struct Arena {
  c10::DataPtr memory;
  std::vector<size_t> bytes;   ///< by request index
  std::vector<int64_t> offset; ///< -1: not planned
  /// The ranges of the arena in use now (offset -> end): never overlapping.
  std::map<size_t, size_t> inUse;

  bool free(size_t begin, size_t end) const {
    auto next = inUse.lower_bound(begin);
    if (next != inUse.end() && next->first < end)
      return false;
    return next == inUse.begin() || std::prev(next)->second <= begin;
  }
};

} // namespace

struct CpuMemoryPlan::State {
  enum class Mode { Record, Replay, Off } mode = Mode::Record;
  bool running = false;
  // Record
  std::vector<Request> requests;
  int64_t event = 0;
  uint64_t generation = 0; ///< which recording a recorded block belongs to
  // Replay
  std::shared_ptr<Arena> arena;
  size_t cursor = 0;
  bool diverged = false;
  Stats stats;

  void plan();
};

namespace {

/// What the allocator knows of a block it handed out.
struct LiveBlock {
  std::shared_ptr<CpuMemoryPlan::State> state; ///< a recorded block's plan
  uint64_t generation = 0;
  size_t index = 0;
  c10::DataPtr inner;            ///< a block of the allocator beneath
  std::shared_ptr<Arena> arena;  ///< or a block of this arena
};

class PlanningCpuAllocator final : public c10::Allocator {
public:
  explicit PlanningCpuAllocator(c10::Allocator *underlying) : underlying_(underlying) {}

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return &deleteFn; }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  bool begin(const std::shared_ptr<CpuMemoryPlan::State> &state);
  void end();
  c10::Allocator *underlying() const { return underlying_; }
  std::mutex &mutex() { return mutex_; }

private:
  static void deleteFn(void *ptr);
  void release(void *ptr);
  c10::DataPtr wrap(void *ptr, LiveBlock block) {
    live_.emplace(ptr, std::move(block));
    // The context is the data pointer itself (oneDNN's raw_allocate checks it).
    return c10::DataPtr(ptr, ptr, &deleteFn, c10::Device(c10::DeviceType::CPU));
  }

  c10::Allocator *underlying_;
  std::mutex mutex_;
  std::shared_ptr<CpuMemoryPlan::State> active_;
  std::thread::id activeThread_;
  std::unordered_map<void *, LiveBlock> live_;
};

PlanningCpuAllocator *gAllocator = nullptr;
std::once_flag gInstallOnce;

PlanningCpuAllocator &planningAllocator() {
  std::call_once(gInstallOnce, [] {
    // Leaked on purpose: tensors freed during static destruction still call it.
    gAllocator = new PlanningCpuAllocator(c10::GetCPUAllocator());
  });
  return *gAllocator;
}

c10::DataPtr PlanningCpuAllocator::allocate(size_t nbytes) {
  if (nbytes < CpuMemoryPlan::kMinBytes)
    return underlying_->allocate(nbytes);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!active_ || std::this_thread::get_id() != activeThread_ ||
      active_->mode == CpuMemoryPlan::State::Mode::Off) {
    lock.unlock();
    return underlying_->allocate(nbytes);
  }
  CpuMemoryPlan::State &s = *active_;
  if (s.mode == CpuMemoryPlan::State::Mode::Record) {
    size_t index = s.requests.size();
    s.requests.push_back(Request{nbytes, s.event++, -1});
    c10::DataPtr inner = underlying_->allocate(nbytes);
    void *ptr = inner.get();
    return wrap(ptr, LiveBlock{active_, s.generation, index, std::move(inner), nullptr});
  }
  // Replay.
  size_t k = s.cursor++;
  Arena &arena = *s.arena;
  if (!s.diverged && (k >= arena.bytes.size() || arena.bytes[k] != nbytes))
    s.diverged = true;
  if (!s.diverged && arena.offset[k] < 0) { // live at the end of the recorded run
    lock.unlock();
    return underlying_->allocate(nbytes);
  }
  if (!s.diverged) {
    size_t begin = static_cast<size_t>(arena.offset[k]);
    size_t end = begin + alignUp(nbytes);
    if (arena.free(begin, end)) {
      arena.inUse.emplace(begin, end);
      ++s.stats.served;
      void *ptr = static_cast<char *>(arena.memory.get()) + begin;
      return wrap(ptr, LiveBlock{nullptr, 0, k, {}, s.arena});
    }
  }
  ++s.stats.fellBack;
  lock.unlock();
  return underlying_->allocate(nbytes);
}

void PlanningCpuAllocator::deleteFn(void *ptr) {
  if (ptr && gAllocator)
    gAllocator->release(ptr);
}

void PlanningCpuAllocator::release(void *ptr) {
  LiveBlock block; // declared first: destroyed (and its memory freed) after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end())
    return;
  block = std::move(it->second);
  live_.erase(it);
  if (block.arena) {
    block.arena->inUse.erase(static_cast<size_t>(static_cast<char *>(ptr) -
                                                 static_cast<char *>(block.arena->memory.get())));
    return;
  }
  CpuMemoryPlan::State *s = block.state.get();
  if (s && s->running && s->mode == CpuMemoryPlan::State::Mode::Record &&
      s->generation == block.generation)
    s->requests[block.index].freeEvent = s->event++;
}

bool PlanningCpuAllocator::begin(const std::shared_ptr<CpuMemoryPlan::State> &state) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (active_)
    return false;
  active_ = state;
  activeThread_ = std::this_thread::get_id();
  CpuMemoryPlan::State &s = *state;
  s.running = true;
  if (s.mode == CpuMemoryPlan::State::Mode::Record) {
    s.requests.clear();
    s.event = 0;
    ++s.generation;
    ++s.stats.records;
  } else if (s.mode == CpuMemoryPlan::State::Mode::Replay) {
    s.cursor = 0;
    s.diverged = false;
    if (!s.arena->memory)
      s.arena->memory = underlying_->allocate(static_cast<size_t>(s.stats.arenaBytes));
  }
  return true;
}

void PlanningCpuAllocator::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  CpuMemoryPlan::State &s = *active_;
  s.running = false;
  if (s.mode == CpuMemoryPlan::State::Mode::Record) {
    s.plan();
  } else if (s.mode == CpuMemoryPlan::State::Mode::Replay && s.diverged) {
    // The run allocated differently from the recording: record it again.
    s.arena.reset();
    s.stats.arenaBytes = s.stats.plannedPeakBytes = s.stats.plannedBlocks = 0;
    s.mode = s.stats.records < CpuMemoryPlan::kMaxRecords ? CpuMemoryPlan::State::Mode::Record
                                                         : CpuMemoryPlan::State::Mode::Off;
    s.stats.off = s.mode == CpuMemoryPlan::State::Mode::Off;
  }
  active_.reset();
}

} // namespace

/// Greedy by size: the blocks freed within the run, largest first, each at the
/// lowest offset where it overlaps no block already placed whose lifetime
/// overlaps its own.
void CpuMemoryPlan::State::plan() {
  auto next = std::make_shared<Arena>();
  next->bytes.reserve(requests.size());
  next->offset.assign(requests.size(), -1);
  std::vector<size_t> order;
  for (size_t i = 0; i < requests.size(); ++i) {
    next->bytes.push_back(requests[i].bytes);
    if (requests[i].freeEvent >= 0)
      order.push_back(i);
  }
  if (order.empty()) {
    if (stats.records >= kMaxRecords) {
      mode = Mode::Off;
      stats.off = true;
    }
    return;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes > requests[b].bytes;
  });
  auto overlapInTime = [&](size_t a, size_t b) {
    return requests[a].allocEvent < requests[b].freeEvent &&
           requests[b].allocEvent < requests[a].freeEvent;
  };
  std::vector<size_t> placed;
  size_t arenaBytes = 0;
  std::vector<std::pair<size_t, size_t>> taken; // [begin, end) of placed blocks live alongside
  for (size_t b : order) {
    taken.clear();
    for (size_t p : placed)
      if (overlapInTime(b, p))
        taken.emplace_back(static_cast<size_t>(next->offset[p]),
                           static_cast<size_t>(next->offset[p]) + alignUp(requests[p].bytes));
    std::sort(taken.begin(), taken.end());
    size_t size = alignUp(requests[b].bytes), at = 0;
    for (const auto &[begin, end] : taken) {
      if (begin >= at + size)
        break;
      at = std::max(at, end);
    }
    next->offset[b] = static_cast<int64_t>(at);
    arenaBytes = std::max(arenaBytes, at + size);
    placed.push_back(b);
  }
  // The highest sum of planned bytes live at once: the least any layout needs.
  std::vector<std::pair<int64_t, int64_t>> events;
  for (size_t b : order) {
    events.emplace_back(requests[b].allocEvent, static_cast<int64_t>(alignUp(requests[b].bytes)));
    events.emplace_back(requests[b].freeEvent, -static_cast<int64_t>(alignUp(requests[b].bytes)));
  }
  std::sort(events.begin(), events.end());
  int64_t liveBytes = 0, peak = 0;
  for (const auto &[when, delta] : events)
    peak = std::max(peak, liveBytes += delta);
  arena = std::move(next);
  stats.arenaBytes = static_cast<int64_t>(arenaBytes);
  stats.plannedPeakBytes = peak;
  stats.plannedBlocks = static_cast<int64_t>(order.size());
  mode = Mode::Replay;
}

CpuMemoryPlan::CpuMemoryPlan() : state_(std::make_shared<State>()) { planningAllocator(); }

CpuMemoryPlan::~CpuMemoryPlan() {
  // Blocks still in use keep the arena alive through their shared pointers.
  std::lock_guard<std::mutex> lock(gAllocator->mutex());
  state_->arena.reset();
  state_->requests.clear();
}

CpuMemoryPlan::RunScope::RunScope(CpuMemoryPlan &plan) {
  if (planningAllocator().begin(plan.state_))
    plan_ = &plan;
}

CpuMemoryPlan::RunScope::~RunScope() {
  if (plan_)
    gAllocator->end();
}

CpuMemoryPlan::Stats CpuMemoryPlan::stats() const {
  std::lock_guard<std::mutex> lock(gAllocator->mutex());
  return state_->stats;
}

c10::Allocator &CpuMemoryPlan::allocator() { return planningAllocator(); }

} // namespace graphopt
