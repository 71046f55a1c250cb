//===- CheckpointPass.cpp - Fit a training step into a memory budget ------===//
#include "CheckpointPass.h"

#include "checkpoint/BudgetLadder.h"
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/FlopCost.h"
#include "checkpoint/InductorCost.h"
#include "checkpoint/OffloadPlanner.h"

#include "graphopt/Analysis/Attribution.h"
#include "graphopt/Analysis/MeasuredScratch.h"
#include "graphopt/Analysis/Profile.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/Benchmark.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Support/Bytes.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/MapVector.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <chrono>

namespace graphopt {

namespace {

/// How many times a plan is tightened after a measured peak over the budget.
constexpr unsigned kMaxPlanAttempts = 3;

std::string moduleOf(const Value *v) {
  const Node *n = v->definingNode();
  return n ? stringAttr(*n, "module") : std::string();
}

/// The planners' simulation of a plan (`fast`, made without rewriting a
/// graph) against the liveness of the graph it rewrote (`rewritten`): an
/// internal error where they differ.
absl::Status checkSimulation(const absl::StatusOr<Simulation> &fast,
                             const absl::StatusOr<Simulation> &rewritten) {
  if (!fast.ok() || !rewritten.ok())
    return !rewritten.ok() ? rewritten.status() : fast.status();
  if (fast->peakAboveInputs != rewritten->peakAboveInputs || fast->bounded != rewritten->bounded ||
      fast->savedActivations != rewritten->savedActivations)
    return absl::InternalError(absl::StrCat(
        "checkpoint: the plan's simulation (peak ", fast->peakAboveInputs, ", saved ",
        fast->savedActivations, " bytes) differs from the liveness of the graph it rewrites to "
        "(peak ", rewritten->peakAboveInputs, ", saved ", rewritten->savedActivations,
        " bytes): a bug in RecomputeSimulation.cpp, to report with this graph"));
  return absl::OkStatus();
}

/// Runs the graph and its rewrite alternately (the benchmark harness's
/// measurement) for their peaks above the inputs, backward-start bytes and step times.
absl::StatusOr<BenchmarkReport> measurePlan(const Graph &graph, const RecomputeModel &model,
                                     const CheckpointPlan &plan, AnalysisManager &analyses) {
  auto setup = analyses.setupToRun(graph, "checkpoint{measure=true}");
  if (!setup.ok())
    return setup.status();
  ValueMap<Value *> map;
  std::unique_ptr<Graph> rewritten = graph.clone(&map);
  if (auto added = model.apply(plan.recompute, *rewritten, &map); !added.ok())
    return added.status();
  auto rewrittenInputs = setup->context->inputsFor(*rewritten);
  if (!rewrittenInputs.ok())
    return rewrittenInputs.status();
  BenchmarkOptions options;
  options.warmup = 1;
  options.runs = 3;
  options.execution.device = setup->context->device;
  options.execution.seed = setup->context->seed;
  return benchmarkRewrite(graph, *rewritten, *setup->context->weights, setup->inputs,
                          *rewrittenInputs, options);
}

/// Copies the plan's predictions (and measurements, when made) into `out`,
/// and lists every activation storage with what was decided for it.
void recordPlan(const RecomputeModel &model, const CheckpointPlan &plan,
                const std::optional<BenchmarkReport> &measured, CheckpointPass::Outcome &out) {
  using Activation = CheckpointPass::Activation;
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

/// Writes checkpoint.json (what the run decided and measured) into `dir`.
absl::Status writeCheckpointJson(llvm::StringRef dir, const CheckpointPass::Outcome &out) {
  llvm::json::Array acts;
  for (const CheckpointPass::Activation &a : out.activations)
    acts.push_back(llvm::json::Object{{"name", a.name},
                                      {"module", a.module},
                                      {"bytes", a.bytes},
                                      {"decision", a.decision},
                                      {"reason", a.reason},
                                      {"recompute_seconds", a.recomputeSeconds}});
  llvm::json::Array recomputedNodes;
  for (const CheckpointPass::RecomputedNode &n : out.recomputedNodes)
    recomputedNodes.push_back(llvm::json::Object{{"value", n.value},
                                                 {"op", n.op},
                                                 {"priced_by", n.pricedBy},
                                                 {"seconds", n.seconds}});
  llvm::json::Array ladder; // empty: monotone=false, or not the greedy
  for (const CheckpointPass::Outcome::Rung &r : out.ladder)
    ladder.push_back(llvm::json::Object{{"budget", r.name},
                                        {"budget_bytes", r.budgetBytes},
                                        {"asked", r.asked},
                                        {"how", r.how},
                                        {"meets", r.meets},
                                        {"predicted_bounded_bytes", r.predictedBounded},
                                        {"predicted_peak_bytes", r.predictedPeak},
                                        {"predicted_extra_seconds", r.predictedExtraSeconds},
                                        {"plan_seconds", r.planSeconds}});
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
      {"budget_ladder_from", out.ladderFrom.empty() ? llvm::json::Value(nullptr)
                                                    : llvm::json::Value(out.ladderFrom)},
      {"budget_ladder_peaks_monotone", out.ladderPeaksMonotone},
      {"budget_ladder_rungs_skipped", static_cast<int64_t>(out.ladderRungsSkipped)},
      {"budget_ladder_rungs_peak_rose", static_cast<int64_t>(out.ladderRungsPeakRose)},
      {"activations", std::move(acts)}};
  std::string text = llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))).str() + "\n";
  return writeReportFiles(dir, {{"checkpoint.json", text}});
}

} // namespace

