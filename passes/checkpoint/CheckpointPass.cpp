//===- CheckpointPass.cpp - Fit a training step into a memory budget ------===//
#include "checkpoint/CheckpointPass.h"

#include "checkpoint/BoundSearch.h"

#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/OffloadPlanner.h"

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

/// Plans the measured search (BoundSearch.h) makes at most: the first, and
/// two tightened after a measured peak over the budget.
constexpr unsigned kMaxPlanAttempts = 3;

/// The bound on the peak above the inputs beside the budget (kNoPeakCap: none).
int64_t peakCapOf(const CheckpointOutcome &out) {
  return out.peakCapBytes < 0 ? kNoPeakCap : out.peakCapBytes;
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

/// The rewrite itself, on the graph: the nodes added (the offloads' too). The
/// planners simulated plans without rewriting a graph (RecomputeModel::simulate);
/// the liveness of the graph rewritten must agree with it (else the pass fails:
/// no output is written).
absl::StatusOr<unsigned> rewriteWithPlan(Graph &graph, const RecomputeModel &model,
                                         const CheckpointPlan &plan,
                                         const std::vector<AppliedOffload> &offloads) {
  unsigned added = 0;
  if (!plan.dropped.empty()) {
    const bool check = offloads.empty();
    absl::StatusOr<Simulation> fast = check ? model.simulate(plan.recompute) : Simulation{};
    NodeMap<int64_t> source;
    auto applied = model.apply(plan.recompute, graph, nullptr, &source);
    if (!applied.ok())
      return applied.status();
    added = *applied;
    if (check)
      if (absl::Status st = checkSimulation(fast, model.simulateRewritten(source)); !st.ok())
        return st;
  }
  for (const AppliedOffload &a : offloads)
    added += 3 + static_cast<unsigned>(a.views.size());
  return added;
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
  const std::string peakOption = peak_.get() ? "peak=" : budget_.get() ? "budget=" : "";
  if (absl::Status ok = planner().accepts({peakOption, activations_.get().has_value(),
                                           plannerOptions()});
      !ok.ok())
    return ok;
  if (!db_.get().empty() && cost_.get() != CostSource::Db && cost_.get() != CostSource::Inductor)
    return absl::InvalidArgumentError(
        "db= names the cost database of cost=db or cost=inductor; give one of them too");
  if (timeLimit_.get() <= 0)
    return absl::InvalidArgumentError("time-limit must be positive seconds");
  if (!(gap_.get() >= 0 && gap_.get() < 1))
    return absl::InvalidArgumentError(
        "gap is a share of the optimum from 0 (prove the optimum) to below 1 (gap=0.01: 1%)");
  if (offloadBandwidth_.get() && !planner().plansAroundOffloads())
    return absl::InvalidArgumentError(absl::StrCat(
        "offload-bandwidth= goes with the greedy planner (the default), not planner=",
        planner_.get()));
  return absl::OkStatus();
}

struct CheckpointPass::Planned {
  CheckpointPlan plan;
  std::optional<BenchmarkReport> measured;
};

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
  out.planner = planner_.get();
  setStatistic("budget bytes", out.budgetBytes);
  if (out.stepPeakBound >= 0)
    setStatistic("step peak bound bytes", out.stepPeakBound);
  setStatistic("unoptimised peak bytes", out.baselinePeak);
  return peakBudget;
}

std::vector<std::pair<std::string, std::string>> CheckpointPass::registeredPlanners() {
  std::vector<std::pair<std::string, std::string>> choices;
  for (const PlannerRegistry::Entry *e : PlannerRegistry::instance().entries())
    choices.emplace_back(e->name, e->name);
  return choices;
}

const Planner &CheckpointPass::planner() const {
  // The option's choices are the registry's names, so the lookup cannot fail.
  return *PlannerRegistry::instance().find(planner_.get());
}

