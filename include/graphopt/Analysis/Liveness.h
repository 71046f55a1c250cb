//===- Liveness.h - Activation lifetimes and simulated peak memory -*- C++ -*-===//
//
// For every value: where it is created, its last forward use, its first and
// last backward use, the bytes it owns (views own none: they share their
// base's storage, found through the operator effects, IR/OpEffects.h) and its
// kind. A memory timeline under the executor's own free policy
// (Runtime/FreePolicy.h: each value dropped after its last use, a storage when
// its last value goes; graph inputs held throughout; graph outputs kept to the
// end), its peak, and what is live at the peak. Results are looked up by value
// (`lookup`) and node (`rank`), not by position.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/IRMap.h"
#include "graphopt/Pass/AnalysisManager.h"

#include <llvm/Support/raw_ostream.h>

#include <array>
#include <vector>

namespace graphopt {

class AliasInfo;

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
  /// In host memory (graphopt::offload's copy): `bytes` is 0, `hostBytes` its size.
  int64_t hostBytes = 0;
};

struct LivenessResult {
  std::vector<ValueLiveness> values; ///< in Graph::allValues() order
  /// Each value's entry in `values`, and each node's rank (its index in the
  /// node list when the analysis ran, which indexes `timeline` and `scratch`).
  ValueMap<int32_t> slot;
  NodeMap<int64_t> rank;
  /// The entry of `v` (a value of the analysed graph), or null.
  const ValueLiveness *lookup(const Value *v) const {
    int32_t s = slot.lookup(v);
    return s < 0 ? nullptr : &values[s];
  }

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
  enum class Scratch : uint8_t {
    None,     ///< the graph alone: runs nothing
    Measured, ///< plus operator scratch memory, measured (MeasuredScratchAnalysis)
  };
  struct Options {
    Scratch scratch = Scratch::None;
    std::string cacheKey() const { return scratch == Scratch::Measured ? "scratch=measured" : ""; }
  };
  /// The simulation itself; `scratch` (per node rank, or empty) adds operator
  /// scratch; `roots` the graph's storage roots where the caller has them
  /// (StorageRootsAnalysis), else it finds them.
  static absl::StatusOr<LivenessResult> compute(const Graph &graph, llvm::ArrayRef<int64_t> scratch = {},
                                                const AliasInfo *roots = nullptr);
  /// Through the AnalysisManager; with Scratch::Measured it depends on the
  /// MeasuredScratchAnalysis (which runs the graph).
  static absl::StatusOr<LivenessResult> run(const Graph &graph, AnalysisManager &analyses,
                                            const Options &options);
};

/// Bytes live while each node runs, by MemoryKind (indexed by node rank, then
/// kind): the timeline split the way `breakdown` splits the peak, so each
/// row sums to `timeline` at that rank. With `granularity` > 1, each storage a
/// node makes is rounded up to a multiple of it, as an allocator that hands
/// out blocks counts it (CUDA's caching allocator: 512 bytes); graph inputs
/// stay exact.
std::vector<std::array<int64_t, kNumMemoryKinds>> liveBytesByKind(const LivenessResult &result,
                                                                 int64_t granularity = 1);

/// The breakdown at the peak and the `top` largest activations, for people.
void printLivenessReport(llvm::raw_ostream &os, const LivenessResult &result, size_t top = 10);

} // namespace graphopt