absl::Status CheckpointPass::validateOptions() {
  if (budget_.get() && peak_.get())
    return absl::InvalidArgumentError(
        "give peak= (the whole step's peak) or budget= (the peak above weights and inputs), not "
        "both: they bound the same peak");
  const bool peakBound = budget_.get() || peak_.get();
  if (!peakBound && !activations_.get())
    return absl::InvalidArgumentError(
        "give peak= (the whole step's peak: bytes, e.g. peak=6GiB, or a share of it, e.g. "
        "peak=80%), budget= (bytes or a share of the peak above weights and inputs, e.g. "
        "budget=60%), activations= (bytes or a share of the activation memory, e.g. "
        "activations=50%), or activations= with one of the others");
  if (peakBound && activations_.get() && planner_.get() == Planner::Milp)
    return absl::InvalidArgumentError(absl::StrCat(
        "planner=milp plans for one bound: give ", peak_.get() ? "peak=" : "budget=",
        " or activations=, not both"));
  if (planner_.get() == Planner::Torch &&
      (peakBound || !activations_.get() || !activations_.get()->isPercent() ||
       activations_.get()->percentValue() > 100))
    return absl::InvalidArgumentError(
        "planner=torch runs torch.compile's partitioner, whose one bound is its "
        "activation_memory_budget: give activations= as a share up to 100% (activations=30%), "
        "without budget= or peak=");
  if (!db_.get().empty() && cost_.get() != Cost::Db && cost_.get() != Cost::Inductor)
    return absl::InvalidArgumentError(
        "db= names the cost database of cost=db or cost=inductor; give one of them too");
  if (timeLimit_.get() <= 0)
    return absl::InvalidArgumentError("time-limit must be positive seconds");
  if (!(gap_.get() >= 0 && gap_.get() < 1))
    return absl::InvalidArgumentError(
        "gap is a share of the optimum from 0 (prove the optimum) to below 1 (gap=0.01: 1%)");
  if (offloadBandwidth_.get() && planner_.get() != Planner::Greedy)
    return absl::InvalidArgumentError(
        "offload-bandwidth= goes with the greedy planner (the default), not planner=structured, "
        "milp or torch");
  return absl::OkStatus();
}

struct CheckpointPass::NodeCosts {
  std::vector<double> seconds;
  std::vector<int64_t> scratch;
  /// Per rank, what priced the node (a static string).
  std::vector<llvm::StringRef> pricedBy;
};

struct CheckpointPass::Planned {
  CheckpointPlan plan;
  std::optional<BenchmarkReport> measured;
};

std::string CheckpointPass::databasePath() const {
  std::string path = db_.get();
  if (path.empty() && cost_.get() == Cost::Db)
    if (const char *env = std::getenv("GRAPHOPT_COSTDB"))
      path = env;
  return path;
}