PlannerOptions CheckpointPass::plannerOptions() const {
  PlannerOptions options;
  options.monotone = monotone_.get();
  options.timeLimitSeconds = timeLimit_.get();
  options.gap = gap_.get();
  if (activations_.get() && activations_.get()->isPercent())
    options.activationsShare = activations_.get()->percentValue() / 100;
  return options;
}

PlanRequest CheckpointPass::planRequest(const RecomputeModel &model, int64_t target,
                                        int64_t peakCap, const Outcome &out) const {
  // The ladder's rungs are shares of the same whole the option resolves against.
  const bool activations = model.boundedMemory() == BoundedMemory::SavedActivations;
  return PlanRequest{model, target, peakCap,
                     activations ? out.activationBytes : out.baselinePeak, plannerOptions()};
}

CostOptions CheckpointPass::costOptions() const {
  return CostOptions{cost_.get(), db_.get(), scratch_.get()};
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
  const bool measuring =
      measure_.get() && cost_.get() == CostSource::Profile && out.offloadedBytes == 0;
  const int64_t peakCap = peakCapOf(out);
  out.planAttempts = 1;
  auto first = planner().plan(planRequest(model, out.budgetBytes, peakCap, out), &out.ladder);
  if (!first.ok())
    return first.status();
  Planned planned{std::move(*first), std::nullopt};
  absl::Status unmet = plannerUnmet(model, planned.plan, out.budgetBytes, 1, out);
  if (!unmet.ok() && unmet_.get() == Unmet::Error)
    return unmet;
  if (!measuring || peakBudget < 0 || planned.plan.dropped.empty()) {
    // One plan: nothing measured to tighten for (a plan that drops nothing
    // is the unoptimised step).
    if (!unmet.ok()) // unmet=closest: the plan the planner reached, said to fall short
      out.budgetUnmet = std::string(unmet.message());
    if (measuring && !planned.plan.dropped.empty()) {
      auto m = measurePlan(graph, model, planned.plan, analyses);
      if (!m.ok())
        return m.status();
      planned.measured = *m;
      out.measuredPlanPeaks = {m->optimized.peakBytes};
    }
    return planned;
  }
  return searchMeasured(graph, model, analyses, peakBudget, std::move(planned), out);
}

