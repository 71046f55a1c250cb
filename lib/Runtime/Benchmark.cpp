//===- Benchmark.cpp - Before/after of a rewrite, measured in one run -----===//
#include "graphopt/Runtime/Benchmark.h"

#include "graphopt/Runtime/MemoryProbe.h"

#include <ATen/Parallel.h>
#include <absl/strings/str_cat.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace graphopt {

double stepSeconds(c10::Device device, const ExecutionResult &result, double wallSeconds) {
  return device.is_cpu() ? result.nodeSeconds : wallSeconds;
}

absl::StatusOr<double> TimedSteps::step(llvm::ArrayRef<at::Tensor> inputs) {
  auto start = std::chrono::steady_clock::now();
  auto result = executor_.run(inputs);
  synchronizeDevice(device_);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok())
    return result.status();
  return stepSeconds(device_, *result, wall);
}

double GraphBenchmark::quantile(double q) const {
  if (stepSeconds.empty())
    return 0;
  std::vector<double> s = stepSeconds;
  std::sort(s.begin(), s.end());
  double pos = q * (s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - lo) * (s[hi] - s[lo]);
}
double GraphBenchmark::median() const { return quantile(0.5); }
double GraphBenchmark::min() const { return quantile(0); }
double GraphBenchmark::max() const { return quantile(1); }

namespace {

struct MeasuredMemory {
  int64_t peak = 0;
  int64_t atBackwardStart = -1;
};

/// One profiled run: the peak above the inputs, and what was live when the
/// first non-forward node started (what forward left for backward).
absl::StatusOr<MeasuredMemory> measuredMemory(const Graph &graph, WeightStore &weights,
                                              llvm::ArrayRef<at::Tensor> inputs,
                                              const ExecutionOptions &options) {
  MeasuredMemory m;
  absl::Status st = profileRuns(graph, weights, inputs, options, 1, [&](const ProfiledRun &run) {
    m.peak = run.profiler->runPeakBytes();
    for (const NodeProfile &p : run.profiler->profiles())
      if (p.node->phase() != Phase::Forward) {
        m.atBackwardStart = p.bytesBefore;
        break;
      }
    return absl::OkStatus();
  });
  if (!st.ok())
    return st;
  return m;
}

double ratio(double optimized, double original) {
  return original != 0 ? optimized / original : 0.0;
}

} // namespace

std::string cpuModel() {
  auto file = llvm::MemoryBuffer::getFileAsStream("/proc/cpuinfo");
  if (!file)
    return "unknown";
  llvm::StringRef text = (*file)->getBuffer();
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    if (line.startswith("model name")) {
      auto colon = line.find(':');
      if (colon != llvm::StringRef::npos)
        return line.substr(colon + 1).trim().str();
    }
    text = rest;
  }
  return "unknown";
}

absl::StatusOr<BenchmarkReport> benchmarkRewrite(const Graph &original, const Graph &optimized,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> originalInputs,
                                                 llvm::ArrayRef<at::Tensor> optimizedInputs,
                                                 const BenchmarkOptions &options) {
  BenchmarkReport report;
  report.device = options.execution.device;
  report.threads = at::get_num_threads();
  report.warmup = options.warmup;
  report.original.nodes = original.numNodes();
  report.optimized.nodes = optimized.numNodes();
  TimedSteps a(original, weights, options.execution);
  TimedSteps b(optimized, weights, options.execution);
  for (TimedSteps *g : {&a, &b})
    if (absl::Status st = g->prepare(); !st.ok())
      return st;
  auto label = [](bool first) { return first ? "the original graph" : "the optimized graph"; };
  for (unsigned round = 0; round < options.warmup + options.runs; ++round) {
    // Alternate which graph goes first, so an order effect touches both.
    bool originalFirst = round % 2 == 0;
    for (bool isOriginal : {originalFirst, !originalFirst}) {
      auto seconds = isOriginal ? a.step(originalInputs) : b.step(optimizedInputs);
      if (!seconds.ok())
        return absl::Status(seconds.status().code(),
                            absl::StrCat(label(isOriginal), ": ", seconds.status().message()));
      if (round >= options.warmup)
        (isOriginal ? report.original : report.optimized).stepSeconds.push_back(*seconds);
    }
  }
  auto memA = measuredMemory(original, weights, originalInputs, options.execution);
  if (!memA.ok())
    return memA.status();
  auto memB = measuredMemory(optimized, weights, optimizedInputs, options.execution);
  if (!memB.ok())
    return memB.status();
  report.original.peakBytes = memA->peak;
  report.optimized.peakBytes = memB->peak;
  report.original.backwardStartBytes = memA->atBackwardStart;
  report.optimized.backwardStartBytes = memB->atBackwardStart;
  for (auto [steps, figures] : {std::pair(&a, &report.original), std::pair(&b, &report.optimized)})
    if (const CpuMemoryPlan *plan = steps->executor().memoryPlan()) {
      report.cpuMemoryPlan = true;
      CpuMemoryPlan::Stats stats = plan->stats();
      figures->arenaBytes = stats.arenaBytes;
      figures->arenaLiveBytes = stats.plannedPeakBytes;
    }
  return report;
}

