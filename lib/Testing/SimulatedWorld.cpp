//===- SimulatedWorld.cpp - Ranks of a process group as threads -----------===//
#include "graphopt/Testing/SimulatedWorld.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/cat.h>
#include <absl/strings/str_cat.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace graphopt::testing {

namespace {

at::Tensor generatorState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void setGeneratorState(const at::Tensor &state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

/// What a collective makes of every rank's input: each rank's result.
using Combine = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor> &inputs)>;

} // namespace

struct SimulatedWorld::State {
  State(int size, std::string group)
      : size(size), group(std::move(group)), rngStates(size, generatorState()),
        finished(size, false), issued(size, 0) {}

  /// One collective: the k-th issued by every rank.
  struct Slot {
    std::string what;
    std::vector<at::Tensor> inputs;
    int arrived = 0;
    std::vector<at::Tensor> results; ///< by rank, once every rank has arrived
    std::string error;
  };

  const int size;
  const std::string group;
  std::mutex m;
  std::condition_variable cv;
  int holder = -1; ///< the rank running, -1 when none
  std::vector<at::Tensor> rngStates;
  std::vector<bool> finished;
  std::vector<uint64_t> issued;
  std::map<uint64_t, Slot> slots;

  void acquire(int rank, std::unique_lock<std::mutex> &lock) {
    cv.wait(lock, [&] { return holder == -1; });
    holder = rank;
    setGeneratorState(rngStates[rank]);
  }
  void release(int rank) {
    rngStates[rank] = generatorState();
    holder = -1;
    cv.notify_all();
  }

  /// Rank `rank` issues its next collective with `input`: the slot's number.
  uint64_t issue(int rank, const std::string &what, const at::Tensor &input, Combine combine) {
    std::lock_guard<std::mutex> lock(m);
    uint64_t seq = issued[rank]++;
    Slot &slot = slots[seq];
    if (slot.inputs.empty()) {
      slot.what = what;
      slot.inputs.resize(size);
    } else if (slot.what != what && slot.error.empty()) {
      slot.error = absl::StrCat("collective #", seq, ": rank ", rank, " issued ", what,
                                " where another rank issued ", slot.what);
    }
    slot.inputs[rank] = input.detach().clone();
    if (++slot.arrived == size && slot.error.empty())
      slot.results = combine(slot.inputs);
    cv.notify_all();
    return seq;
  }

  /// Rank `rank` waits for collective `seq`, handing the baton on meanwhile,
  /// and copies its result into `output`.
  void await(int rank, uint64_t seq, at::Tensor output) {
    std::unique_lock<std::mutex> lock(m);
    Slot &slot = slots[seq];
    auto gone = [&]() -> int {
      for (int r = 0; r < size; ++r)
        if (finished[r] && !slot.inputs[r].defined())
          return r;
      return -1;
    };
    release(rank);
    cv.wait(lock, [&] {
      return holder == -1 && (!slot.results.empty() || !slot.error.empty() || gone() >= 0);
    });
    holder = rank;
    setGeneratorState(rngStates[rank]);
    std::string error = slot.error;
    if (error.empty() && slot.results.empty())
      error = absl::StrCat(slot.what, " (collective #", seq, ") waits for rank ", gone(),
                           ", which returned without issuing it");
    TORCH_CHECK(error.empty(), "simulated world: ", error);
    output.copy_(slot.results[rank]);
    if (--slot.arrived == 0) // every rank has its result
      slots.erase(seq);
  }
};

namespace {

using State = SimulatedWorld::State;

class SimulatedWork : public c10d::Work {
public:
  SimulatedWork(std::shared_ptr<State> state, int rank, uint64_t seq, at::Tensor output)
      : c10d::Work(rank), state_(std::move(state)), rank_(rank), seq_(seq),
        output_(std::move(output)) {}
  bool wait(std::chrono::milliseconds) override {
    if (!done_) {
      done_ = true;
      state_->await(rank_, seq_, output_);
    }
    return true;
  }
  bool isCompleted() override { return done_; }
  bool isSuccess() const override { return done_; }

private:
  std::shared_ptr<State> state_;
  int rank_;
  uint64_t seq_;
  at::Tensor output_;
  bool done_ = false;
};

/// The collectives data-parallel and shard-parameters emit, in memory.
class SimulatedBackend : public c10d::Backend {
public:
  SimulatedBackend(std::shared_ptr<State> state, int rank, int size)
      : c10d::Backend(rank, size), state_(std::move(state)) {}
  const std::string getBackendName() const override { return "simulated"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override {
    TORCH_CHECK(tensors.size() == 1, "simulated world: all_reduce of one tensor only");
    TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM,
                "simulated world: all_reduce with a reduction other than sum");
    return start("all_reduce", tensors[0], tensors[0], [](const std::vector<at::Tensor> &in) {
      return std::vector<at::Tensor>(in.size(), sum(in));
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &) override {
    std::vector<int64_t> sizes = output.sizes().vec();
    return start("all_gather_into_tensor", input, output,
                 [sizes](const std::vector<at::Tensor> &in) {
                   std::vector<at::Tensor> flat;
                   for (const at::Tensor &t : in)
                     flat.push_back(t.reshape({-1}));
                   return std::vector<at::Tensor>(in.size(), at::cat(flat).view(sizes));
                 });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                      const c10d::ReduceScatterOptions &opts) override {
    TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM,
                "simulated world: reduce_scatter_tensor with a reduction other than sum");
    std::vector<int64_t> sizes = output.sizes().vec();
    const int64_t chunk = output.numel();
    return start("reduce_scatter_tensor", input, output,
                 [sizes, chunk](const std::vector<at::Tensor> &in) {
                   at::Tensor whole = sum(in).reshape({-1});
                   std::vector<at::Tensor> parts;
                   for (size_t r = 0; r < in.size(); ++r)
                     parts.push_back(whole.narrow(0, static_cast<int64_t>(r) * chunk, chunk)
                                         .view(sizes));
                   return parts;
                 });
  }

  // torch's functional all_gather_into_tensor and reduce_scatter_tensor come
  // here with one tensor each.
  c10::intrusive_ptr<c10d::Work>
  allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::AllgatherOptions &opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "simulated world: all_gather_into_tensor of one tensor only");
    return _allgather_base(outputs[0], inputs[0], opts);
  }
  c10::intrusive_ptr<c10d::Work>
  reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                  const c10d::ReduceScatterOptions &opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "simulated world: reduce_scatter_tensor of one tensor only");
    return _reduce_scatter_base(outputs[0], inputs[0], opts);
  }