absl::StatusOr<std::vector<double>>
CheckpointPass::databaseNodeSeconds(const Graph &graph, Outcome &out,
                                    std::vector<std::optional<double>> *predicted) const {
  std::string path = databasePath();
  if (path.empty())
    return absl::InvalidArgumentError(
        "cost=db needs the database: db=FILE or $GRAPHOPT_COSTDB (graph-opt-costdb measure makes "
        "one)");
  // The device graph-opt runs on by default; nothing runs here, so the model
  // may be too large for this machine.
  auto model = loadCostModel(path, defaultDevice(), {});
  if (!model.ok())
    return model.status();
  StepAttribution attributed = attributeStep(graph, *model, nullptr);
  std::vector<double> seconds;
  llvm::MapVector<llvm::StringRef, size_t> missing;
  for (const NodeAttribution &n : attributed.nodes) {
    if (predicted)
      predicted->push_back(n.how != CostModel::How::Missing
                               ? std::optional<double>(n.predictedSeconds)
                               : std::nullopt);
    if (n.how != CostModel::How::Missing) {
      seconds.push_back(n.predictedSeconds);
      continue;
    }
    // Not in the database: the FLOP model, said so in the report.
    seconds.push_back(estimateFlops(*n.node) / kNominalFlopsPerSecond);
    ++missing[n.op];
  }
  out.costSource = absl::StrCat("db: ", path, " (", attributed.machine, "): ", attributed.predictedNodes,
                                " nodes predicted, ", attributed.exactNodes, " measured exactly");
  if (!missing.empty()) {
    std::vector<std::string> ops;
    for (auto &[op, count] : missing)
      ops.push_back(absl::StrCat(op.str(), " x", count));
    absl::StrAppend(&out.costSource, "; from the FLOP model (not in the database): ",
                    absl::StrJoin(ops, ", "));
  }
  return seconds;
}

absl::StatusOr<CheckpointPass::NodeCosts>
CheckpointPass::nodeCosts(const Graph &graph, AnalysisManager &analyses, Outcome &out) const {
  NodeCosts costs;
  if (cost_.get() == Cost::Profile) {
    auto profile = analyses.getResult<ProfileAnalysis>(graph);
    if (!profile.ok())
      return absl::Status(profile.status().code(),
                          absl::StrCat(profile.status().message(),
                                       " (checkpoint{cost=flops} plans without running the graph)"));
    for (const NodeStats &s : (*profile)->nodes) {
      costs.seconds.push_back(s.seconds);
      costs.scratch.push_back(s.scratchBytes);
    }
    out.costSource = absl::StrCat("profile: median of ", (*profile)->measuredRuns, " runs on ",
                                  (*profile)->device);
    out.baselineStepSeconds = (*profile)->stepSeconds;
    costs.pricedBy.assign(costs.seconds.size(), "profile");
  } else if (cost_.get() == Cost::Db) {
    std::vector<std::optional<double>> fromDb;
    auto predicted = databaseNodeSeconds(graph, out, &fromDb);
    if (!predicted.ok())
      return predicted.status();
    costs.seconds = std::move(*predicted);
    for (const std::optional<double> &s : fromDb)
      costs.pricedBy.push_back(s ? "db" : "flops (not in the db)");
  } else if (cost_.get() == Cost::Inductor) {
    std::vector<std::optional<double>> fromDb;
    std::string dbSource;
    if (!databasePath().empty()) {
      auto predicted = databaseNodeSeconds(graph, out, &fromDb);
      if (!predicted.ok())
        return predicted.status();
      dbSource = std::move(out.costSource);
    }
    const MachineRates &rates = measuredCpuRates();
    InductorPrices prices = inductorNodeSeconds(graph, rates, fromDb.empty() ? nullptr : &fromDb);
    costs.seconds = std::move(prices.seconds);
    for (PriceSource source : prices.sources)
      costs.pricedBy.push_back(priceSourceName(source));
    out.costSource = absl::StrFormat(
        "inductor: fusing operators by the bytes they read at %.1f GB/s, matrix products, "
        "convolutions and attention by %sa roofline at %.1f GFLOP/s (rates measured on this "
        "machine's CPU)",
        rates.bytesPerSecond / 1e9, dbSource.empty() ? "" : "the database where it has them, else ",
        rates.flopsPerSecond / 1e9);
    if (!dbSource.empty())
      absl::StrAppend(&out.costSource, "; ", dbSource);
  } else {
    costs.seconds = estimatedNodeSeconds(graph);
    out.costSource = "flops: estimated at a nominal 100 GFLOP/s";
    costs.pricedBy.assign(costs.seconds.size(), "flops");
  }
  if (cost_.get() != Cost::Profile)
    for (double s : costs.seconds)
      out.baselineStepSeconds += s;
  // Scratch bytes are what a run allocates, not a timing: measured, they are
  // the same in every run, so plans on FLOP costs stay reproducible.
  if (scratch_.get() == Scratch::None) {
    costs.scratch.clear();
  } else if (scratch_.get() == Scratch::Measured && cost_.get() != Cost::Profile) {
    auto scratch = analyses.getResult<MeasuredScratchAnalysis>(graph);
    if (!scratch.ok())
      return scratch.status();
    costs.scratch = (*scratch)->bytes;
    absl::StrAppend(&out.costSource, "; scratch measured on ", (*scratch)->device);
  }
  return costs;
}

