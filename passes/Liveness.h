//===- Liveness.h - Activation lifetimes and simulated peak memory -*- C++ -*-===//
//
// For every value: where it is created, its last forward use, its first and
// last backward use, the bytes it owns (views own none: they share their
// base's storage, found through the schema's alias information) and its kind.
// A memory timeline under the executor's policy (each value freed after its
// last use, a storage when its last value goes; graph inputs held throughout;
// graph outputs kept to the end), its peak, and what is live at the peak.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/Pass.h"

#include <llvm/Support/raw_ostream.h>

#include <array>
#include <vector>

namespace graphopt {

/// What memory is. Values get the first five; Scratch is operator workspace,
/// which belongs to a node, not a value.
enum class MemoryKind : uint8_t { Param, Grad, Act, OptState, Other, Scratch };
constexpr int kNumMemoryKinds = 6;
llvm::StringRef memoryKindName(MemoryKind kind); // PARAM, GRAD, ACT, OPT_STATE, OTHER, SCRATCH

struct ValueLiveness {
  const Value *value = nullptr;
  int64_t created = -1;          ///< node index; -1 for graph inputs
  int64_t lastForwardUse = -1;   ///< -1: none
  int64_t firstBackwardUse = -1;
  int64_t lastBackwardUse = -1;
  int64_t bytes = 0;             ///< storage this value owns (0 for a view)
  const Value *storage = nullptr; ///< the value whose storage it lives in (itself if it owns one)
  int64_t freedAfter = -1;       ///< node after which its storage is freed (numNodes: kept)
  MemoryKind kind = MemoryKind::Other;
};

struct LivenessResult {
  std::vector<ValueLiveness> values; ///< in Graph::allValues() order
  /// Bytes live while each node runs (its inputs, its outputs, all else
  /// alive, and its scratch when measured).
  std::vector<int64_t> timeline;
  /// Measured scratch bytes per node; empty when not measured.
  std::vector<int64_t> scratch;
  int64_t inputBytes = 0; ///< graph inputs, live throughout
  int64_t peakBytes = 0;
  int64_t peakNode = -1;
  /// What is live at the peak, by MemoryKind; sums to peakBytes exactly.
  std::array<int64_t, kNumMemoryKinds> breakdown{};
};

struct LivenessAnalysis {
  static llvm::StringRef analysisName() { return "liveness"; }
  using Result = LivenessResult;
  /// The simulation itself; `scratch` (per node, or empty) adds operator scratch.
  static absl::StatusOr<LivenessResult> compute(const Graph &graph, llvm::ArrayRef<int64_t> scratch = {});
  /// Through the AnalysisManager: with the measured scratch if that is cached.
  static absl::StatusOr<LivenessResult> run(const Graph &graph, AnalysisManager &analyses);
};

/// The breakdown at the peak and the `top` largest activations, for people.
void printLivenessReport(llvm::raw_ostream &os, const LivenessResult &result, size_t top = 10);

/// The analysis as a pass: computes it and, with a report directory, writes
/// liveness_values.csv, liveness_timeline.csv and liveness.json there.
/// Option `scratch=none|measured` (default none): measure operator scratch
/// memory by running the graph, and add it to the timeline.
class LivenessPass : public OptimizationPass {
public:
  absl::Status setOptions(const PassOptions &options) override;
  PassOptions options() const override;
  static llvm::StringRef passName() { return "liveness"; }
  static llvm::StringRef passDescription() {
    return "activation lifetimes, simulated memory timeline and peak, breakdown at the peak";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::Status analyze(const Graph &graph, AnalysisManager &analyses) override;

private:
  bool measureScratch_ = false;
};

} // namespace graphopt
