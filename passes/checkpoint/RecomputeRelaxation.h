//===- RecomputeRelaxation.h - A lower bound on every recomputation plan -*- C++ -*-===//
//
// checkpoint{planner=milp}'s bound: a 0-1 program whose optimum is no slower
// than any plan RecomputeModel can make (any set of drops and held values,
// clones wherever the closure puts them, shared or hoisted), so that the gap
// between a plan and it is a gap to the true optimum, not to the optimum of a
// restricted program. It relaxes the plans' model in three places, each only
// in the direction of less time and less memory:
//
//   - time: each forward node recomputed at all is paid once, however many
//     clones a plan makes of it (a real plan pays each one);
//   - memory: a dropped candidate frees its bytes wherever some plan could
//     (freedRanksOf; a dropout's mask less the generator state saved in its
//     place through forward), a held forward value costs its bytes only from
//     where it would have been freed to the start of backward, and the
//     clones' own outputs and temporaries are left out;
//   - order: a value recomputed for backward is there for every clone that
//     reads it, wherever that clone runs (a real plan may have to make it
//     again, or hoist it).
//
// In the form of a minimum cut (the node splitting of torch's partitioner,
// with recomputation time on the cut): the binaries are
//
//   X_n   forward node n runs again (a recomputable node that owns a storage);
//   Z_s   forward storage s, which backward does not read, is there for the
//         clones: held (Z_s - X_owner(s) = 1) or made again (X_owner(s) = 1);
//
//   minimise   sum seconds[n] X_n
//   operands   X_n <= Z_s for each storage s that n reads and that is neither a
//              graph input, nor live into backward anyway, nor a candidate
//              (a candidate is always there: kept, or made again at X's cost);
//              Z_s >= X_owner(s)
//   memory     base(t) - sum_{candidates c freed at t} bytes_c X_owner(c)
//                      + sum_{held s at t} bytes_s (Z_s - X_owner(s)) <= budget
//              per run of ranks over the budget with the same coefficients.
//
// Every row but the memory rows is a difference of two columns, so the
// program without them is a closure problem whose linear relaxation is
// integral: CBC's bound on it is close to its optimum, unlike the bound of
// the clone-by-point program (MilpFormulation.h), which is near zero on
// BERT-base because its chains relax to nothing.
//
// A solution is also a plan: the candidates whose node runs again dropped,
// the storages with Z - X = 1 held; RecomputeModel's closure and simulation
// then say what it really costs and peaks at.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/MilpProblem.h"
#include "checkpoint/RecomputeModel.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>

#include <optional>
#include <vector>

namespace graphopt {

class RecomputeRelaxation {
public:
  explicit RecomputeRelaxation(const RecomputeModel &model);

  /// The program for `budget` (bytes of the model's bounded memory); nullopt
  /// when some rank stays over it whatever is dropped.
  std::optional<MilpProblem> problem(int64_t budget) const;
  /// The same with at most `maxNonzeros` memory coefficients: where its rows
  /// have more (a long chain of activations: quadratic in the graph), the
  /// rows where the unoptimised memory is furthest over the budget, as many
  /// as fit, and `*partial` set. A program with fewer rows still bounds every
  /// plan's time from below (its optimum is no higher), but its solutions
  /// need not meet the budget: a bound, not a start. Nullopt when a row it
  /// keeps cannot be met (then no plan meets the budget).
  std::optional<MilpProblem> problem(int64_t budget, size_t maxNonzeros, bool &partial) const;

  /// The plan a solution describes.
  struct Decoded {
    std::vector<int32_t> dropped;     ///< candidates whose node runs again
    std::vector<const Value *> held;  ///< forward storages kept for the clones
  };
  Decoded decode(llvm::ArrayRef<double> columns) const;

  /// A plan's place in the program (the nodes its clones run again, the
  /// storages it holds or makes again): a start for the solver, and what the
  /// tests check satisfies every row at no more than the plan's time.
  std::vector<double> pointOf(const RecomputeSet &set, llvm::ArrayRef<const Value *> held) const;

  /// The least time any plan needs, in seconds, from the best bound a solver
  /// proved on problem()'s objective (its tie-breaks taken off); 0 when none.
  double lowerBoundSeconds(double solverBound) const;
  /// The objective value whose lowerBoundSeconds is `seconds` (its inverse).
  double objectiveOf(double seconds) const;
  /// The objective's unit, in seconds.
  double secondsUnit() const { return secondsUnit_; }
  size_t numNodeColumns() const { return nodes_.size(); }
  /// The memory rows' coefficients at most (every run of ranks a row): what
  /// building and solving the program costs grows with it, quadratically in
  /// the graph on a long chain of activations.
  size_t memoryNonzeros() const { return memoryNonzeros_; }
  size_t numStorageColumns() const { return storages_.size(); }
  const RecomputeModel &model() const { return model_; }

private:
  /// Where a column takes bytes off (positive) or puts them on the bounded memory.
  struct Interval {
    int64_t first, last; ///< ranks, inclusive
    int column;
    int64_t bytes;
  };
  /// Forward node -> its X column.
  using NodeColumns = llvm::DenseMap<const Node *, int>;

  // The constructor's steps, in order.
  NodeColumns addNodeColumns(int64_t backwardStart);
  void addStorageColumns(int64_t backwardStart);
  void addCandidateIntervals(const NodeColumns &nodeColumn, int64_t backwardStart);
  void addStorageIntervals(const NodeColumns &nodeColumn, int64_t backwardStart);
  /// cuts_ and memoryNonzeros_, from the intervals.
  void addCuts(int64_t numNodes);
  /// The objective's and the memory rows' units; the tie-breaks.
  void chooseUnits();
  /// The memory row of the run of ranks from `first` (to the next cut),
  /// reaching `high`, appended to `p`; false when it cannot be met.
  bool addMemoryRow(MilpProblem &p, int64_t first, int64_t high, int64_t budget) const;

  const RecomputeModel &model_;
  std::vector<const Node *> nodes_;      ///< per X column
  std::vector<const Value *> storages_;  ///< per Z column (after the X columns)
  std::vector<double> objective_;
  std::vector<MilpProblem::Row> structural_;
  std::vector<Interval> intervals_;
  std::vector<int64_t> cuts_; ///< ranks where the memory rows' coefficients change
  double secondsUnit_ = 1, bytesUnit_ = 1;
  size_t tieBroken_ = 0; ///< columns whose objective is the tie-break alone
  size_t memoryNonzeros_ = 0;
};

/// `model`'s relaxation, made once per model (the planners ask for it per
/// start and per budget rung: at 100k nodes building it is some tens of ms
/// each time). Like every other member, it assumes the graph does not change
/// after RecomputeModel::build().
const RecomputeRelaxation &relaxationOf(const RecomputeModel &model);

} // namespace graphopt