std::string CheckpointPass::peakOptionText() const {
  if (peak_.get())
    return absl::StrCat("peak=", peak_.get()->str());
  if (budget_.get())
    return absl::StrCat("budget=", budget_.get()->str());
  return "";
}

int64_t CheckpointPass::asStated(const Outcome &out, int64_t aboveInputs) const {
  return peak_.get() ? aboveInputs + out.inputBytes : aboveInputs;
}

int64_t CheckpointPass::resolveBudgets(const RecomputeModel &model, Outcome &out) {
  const LivenessResult &base = model.baseline();
  out.baselinePeak = base.peakBytes - base.inputBytes;
  out.inputBytes = base.inputBytes;
  for (const auto &kinds : liveBytesByKind(base))
    out.activationBytes = std::max(out.activationBytes, kinds[static_cast<int>(MemoryKind::Act)]);
  // What budget= or peak= allows the peak above the inputs (-1: neither);
  // the bound itself, or with activations= a cap beside it. peak= states the
  // whole step's peak: what the inputs hold throughout is taken off (below
  // them nothing is reachable: 0 above them, refused as unmet with the least
  // peak the planner reaches).
  int64_t peakBudget = -1;
  if (budget_.get())
    peakBudget = budget_.get()->resolve(out.baselinePeak);
  if (peak_.get()) {
    out.stepPeakBound = peak_.get()->resolve(base.peakBytes);
    peakBudget = std::max<int64_t>(0, out.stepPeakBound - base.inputBytes);
  }
  if (model.boundedMemory() == BoundedMemory::PeakAboveInputs) {
    out.budgetBytes = peakBudget;
    out.budgetText = peakOptionText();
    out.boundedName = "peak above weights and inputs";
  } else {
    out.budgetBytes = activations_.get()->resolve(out.activationBytes);
    out.budgetText = absl::StrCat("activations=", activations_.get()->str());
    out.boundedName = "activations saved for backward";
    out.peakCapBytes = peakBudget;
  }
  out.planner = planner_.get() == Planner::Greedy       ? "greedy"
                : planner_.get() == Planner::Structured ? "structured"
                : planner_.get() == Planner::Milp       ? "milp"
                                                        : "torch";
  setStatistic("budget bytes", out.budgetBytes);
  if (out.stepPeakBound >= 0)
    setStatistic("step peak bound bytes", out.stepPeakBound);
  setStatistic("unoptimised peak bytes", out.baselinePeak);
  return peakBudget;
}

absl::StatusOr<CheckpointPlan> CheckpointPass::planGreedyMonotone(const RecomputeModel &model,
                                                                 int64_t target, int64_t peakCap,
                                                                 Outcome &out) const {
  out.ladder.clear();
  out.ladderFrom.clear();
  const GreedyStarts starts =
      planner_.get() == Planner::Structured ? GreedyStarts::Structured : GreedyStarts::All;
  if (!monotone_.get())
    return planGreedy(model, target, peakCap, starts);
  // The rungs are shares of the same whole the option resolves against.
  const bool activations = model.boundedMemory() == BoundedMemory::SavedActivations;
  auto made = planMonotone(
      model, target, peakCap,
      standardRungs(activations ? out.activationBytes : out.baselinePeak,
                    activations ? "activations" : "budget"),
      starts);
  if (!made.ok())
    return made.status();
  for (const LadderStep &s : made->ladder)
    out.ladder.push_back({s.rung.name, howText(s.how), s.rung.target, s.plan.predictedBounded,
                          s.plan.predictedPeak, s.plan.predictedExtraSeconds,
                          s.how == LadderStep::How::LooserRungsPlan ? 0 : s.plan.solveSeconds,
                          s.plan.meetsBudget, s.asked});
  out.ladderFrom = made->from;
  out.ladderPeaksMonotone = made->peaksMonotone;
  out.ladderRungsSkipped = made->rungsSkipped;
  out.ladderRungsPeakRose = made->rungsPeakRose;
  return std::move(made->plan);
}

