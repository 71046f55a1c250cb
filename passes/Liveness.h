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

#include "graphopt/Pass/Pass.h"

#include <llvm/Support/raw_ostream.h>

#include <array>
#include <vector>

namespace graphopt {

enum class MemoryKind : uint8_t { Param, Grad, Act, OptState, Other };
llvm::StringRef memoryKindName(MemoryKind kind); // PARAM, GRAD, ACT, OPT_STATE, OTHER

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
  /// Bytes live while each node runs (its inputs, its outputs, all else alive).
  std::vector<int64_t> timeline;
  int64_t inputBytes = 0; ///< graph inputs, live throughout
  int64_t peakBytes = 0;
  int64_t peakNode = -1;
  /// What is live at the peak, by MemoryKind; sums to peakBytes exactly.
  std::array<int64_t, 5> breakdown{};
};

struct LivenessAnalysis {
  static llvm::StringRef analysisName() { return "liveness"; }
  using Result = LivenessResult;
  static absl::StatusOr<LivenessResult> run(const Graph &graph);
};

/// The breakdown at the peak and the `top` largest activations, for people.
void printLivenessReport(llvm::raw_ostream &os, const LivenessResult &result, size_t top = 10);

/// The analysis as a pass: computes it and, with a report directory, writes
/// liveness_values.csv, liveness_timeline.csv and liveness.json there.
class LivenessPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "liveness"; }
  static llvm::StringRef passDescription() {
    return "activation lifetimes, simulated memory timeline and peak, breakdown at the peak";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::Status analyze(const Graph &graph, AnalysisManager &analyses) override;
};

} // namespace graphopt