private:
  /// The ranks' inputs added in rank order.
  static at::Tensor sum(const std::vector<at::Tensor> &in) {
    at::Tensor total = in[0].clone();
    for (size_t r = 1; r < in.size(); ++r)
      total.add_(in[r]);
    return total;
  }

  c10::intrusive_ptr<c10d::Work> start(const char *what, const at::Tensor &input,
                                       const at::Tensor &output, Combine combine) {
    uint64_t seq = state_->issue(getRank(), what, input, std::move(combine));
    return c10::make_intrusive<SimulatedWork>(state_, getRank(), seq, output);
  }

  std::shared_ptr<State> state_;
};

} // namespace

namespace {
// c10d keeps one flag for the process (and does not export its getter): on
// while any world lives.
std::mutex worldsMutex;
int liveWorlds = 0;
} // namespace

/// The ranks' threads, kept for the world's life: a thread's process group
/// is made once, and so is its OpenMP team (libgomp makes one per thread
/// that runs a parallel region; making them per run cost more than the run).
struct SimulatedWorld::Threads {
  std::vector<std::thread> threads;
  std::mutex m;
  std::condition_variable cv;
  const std::function<absl::Status(int)> *body = nullptr;
  uint64_t generation = 0; ///< runs posted
  int running = 0;         ///< ranks still in the current run
  bool stop = false;
  std::vector<absl::Status> statuses;
};

SimulatedWorld::SimulatedWorld(int size, std::string group)
    : state_(std::make_shared<State>(size, std::move(group))),
      threads_(std::make_unique<Threads>()) {
  {
    std::lock_guard<std::mutex> lock(worldsMutex);
    if (liveWorlds++ == 0)
      c10d::set_thread_isolation_mode(true);
  }
  threads_->statuses.resize(size);
  for (int rank = 0; rank < size; ++rank)
    threads_->threads.emplace_back([this, rank] { serve(rank); });
}

SimulatedWorld::~SimulatedWorld() {
  {
    std::lock_guard<std::mutex> lock(threads_->m);
    threads_->stop = true;
  }
  threads_->cv.notify_all();
  for (std::thread &t : threads_->threads)
    t.join();
  std::lock_guard<std::mutex> lock(worldsMutex);
  if (--liveWorlds == 0)
    c10d::set_thread_isolation_mode(false);
}

int SimulatedWorld::size() const { return state_->size; }

void SimulatedWorld::serve(int rank) {
  State &s = *state_;
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(c10::make_intrusive<c10d::HashStore>(), rank,
                                                     s.size);
  pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::CUSTOM,
                 c10::make_intrusive<SimulatedBackend>(state_, rank, s.size));
  pg->setDefaultBackend(c10d::ProcessGroup::BackendType::CUSTOM);
  pg->setGroupName(s.group);
  c10d::register_process_group(s.group, pg);
  Threads &t = *threads_;
  uint64_t seen = 0;
  while (true) {
    const std::function<absl::Status(int)> *body;
    {
      std::unique_lock<std::mutex> lock(t.m);
      t.cv.wait(lock, [&] { return t.stop || t.generation != seen; });
      if (t.stop)
        break;
      seen = t.generation;
      body = t.body;
    }
    {
      std::unique_lock<std::mutex> lock(s.m);
      s.acquire(rank, lock);
    }
    absl::Status status;
    try {
      status = (*body)(rank);
    } catch (const std::exception &e) {
      status = absl::InternalError(absl::StrCat("rank ", rank, ": ", e.what()));
    }
    {
      std::lock_guard<std::mutex> lock(s.m);
      s.finished[rank] = true;
      s.release(rank);
    }
    std::lock_guard<std::mutex> lock(t.m);
    t.statuses[rank] = std::move(status);
    if (--t.running == 0)
      t.cv.notify_all();
  }
  c10d::unregister_process_group(s.group);
}

std::vector<absl::Status> SimulatedWorld::run(const std::function<absl::Status(int rank)> &body) {
  State &s = *state_;
  {
    // Each run starts afresh: no collectives, every rank with the caller's
    // generator state.
    std::lock_guard<std::mutex> lock(s.m);
    s.slots.clear();
    std::fill(s.issued.begin(), s.issued.end(), 0);
    std::fill(s.finished.begin(), s.finished.end(), false);
    std::fill(s.rngStates.begin(), s.rngStates.end(), generatorState());
  }
  Threads &t = *threads_;
  std::unique_lock<std::mutex> lock(t.m);
  t.body = &body;
  t.running = s.size;
  ++t.generation;
  t.cv.notify_all();
  t.cv.wait(lock, [&] { return t.running == 0; });
  return t.statuses;
}

} // namespace graphopt::testing
