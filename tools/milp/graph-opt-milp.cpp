//===- graph-opt-milp.cpp - The MILP solver program of checkpoint{planner=milp} ---===//
//
//   graph-opt-milp REQUEST SOLUTION
//
// Reads a 0-1 program, a start and a time limit (REQUEST, written by the
// planner: checkpoint/MilpProblem.h), solves it with CBC and writes the
// solution to SOLUTION. The planner starts this program with posix_spawn and
// waits for it with a deadline, so that CBC crashing (it has: its
// preprocessing on ResNet-152's program) or hanging is an error the planner
// reports, and graph-opt goes on to report it and exit cleanly.
//
// Exit status: 0 solved (the solution may say "infeasible"), 2 a bad request
// or an unwritable solution (the reason on stderr).
//
//===----------------------------------------------------------------------===//
#include "checkpoint/MilpProblem.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

namespace {

using graphopt::MilpProblem;
using graphopt::MilpRequest;
using graphopt::MilpSolution;

/// An unbounded side of a row (CoinFinite.hpp's COIN_DBL_MAX).
constexpr double kInfinity = std::numeric_limits<double>::max();

/// The matrix by columns, loaded at once (Cbc_addRow copies the matrix on
/// every call: quadratic in the rows, minutes at 10^5).
struct ColumnMatrix {
  std::vector<CoinBigIndex> start;
  std::vector<int> index;
  std::vector<double> value;
  std::vector<double> rowLower, rowUpper;
};

ColumnMatrix byColumns(const MilpProblem &p) {
  const int numCols = static_cast<int>(p.objective.size());
  const int numRows = static_cast<int>(p.rows.size());
  ColumnMatrix m;
  m.start.assign(numCols + 1, 0);
  for (const MilpProblem::Row &row : p.rows)
    for (int c : row.columns)
      ++m.start[c + 1];
  for (int c = 0; c < numCols; ++c)
    m.start[c + 1] += m.start[c];
  m.index.resize(m.start[numCols]);
  m.value.resize(m.start[numCols]);
  std::vector<CoinBigIndex> next(m.start.begin(), m.start.end() - 1);
  m.rowLower.resize(numRows);
  m.rowUpper.assign(numRows, kInfinity);
  for (int r = 0; r < numRows; ++r) {
    const MilpProblem::Row &row = p.rows[r];
    for (size_t k = 0; k < row.columns.size(); ++k) {
      CoinBigIndex at = next[row.columns[k]]++;
      m.index[at] = r;
      m.value[at] = row.coefficients[k];
    }
    m.rowLower[r] = row.rhs;
  }
  return m;
}

MilpSolution solve(const MilpRequest &request) {
  const MilpProblem &p = request.problem;
  const int numCols = static_cast<int>(p.objective.size());
  ColumnMatrix matrix = byColumns(p);
  std::vector<double> colLower(numCols, 0);

  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model *)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_Model *m = model.get();
  Cbc_setLogLevel(m, 0);
  // CBC 2.10.8's preprocessing crashed (in CglPreProcess::postProcess) with
  // the greedy's MIP start on ResNet-152's 46k-column program; without it the
  // zoo's solves took up to twice as long.
  if (!request.preprocess)
    Cbc_setParameter(m, "preprocess", "off");
  Cbc_loadProblem(m, numCols, static_cast<int>(p.rows.size()), matrix.start.data(),
                  matrix.index.data(), matrix.value.data(), colLower.data(), p.upper.data(),
                  p.objective.data(), matrix.rowLower.data(), matrix.rowUpper.data());
  for (int c = 0; c < numCols; ++c)
    Cbc_setInteger(m, c);
  if (!request.start.empty()) {
    std::vector<int> all(numCols);
    for (int c = 0; c < numCols; ++c)
      all[c] = c;
    Cbc_setMIPStartI(m, numCols, all.data(), request.start.data());
  }
  Cbc_setMaximumSeconds(m, std::max(request.seconds, 0.01));
  Cbc_solve(m);

  MilpSolution out;
  const double *best = Cbc_bestSolution(m);
  if (Cbc_isProvenInfeasible(m) || (!best && Cbc_status(m) == 0)) {
    out.status = "infeasible";
    return out;
  }
  out.status = Cbc_isProvenOptimal(m) ? "optimal" : "time limit";
  if (double bound = Cbc_getBestPossibleObjValue(m); std::isfinite(bound) && std::abs(bound) < 1e300)
    out.bound = bound;
  if (!best)
    return out;
  out.found = true;
  out.columns.assign(best, best + numCols);
  if (Cbc_isProvenOptimal(m)) {
    out.gap = 0;
    out.bound = Cbc_getObjValue(m);
  } else {
    double obj = Cbc_getObjValue(m), bound = Cbc_getBestPossibleObjValue(m);
    out.gap = std::isfinite(bound) ? std::max(0.0, (obj - bound) / std::max(std::abs(obj), 1e-12))
                                   : 1.0;
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: graph-opt-milp REQUEST SOLUTION (started by graph-opt's "
                         "checkpoint{planner=milp})\n");
    return 2;
  }
  MilpRequest request;
  if (std::string error = graphopt::readMilpRequest(argv[1], request); !error.empty()) {
    std::fprintf(stderr, "graph-opt-milp: %s\n", error.c_str());
    return 2;
  }
  MilpSolution solution = solve(request);
  if (std::string error = graphopt::writeMilpSolution(argv[2], solution); !error.empty()) {
    std::fprintf(stderr, "graph-opt-milp: %s\n", error.c_str());
    return 2;
  }
  return 0;
}