void printBenchmark(llvm::raw_ostream &os, const BenchmarkReport &r) {
  const GraphBenchmark &a = r.original, &b = r.optimized;
  os << "benchmark on " << r.device.str() << " (" << r.threads << " threads): "
     << a.stepSeconds.size() << " runs of each graph after " << r.warmup
     << " warm-up, alternating\n";
  const char *blank = "", *orig = "original", *opt = "optimized", *rat = "ratio";
  os << llvm::format("  %-30s %18s %18s %8s\n", blank, orig, opt, rat);
  const char *nodes = "nodes", *peak = "peak memory above inputs (MiB)",
             *median = "step time, median (ms)", *minMax = "  min-max (ms)",
             *iqr = "  interquartile range (ms)";
  os << llvm::format("  %-30s %18zu %18zu %8.3f\n", nodes, a.nodes, b.nodes,
                     ratio(b.nodes, a.nodes));
  os << llvm::format("  %-30s %18.2f %18.2f %8.3f\n", peak,
                     a.peakBytes / 1048576.0, b.peakBytes / 1048576.0,
                     ratio(b.peakBytes, a.peakBytes));
  if (a.backwardStartBytes >= 0 && b.backwardStartBytes >= 0) {
    const char *saved = "live at backward start (MiB)";
    os << llvm::format("  %-30s %18.2f %18.2f %8.3f\n", saved, a.backwardStartBytes / 1048576.0,
                       b.backwardStartBytes / 1048576.0,
                       ratio(b.backwardStartBytes, a.backwardStartBytes));
  }
  os << llvm::format("  %-30s %18.3f %18.3f %8.3f\n", median, 1e3 * a.median(),
                     1e3 * b.median(), ratio(b.median(), a.median()));
  auto range = [](double lo, double hi) { return llvm::formatv("{0:f3}-{1:f3}", 1e3 * lo, 1e3 * hi).str(); };
  os << llvm::format("  %-30s %18s %18s\n", minMax, range(a.min(), a.max()).c_str(),
                     range(b.min(), b.max()).c_str());
  os << llvm::format("  %-30s %18s %18s\n", iqr,
                     range(a.quantile(0.25), a.quantile(0.75)).c_str(),
                     range(b.quantile(0.25), b.quantile(0.75)).c_str());
  if (r.cpuMemoryPlan) {
    const char *arena = "CPU memory plan, arena (MiB)";
    os << llvm::format("  %-30s %18.2f %18.2f %8.3f\n", arena, a.arenaBytes / 1048576.0,
                       b.arenaBytes / 1048576.0, ratio(b.arenaBytes, a.arenaBytes));
  }
}

std::string benchmarkJson(const BenchmarkReport &r, llvm::StringRef model,
                          llvm::StringRef pipeline, llvm::StringRef verification) {
  auto graphJson = [](const GraphBenchmark &g) {
    llvm::json::Array steps;
    for (double s : g.stepSeconds)
      steps.push_back(s);
    return llvm::json::Object{{"nodes", static_cast<int64_t>(g.nodes)},
                              {"peak_bytes_above_inputs", g.peakBytes},
                              {"backward_start_bytes",
                               g.backwardStartBytes < 0 ? llvm::json::Value(nullptr)
                                                        : llvm::json::Value(g.backwardStartBytes)},
                              {"cpu_arena_bytes", g.arenaBytes},
                              {"cpu_arena_live_bytes", g.arenaLiveBytes},
                              {"step_seconds_median", g.median()},
                              {"step_seconds_min", g.min()},
                              {"step_seconds_max", g.max()},
                              {"step_seconds_q1", g.quantile(0.25)},
                              {"step_seconds_q3", g.quantile(0.75)},
                              {"step_seconds", std::move(steps)}};
  };
  const GraphBenchmark &a = r.original, &b = r.optimized;
  llvm::json::Object root{
      {"model", model},
      {"pipeline", pipeline},
      {"verification", verification},
      {"machine",
       llvm::json::Object{{"cpu", cpuModel()},
                          {"threads", r.threads},
                          {"torch_version", TORCH_VERSION},
                          {"device", r.device.str()}}},
      {"runs", static_cast<int64_t>(a.stepSeconds.size())},
      {"warmup", static_cast<int64_t>(r.warmup)},
      {"cpu_memory_plan", r.cpuMemoryPlan},
      {"original", graphJson(a)},
      {"optimized", graphJson(b)},
      {"ratios",
       llvm::json::Object{{"nodes", ratio(b.nodes, a.nodes)},
                          {"peak_bytes", ratio(b.peakBytes, a.peakBytes)},
                          {"backward_start_bytes",
                           a.backwardStartBytes > 0 && b.backwardStartBytes >= 0
                               ? llvm::json::Value(ratio(b.backwardStartBytes, a.backwardStartBytes))
                               : llvm::json::Value(nullptr)},
                          {"step_seconds_median", ratio(b.median(), a.median())}}}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return os.str();
}

} // namespace graphopt
