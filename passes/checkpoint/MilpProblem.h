//===- MilpProblem.h - A 0-1 program and its solution, and their files -*- C++ -*-===//
//
// checkpoint{planner=milp} solves its program in a separate process, the
// graph-opt-milp program (tools/milp/), so that a crash of the solver (CBC)
// is an error graph-opt reports, not the end of graph-opt. The two exchange
// the program and its solution through files in the format below: native
// byte order and widths (both sides are the same build on the same machine),
// a magic word and a version first, then counts and arrays.
//
// Plain C++ only: the solver program links this and CBC, not LibTorch.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace graphopt {

/// A 0-1 program in the form CBC loads: every column binary (bounds [0, upper]).
struct MilpProblem {
  struct Row { ///< sum coefficients[k] * x[columns[k]] >= rhs
    std::vector<int> columns;
    std::vector<double> coefficients;
    double rhs = 0;
  };
  std::vector<double> objective; ///< per column
  std::vector<double> upper;     ///< per column: 1, or 0 when fixed to 0
  std::vector<Row> rows;
  size_t memoryRows = 0; ///< none: nothing has to be dropped
};

/// What the solver is asked: the program, a start (column values, or empty),
/// its time limit, and whether CBC may preprocess it.
struct MilpRequest {
  MilpProblem problem;
  std::vector<double> start;
  double seconds = 10;
  /// CBC's preprocessing: much faster on the relaxation's small programs
  /// (BERT-base's at activations=50%: optimal in 3 s, not proven in 20 s
  /// without), but it crashed on ResNet-152's clone-by-point program.
  bool preprocess = false;
};

/// What the solver answers.
struct MilpSolution {
  bool found = false;          ///< an integer solution
  std::vector<double> columns; ///< its values
  double gap = -1;             ///< (objective - best bound) / |objective|
  std::string status;          ///< "optimal", "time limit", "infeasible"
  /// The best bound the solver proved on the objective (-infinity: none).
  double bound = -std::numeric_limits<double>::infinity();
};

/// Each returns an empty string on success, else what went wrong (naming the file).
std::string writeMilpRequest(const std::string &path, const MilpRequest &request);
std::string readMilpRequest(const std::string &path, MilpRequest &request);
std::string writeMilpSolution(const std::string &path, const MilpSolution &solution);
std::string readMilpSolution(const std::string &path, MilpSolution &solution);

} // namespace graphopt