absl::StatusOr<CheckpointPass::Planned>
CheckpointPass::searchMeasured(const Graph &graph, const RecomputeModel &model,
                               AnalysisManager &analyses, int64_t peakBudget, Planned first,
                               Outcome &out) const {
  // The knob the measured miss moves: the budget itself where it bounds the
  // peak above the inputs, else (activations= with a peak) the peak cap.
  const bool knobIsTarget = model.boundedMemory() == BoundedMemory::PeakAboveInputs;
  const int64_t peakCap = peakCapOf(out);
  std::vector<std::pair<Planned, Outcome>> made; // each round's plan and outcome
  std::vector<absl::Status> unmets;              // and whether the planner met its target
  std::optional<Planned> firstPlan(std::move(first));
  BoundProbeFn probe = [&](int64_t knob) -> absl::StatusOr<BoundProbe> {
    const unsigned attempt = static_cast<unsigned>(made.size()) + 1;
    out.planAttempts = attempt;
    const int64_t target = knobIsTarget ? knob : out.budgetBytes;
    Planned planned;
    if (firstPlan) { // the first round's plan, made by planWithinBudget
      planned = std::move(*firstPlan);
      firstPlan.reset();
    } else {
      auto p = planner().plan(planRequest(model, target, knobIsTarget ? peakCap : knob, out),
                              &out.ladder);
      if (!p.ok())
        return p.status();
      planned.plan = std::move(*p);
    }
    absl::Status unmet = plannerUnmet(model, planned.plan, target, attempt, out);
    if (!unmet.ok() && unmet_.get() == Unmet::Error)
      return unmet;
    unmets.push_back(unmet);
    auto m = measurePlan(graph, model, planned.plan, analyses);
    if (!m.ok())
      return m.status();
    planned.measured = *m;
    const CheckpointPlan &plan = planned.plan;
    BoundProbe seen{m->optimized.peakBytes,
                    knobIsTarget ? plan.predictedBounded : plan.predictedPeak,
                    absl::StrCat(absl::StrJoin(plan.dropped, ","), "|", plan.held.size()),
                    /*atLeast=*/!unmet.ok(), /*atLoosest=*/false};
    made.emplace_back(std::move(planned), out);
    return seen;
  };
  BoundSearchOptions options; // measured on the step that runs: no margin, tighten only
  options.bound = peakBudget;
  options.maxRounds = kMaxPlanAttempts;
  options.firstKnob = knobIsTarget ? out.budgetBytes : peakCap;
  auto searched = searchBound(options, probe);
  if (!searched.ok())
    return searched.status();
  std::vector<int64_t> peaks;
  for (const auto &[p, o] : made)
    peaks.push_back(p.measured->optimized.peakBytes);
  const size_t chosen = searched->best ? *searched->best : searched->closest;
  const int64_t peak = peaks[chosen];
  const absl::Status unmet = unmets[chosen];
  out = std::move(made[chosen].second);
  out.planAttempts = static_cast<unsigned>(made.size());
  out.measuredPlanPeaks = peaks;
  // Measured within the budget, and the planner met its own target (with
  // activations= the saved bytes, which a peak does not show).
  if (searched->best && unmet.ok())
    return std::move(made[chosen].first);
  // Else refused, or (unmet=closest) the plan that measured least, whichever
  // round made it, with what it missed by.
  const std::string why =
      !unmet.ok() || !unmets.back().ok()
          ? std::string((!unmet.ok() ? unmet : unmets.back()).message())
          : absl::StrCat(peakOptionText(), " (", formatBytes(asStated(out, peakBudget)),
                         ") cannot be met as measured: the rewritten step still peaks at ",
                         formatBytes(asStated(out, peaks.back())), " after ", made.size(),
                         " plans, each tightened by the last one's excess over the simulation");
  if (unmet_.get() == Unmet::Error)
    return absl::OutOfRangeError(why);
  out.budgetUnmet = made.size() == 1
                        ? why
                        : absl::StrCat(why, "; the closest of the ", made.size(),
                                       " plans as measured is applied: it peaks at ",
                                       formatBytes(asStated(out, peak)), " against ",
                                       formatBytes(asStated(out, peakBudget)));
  return std::move(made[chosen].first);
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
  auto costs = checkpointNodeCosts(graph, analyses, costOptions());
  if (!costs.ok())
    return costs.status();
  out.costSource = costs->source;
  out.baselineStepSeconds = costs->stepSeconds;
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

  auto added = rewriteWithPlan(graph, *model, plan, offloaded.applied);
  if (!added.ok())
    return added.status();
  out.nodesAdded = *added;
  out.changed = *added > 0;
  addStatistic("activations recomputed", static_cast<int64_t>(plan.dropped.size()));
  addStatistic("nodes added", *added);
  addStatistic("clones shared (hoisted)", plan.hoists);
  addStatistic("drops undone (made unneeded by later ones)", plan.kept);
  addStatistic("rewrites simulated", plan.simulations);
  setStatistic("predicted peak bytes", out.predictedPeak);
  if (out.measuredPeak >= 0)
    setStatistic("measured peak bytes", out.measuredPeak);
  out.recomputations = recomputationsIn(graph);
  outcome_ = out;

  if (!reportDirectory().empty())
    if (absl::Status st = writeCheckpointJson(reportDirectory(), out); !st.ok())
      return st;
  return out.changed;
}

void CheckpointPass::printReport(llvm::raw_ostream &os) const {
  if (outcome_)
    printCheckpointReport(os, *outcome_);
}

std::vector<std::pair<std::string, std::string>> CheckpointPass::jsonReports() const {
  if (!outcome_)
    return {};
  return {{"checkpoint", checkpointJsonText(*outcome_)}};
}

GRAPHOPT_REGISTER_PASS(CheckpointPass);

} // namespace graphopt
