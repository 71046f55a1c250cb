//===- Profile.h - Measured per-node time and memory, μ-TWO metrics -*- C++ -*-===//
//
// Runs the graph: `warmup` runs that are not counted (kernel caches, oneDNN
// primitives), then `runs` measured runs from identical state (the executor
// restores what a run writes in place, so profiling never trains the model),
// each under a NodeProfiler (Runtime/MemoryProbe.h), each followed by a run
// without it (another executor) for the step time the profiler does not
// disturb; interleaved, so the machine's drift touches both alike. Per node it
// keeps the median over the measured runs, never the mean: one slow run (a
// page fault, a context switch) moves a mean, not a median.
//
// Memory is what a training step sees: the graph inputs (weights, optimizer
// state, the batch), live throughout and counted from their types, plus the
// bytes the run allocates, measured. Kinds and phases come from the liveness
// analysis; the μ-TWO activation metrics (ActivationStats) join both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Analysis/Liveness.h"

#include <llvm/ADT/SmallVector.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

namespace graphopt {

/// One node's medians over the measured runs.
struct NodeStats {
  const Node *node = nullptr;
  /// What its results are: its first output's kind; for a node that only
  /// writes in place, OPT_STATE if it writes optimizer state, else the kind
  /// of what it writes; OTHER when it neither returns nor writes anything.
  MemoryKind kind = MemoryKind::Other;
  double seconds = 0;         ///< time the node takes
  int64_t peakBytes = 0;      ///< highest live memory while it runs
  int64_t activeBytes = 0;    ///< live memory when it starts
  int64_t outputBytes = 0;    ///< storage of its outputs
  int64_t scratchBytes = 0;   ///< held only while it ran (NodeProfile::scratchBytes)
  /// Per output: its storage bytes (0 for a non-tensor or a repeated storage).
  llvm::SmallVector<int64_t, 1> outputStorageBytes;
};

/// μ-TWO's metrics for one activation: a storage made in forward and read in
/// backward (views of it count as it: they keep it alive).
struct ActivationStats {
  const Value *value = nullptr; ///< the value that owns the storage
  int64_t creationRank = -1;
  /// The last forward node that reads it or a view of it; its creation rank
  /// when only backward nodes read it.
  int64_t lastForwardUseRank = -1;
  int64_t firstBackwardUseRank = -1;
  int64_t lastBackwardUseRank = -1;
  int64_t bytes = 0;            ///< median measured storage bytes
  /// Time from its last forward use to its first backward use (the node
  /// medians in between): how long it sits in memory unused.
  double inactiveSeconds = 0;
  /// The cheapest recomputation at its first backward use: the nodes that
  /// make it from values still live there (graph inputs, and activations and
  /// other values not yet freed), found by walking back from its producer
  /// and stopping at every live value.
  double recomputeSeconds = 0;
  /// The peak of the temporaries that recomputation holds beside the
  /// activation itself (their outputs until last used there, plus scratch).
  int64_t recomputeMemoryBytes = 0;
  unsigned recomputeNodes = 0;
  /// False when a node of that recomputation writes in place or acts outside
  /// the graph (it cannot simply run again).
  bool recomputable = true;
  /// Bytes freed per second of recomputation (0 when not recomputable).
  double recomputeRatio = 0;
};

/// One measured step, as it ran: for the Chrome trace.
struct ProfiledStep {
  std::vector<double> start;     ///< per rank, seconds from the start of the step
  std::vector<double> seconds;   ///< per rank
  std::vector<int64_t> liveBytes; ///< per rank, live when the node starts (inputs included)
};

struct ProfileResult {
  std::string device;       ///< "cpu", "cuda:0"
  std::string timeSource;   ///< how time was measured, in words
  std::string memorySource; ///< how memory was measured, in words
  unsigned warmupRuns = 0;
  unsigned measuredRuns = 0;

  std::vector<NodeStats> nodes; ///< by rank (LivenessResult::rank)
  std::vector<ActivationStats> activations; ///< by creation rank

  /// Median step without the profiler: on the CPU its nodes, first start to
  /// last return (ExecutionResult::nodeSeconds); on CUDA the wall time to the
  /// device's end.
  double stepSeconds = 0;
  double profiledStepSeconds = 0; ///< the same, with the profiler
  double sumNodeSeconds = 0;      ///< sum of the node medians
  /// Median over the measured runs of each run's node times added up (the
  /// hooks' cost out). On the CPU the node windows divide the step, so it
  /// differs from stepSeconds only by what the windows miss or the hooks add;
  /// on CUDA it is the kernels' time, short of the step by the GPU's idle
  /// gaps. The sum of the node medians falls short of it by the time that
  /// lands on a different node each run (interrupts, a busy host): a node's
  /// median leaves out what hits it in a minority of runs, a whole step's
  /// median does not.
  double runNodeSeconds = 0;
  /// What the profiler's hooks cost per node on the CPU, measured
  /// (NodeProfiler::hookSeconds) and taken out of every node time; 0 on
  /// CUDA, where events time the kernels alone.
  double overheadPerNodeSeconds = 0;

  int64_t inputBytes = 0; ///< graph inputs, live throughout
  int64_t peakBytes = 0;  ///< the highest node median peak
  int64_t peakRank = -1;  ///< where it is
  int64_t simulatedPeakBytes = 0; ///< the liveness analysis' peak (graph only)
  /// What is live at the measured peak: the values by kind (liveness), the
  /// node's measured scratch as SCRATCH.
  std::array<int64_t, kNumMemoryKinds> breakdownAtPeak{};
  /// The measured peak minus the breakdown: 0 when liveness accounts for
  /// every byte the step allocated at the peak.
  int64_t unattributedAtPeak = 0;
  /// Per rank, simulated live bytes by kind; SCRATCH is the measured median.
  std::vector<std::array<int64_t, kNumMemoryKinds>> liveByKind;
  int64_t forwardEndRank = -1;  ///< the last forward node, -1 if none
  int64_t backwardEndRank = -1; ///< the last backward node, -1 if none

  ProfiledStep trace; ///< the last measured run
};

struct ProfileAnalysis {
  static llvm::StringRef analysisName() { return "profile"; }
  using Result = ProfileResult;
  struct Options {
    unsigned warmup = 1;
    unsigned runs = 5;
    /// Called before each measured run, outside its timing (a calibration
    /// that must see the machine as the runs do: SpeedCalibration.h). Not
    /// part of the cache key: whoever sets it wants its calls, so asks an
    /// AnalysisManager that has no profile yet.
    std::function<absl::Status(unsigned run)> beforeRun = nullptr;
    std::string cacheKey() const;
  };
  /// Runs the graph with the AnalysisManager's execution context; depends on
  /// the liveness analysis (graph only).
  static absl::StatusOr<ProfileResult> run(const Graph &graph, AnalysisManager &analyses,
                                           const Options &options);
};

/// The name reports give a node (node_stats.csv, attribution.csv, traces): its
/// first output's name, else its operator. Profile.cpp.

/// The μ-TWO metrics of every activation of `liveness`, from the node medians
/// (indexed by rank). ActivationStats.cpp.
std::vector<ActivationStats> computeActivationStats(const Graph &graph,
                                                    const LivenessResult &liveness,
                                                    llvm::ArrayRef<NodeStats> nodes);

} // namespace graphopt
