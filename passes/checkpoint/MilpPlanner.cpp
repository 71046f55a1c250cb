//===- MilpPlanner.cpp - checkpoint{planner=milp}: a plan and its distance to the optimum ---===//
//
// Three sources of plans and one bound, all on the same model:
//
//   1. the greedy (the default planner, GreedyPlanner.cpp);
//   2. the relaxation (RecomputeRelaxation.h), solved by CBC from the
//      greedy's plan: its optimum bounds every plan's time from below, and its
//      solution is a plan too (drops and values held for the clones), made
//      three ways: clones where the closure puts them, each value made once
//      and shared from its first use, and completed by the greedy;
//   3. when the best plan so far is not proven within `gap` of that bound
//      and time is left, the clone-by-point MILP (MilpFormulation.h), whose
//      costs are exactly the rebuilt plan's but whose own bound is near zero
//      on real models. Its memory rows leave out the clones' temporaries, so
//      where the simulation is over the budget, that rank's row is raised by
//      the program's error there and the program solved again (a few rounds).
//
// The fastest plan that meets the budget is returned with its gap to the
// relaxation's bound: a gap to the optimum of every plan RecomputeModel can
// make, not of a restricted program. CBC runs in a program of its own
// (graph-opt-milp, tools/milp/): a solver crash or hang is an error naming
// this planner, not the end of graph-opt.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/MilpPlanner.h"

#include "checkpoint/BudgetLadder.h"
#include "checkpoint/GreedyPlanner.h"
#include "checkpoint/HelperProcess.h"
#include "checkpoint/MilpFormulation.h"
#include "checkpoint/MilpProblem.h"
#include "checkpoint/RecomputeRelaxation.h"

#include <absl/strings/str_cat.h>

#include <chrono>
#include <cstdlib>

