//===- CheckpointReport.cpp - What checkpoint decided, measured and reports ===//
#include "checkpoint/CheckpointReport.h"

#include "graphopt/IR/Graph.h"
#include "graphopt/Support/Bytes.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/MapVector.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cmath>

namespace graphopt {

std::string moduleOf(const Value *v) {
  const Node *n = v->definingNode();
  return n ? stringAttr(*n, "module") : std::string();
}

/// Copies the plan's predictions (and measurements, when made) into `out`,
/// and lists every activation storage with what was decided for it.
void recordPlan(const RecomputeModel &model, const CheckpointPlan &plan,
                const std::optional<BenchmarkReport> &measured, CheckpointOutcome &out) {
  using Activation = CheckpointOutcome::Activation;
  out.predictedPeak = plan.predictedPeak;
  out.predictedActivations = plan.predictedActivations;
  out.predictedExtraSeconds = plan.predictedExtraSeconds;
  out.solveSeconds = plan.solveSeconds;
  out.gap = plan.gap;
  out.solverStatus = plan.solverStatus;
  out.greedyExtraSeconds = plan.greedyExtraSeconds;
  if (measured) {
    out.measuredBaselinePeak = measured->original.peakBytes;
    out.measuredPeak = measured->optimized.peakBytes;
    out.measuredBaselineAtBackward = measured->original.backwardStartBytes;
    out.measuredAtBackward = measured->optimized.backwardStartBytes;
    out.measuredBaselineSeconds = measured->original.median();
    out.measuredSeconds = measured->optimized.median();
  }
  std::vector<uint8_t> dropped(model.candidates().size(), 0);
  for (int32_t c : plan.dropped)
    dropped[c] = 1;
  for (size_t c = 0; c < model.candidates().size(); ++c) {
    const CheckpointCandidate &cand = model.candidates()[c];
    std::string why;
    if (dropped[c]) {
      auto it = plan.why.find(static_cast<int32_t>(c));
      why = it != plan.why.end() ? it->second
                                 : absl::StrCat("in the ", plan.planner, " plan");
    }
    out.activations.push_back({cand.storage->name().str(), moduleOf(cand.storage),
                               dropped[c] ? "recomputed" : "kept", std::move(why), cand.bytes,
                               cand.standaloneSeconds});
  }
  for (const Value *v : plan.held)
    out.activations.push_back({v->name().str(), moduleOf(v), "held",
                               "kept for recomputations to read; backward does not read it",
                               model.baseline().lookup(v)->bytes, 0});
  for (const auto &[v, why] : model.excluded())
    out.activations.push_back({v->name().str(), moduleOf(v), "never", why,
                               model.baseline().lookup(v)->bytes, 0});
  std::stable_sort(out.activations.begin(), out.activations.end(),
                   [](const Activation &a, const Activation &b) { return a.bytes > b.bytes; });
}

namespace {

/// checkpoint.json's "activations": every activation storage and what was decided for it.
llvm::json::Array activationsJson(const CheckpointOutcome &out) {
  llvm::json::Array acts;
  for (const CheckpointOutcome::Activation &a : out.activations)
    acts.push_back(llvm::json::Object{{"name", a.name},
                                      {"module", a.module},
                                      {"bytes", a.bytes},
                                      {"decision", a.decision},
                                      {"reason", a.reason},
                                      {"recompute_seconds", a.recomputeSeconds}});
  return acts;
}

/// checkpoint.json's "recomputed_nodes": each node recomputed, and how it was priced.
llvm::json::Array recomputedNodesJson(const CheckpointOutcome &out) {
  llvm::json::Array recomputedNodes;
  for (const CheckpointOutcome::RecomputedNode &n : out.recomputedNodes)
    recomputedNodes.push_back(llvm::json::Object{{"value", n.value},
                                                 {"op", n.op},
                                                 {"priced_by", n.pricedBy},
                                                 {"seconds", n.seconds}});
  return recomputedNodes;
}

/// checkpoint.json's "budget_ladder": its rungs (empty: monotone=false, or not the greedy).
llvm::json::Array ladderJson(const CheckpointOutcome &out) {
  llvm::json::Array ladder;
  for (const LadderReport::Rung &r : out.ladder.rungs)
    ladder.push_back(llvm::json::Object{{"budget", r.name},
                                        {"budget_bytes", r.budgetBytes},
                                        {"asked", r.asked},
                                        {"how", r.how},
                                        {"meets", r.meets},
                                        {"predicted_bounded_bytes", r.predictedBounded},
                                        {"predicted_peak_bytes", r.predictedPeak},
                                        {"predicted_extra_seconds", r.predictedExtraSeconds},
                                        {"plan_seconds", r.planSeconds}});
  return ladder;
}

} // namespace

/// Writes checkpoint.json (what the run decided and measured) into `dir`.
/// checkpoint.json's "recomputations": each clone's results and what they make again.
llvm::json::Array recomputationsJson(const CheckpointOutcome &out) {
  llvm::json::Array list;
  for (const CheckpointOutcome::Recomputation &r : out.recomputations) {
    llvm::json::Array outputs, of;
    for (const std::string &v : r.outputs)
      outputs.push_back(v);
    for (const std::string &v : r.of)
      of.push_back(v);
    list.push_back(llvm::json::Object{{"outputs", std::move(outputs)}, {"of", std::move(of)}});
  }
  return list;
}

std::vector<CheckpointOutcome::Recomputation> recomputationsIn(const Graph &graph) {
  llvm::StringMap<const Node *> producer;
  for (const Node &n : graph.nodes())
    for (const Value *v : n.outputs())
      producer[v->name()] = &n;
  std::vector<CheckpointOutcome::Recomputation> found;
  for (const Node &n : graph.nodes()) {
    const Constant *attr = n.attr(kRecomputeOfAttr);
    if (!attr || attr->kind() != ConstantKind::String || n.numOutputs() == 0)
      continue;
    CheckpointOutcome::Recomputation r;
    for (const Value *v : n.outputs())
      r.outputs.push_back(v->name().str());
    // A multi-result clone makes the original's results in order; one
    // recomputed for another reason names the value it was made for.
    const Node *original = producer.lookup(attr->asString());
    if (original && original->numOutputs() == n.numOutputs())
      for (const Value *v : original->outputs())
        r.of.push_back(v->name().str());
    else {
      r.of = {attr->asString()};
      r.outputs.resize(1);
    }
    found.push_back(std::move(r));
  }
  return found;
}

std::string checkpointJsonText(const CheckpointOutcome &out) {
  llvm::json::Array acts = activationsJson(out);
  llvm::json::Array recomputedNodes = recomputedNodesJson(out);
  llvm::json::Array ladder = ladderJson(out);
  auto orNull = [](double v) { return v < 0 ? llvm::json::Value(nullptr) : llvm::json::Value(v); };
  auto bytesOrNull = [](int64_t v) {
    return v < 0 ? llvm::json::Value(nullptr) : llvm::json::Value(v);
  };
  llvm::json::Object doc{
      {"format", "graph-opt-checkpoint/1"},
      {"graph", out.graph},
      {"budget", out.budgetText},
      {"budget_bytes", out.budgetBytes},
      {"peak_budget_bytes", out.peakCapBytes < 0 ? llvm::json::Value(nullptr)
                                                 : llvm::json::Value(out.peakCapBytes)},
      {"planner", out.planner},
      {"cost", out.costSource},
      {"recomputed_nodes", std::move(recomputedNodes)},
      {"solve_seconds", out.solveSeconds},
      {"gap", orNull(out.gap)},
      {"solver_status", out.solverStatus},
      {"greedy_predicted_extra_seconds", orNull(out.greedyExtraSeconds)},
      {"plan_attempts", static_cast<int64_t>(out.planAttempts)},
      {"measured_plan_peak_bytes", llvm::json::Array(out.measuredPlanPeaks)},
      {"budget_unmet", out.budgetUnmet.empty() ? llvm::json::Value(nullptr)
                                               : llvm::json::Value(out.budgetUnmet)},
      {"unoptimised_peak_bytes", out.baselinePeak},
      // The *_peak_bytes figures are above the inputs; these add up to the whole step's.
      {"input_bytes", out.inputBytes},
      {"step_peak_bound_bytes", bytesOrNull(out.stepPeakBound)},
      {"bounded", out.boundedName},
      {"unoptimised_saved_activation_bytes", out.activationBytes},
      {"predicted_saved_activation_bytes", out.predictedActivations},
      {"predicted_peak_bytes", out.predictedPeak},
      {"measured_unoptimised_peak_bytes", bytesOrNull(out.measuredBaselinePeak)},
      {"measured_peak_bytes", bytesOrNull(out.measuredPeak)},
      {"measured_unoptimised_backward_start_bytes", bytesOrNull(out.measuredBaselineAtBackward)},
      {"measured_backward_start_bytes", bytesOrNull(out.measuredAtBackward)},
      {"unoptimised_step_seconds", out.baselineStepSeconds},
      {"predicted_extra_seconds", out.predictedExtraSeconds},
      {"lower_bound_extra_seconds", std::isfinite(out.lowerBoundSeconds)
                                        ? llvm::json::Value(out.lowerBoundSeconds)
                                        : llvm::json::Value(nullptr)},
      {"measured_unoptimised_step_seconds", orNull(out.measuredBaselineSeconds)},
      {"measured_step_seconds", orNull(out.measuredSeconds)},
      {"nodes_added", static_cast<int64_t>(out.nodesAdded)},
      {"offload_bandwidth_bytes_per_second",
       out.offloadBandwidth > 0 ? llvm::json::Value(out.offloadBandwidth) : llvm::json::Value(nullptr)},
      {"offloaded_bytes", out.offloadedBytes},
      {"predicted_offload_wait_seconds", out.offloadStallSeconds},
      {"offload_rejected", out.offloadRejected.empty() ? llvm::json::Value(nullptr)
                                                       : llvm::json::Value(out.offloadRejected)},
      {"budget_ladder", std::move(ladder)},
      {"budget_ladder_from", out.ladder.from.empty() ? llvm::json::Value(nullptr)
                                                    : llvm::json::Value(out.ladder.from)},
      {"budget_ladder_peaks_monotone", out.ladder.peaksMonotone},
      {"budget_ladder_rungs_skipped", static_cast<int64_t>(out.ladder.rungsSkipped)},
      {"budget_ladder_rungs_peak_rose", static_cast<int64_t>(out.ladder.rungsPeakRose)},
      {"recomputations", recomputationsJson(out)},
      {"activations", std::move(acts)}};
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))).str() + "\n";
}

