//===- CheckpointReport.h - What checkpoint decided, measured and reports -*- C++ -*-===//
//
// The checkpoint pass's outcome (budgets, the plan's predictions and
// measurements, each activation's decision), the text report it prints and
// the checkpoint.json it writes with --report-dir (docs/Checkpointing.md,
// "The report").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/Planner.h"

#include "graphopt/Runtime/Benchmark.h"

#include <llvm/Support/raw_ostream.h>

#include <optional>
#include <string>
#include <vector>

namespace graphopt {

/// What a checkpoint run decided and measured: the report's, checkpoint.json's.
struct CheckpointOutcome {
  /// One activation storage in the report.
  struct Activation {
    std::string name, module, decision, reason; ///< decision: recomputed, offloaded, kept, held, never
    int64_t bytes = 0;
    double recomputeSeconds = 0; ///< recomputing it alone
  };
  /// A node the plan recomputes (one per clone), and what priced it.
  struct RecomputedNode {
    std::string value, op, pricedBy; ///< the original's first output, its operator, the cost model
    double seconds = 0;
  };

  std::string graph, planner, budgetText, boundedName, costSource, solverStatus;
  std::vector<RecomputedNode> recomputedNodes;
  int64_t budgetBytes = 0;     ///< of the bounded memory
  /// activations= with budget= too: the peak above the inputs allowed; -1 otherwise.
  int64_t peakCapBytes = -1;
  /// What the step's inputs hold (weights, optimizer state, the batch): the
  /// peak above them plus this is the whole step's.
  int64_t inputBytes = 0;
  /// peak=: the whole step's peak allowed; -1 without peak=.
  int64_t stepPeakBound = -1;
  int64_t baselinePeak = 0;    ///< unoptimised, above weights and inputs (simulated)
  int64_t activationBytes = 0; ///< unoptimised, activations saved for backward (simulated)
  int64_t predictedPeak = 0, predictedActivations = 0;
  int64_t measuredBaselinePeak = -1, measuredPeak = -1;
  /// The measured peak above the inputs of each plan the measured loop ran, in order.
  std::vector<int64_t> measuredPlanPeaks;
  /// Measured live bytes above the inputs when backward starts (what forward left).
  int64_t measuredBaselineAtBackward = -1, measuredAtBackward = -1;
  double baselineStepSeconds = 0, predictedExtraSeconds = 0;
  double measuredBaselineSeconds = -1, measuredSeconds = -1;
  double solveSeconds = 0, gap = -1;
  double greedyExtraSeconds = -1; ///< milp: the greedy plan's predicted extra time
  /// recomputeLowerBound at the budget: no recomputation plan is faster.
  double lowerBoundSeconds = 0;
  unsigned nodesAdded = 0, planAttempts = 0;
  bool changed = false;
  /// unmet=closest applied a plan that does not meet the budget; why not.
  std::string budgetUnmet;
  std::vector<Activation> activations;
  /// monotone=true: the budget ladder the plan came from (the greedy planners').
  LadderReport ladder;
  /// offload-bandwidth=: bytes per second each way (0: no offload), the
  /// offloaded activations' bytes and the step's predicted wait for copies.
  double offloadBandwidth = 0;
  int64_t offloadedBytes = 0;
  double offloadStallSeconds = 0, offloadPlanSeconds = 0;
  /// Offloads planned but not used (recomputation alone was faster): why.
  std::string offloadRejected;
  /// Each recomputation in the rewritten graph: its results, and the values
  /// they make again (one per result; a node recomputed for another of its
  /// results names only that one).
  struct Recomputation {
    std::vector<std::string> outputs, of;
  };
  std::vector<Recomputation> recomputations;
};

/// The module (nn.Module path) a value was made in, "" if none is recorded.
std::string moduleOf(const Value *v);

/// Copies the plan's predictions (and measurements, when made) into `out`,
/// and lists every activation storage with what was decided for it.
void recordPlan(const RecomputeModel &model, const CheckpointPlan &plan,
                const std::optional<BenchmarkReport> &measured, CheckpointOutcome &out);

/// The recomputations in `graph` (nodes marked recompute_of), for the
/// outcome's `recomputations`.
std::vector<CheckpointOutcome::Recomputation> recomputationsIn(const Graph &graph);

/// checkpoint.json's text: what the run decided and measured.
std::string checkpointJsonText(const CheckpointOutcome &out);
/// Writes it into `dir`.
absl::Status writeCheckpointJson(llvm::StringRef dir, const CheckpointOutcome &out);

/// The pass's text report: the budget and planner, predictions against
/// measurements, offloads, the activations recomputed, what priced them.
void printCheckpointReport(llvm::raw_ostream &os, const CheckpointOutcome &out);

} // namespace graphopt
