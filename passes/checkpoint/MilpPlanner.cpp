//===- MilpPlanner.cpp - The optimal plan of a MILP, solved by CBC ---------===//
//
// Solves CheckpointMilp (MilpFormulation.h) with CBC's C interface and
// completes the plan as the greedy does: the closure of the dropped set and
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
#include "checkpoint/MilpFormulation.h"

#include <coin/Cbc_C_Interface.h>

#include <absl/strings/str_cat.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>

namespace graphopt {

namespace {

/// Solves in all: the first, then those that tighten where the simulation is over.
constexpr unsigned kMaxRounds = 4;

/// An unbounded side of a row (CoinFinite.hpp's COIN_DBL_MAX).
constexpr double kInfinity = std::numeric_limits<double>::max();

/// CbcMain, behind Cbc_solve, keeps its parameter tables in statics: one solve at a time.
std::mutex cbcMutex;

struct Solution {
  bool found = false;          ///< an integer solution
  std::vector<double> columns; ///< its values
  double gap = -1;             ///< (objective - best bound) / |objective|
  std::string status;          ///< "optimal", "time limit", "infeasible"
};

Solution solve(const MilpProblem &p, double seconds, llvm::ArrayRef<double> initial) {
  Solution out;
  if (p.memoryRows == 0) { // nothing dropped satisfies every row, at no cost
    out.found = true;
    out.columns.assign(p.objective.size(), 0);
    out.gap = 0;
    out.status = "optimal";
    return out;
  }
  // The matrix by columns, loaded at once (Cbc_addRow copies the matrix on
  // every call: quadratic in the rows, minutes at 10^5).
  const int numCols = static_cast<int>(p.objective.size());
  const int numRows = static_cast<int>(p.rows.size());
  std::vector<CoinBigIndex> start(numCols + 1, 0);
  for (const MilpProblem::Row &row : p.rows)
    for (int c : row.columns)
      ++start[c + 1];
  for (int c = 0; c < numCols; ++c)
    start[c + 1] += start[c];
  std::vector<int> index(start[numCols]);
  std::vector<double> value(start[numCols]);
  std::vector<CoinBigIndex> next(start.begin(), start.end() - 1);
  std::vector<double> rowLower(numRows), rowUpper(numRows, kInfinity);
  for (int r = 0; r < numRows; ++r) {
    const MilpProblem::Row &row = p.rows[r];
    for (size_t k = 0; k < row.columns.size(); ++k) {
      CoinBigIndex at = next[row.columns[k]]++;
      index[at] = r;
      value[at] = row.coefficients[k];
    }
    rowLower[r] = row.rhs;
  }
  std::vector<double> colLower(numCols, 0);

  std::lock_guard<std::mutex> lock(cbcMutex);
  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model *)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_Model *m = model.get();
  Cbc_setLogLevel(m, 0);
  // CBC 2.10.8's preprocessing crashed (in CglPreProcess::postProcess) with
  // the greedy's MIP start on ResNet-152's 46k-column program; without it the
  // zoo's solves took up to twice as long.
  Cbc_setParameter(m, "preprocess", "off");
  Cbc_loadProblem(m, numCols, numRows, start.data(), index.data(), value.data(), colLower.data(),
                  p.upper.data(), p.objective.data(), rowLower.data(), rowUpper.data());
  for (int c = 0; c < numCols; ++c)
    Cbc_setInteger(m, c);
  if (!initial.empty()) {
    std::vector<int> all(numCols);
    for (int c = 0; c < numCols; ++c)
      all[c] = c;
    Cbc_setMIPStartI(m, numCols, all.data(), initial.data());
  }
  Cbc_setMaximumSeconds(m, std::max(seconds, 0.01));
  Cbc_solve(m);

  const double *best = Cbc_bestSolution(m);
  if (Cbc_isProvenInfeasible(m) || (!best && Cbc_status(m) == 0)) {
    out.status = "infeasible";
    return out;
  }
  out.status = Cbc_isProvenOptimal(m) ? "optimal" : "time limit";
  if (!best)
    return out;
  out.found = true;
  out.columns.assign(best, best + numCols);
  if (Cbc_isProvenOptimal(m)) {
    out.gap = 0;
  } else {
    double obj = Cbc_getObjValue(m), bound = Cbc_getBestPossibleObjValue(m);
    out.gap = std::isfinite(bound) ? std::max(0.0, (obj - bound) / std::max(std::abs(obj), 1e-12))
                                   : 1.0;
  }
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
    Solution solution = solve(*problem, left, start);
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