absl::StatusOr<CheckpointPlan> CheckpointPass::planMilpFromDefault(const RecomputeModel &model,
                                                                  int64_t target, int64_t peakCap,
                                                                  Outcome &out) const {
  // The default planner's plan (the budget ladder's, when monotone) is the
  // MILP planner's first source; its ladder is not this plan's to report.
  auto begin = std::chrono::steady_clock::now();
  Outcome ladderOnly = out;
  auto greedy = planGreedyMonotone(model, target, peakCap, ladderOnly);
  if (!greedy.ok())
    return greedy.status();
  auto plan = planMilp(model, target, MilpOptions{timeLimit_.get(), gap_.get()}, std::move(*greedy));
  if (plan.ok()) // the greedy's time too
    plan->solveSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return plan;
}

absl::Status CheckpointPass::plannerUnmet(const RecomputeModel &model,
                                         const CheckpointPlan &plan, int64_t target,
                                         unsigned attempt, const Outcome &out) const {
  if (plan.meetsBudget)
    return absl::OkStatus();
  const std::string tightened =
      attempt > 1
          ? absl::StrCat(" once tightened for the measured peak, ", attempt - 1, " time(s)")
          : "";
  if (plan.predictedBounded <= target) { // the budget met, the peak cap not
    const std::string peakCapText = absl::StrCat(
        peakOptionText(), " (", formatBytes(asStated(out, out.peakCapBytes)),
        peak_.get() ? " of the whole step's peak)" : " of peak above weights and inputs)");
    return absl::OutOfRangeError(absl::StrCat(
        out.budgetText, " and ", peakCapText, " cannot both be met: the least peak the ",
        out.planner, " planner reaches within ", out.budgetText, " is ",
        formatBytes(asStated(out, plan.predictedPeak)), " (", asStated(out, plan.predictedPeak),
        " bytes", peak_.get() ? ", the whole step's" : "", ")", tightened));
  }
  // The bounded memory as the option states it (peak=: the whole step's).
  const bool statedWhole = peak_.get() && model.boundedMemory() == BoundedMemory::PeakAboveInputs;
  auto bounded = [&](int64_t b) { return statedWhole ? asStated(out, b) : b; };
  return absl::OutOfRangeError(absl::StrCat(
      out.budgetText, " (", formatBytes(statedWhole ? out.stepPeakBound : out.budgetBytes), " of ",
      statedWhole ? "the whole step's peak" : out.boundedName.c_str(), "; ",
      formatBytes(bounded(model.boundedPeak())), " unoptimised) cannot be met: the least the ",
      out.planner, " planner reaches is ", formatBytes(bounded(plan.predictedBounded)), " (",
      bounded(plan.predictedBounded), " bytes)", tightened));
}

