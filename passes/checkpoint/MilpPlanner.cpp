//===- MilpPlanner.cpp - The optimal plan of a MILP, solved by CBC ---------===//
//
// Solves CheckpointMilp (MilpFormulation.h) with CBC, in a program of its own
// (graph-opt-milp, tools/milp/: a solver crash or hang is an error naming
// this planner, not the end of graph-opt), and completes the plan as the greedy does: the closure of the dropped set and
// the liveness simulation of the rewritten graph, which decides whether the
// budget is met. The program's memory rows leave out the clones' own
// temporaries, so where the simulation is over the budget, that rank's row is
// raised by the program's error there and the program solved again: the
// simulator in the loop, a few rounds.
//
// The greedy's plan starts each solve (a MIP start): CBC has an incumbent
// before its first node, so a solve the time limit cuts short still returns a
// plan, and one no slower than the greedy's whenever that plan satisfies the
// program. The greedy's plan is returned instead (no gap, the solver status
// saying why) when it fits and no solved plan does (the time limit ended the
// rounds, or the plans the simulation accepts are outside a program whose
// chains were cut), or when it is faster (a solve cut short before it found
// what the greedy did, when the start did not satisfy a tightened program).
//
//===----------------------------------------------------------------------===//
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/HelperProcess.h"
#include "checkpoint/MilpFormulation.h"
#include "checkpoint/MilpProblem.h"

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

const char *const kPlannerName = "checkpoint{planner=milp}";

/// The solver program: $GRAPHOPT_MILP_SOLVER, else where the build put it.
std::string solverPath() {
  if (const char *env = std::getenv("GRAPHOPT_MILP_SOLVER"); env && *env)
    return env;
  return GRAPHOPT_MILP_SOLVER;
}

absl::StatusOr<MilpSolution> solve(const MilpProblem &p, double seconds,
                                   llvm::ArrayRef<double> initial) {
  MilpSolution out;
  if (p.memoryRows == 0) { // nothing dropped satisfies every row, at no cost
    out.found = true;
    out.columns.assign(p.objective.size(), 0);
    out.gap = 0;
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
                    std::max(seconds, 0.01)};
  if (std::string error = writeMilpRequest(request->path(), asked); !error.empty())
    return absl::InternalError(absl::StrCat(kPlannerName, ": ", error));

  std::string solver = solverPath();
  const HelperProgram program{kPlannerName, "MILP solver",
                              " (set GRAPHOPT_MILP_SOLVER to graph-opt-milp's path)"};
  if (absl::Status st = runHelper(
          program, {solver, request->path(), solution->path()}, {}, errors->path(),
          asked.seconds + kGraceSeconds,
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

} // namespace

absl::StatusOr<CheckpointPlan> planMilp(const RecomputeModel &model, int64_t budget,
                                        const MilpOptions &options) {
  auto begin = std::chrono::steady_clock::now();
  CheckpointMilp milp(model);
  auto greedy = planGreedy(model, budget);
  if (!greedy.ok())
    return greedy.status();
  std::vector<double> start;
  if (greedy->meetsBudget)
    start = milp.columnsOf(greedy->dropped, greedy->recompute);
  unsigned simulations = greedy->simulations;

  std::vector<int64_t> adjust(model.boundedTimeline().size(), 0);
  std::optional<CheckpointPlan> closest; // the least bounded memory of the plans over budget
  std::string status = "infeasible";
  std::string reason; // why the greedy's plan is returned, when it is
  for (unsigned round = 0; round < kMaxRounds; ++round) {
    double left = options.timeLimitSeconds - since(begin);
    if (round > 0 && left <= 0)
      break;
    std::optional<MilpProblem> problem = milp.problem(budget, adjust);
    if (!problem) { // some rank cannot get under the budget whatever is dropped
      status = "infeasible";
      break;
    }
    auto solved = solve(*problem, left, start);
    if (!solved.ok())
      return solved.status();
    MilpSolution &solution = *solved;
    status = solution.status;
    if (!solution.found)
      break;
    CheckpointMilp::Decoded decoded = milp.decode(solution.columns);
    auto made = planOf(model, budget, decoded);
    if (!made.ok())
      return absl::InternalError(absl::StrCat(
          "checkpoint{planner=milp}: the program's plan cannot be rewritten: ",
          made.status().message()));
    CheckpointPlan plan = std::move(*made);
    ++simulations;
    plan.gap = solution.gap;
    plan.solverStatus = solution.status;
    if (plan.meetsBudget) {
      if (greedy->meetsBudget &&
          greedy->predictedExtraSeconds < plan.predictedExtraSeconds * (1 - 1e-9)) {
        reason = absl::StrCat("the greedy's plan: faster than the program's (", status, ")");
        break;
      }
      plan.simulations = simulations;
      plan.solveSeconds = since(begin);
      plan.greedyExtraSeconds = greedy->predictedExtraSeconds;
      return plan;
    }
    // Where the simulation is over the budget, the program was short by its
    // error there (simulated minus modelled): ask that much more next time.
    // The program held modelled + adjust to the budget, so wherever the
    // simulation is over, the error exceeds the old adjust: each round asks more.
    auto sim = model.simulate(plan.recompute);
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
    if (!closest || plan.predictedBounded < closest->predictedBounded)
      closest = std::move(plan);
    if (!tightened)
      break;
  }

  // The greedy's plan, when it fits: faster than the program's, or none
  // solved fits (the time limit ended the rounds, or the plans the simulation
  // accepts are outside the program: cut chains). No gap to give.
  if (greedy->meetsBudget) {
    CheckpointPlan plan = std::move(*greedy);
    plan.greedyExtraSeconds = plan.predictedExtraSeconds;
    plan.planner = "milp";
    plan.solverStatus =
        reason.empty() ? absl::StrCat("the greedy's plan: none solved fits (", status, ")") : reason;
    plan.gap = -1;
    plan.simulations = simulations;
    plan.solveSeconds = since(begin);
    return plan;
  }

  // The budget is not met: the pass reports the least the planner reaches.
  // The program has no "as low as it goes" objective, so the plan returned is
  // the lower of the closest one solved and the greedy's at budget 0 (which
  // drops at the peak until nothing there can go: the least dropping reaches
  // in practice), marked as the MILP's, budget unmet (a greedy plan has no gap: -1).
  auto lowest = planGreedy(model, 0);
  if (!lowest.ok())
    return lowest.status();
  simulations += lowest->simulations;
  CheckpointPlan plan = closest && closest->predictedBounded <= lowest->predictedBounded
                            ? std::move(*closest)
                            : std::move(*lowest);
  plan.planner = "milp";
  plan.meetsBudget = false;
  plan.solverStatus = status;
  plan.simulations = simulations;
  plan.solveSeconds = since(begin);
  return plan;
}

} // namespace graphopt