namespace graphopt {

namespace {

/// Solves in all: the first, then those that tighten where the simulation is over.
constexpr unsigned kMaxRounds = 4;

/// How long past its own time limit the solver may run before it is stopped:
/// CBC's root LP is not cut short by the limit (6 s on ResNet-152's 46k columns).
constexpr double kGraceSeconds = 60;
/// The clone-by-point program is a search for a faster plan once a plan and
/// the bound are in hand: past the time limit by this much it is stopped and
/// its search counts as ended by the limit, so that time-limit= holds.
constexpr double kSearchGraceSeconds = 2;

const char *const kPlannerName = "checkpoint{planner=milp}";

/// The solver program: $GRAPHOPT_MILP_SOLVER, else where the build put it.
std::string solverPath() {
  if (const char *env = std::getenv("GRAPHOPT_MILP_SOLVER"); env && *env)
    return env;
  return GRAPHOPT_MILP_SOLVER;
}

absl::StatusOr<MilpSolution> solve(const MilpProblem &p, double seconds,
                                   llvm::ArrayRef<double> initial,
                                   double graceSeconds = kGraceSeconds, bool preprocess = false) {
  MilpSolution out;
  if (p.memoryRows == 0) { // nothing dropped satisfies every row, at no cost
    out.found = true;
    out.columns.assign(p.objective.size(), 0);
    out.gap = 0;
    out.bound = 0;
    out.status = "optimal";
    return out;
  }
  auto request = TempFile::make("graph-opt-milp-request");
  auto solution = TempFile::make("graph-opt-milp-solution");
  auto errors = TempFile::make("graph-opt-milp-stderr");
  for (const absl::StatusOr<TempFile> *file : {&request, &solution, &errors})
    if (!file->ok())
      return absl::InternalError(absl::StrCat(kPlannerName, ": ", file->status().message()));
  MilpRequest asked{p, std::vector<double>(initial.begin(), initial.end()),
                    std::max(seconds, 0.01), preprocess};
  if (std::string error = writeMilpRequest(request->path(), asked); !error.empty())
    return absl::InternalError(absl::StrCat(kPlannerName, ": ", error));

  std::string solver = solverPath();
  const HelperProgram program{kPlannerName, "MILP solver",
                              " (set GRAPHOPT_MILP_SOLVER to graph-opt-milp's path)"};
  if (absl::Status st = runHelper(
          program, {solver, request->path(), solution->path()}, {}, errors->path(),
          asked.seconds + graceSeconds,
          absl::StrCat(" solving a program of ", p.objective.size(), " columns and ",
                       p.rows.size(), " rows"),
          "checkpoint{planner=greedy} does not need it");
      !st.ok())
    return st;
  if (std::string error = readMilpSolution(solution->path(), out); !error.empty())
    return absl::InternalError(absl::StrCat(kPlannerName, ": ", error));
  if (out.found && out.columns.size() != p.objective.size())
    return absl::InternalError(absl::StrCat(kPlannerName, ": the MILP solver ", solver,
                                            " answered ", out.columns.size(), " columns for ",
                                            p.objective.size()));
  return out;
}

/// The plan a solution describes: its own clones hoisted where it says (set
/// before any drop, so the closure grows each at its place), then its drops,
/// simulated.
absl::StatusOr<CheckpointPlan> planOf(const RecomputeModel &model, int64_t budget,
                                      const CheckpointMilp::Decoded &decoded) {
  PlanState state(model);
  for (const CheckpointMilp::Hoist &h : decoded.hoists) {
    auto next = state.hoisted(h.candidate, h.point);
    if (!next.ok())
      return next.status();
    state = std::move(*next);
  }
  for (int32_t c : decoded.dropped)
    if (absl::Status st = state.add(c); !st.ok())
      return st;
  CheckpointPlan plan;
  plan.planner = "milp";
  plan.dropped = decoded.dropped;
  plan.hoists = static_cast<unsigned>(decoded.hoists.size());
  plan.recompute = state.result();
  if (absl::Status st = predictPlan(model, budget, plan); !st.ok())
    return st;
  return plan;
}

double since(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

/// The relaxation's bound and plan.
struct Relaxed {
  double boundSeconds = 0; ///< no plan within the budget is faster
  bool infeasible = false; ///< no plan meets the budget at all
  std::string status;      ///< the solver's
  std::optional<CheckpointPlan> plan;
  unsigned simulations = 0;
};

/// Solves the relaxation from the greedy's plan; its solution is a plan of
/// its own (the fastest of three ways to make it that meets the budget).
absl::StatusOr<Relaxed> solveRelaxation(const RecomputeModel &model, int64_t budget,
                                        double seconds, const CheckpointPlan &greedy) {
  Relaxed out;
  const RecomputeRelaxation &relaxation = relaxationOf(model);
  std::optional<MilpProblem> problem = relaxation.problem(budget);
  if (!problem) { // some rank cannot get under the budget whatever is dropped
    out.infeasible = true;
    out.status = "infeasible";
    return out;
  }
  std::vector<double> start;
  if (greedy.meetsBudget)
    start = relaxation.pointOf(greedy.recompute, greedy.held);
  // Preprocessed first (the relaxation's programs are small); should CBC's
  // preprocessing fail or crash on it, without.
  auto solved = solve(*problem, seconds, start, kGraceSeconds, /*preprocess=*/true);
  if (!solved.ok() && solved.status().code() != absl::StatusCode::kDeadlineExceeded)
    solved = solve(*problem, seconds, start);
  if (!solved.ok())
    return solved.status();
  out.status = solved->status;
  if (solved->status == "infeasible") {
    out.infeasible = true;
    return out;
  }
  out.boundSeconds = relaxation.lowerBoundSeconds(solved->bound);
  if (!solved->found)
    return out;
  // Its plan, three ways: clones where the closure puts them; each value made
  // once and shared from its first use (the relaxation's own view of time);
  // completed by the greedy (drops added where the simulation is over,
  // repeats shared where the budget allows, unneeded drops undone).
  RecomputeRelaxation::Decoded decoded = relaxation.decode(solved->columns);
  PlanState state(model);
  for (const Value *v : decoded.held)
    state.hold(v);
  for (int32_t c : decoded.dropped)
    if (absl::Status st = state.add(c); !st.ok())
      return absl::InternalError(absl::StrCat(
          kPlannerName, ": the relaxation's plan cannot be rewritten: ", st.message()));
  std::vector<CheckpointPlan> made;
  auto add = [&](unsigned hoists) -> absl::Status {
    CheckpointPlan &plan = made.emplace_back();
    plan.dropped = decoded.dropped;
    plan.held = decoded.held;
    for (int32_t c : decoded.dropped)
      plan.why[c] = "in the relaxation's plan";
    plan.hoists = hoists;
    plan.recompute = state.result();
    ++out.simulations;
    return predictPlan(model, budget, plan);
  };
  if (absl::Status st = add(0); !st.ok())
    return st;
  if (absl::Status st = add(state.hoistEveryRepeat()); !st.ok())
    return st;
  auto completed =
      planGreedyFrom(model, budget, decoded.dropped, decoded.held, "in the relaxation's plan");
  if (!completed.ok())
    return completed.status();
  if (*completed) {
    out.simulations += (*completed)->simulations;
    made.push_back(std::move(**completed));
  }
  for (CheckpointPlan &plan : made)
    if (plan.meetsBudget &&
        (!out.plan || plan.predictedExtraSeconds < out.plan->predictedExtraSeconds))
      out.plan = std::move(plan);
  return out;
}

/// The clone-by-point program, from `start` (a plan that meets the budget,
/// or none), solved again where the simulation says its memory rows were
/// short, until `deadline`. Fills the fastest plan it finds that meets the
/// budget, and the one with the least bounded memory of those that do not.
absl::Status solveClonePrograms(const RecomputeModel &model, int64_t budget,
                                std::chrono::steady_clock::time_point deadline,
                                const CheckpointPlan *start, std::optional<CheckpointPlan> &met,
                                std::optional<CheckpointPlan> &closest, unsigned &simulations) {
  CheckpointMilp milp(model);
  std::vector<double> initial;
  if (start)
    initial = milp.columnsOf(start->dropped, start->recompute);
  std::vector<int64_t> adjust(model.boundedTimeline().size(), 0);
  for (unsigned round = 0; round < kMaxRounds; ++round) {
    double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      break;
    std::optional<MilpProblem> problem = milp.problem(budget, adjust);
    if (!problem)
      break; // some rank cannot get under the budget whatever is dropped
    auto solved = solve(*problem, left, initial, kSearchGraceSeconds);
    if (!solved.ok() && solved.status().code() == absl::StatusCode::kDeadlineExceeded)
      break; // stopped at the limit: CBC's first LP ran past it
    if (!solved.ok())
      return solved.status();
    if (!solved->found)
      break;
    CheckpointMilp::Decoded decoded = milp.decode(solved->columns);
    auto made = planOf(model, budget, decoded);
    if (!made.ok())
      return absl::InternalError(absl::StrCat(
          kPlannerName, ": the program's plan cannot be rewritten: ", made.status().message()));
    ++simulations;
    if (made->meetsBudget) {
      met = std::move(*made);
      return absl::OkStatus();
    }
    // Where the simulation is over the budget, the program was short by its
    // error there (simulated minus modelled): ask that much more next time.
    // The program held modelled + adjust to the budget, so wherever the
    // simulation is over, the error exceeds the old adjust: each round asks more.
    auto sim = model.simulate(made->recompute);
    if (!sim.ok())
      return sim.status();
    ++simulations;
    std::vector<int64_t> modelled = milp.modelledTimeline(decoded);
    bool tightened = false;
    for (size_t t = 0; t < modelled.size(); ++t) {
      int64_t simulated = sim->boundedByRank[t];
      if (simulated > budget && simulated - modelled[t] > adjust[t]) {
        adjust[t] = simulated - modelled[t];
        tightened = true;
      }
    }
    if (!closest || made->predictedBounded < closest->predictedBounded)
      closest = std::move(*made);
    if (!tightened)
      break;
  }
  return absl::OkStatus();
}

/// A gap this small is the optimum: what is left is the bound's tie-breaks
/// taken off (RecomputeRelaxation::lowerBoundSeconds) and CBC's tolerances.
constexpr double kProvenGap = 1e-4;

/// How far a plan's time may be above the bound: its share of the plan's time.
double gapTo(double seconds, double bound) {
  if (seconds <= 0 || bound >= seconds)
    return 0;
  return (seconds - bound) / seconds;
}

/// planMilp's answer where a plan meets the budget: `plan` (`whose` it is)
/// with its gap to the relaxation's bound and how far that is proven.
CheckpointPlan metPlan(CheckpointPlan plan, const std::string &whose, double boundSeconds,
                       const MilpOptions &options,
                       std::chrono::steady_clock::time_point deadline, double greedySeconds,
                       unsigned simulations, std::chrono::steady_clock::time_point begin) {
  plan.planner = "milp";
  plan.lowerBoundSeconds = boundSeconds;
  plan.gap = gapTo(plan.predictedExtraSeconds, boundSeconds);
  const bool timeUp = std::chrono::steady_clock::now() >= deadline;
  const char *proof = plan.gap <= kProvenGap    ? "optimal"
                      : plan.gap <= options.gap ? "within the gap asked"
                      : timeUp                  ? "time limit"
                                                : "the bound not reached";
  plan.solverStatus = absl::StrCat(proof, ": ", whose);
  plan.greedyExtraSeconds = greedySeconds;
  plan.simulations = simulations;
  plan.solveSeconds = since(begin);
  return plan;
}

/// planMilp's answer where no plan meets the budget: the pass reports the
/// least the planner reaches. The programs have no "as low as it goes"
/// objective, so the plan returned is the lower of the closest one solved and
/// the greedy's at budget 0 (which drops at the peak until nothing there can
/// go: the least dropping reaches in practice), marked as the MILP's, budget
/// unmet (no gap: -1).
absl::StatusOr<CheckpointPlan> unmetPlan(const RecomputeModel &model,
                                         std::optional<CheckpointPlan> closest,
                                         std::string solverStatus, unsigned simulations,
                                         std::chrono::steady_clock::time_point begin) {
  auto lowest = planGreedy(model, 0);
  if (!lowest.ok())
    return lowest.status();
  simulations += lowest->simulations;
  CheckpointPlan plan = closest && closest->predictedBounded <= lowest->predictedBounded
                            ? std::move(*closest)
                            : std::move(*lowest);
  plan.planner = "milp";
  plan.meetsBudget = false;
  plan.gap = -1;
  plan.solverStatus = std::move(solverStatus);
  plan.simulations = simulations;
  plan.solveSeconds = since(begin);
  return plan;
}

} // namespace

absl::StatusOr<CheckpointPlan> planMilp(const RecomputeModel &model, int64_t budget,
                                        const MilpOptions &options,
                                        std::optional<CheckpointPlan> given) {
  auto begin = std::chrono::steady_clock::now();
  const auto deadline =
      begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(options.timeLimitSeconds));
  absl::StatusOr<CheckpointPlan> greedy =
      given ? absl::StatusOr<CheckpointPlan>(std::move(*given)) : planGreedy(model, budget);
  if (!greedy.ok())
    return greedy.status();
  unsigned simulations = greedy->simulations;