absl::StatusOr<CheckpointPass::Planned>
CheckpointPass::planWithinBudget(const Graph &graph, const RecomputeModel &model,
                                 AnalysisManager &analyses, int64_t peakBudget,
                                 Outcome &out) const {
  // The measured check applies to a peak budget: a run measures its peak, not
  // which bytes are activations.
  // An offload plan runs on CUDA only (GraphoptOps.h): it is not measured.
  bool measuring = measure_.get() && cost_.get() == Cost::Profile && out.offloadedBytes == 0;
  bool tighten = measuring && peakBudget >= 0;
  int64_t target = out.budgetBytes;
  int64_t peakCap = out.peakCapBytes < 0 ? kNoPeakCap : out.peakCapBytes;
  Planned planned;
  CheckpointPlan &plan = planned.plan;
  // unmet=closest: the measured plan with the least measured peak, and the outcome
  // as it stood when that plan was made (its ladder, its budgets): where no plan
  // measures within the budget, it is the closest, whichever attempt made it.
  std::optional<std::pair<Planned, Outcome>> closest;
  std::vector<int64_t> measuredPeaks;
  auto measure = [&]() -> absl::Status {
    auto m = measurePlan(graph, model, plan, analyses);
    if (!m.ok())
      return m.status();
    planned.measured = *m;
    measuredPeaks.push_back(m->optimized.peakBytes);
    if (!closest || m->optimized.peakBytes < closest->first.measured->optimized.peakBytes)
      closest.emplace(planned, out);
    return absl::OkStatus();
  };
  // The closest measured plan applied, with what it missed by (unmet=closest).
  auto applyClosest = [&](unsigned attempts, absl::string_view why) {
    const int64_t peak = closest->first.measured->optimized.peakBytes;
    out = std::move(closest->second);
    out.planAttempts = attempts;
    out.measuredPlanPeaks = measuredPeaks;
    out.budgetUnmet = absl::StrCat(
        why, "; the closest of the ", attempts, " plans as measured is applied: it peaks at ",
        formatBytes(asStated(out, peak)), " against ", formatBytes(asStated(out, peakBudget)));
    return std::move(closest->first);
  };
  for (unsigned attempt = 1;; ++attempt) {
    out.planAttempts = attempt;
    auto made = planner_.get() == Planner::Greedy || planner_.get() == Planner::Structured
                    ? planGreedyMonotone(model, target, peakCap, out)
                : planner_.get() == Planner::Milp
                    ? planMilpFromDefault(model, target, peakCap, out)
                    : planTorch(model, activations_.get()->percentValue() / 100, target, peakCap);
    if (!made.ok())
      return made.status();
    plan = std::move(*made);
    planned.measured.reset(); // this plan's measurement, if it gets one
    absl::Status unmet = plannerUnmet(model, plan, target, attempt, out);
    if (!unmet.ok()) {
      // unmet=closest: the plan the planner reached, said to fall short.
      if (unmet_.get() == Unmet::Error)
        return unmet;
      if (closest) {
        // Tightened past what the planner reaches: this plan is measured too, and
        // of the plans measured the least peak is applied (not this one unmeasured,
        // nor this one beside an earlier plan's measurement).
        if (measuring && !plan.dropped.empty())
          if (absl::Status s = measure(); !s.ok())
            return s;
        return applyClosest(attempt, unmet.message());
      }
      out.budgetUnmet = std::string(unmet.message());
      break;
    }
    if (!measuring || plan.dropped.empty())
      break;
    if (absl::Status s = measure(); !s.ok())
      return s;
    if (!tighten || planned.measured->optimized.peakBytes <= peakBudget)
      break;
    if (attempt == kMaxPlanAttempts) {
      std::string refused = absl::StrCat(
          peakOptionText(), " (", formatBytes(asStated(out, peakBudget)),
          ") cannot be met as measured: the rewritten step still peaks at ",
          formatBytes(asStated(out, planned.measured->optimized.peakBytes)), " after ", attempt,
          " plans, each tightened by the last one's excess over the simulation");
      if (unmet_.get() == Unmet::Error)
        return absl::OutOfRangeError(refused);
      return applyClosest(attempt, refused);
    }
    // Plan for the excess the simulation misses.
    int64_t excess = planned.measured->optimized.peakBytes - peakBudget;
    if (model.boundedMemory() == BoundedMemory::PeakAboveInputs)
      target -= excess;
    else
      peakCap -= excess;
  }
  out.measuredPlanPeaks = std::move(measuredPeaks);
  return planned;
}

struct CheckpointPass::Offloaded {
  std::optional<RecomputeModel> model; ///< of the graph with the offloads (none: no offload)
  std::vector<AppliedOffload> applied;
  std::vector<Activation> rows; ///< the report's, one per offloaded activation
};

