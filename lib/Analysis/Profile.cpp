//===- Profile.cpp - Measured per-node time and memory --------------------===//
#include "graphopt/Analysis/Profile.h"
#include "graphopt/Alias/AliasAnalysis.h"

#include "graphopt/IR/OpEffects.h"
#include "graphopt/Pass/ExecutionContext.h"
#include "graphopt/Runtime/Benchmark.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"
#include "graphopt/Support/Statistics.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <chrono>

namespace graphopt {

namespace {

/// Every measured run's profile of every node, by rank, then run.
struct Samples {
  std::vector<std::vector<NodeProfile>> byNode;
  std::vector<double> stepSeconds;
  std::vector<double> plainSeconds; ///< the unprofiled steps between them
  ProfiledStep last;
};

NodeStats medians(const std::vector<NodeProfile> &runs, int64_t inputBytes) {
  NodeStats s;
  s.node = runs.front().node;
  auto pick = [&](auto field) {
    std::vector<decltype(field(runs.front()))> xs;
    xs.reserve(runs.size());
    for (const NodeProfile &p : runs)
      xs.push_back(field(p));
    return medianOf(std::move(xs));
  };
  s.seconds = pick([](const NodeProfile &p) { return p.seconds; });
  s.peakBytes = inputBytes + pick([](const NodeProfile &p) { return p.peakBytes; });
  s.activeBytes = inputBytes + pick([](const NodeProfile &p) { return p.bytesBefore; });
  s.outputBytes = pick([](const NodeProfile &p) { return p.outputBytes; });
  s.scratchBytes = pick([](const NodeProfile &p) { return p.scratchBytes(); });
  size_t outs = runs.front().outputStorageBytes.size();
  for (size_t o = 0; o < outs; ++o)
    s.outputStorageBytes.push_back(pick([o](const NodeProfile &p) {
      return o < p.outputStorageBytes.size() ? p.outputStorageBytes[o] : int64_t(0);
    }));
  return s;
}

/// What a node's result is: its first output's kind; for a node that only
/// writes in place (an optimizer update), optimizer state if it writes any,
/// else what it writes first; OTHER otherwise.
MemoryKind nodeKind(const Node &n, const LivenessResult &live, const AliasInfo &aliases) {
  if (n.numOutputs())
    return live.lookup(n.output())->kind;
  llvm::SmallVector<const Value *, 2> written = aliases.rootsWrittenBy(n);
  for (const Value *v : written)
    if (live.lookup(v)->kind == MemoryKind::OptState)
      return MemoryKind::OptState;
  return written.empty() ? MemoryKind::Other : live.lookup(written.front())->kind;
}

} // namespace

std::string ProfileAnalysis::Options::cacheKey() const {
  return absl::StrCat("warmup=", warmup, ",runs=", runs);
}

namespace {

/// The measured runs: each profiled run's node samples, with an unprofiled
/// step on an executor of its own between the profiled ones (drift in the
/// machine's speed, clock, caches, neighbours, then touches both alike).
absl::StatusOr<Samples> sampleRuns(const Graph &graph, const ExecutionContext &context,
                                   const std::vector<at::Tensor> &inputs,
                                   const ExecutionOptions &exec, const LivenessResult &live,
                                   const ProfileAnalysis::Options &options) {
  const size_t numNodes = graph.numNodes();
  Samples samples;
  samples.byNode.resize(numNodes);
  TimedSteps plain(graph, *context.weights, exec);
  if (absl::Status st = plain.prepare(); !st.ok())
    return absl::Status(st.code(), absl::StrCat("profiling: ", st.message()));
  absl::Status st = profileRuns(
      graph, *context.weights, inputs, exec, options.warmup + options.runs,
      [&](const ProfiledRun &run) {
        if (run.index < options.warmup)
          return absl::OkStatus();
        const std::vector<NodeProfile> &profiles = run.profiler->profiles();
        if (profiles.size() != numNodes)
          return absl::InternalError(absl::StrCat("profile: a run profiled ", profiles.size(),
                                                  " nodes of ", numNodes));
        for (size_t i = 0; i < numNodes; ++i)
          samples.byNode[i].push_back(profiles[i]);
        samples.stepSeconds.push_back(stepSeconds(exec.device, *run.result, run.seconds));
        ProfiledStep &last = samples.last;
        last = ProfiledStep();
        for (const NodeProfile &p : profiles) {
          last.start.push_back(p.start);
          last.seconds.push_back(p.seconds);
          last.liveBytes.push_back(live.inputBytes + p.bytesBefore);
        }
        return absl::OkStatus();
      },
      // The unprofiled step goes first, while the profiled run's results
      // (every gradient) are not held: both start from the same memory.
      [&](unsigned index) -> absl::Status {
        if (index >= options.warmup && options.beforeRun) {
          if (absl::Status st = options.beforeRun(index - options.warmup); !st.ok())
            return st;
          // The step right after whatever beforeRun ran pays for it (a tiny
          // MLP's 0.18 ms step took 4.5 ms after calibration probes): one
          // more, not timed, brings the step back to where the runs left it.
          if (auto warm = plain.step(inputs); !warm.ok())
            return warm.status();
        }
        auto plainStep = plain.step(inputs);
        if (!plainStep.ok())
          return plainStep.status();
        if (index >= options.warmup)
          samples.plainSeconds.push_back(*plainStep);
        return absl::OkStatus();
      });
  if (!st.ok())
    return absl::Status(st.code(), absl::StrCat("profiling: ", st.message()));
  return samples;
}

/// Each node's medians over the runs (the probe's own hook time `subtracted`
/// from each sample), its kind, and the step's times.
void takeMedians(const Graph &graph, const LivenessResult &live, Samples &samples,
                 double subtracted, unsigned runs, ProfileResult &r) {
  const size_t numNodes = graph.numNodes();
  r.nodes.reserve(numNodes);
  const AliasInfo aliases(graph);
  std::vector<double> runSums(runs, 0.0);
  for (size_t i = 0; i < numNodes; ++i) {
    for (size_t run = 0; run < samples.byNode[i].size(); ++run) {
      NodeProfile &p = samples.byNode[i][run];
      p.seconds = std::max(0.0, p.seconds - subtracted);
      runSums[run] += p.seconds;
    }
    r.nodes.push_back(medians(samples.byNode[i], live.inputBytes));
    r.nodes.back().kind = nodeKind(*r.nodes.back().node, live, aliases);
    r.sumNodeSeconds += r.nodes.back().seconds;
  }
  r.runNodeSeconds = medianOf(std::move(runSums));
  r.stepSeconds = medianOf(std::move(samples.plainSeconds));
  r.profiledStepSeconds = medianOf(samples.stepSeconds);
  r.trace = std::move(samples.last);
}

/// Phases, the simulated memory by kind with the measured scratch, the peak.
void summarizeMemory(const Graph &graph, const LivenessResult &live, const c10::Device &device,
                     ProfileResult &r) {
  const size_t numNodes = graph.numNodes();
  r.simulatedPeakBytes = live.peakBytes;
  // CUDA's caching allocator counts each block rounded up to 512 bytes.
  constexpr int64_t kCudaBlockBytes = 512;
  r.liveByKind = liveBytesByKind(live, device.is_cuda() ? kCudaBlockBytes : 1);
  for (const Node &n : graph.nodes()) {
    int64_t rank = live.rank.lookup(&n);
    if (n.phase() == Phase::Forward)
      r.forwardEndRank = rank;
    else if (n.phase() == Phase::Backward)
      r.backwardEndRank = rank;
  }
  r.peakBytes = r.inputBytes;
  for (size_t i = 0; i < numNodes; ++i) {
    r.liveByKind[i][static_cast<int>(MemoryKind::Scratch)] = r.nodes[i].scratchBytes;
    if (r.peakRank < 0 || r.nodes[i].peakBytes > r.peakBytes) {
      r.peakBytes = std::max(r.peakBytes, r.nodes[i].peakBytes);
      r.peakRank = static_cast<int64_t>(i);
    }
  }
  if (r.peakRank >= 0) {
    r.breakdownAtPeak = r.liveByKind[r.peakRank];
    int64_t sum = 0;
    for (int64_t b : r.breakdownAtPeak)
      sum += b;
    r.unattributedAtPeak = r.peakBytes - sum;
  }
}

} // namespace

absl::StatusOr<ProfileResult> ProfileAnalysis::run(const Graph &graph, AnalysisManager &analyses,
                                                   const Options &options) {
  if (options.runs == 0)
    return absl::InvalidArgumentError("profile: runs must be at least 1");
  auto setup = analyses.setupToRun(graph, "profiling");
  if (!setup.ok())
    return setup.status();
  const ExecutionContext *context = setup->context;
  const std::vector<at::Tensor> &inputs = setup->inputs;
  auto liveness = analyses.getResult<LivenessAnalysis>(graph, {});
  if (!liveness.ok())
    return liveness.status();
  const LivenessResult &live = **liveness;

  ExecutionOptions exec;
  exec.device = context->device;
  exec.seed = context->seed;
  const size_t numNodes = graph.numNodes();

  ProfileResult r;
  r.warmupRuns = options.warmup;
  r.measuredRuns = options.runs;
  r.inputBytes = live.inputBytes;
  // What the probe's own hooks take per node: subtracted from each CPU node
  // time, whose window holds them (CUDA events time the kernels alone).
  double hookSeconds = 0;
  {
    NodeProfiler probe(exec.device);
    r.device = probe.device().str();
    r.timeSource = probe.timeSource();
    r.memorySource = probe.memorySource();
    if (exec.device.is_cpu() && numNodes)
      hookSeconds = probe.hookSeconds(graph.nodes().front());
  }
  r.overheadPerNodeSeconds = hookSeconds;

  auto samples = sampleRuns(graph, *context, inputs, exec, live, options);
  if (!samples.ok())
    return samples.status();
  takeMedians(graph, live, *samples, hookSeconds, options.runs, r);
  summarizeMemory(graph, live, exec.device, r);
  r.activations = computeActivationStats(graph, live, r.nodes);
  return r;
}

} // namespace graphopt