absl::Status writeCheckpointJson(llvm::StringRef dir, const CheckpointOutcome &out) {
  return writeReportFiles(dir, {{"checkpoint.json", checkpointJsonText(out)}});
}

namespace {

using Outcome = CheckpointOutcome;
using Activation = CheckpointOutcome::Activation;

double shareOf(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

/// The budget, the planner and how the plan was reached.
void printPlanning(llvm::raw_ostream &os, const Outcome &o) {
  os << "checkpoint @" << o.graph << ": " << o.budgetText << " = ";
  if (o.stepPeakBound >= 0 && o.peakCapBytes < 0) // peak= alone: stated with the inputs
    os << formatMiB(o.stepPeakBound) << " of the whole step's peak, ";
  os << formatMiB(o.budgetBytes) << " of " << o.boundedName;
  if (o.peakCapBytes >= 0)
    os << ", peak above weights and inputs at most " << formatMiB(o.peakCapBytes);
  os << "; planner " << o.planner
     << llvm::format(", planned in %.1f ms", o.solveSeconds * 1e3);
  if (o.gap >= 0)
    os << llvm::format(" (%s, gap %.2f%%)", o.solverStatus.c_str(), 100 * o.gap);
  else if (!o.solverStatus.empty())
    os << " (" << o.solverStatus << ")";
  os << "\n  cost model: " << o.costSource << "\n";
  if (!o.ladder.from.empty())
    os << "  budget ladder: the plan of the tighter " << o.ladder.from
       << ", no slower than this budget's own (monotone=false plans this budget alone)\n";
  if (!o.ladder.rungs.empty() && !o.ladder.peaksMonotone)
    os << "  budget ladder: " << o.ladder.rungsPeakRose
       << " rung(s) whose plan could not be held under the peak of the rung above; the peak "
          "rises there (checkpoint.json, budget_ladder)\n";
  if (!o.budgetUnmet.empty())
    os << "  budget not met (unmet=closest applied the closest plan): " << o.budgetUnmet << "\n";
}

/// Memory and time, unoptimised against predicted (and measured, where they were).
void printPredictions(llvm::raw_ostream &os, const Outcome &o) {
  os << "  activations saved for backward: unoptimised " << formatMiB(o.activationBytes)
     << ", predicted " << formatMiB(o.predictedActivations)
     << llvm::format(" (%.2fx)", shareOf(o.predictedActivations, o.activationBytes));
  if (o.measuredAtBackward >= 0)
    os << "; measured live at backward start " << formatMiB(o.measuredAtBackward) << " against "
       << formatMiB(o.measuredBaselineAtBackward)
       << llvm::format(" (%.2fx)", shareOf(o.measuredAtBackward, o.measuredBaselineAtBackward));
  os << "\n";
  os << "  peak above weights and inputs: unoptimised " << formatMiB(o.baselinePeak)
     << ", predicted " << formatMiB(o.predictedPeak)
     << llvm::format(" (%.2fx)", shareOf(o.predictedPeak, o.baselinePeak));
  if (o.measuredPeak >= 0)
    os << ", measured " << formatMiB(o.measuredPeak) << " against " << formatMiB(o.measuredBaselinePeak)
       << llvm::format(" unoptimised (%.2fx)", shareOf(o.measuredPeak, o.measuredBaselinePeak));
  os << "\n";
  if (o.stepPeakBound >= 0) { // peak=: the same, with the inputs, against the bound
    os << "  whole step's peak (inputs " << formatMiB(o.inputBytes) << " included): bound "
       << formatMiB(o.stepPeakBound) << ", unoptimised " << formatMiB(o.baselinePeak + o.inputBytes)
       << ", predicted " << formatMiB(o.predictedPeak + o.inputBytes);
    if (o.measuredPeak >= 0)
      os << ", measured " << formatMiB(o.measuredPeak + o.inputBytes) << " against "
         << formatMiB(o.measuredBaselinePeak + o.inputBytes) << " unoptimised: "
         << (o.measuredPeak + o.inputBytes <= o.stepPeakBound ? "within" : "OVER")
         << " the bound";
    os << "\n";
  }
  os << llvm::format("  extra step time: predicted %.2f ms (+%.1f%%)", o.predictedExtraSeconds * 1e3,
                     100 * shareOf(o.predictedExtraSeconds, o.baselineStepSeconds));
  if (o.greedyExtraSeconds >= 0) // the oracle against the default planner, same costs
    os << llvm::format(" (the greedy's plan: %.2f ms, +%.1f%%)", o.greedyExtraSeconds * 1e3,
                       100 * shareOf(o.greedyExtraSeconds, o.baselineStepSeconds));
  if (o.gap >= 0 || o.lowerBoundSeconds > 0) // what no plan within the budget can beat
    os << llvm::format("; no plan needs less than %.2f ms", o.lowerBoundSeconds * 1e3);
  if (o.measuredSeconds >= 0)
    os << llvm::format(", measured %.2f ms against %.2f ms (%.3fx)", o.measuredSeconds * 1e3,
                       o.measuredBaselineSeconds * 1e3, shareOf(o.measuredSeconds, o.measuredBaselineSeconds));
  os << "\n";
}

/// offload-bandwidth=: what was offloaded, or why offloads were not used.
void printOffloads(llvm::raw_ostream &os, const Outcome &o) {
  if (o.offloadBandwidth <= 0)
    return;
  unsigned n = 0;
  for (const Activation &a : o.activations)
    n += a.decision == "offloaded";
  os << llvm::format("  offload at %.1f GB/s each way: ", o.offloadBandwidth / 1e9) << n
     << " activations (" << formatMiB(o.offloadedBytes) << ") to host memory and back"
     << llvm::format(", the step predicted to wait %.2f ms for copies", o.offloadStallSeconds * 1e3)
     << "; predicted, not measured: an offload plan runs on CUDA only\n";
  if (!o.offloadRejected.empty())
    os << "  offload: " << o.offloadRejected << "\n";
}

/// The activations by decision, and the first 20 recomputed or offloaded.
void printActivations(llvm::raw_ostream &os, const Outcome &o) {
  unsigned recomputed = 0, never = 0, held = 0;
  int64_t recomputedBytes = 0;
  for (const Activation &a : o.activations) {
    recomputed += a.decision == "recomputed";
    never += a.decision == "never";
    held += a.decision == "held";
    if (a.decision == "recomputed")
      recomputedBytes += a.bytes;
  }
  os << "  activations: " << o.activations.size() << ", recomputed " << recomputed << " ("
     << formatMiB(recomputedBytes) << "), never recomputable " << never;
  if (held)
    os << ", held for recomputation (backward does not read them) " << held;
  os << "; nodes added " << o.nodesAdded << "\n";
  const bool offloaded = o.offloadedBytes > 0;
  if (!recomputed && !offloaded) {
    os << "  the unoptimised step is already within " << o.budgetText
       << ": nothing to recompute\n";
    return;
  }
  os << "  " << llvm::left_justify("recomputed", 32) << " " << llvm::left_justify("module", 32)
     << " " << llvm::right_justify("bytes", 12) << " " << llvm::right_justify("recompute", 12)
     << "  why\n";
  unsigned shown = 0;
  const unsigned listed = recomputed + (offloaded ? static_cast<unsigned>(llvm::count_if(
                                                       o.activations, [](const Activation &a) {
                                                         return a.decision == "offloaded";
                                                       }))
                                                 : 0);
  for (const Activation &a : o.activations) {
    if (a.decision != "recomputed" && a.decision != "offloaded")
      continue;
    if (++shown > 20) {
      os << "  ... and " << listed - 20 << " more (checkpoint.json with --report-dir)\n";
      break;
    }
    os << llvm::format("  %-32s %-32s %12s %9.3f ms  %s\n", ("%" + a.name).c_str(),
                       a.module.empty() ? "-" : a.module.c_str(), formatBytes(a.bytes).c_str(),
                       a.recomputeSeconds * 1e3, a.reason.c_str());
  }
}

/// What priced the recomputed nodes, by cost model (the last line of the report:
/// checkpoint.json's recomputed_nodes has them one by one).
void printPricing(llvm::raw_ostream &os, const Outcome &o) {
  if (o.recomputedNodes.empty())
    return;
  llvm::MapVector<llvm::StringRef, std::pair<size_t, double>> bySource;
  for (const CheckpointOutcome::RecomputedNode &n : o.recomputedNodes) {
    auto &[count, seconds] = bySource[n.pricedBy];
    ++count;
    seconds += n.seconds;
  }
  std::vector<std::string> parts;
  for (const auto &[source, tally] : bySource)
    parts.push_back(
        llvm::formatv("{0} x{1} ({2:F2} ms)", source, tally.first, tally.second * 1e3));
  os << "  recomputed nodes priced by: " << absl::StrJoin(parts, ", ") << "\n";
}

} // namespace

void printCheckpointReport(llvm::raw_ostream &os, const CheckpointOutcome &o) {
  printPlanning(os, o);
  printPredictions(os, o);
  printOffloads(os, o);
  printActivations(os, o);
  printPricing(os, o);
}

} // namespace graphopt