absl::StatusOr<CheckpointPass::Offloaded>
CheckpointPass::planAndApplyOffloads(Graph &graph, const RecomputeModel &original,
                                     const NodeCosts &costs, BoundedMemory bounded,
                                     Outcome &out) const {
  Offloaded done;
  if (!offloadBandwidth_.get())
    return done;
  out.offloadBandwidth = offloadBandwidth_.get()->bytesPerSecond;
  auto begin = std::chrono::steady_clock::now();
  OffloadPlan plan = planOffloads(original, out.budgetBytes, out.offloadBandwidth);
  out.offloadPlanSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (plan.offloads.empty())
    return done;
  for (const Offload &o : plan.offloads) {
    const CheckpointCandidate &c = original.candidates()[o.candidate];
    done.rows.push_back(
        {c.storage->name().str(), moduleOf(c.storage), "offloaded",
         llvm::formatv("offloaded: to host after its last forward use, back before its first backward "
                       "use: {0:F3} ms each way, {1}",
                       o.transfer.seconds * 1e3,
                       o.stallSeconds > 0
                           ? llvm::formatv("the step waits {0:F3} ms for it", o.stallSeconds * 1e3)
                                 .str()
                           : std::string("hidden behind compute"))
             .str(),
         c.bytes, 2 * o.transfer.seconds});
  }
  out.offloadedBytes = plan.offloadedBytes;
  out.offloadStallSeconds = plan.stallSeconds;
  // Node costs on the graph with the offloads: the copies take no compute
  // time (their waits are the stall), and a buffer being copied out is held
  // as the scratch of the nodes that run meanwhile.
  auto applied = applyOffloads(original, plan, graph);
  if (!applied.ok())
    return applied.status();
  done.applied = std::move(*applied);
  std::vector<double> seconds;
  std::vector<int64_t> scratch;
  for (const Node &n : graph.nodes()) {
    const int64_t r = original.baseline().rank.lookup(&n); // -1: a node just inserted
    seconds.push_back(r < 0 ? 0.0 : costs.seconds[r]);
    scratch.push_back(r < 0 ? 0
                            : (costs.scratch.empty() ? 0 : costs.scratch[r]) +
                                  plan.inFlightBytes[r]);
  }
  auto built = RecomputeModel::build(graph, std::move(seconds), std::move(scratch), bounded);
  if (!built.ok()) {
    if (absl::Status undone = removeOffloads(done.applied, graph); !undone.ok())
      return undone;
    return built.status();
  }
  done.model = std::move(*built);
  return done;
}

absl::StatusOr<double> CheckpointPass::preferOffloadsIfFaster(
    Graph &graph, AnalysisManager &analyses, const RecomputeModel &built, const NodeCosts &costs,
    BoundedMemory bounded, int64_t peakBudget, absl::StatusOr<Planned> &planned,
    Offloaded &offloaded, Outcome &out) const {
  double alsoPlanned = 0; // the seconds of the plan not taken
  Outcome withOffloads = out;
  auto made = planAndApplyOffloads(graph, built, costs, bounded, withOffloads);
  if (!made.ok())
    return made.status();
  out.offloadBandwidth = withOffloads.offloadBandwidth;
  out.offloadPlanSeconds = withOffloads.offloadPlanSeconds;
  if (!made->model)
    return alsoPlanned;
  auto both = planWithinBudget(graph, *made->model, analyses, peakBudget, withOffloads);
  const bool better =
      both.ok() && both->plan.meetsBudget &&
      (!planned.ok() || !planned->plan.meetsBudget ||
       both->plan.predictedExtraSeconds + withOffloads.offloadStallSeconds <
           planned->plan.predictedExtraSeconds);
  // Both plans' time is planning time.
  alsoPlanned = better ? (planned.ok() ? planned->plan.solveSeconds : 0)
                       : (both.ok() ? both->plan.solveSeconds : 0);
  if (better) {
    out = std::move(withOffloads);
    planned = std::move(both);
    offloaded = std::move(*made);
    return alsoPlanned;
  }
  if (absl::Status undone = removeOffloads(made->applied, graph); !undone.ok())
    return undone;
  out.offloadRejected = absl::StrCat(
      made->rows.size(), " offloads tried, not used: ",
      both.ok() && both->plan.meetsBudget
          ? llvm::formatv("with them, {0:F2} ms predicted against {1:F2} ms by "
                          "recomputation alone",
                          (both->plan.predictedExtraSeconds +
                           withOffloads.offloadStallSeconds) * 1e3,
                          planned->plan.predictedExtraSeconds * 1e3)
                .str()
          : std::string("with them, the budget was not met"));
  return alsoPlanned;
}

