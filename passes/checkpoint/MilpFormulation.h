//===- MilpFormulation.h - checkpoint{planner=milp}'s mixed-integer program -*- C++ -*-===//
//
// A reduced form of Checkmate's MILP (Jain et al., MLSys 2020). Checkmate
// decides, for every stage t and node i, whether i is computed (R[t,i]) and
// kept (S[t,i]), free to reorder everything. Here the schedule is the joint
// graph's order and RecomputeModel's closure says where clones go: a dropped
// candidate's values are made again at its first backward use (its "point"),
// and each operand a clone cannot read there is made at the same point. So
// the binaries are
//
//   d_c      candidate c is dropped;
//   r_{n,p}  forward node n is cloned before rank p (p: some candidate's point).
//
//   minimise   sum seconds[n] * r_{n,p}
//   drop       r_{def(v),p_c} >= d_c     for each value v of c that backward reads
//   operands   for clone (n,p) reading o, in storage s:
//              (nothing)                  o is a graph input, a kept storage live at p,
//                                         or a dropped value whose own clone is live at p
//              r_{def(o),p} >= r_{n,p} + d_s - 1   s is a candidate live at p
//              r_{def(o),p} >= r_{n,p}             s is gone by p (freed in forward)
//              r_{n,p} = 0                n may not run again (whyNotRecomputable), it
//                                         reads a storage written in place in between,
//                                         or a dropout mask that is gone
//   memory     base(t) - sum_c bytes_c * d_c * [t in cover_c] <= budget
//              for every rank t over the budget; cover_c is where dropping c takes it
//              off the bounded memory (between its last forward and first backward
//              use for the peak; its whole life for the saved activations). One row per
//              run of ranks with the same covering candidates (the run's highest base).
//
// These are PlanState::grow's rules, so a solution's closure is exactly its
// r columns and costs exactly its objective. What the program leaves out is
// memory: the clones' own temporaries. The planner simulates each solution's
// rewrite and, where the simulation is over the budget, raises that rank's
// base by the program's error there (`adjust`), then solves again.
//
// Size: one r column per (node, point) a chain may reach, O(nodes x points)
// when chains run back through every candidate. Past kMaxColumns, chains are
// cut at some number of candidates passed through (hops): a clone that would
// need a dropped candidate beyond that may not coexist with the drop
// (r_{n,p} + d_s <= 1). A restriction of the plans, never a wrong cost.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/RecomputeModel.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>

#include <optional>
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

class CheckpointMilp {
public:
  /// `maxColumns` bounds the r columns (chains are cut past it, see above).
  explicit CheckpointMilp(const RecomputeModel &model, size_t maxColumns = kMaxColumns);
  static constexpr size_t kMaxColumns = 200000;

  /// Column c is d_c for candidate c; the r columns follow.
  size_t numCandidates() const { return numCandidates_; }
  size_t numNodeColumns() const { return nodeRank_.size(); }
  /// The most candidates a chain passes through at one point; -1: no cut.
  int maxHops() const { return maxHops_; }

  /// The program whose memory rows hold base(t) + adjust[t] (adjust may be
  /// empty) to `budget`, base being the model's bounded memory
  /// (RecomputeModel::boundedTimeline, the budget's units). nullopt when some
  /// rank over the budget is not covered by enough candidates to get under it.
  std::optional<MilpProblem> problem(int64_t budget, llvm::ArrayRef<int64_t> adjust) const;

  /// The timeline the memory rows see once `dropped` (candidate indices) is
  /// dropped, without `adjust`.
  std::vector<int64_t> modelledTimeline(llvm::ArrayRef<int32_t> dropped) const;

  /// A plan (dropped candidates and the closure's clones) as column values,
  /// to start the solver from; empty when one of its clones has no column.
  std::vector<double> columnsOf(llvm::ArrayRef<int32_t> dropped, const RecomputeSet &set) const;

  /// The objective's unit, in seconds (coefficients are scaled to at most 1).
  double secondsUnit() const { return secondsUnit_; }

private:
  /// When a clone at a point must have an operand made there too.
  enum class Need : uint8_t { IfDropped, IfKept, Always };
  struct Operand {
    const Node *def;
    int32_t candidate;
    Need need;
  };
  /// The operands the clone of `n` before rank `p` may need made; false when
  /// that clone may not exist at all.
  bool operandsOf(const Node &n, int64_t p, std::vector<Operand> &out) const;
  bool writtenBetween(const Value *storage, int64_t after, int64_t before) const;

  const RecomputeModel &model_;
  size_t numCandidates_ = 0;
  int maxHops_ = -1;
  llvm::DenseMap<const Value *, std::vector<int64_t>> writes_; ///< storage -> write ranks
  std::vector<int64_t> nodeRank_;  ///< per r column, its node's rank
  std::vector<int64_t> nodePoint_; ///< per r column, the rank its clone goes before
  llvm::DenseMap<std::pair<int64_t, int64_t>, int> nodeColumn_; ///< (rank, point) -> column
  std::vector<double> objective_, upper_;
  std::vector<MilpProblem::Row> structural_; ///< drop and operand rows
  /// Per candidate: the ranks [first, second] dropping it takes its bytes off.
  std::vector<std::pair<int64_t, int64_t>> covers_;
  /// Ranks where the set of candidates covering a rank changes, ascending.
  std::vector<int64_t> cuts_;
  double secondsUnit_ = 1, bytesUnit_ = 1;
};

} // namespace graphopt