  auto relaxed = solveRelaxation(model, budget, options.timeLimitSeconds, *greedy);
  if (!relaxed.ok())
    return relaxed.status();
  simulations += relaxed->simulations;

  // The fastest of the plans that meet the budget, and whose it is.
  std::optional<CheckpointPlan> best;
  std::string whose;
  auto consider = [&](std::optional<CheckpointPlan> &plan, const char *name) {
    if (plan && plan->meetsBudget &&
        (!best || plan->predictedExtraSeconds < best->predictedExtraSeconds * (1 - 1e-9))) {
      best = std::move(plan);
      whose = name;
    }
  };
  const double greedySeconds = greedy->meetsBudget ? greedy->predictedExtraSeconds : -1;
  std::optional<CheckpointPlan> fromGreedy(std::move(*greedy));
  consider(fromGreedy, "the greedy's plan");
  consider(relaxed->plan, "the relaxation's plan");

  std::optional<CheckpointPlan> closest;
  std::string status = relaxed->status;
  if (!relaxed->infeasible &&
      (!best || gapTo(best->predictedExtraSeconds, relaxed->boundSeconds) >
                    std::max(options.gap, kProvenGap)) &&
      std::chrono::steady_clock::now() < deadline) {
    std::optional<CheckpointPlan> met;
    if (absl::Status st = solveClonePrograms(model, budget, deadline, best ? &*best : nullptr,
                                             met, closest, simulations);
        !st.ok())
      return st;
    consider(met, "the clone-by-point program's plan");
  }