absl::StatusOr<bool> CheckpointPass::transform(Graph &graph, AnalysisManager &analyses) {
  Outcome out;
  out.graph = graph.name().str();
  // The cost model: measured node times and scratch, or a static estimate.
  auto costs = nodeCosts(graph, analyses, out);
  if (!costs.ok())
    return costs.status();
  // budget= (peak=) bounds the peak above the inputs (with them); activations=
  // the saved activations. Both given: the saved activations are bounded, and
  // the peak capped.
  BoundedMemory bounded =
      activations_.get() ? BoundedMemory::SavedActivations : BoundedMemory::PeakAboveInputs;
  auto built = RecomputeModel::build(graph, costs->seconds, costs->scratch, bounded);
  if (!built.ok())
    return built.status();
  const int64_t peakBudget = resolveBudgets(*built, out);

  // Plan; with measurement, check the measured peak and tighten while it is over.
  auto planned = planWithinBudget(graph, *built, analyses, peakBudget, out);
  // offload-bandwidth=: offloads first, then recomputation for the rest, on
  // the graph with the offloads in it; kept only where that is predicted
  // faster than recomputation alone (recomputing around offloaded values can
  // cost more than the copies save).
  Offloaded offloaded;
  double alsoPlanned = 0; // the seconds of the plan not taken
  if (offloadBandwidth_.get()) {
    auto also = preferOffloadsIfFaster(graph, analyses, *built, *costs, bounded, peakBudget,
                                       planned, offloaded, out);
    if (!also.ok())
      return also.status();
    alsoPlanned = *also;
  }
  const RecomputeModel *model = offloaded.model ? &*offloaded.model : &*built;
  if (!planned.ok())
    return planned.status();
  const CheckpointPlan &plan = planned->plan;
  recordPlan(*model, plan, planned->measured, out);
  for (const RecomputeSet::Clone &clone : plan.recompute.clones) {
    const int64_t r = built->baseline().rank.lookup(clone.original);
    out.recomputedNodes.push_back(
        {clone.original->numOutputs() ? clone.original->output(0)->name().str() : "",
         clone.original->opName(), r < 0 ? "" : costs->pricedBy[r].str(),
         r < 0 ? 0.0 : costs->seconds[r]});
  }
  // What no recomputation plan can beat (offloads can): the gap is measured.
  out.lowerBoundSeconds =
      std::max(recomputeLowerBound(*built, out.budgetBytes), plan.lowerBoundSeconds);
  out.predictedExtraSeconds += out.offloadStallSeconds;
  out.solveSeconds += out.offloadPlanSeconds + alsoPlanned;
  for (Activation &row : offloaded.rows)
    out.activations.push_back(std::move(row));

  // The rewrite itself, on the graph. The planners simulated plans without
  // rewriting a graph (RecomputeModel::simulate); the liveness of the graph
  // rewritten must agree with it (else the pass fails: no output is written).
  unsigned added = 0;
  if (!plan.dropped.empty()) {
    const bool check = offloaded.applied.empty();
    absl::StatusOr<Simulation> fast = check ? model->simulate(plan.recompute) : Simulation{};
    NodeMap<int64_t> source;
    auto applied = model->apply(plan.recompute, graph, nullptr, &source);
    if (!applied.ok())
      return applied.status();
    added = *applied;
    if (check)
      if (absl::Status st = checkSimulation(fast, model->simulateRewritten(source)); !st.ok())
        return st;
  }
  for (const AppliedOffload &a : offloaded.applied)
    added += 3 + static_cast<unsigned>(a.views.size());
  out.nodesAdded = added;
  out.changed = added > 0;
  addStatistic("activations recomputed", static_cast<int64_t>(plan.dropped.size()));
  addStatistic("nodes added", added);
  addStatistic("clones shared (hoisted)", plan.hoists);
  addStatistic("drops undone (made unneeded by later ones)", plan.kept);
  addStatistic("rewrites simulated", plan.simulations);
  setStatistic("predicted peak bytes", out.predictedPeak);
  if (out.measuredPeak >= 0)
    setStatistic("measured peak bytes", out.measuredPeak);
  outcome_ = out;

  if (!reportDirectory().empty())
    if (absl::Status st = writeCheckpointJson(reportDirectory(), out); !st.ok())
      return st;
  return out.changed;
}

namespace {

using Outcome = CheckpointPass::Outcome;
using Activation = CheckpointPass::Activation;

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
  if (!o.ladderFrom.empty())
    os << "  budget ladder: the plan of the tighter " << o.ladderFrom
       << ", no slower than this budget's own (monotone=false plans this budget alone)\n";
  if (!o.ladder.empty() && !o.ladderPeaksMonotone)
    os << "  budget ladder: " << o.ladderRungsPeakRose
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
  for (const CheckpointPass::RecomputedNode &n : o.recomputedNodes) {
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

void CheckpointPass::printReport(llvm::raw_ostream &os) const {
  if (!outcome_)
    return;
  const Outcome &o = *outcome_;
  printPlanning(os, o);
  printPredictions(os, o);
  printOffloads(os, o);
  printActivations(os, o);
  printPricing(os, o);
}

GRAPHOPT_REGISTER_PASS(CheckpointPass);

} // namespace graphopt
