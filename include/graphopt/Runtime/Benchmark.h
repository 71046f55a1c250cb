//===- Benchmark.h - Before/after of a rewrite, measured in one run -*- C++ -*-===//
//
// What a pipeline gained, measured: the original and the rewritten graph run
// alternately (original first in even rounds, rewritten first in odd ones, so
// the machine's drift and any order effect touch both alike), after warm-up,
// each run from the same state (the executor restores what a run writes in
// place). Step time is each run's time without instrumentation (on CPU the
// node loop, as the profile's step time; on CUDA the wall time to the
// device's end); peak memory above weights and inputs comes from one extra
// profiled run of each graph. graph-opt --benchmark prints it as a table and
// --benchmark-json writes it with the machine and the pipeline.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"
#include "graphopt/Runtime/Executor.h"

#include <ATen/core/Tensor.h>
#include <llvm/Support/raw_ostream.h>

#include <string>
#include <vector>

namespace graphopt {

/// A step's time: on the CPU its nodes alone (ExecutionResult::nodeSeconds:
/// restoring what the run wrote in place, so that measuring never trains the
/// model, is no part of a training step); on CUDA the wall time up to the
/// device's end. The profile's step time and the benchmark share this rule.
double stepSeconds(c10::Device device, const ExecutionResult &result, double wallSeconds);

/// One graph on an executor of its own, each step timed without
/// instrumentation (stepSeconds): the benchmark's runs, and the profile's
/// unprofiled steps.
class TimedSteps {
public:
  TimedSteps(const Graph &graph, WeightStore &weights, const ExecutionOptions &options)
      : executor_(graph, weights, options), device_(options.device) {}
  absl::Status prepare() { return executor_.prepare(); }
  /// Runs one step; returns its time in seconds.
  absl::StatusOr<double> step(llvm::ArrayRef<at::Tensor> inputs);
  const Executor &executor() const { return executor_; }

private:
  Executor executor_;
  c10::Device device_;
};

struct BenchmarkOptions {
  unsigned warmup = 1; ///< unmeasured runs of each graph first
  unsigned runs = 10;  ///< measured runs of each graph
  ExecutionOptions execution;
};

/// One graph's figures.
struct GraphBenchmark {
  size_t nodes = 0;
  std::vector<double> stepSeconds; ///< one per measured run, in run order
  int64_t peakBytes = 0;           ///< above weights and inputs (profiled run)
  /// Live above the inputs when the first backward node starts (profiled run):
  /// what forward left for backward, the saved activations and the loss; -1
  /// for a graph without backward.
  int64_t backwardStartBytes = -1;
  /// The arena its CPU memory plan reserved (ExecutionOptions::planCpuMemory;
  /// 0 without one): memory the runs served from it, which the peak above
  /// counts tensor by tensor.
  int64_t arenaBytes = 0;
  /// The highest sum of planned blocks live at once: what any layout of the
  /// arena needs (arenaBytes above it is the packing's waste).
  int64_t arenaLiveBytes = 0;
  double median() const;
  double min() const;
  double max() const;
  /// The quartiles (linear interpolation, like numpy's default).
  double quantile(double q) const;
};

struct BenchmarkReport {
  GraphBenchmark original, optimized;
  c10::Device device{c10::DeviceType::CPU};
  int threads = 0; ///< intra-op threads (at::get_num_threads)
  unsigned warmup = 0;
  bool cpuMemoryPlan = false; ///< the runs planned their CPU memory
};

/// Runs both graphs as described above. `originalInputs`/`optimizedInputs`
/// are each graph's user inputs (the same tensors, matched by name).
absl::StatusOr<BenchmarkReport> benchmarkRewrite(const Graph &original, const Graph &optimized,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> originalInputs,
                                                 llvm::ArrayRef<at::Tensor> optimizedInputs,
                                                 const BenchmarkOptions &options);

/// The CPU's model name (/proc/cpuinfo), "unknown" where it says none: the
/// machine a measurement was made on.
std::string cpuModel();

/// The table for people: nodes, peak memory, median step time with its spread,
/// each with the ratio optimized/original.
void printBenchmark(llvm::raw_ostream &os, const BenchmarkReport &report);

/// The same as JSON, with the machine (CPU model, threads, torch version,
/// device), the pipeline and the verification verdict.
std::string benchmarkJson(const BenchmarkReport &report, llvm::StringRef model,
                          llvm::StringRef pipeline, llvm::StringRef verification);

} // namespace graphopt