  if (best)
    return metPlan(std::move(*best), whose, relaxed->boundSeconds, options, deadline,
                   greedySeconds, simulations, begin);
  // The budget is not met: the least the planner reaches.
  return unmetPlan(model, std::move(closest), relaxed->infeasible ? "infeasible" : status,
                   simulations, begin);
}

namespace {
/// planner=milp.
class MilpPlannerEntry : public Planner {
public:
  static llvm::StringRef plannerName() { return "milp"; }
  static llvm::StringRef plannerDescription() {
    return "the best of the greedy, the relaxation's plan and a clone-by-point program (CBC), "
           "with its proven gap to the optimum";
  }
  llvm::StringRef name() const override { return plannerName(); }
  absl::Status accepts(const PlannerBounds &bounds) const override {
    if (!bounds.peakOption.empty() && bounds.activations)
      return absl::InvalidArgumentError(absl::StrCat("planner=milp plans for one bound: give ",
                                                     bounds.peakOption,
                                                     " or activations=, not both"));
    return absl::OkStatus();
  }
  absl::StatusOr<CheckpointPlan> plan(const PlanRequest &request, LadderReport *) const override {
    // The default planner's plan (the budget ladder's, when monotone) is the
    // first source; its ladder is not this plan's to report.
    auto begin = std::chrono::steady_clock::now();
    LadderReport greedyLadder;
    auto greedy = planGreedyOnLadder(request, GreedyStarts::All, &greedyLadder);
    if (!greedy.ok())
      return greedy.status();
    auto plan = planMilp(request.model, request.target,
                         MilpOptions{request.options.timeLimitSeconds, request.options.gap},
                         std::move(*greedy));
    if (plan.ok()) // the greedy's time too
      plan->solveSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return plan;
  }
};
} // namespace
GRAPHOPT_REGISTER_PLANNER(MilpPlannerEntry);

} // namespace graphopt
