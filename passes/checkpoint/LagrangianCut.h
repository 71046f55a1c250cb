//===- LagrangianCut.h - A closure program with priced rows, solved by minimum cuts -*- C++ -*-===//
//
// The recomputation relaxation (RecomputeRelaxation.h) is a closure problem
// (rows x_a >= x_b) plus memory rows. With the memory rows priced into the
// objective (a Lagrangian relaxation: a price per row, paid for every byte
// the row is short), what is left is a minimum-weight closure: one minimum
// s-t cut (Picard 1976; the shape of torch's partitioner's cut), solved here
// with Boost.Graph's Boykov-Kolmogorov max-flow. Prices follow the
// subgradient (Polyak's step against the best known plan's objective):
// rows still short get dearer, rows met with room to spare cheaper.
//
// It gives the default planner, without a MILP solver and in a fraction of a
// second, two things: (1) a lower bound on the program's optimum (every
// priced problem's optimum is one), so on every plan's time; (2) a point
// that meets every row, from the cuts along the way or, at the end, from the
// best prices raised on the rows still short: a start for the greedy
// (GreedyPlanner.cpp), with values held for the clones as the program
// allows. The bound is the linear relaxation's at best (rows coupled through
// prices only); CBC's branch and bound (planner=milp) proves more.
//
// The number of cuts is bounded by a count, not a clock, so that the plan
// does not depend on the machine's load.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/MilpProblem.h"

#include <limits>
#include <vector>

namespace graphopt {

struct LagrangianCutSolution {
  /// The cheapest 0-1 point found that satisfies every row; empty when none.
  std::vector<double> columns;
  double objective = std::numeric_limits<double>::infinity();
  /// The best Lagrangian bound on the program's optimum (-infinity: none).
  double bound = -std::numeric_limits<double>::infinity();
  unsigned cuts = 0; ///< minimum cuts solved
};

/// Solves `p`, whose first `p.rows.size() - p.memoryRows` rows are closure
/// rows (two columns, coefficients 1 and -1, right-hand side 0: the first
/// column is 1 wherever the second is) and whose last `p.memoryRows` rows
/// are any >= rows. `upperBound`: the objective of a known feasible point
/// (infinity when none), which steers the step size. At most `maxCuts`
/// minimum cuts.
LagrangianCutSolution solveByLagrangianCuts(const MilpProblem &p, double upperBound,
                                            unsigned maxCuts = 240);

/// The bound alone: the subgradient search for prices, aiming at `aim` (an
/// estimate of the optimum from above: a known point's objective, or
/// infinity), stopped once the bound passes `stopAbove`, at most `maxCuts`
/// cuts; no point is looked for (for programs whose points are not plans,
/// RecomputeRelaxation's partial ones). -infinity when none.
double boundByLagrangianCuts(const MilpProblem &p, double aim, double stopAbove,
                             unsigned maxCuts = 160);

} // namespace graphopt
