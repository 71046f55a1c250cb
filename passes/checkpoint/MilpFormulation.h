//===- MilpFormulation.h - checkpoint{planner=milp}'s mixed-integer program -*- C++ -*-===//
//
// A reduced form of Checkmate's MILP (Jain et al., MLSys 2020). Checkmate
// decides, for every stage t and node i, whether i is computed (R[t,i]) and
// kept (S[t,i]), free to reorder everything. Here the schedule is the joint
// graph's order and RecomputeModel's closure says where clones go: a dropped
// candidate's values are made again by its "own" clone, at its first
// backward use (its point) or hoisted to an earlier point (PlanState::hoisted:
// held from there, shared), and each operand a clone cannot read where it
// runs is made at the same point. So the binaries are
//
//   d_c      candidate c is dropped;
//   g_{c,k}  its own clone is made by its k-th hoist point q_k (the points, before
//            c's own point p_c, where a clone may read c's storage: made there, the
//            own clone shares what that clone needs; ascending, so g is a
//            prefix: g_{c,1} <= ... <= g_{c,K} <= d_c, and each row needs one g);
//   r_{n,p}  forward node n is cloned before rank p (p: some own clone's point).
//
//   minimise   sum seconds[n] * r_{n,p}
//   own        r_{def(v),q_k} >= g_{c,k} - g_{c,k-1};  r_{def(v),p_c} >= d_c - g_{c,K}
//              for each value v of c that backward reads
//   operands   clone (n,p) reads o as is when o's storage s is a graph input, or
//              kept and live at p, or dropped with its own clone live at p (made at
//              p_s, or by a hoist point <= p; until o's last backward use); else o is
//              made at p too:  r_{def(o),p} >= r_{n,p} - [o is there]  (linear);
//              r_{n,p} = 0 when n may not run again (whyNotRecomputable), reads a
//              storage written in place in between, or a dropout mask that is gone
//   memory     base(t) - sum_c bytes_c * (d_c [t in cover_c] - g_{c,k(t)} [t < p_c])
//              <= budget at every rank t over the budget; cover_c is where dropping c
//              takes it off the bounded memory (after its last forward use and before
//              its point for the peak, its whole life for the saved activations, which
//              a clone made in backward is not). One row per run of ranks with the same
//              coefficients (the run's highest base).
//
// These are PlanState's rules, so a solution's closure is exactly its r
// columns and costs exactly its objective. What the program leaves out is
// memory: the clones' own temporaries. The planner simulates each solution's
// rewrite and, where the simulation is over the budget, raises that rank's
// base by the program's error there (`adjust`), then solves again.
//
// Size: one r column per (node, point) a chain may reach, O(nodes x points)
// when chains run back through every candidate. Past kMaxColumns, chains are
// cut at some number of candidates passed through (hops): a clone that would
// need a dropped candidate beyond that may not coexist with that drop. A
// restriction of the plans, never a wrong cost.
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

class CheckpointMilp {
public:
  /// `maxColumns` bounds the r and g columns (chains are cut past it, see above).
  explicit CheckpointMilp(const RecomputeModel &model, size_t maxColumns = kMaxColumns);
  /// CBC's root LP is not cut short by its time limit: ResNet-152's program
  /// takes it 6 s at 46k columns, 45 s at 180k.
  static constexpr size_t kMaxColumns = 50000;

  /// Column c is d_c for candidate c; the r columns follow, then the g columns.
  size_t numCandidates() const { return numCandidates_; }
  size_t numNodeColumns() const { return nodeRank_.size(); }
  size_t numHoistColumns() const { return hoists_.size(); }

  /// A dropped candidate's own clone made before rank `point`, not its first backward use.
  struct Hoist {
    int32_t candidate;
    int64_t point;
  };
  /// The plan a solution's column values describe.
  struct Decoded {
    std::vector<int32_t> dropped;
    std::vector<Hoist> hoists;
  };
  Decoded decode(llvm::ArrayRef<double> columns) const;
  /// The most candidates a chain passes through at one point; -1: no cut.
  int maxHops() const { return maxHops_; }

  /// The program whose memory rows hold base(t) + adjust[t] (adjust may be
  /// empty) to `budget`, base being the model's bounded memory
  /// (RecomputeModel::boundedTimeline, the budget's units). nullopt when some
  /// rank over the budget is not covered by enough candidates to get under it.
  std::optional<MilpProblem> problem(int64_t budget, llvm::ArrayRef<int64_t> adjust) const;

  /// The timeline the memory rows see for a plan, without `adjust`.
  std::vector<int64_t> modelledTimeline(const Decoded &plan) const;

  /// A plan (dropped candidates and the closure's clones, own clones where
  /// its redirects say) as column values, to start the solver from; empty
  /// when one of its clones or hoists has no column.
  std::vector<double> columnsOf(llvm::ArrayRef<int32_t> dropped, const RecomputeSet &set) const;

  /// The objective's unit, in seconds (coefficients are scaled to at most 1).
  double secondsUnit() const { return secondsUnit_; }

private:
  /// An operand the clone of a node at point p may need made at p too.
  struct Operand {
    const Node *def;
    int32_t candidate; ///< its storage's candidate, or -1
    bool live;         ///< its storage is live at p in the unoptimised graph
    bool own;          ///< a dropped candidate's own clone made at its point serves it
    bool hoistable;    ///< one hoisted to a point q <= p would (a value backward reads)
    bool early;        ///< p is before the candidate's own point: a place to hoist it to
    /// Made at p whatever the plan (not through a candidate: no hop).
    bool always() const { return candidate < 0 || (!live && !own && !hoistable); }
  };
  /// The operands the clone of `n` before rank `p` may need made; false when
  /// that clone may not exist at all.
  bool operandsOf(const Node &n, int64_t p, std::vector<Operand> &out) const;
  /// The g column saying candidate c's own clone is made by rank p, or -1.
  int hoistedBy(int32_t c, int64_t p) const;
  /// The r column of the clone of `n` before rank `p`, or -1.
  int nodeColumnOf(const Node *n, int64_t p) const;
  /// Whether a chain of `hops` is within the cut (maxHops).
  bool withinHops(int hops) const { return maxHops_ < 0 || hops <= maxHops_; }

  // The constructor's steps, in order.
  struct Reachable; ///< the (node, point) pairs and hoists chains reach, with their hops
  class RowSet;     ///< the structural rows, each added once
  Reachable reachablePairs() const;
  void cutChains(const Reachable &reached, size_t maxColumns);
  void addColumns(const Reachable &reached);
  void addOwnCloneRows(RowSet &rows);
  void addOperandRows(RowSet &rows);
  void scaleUnits();
  void computeCovers();

  const RecomputeModel &model_;
  size_t numCandidates_ = 0;
  int maxHops_ = -1;
  std::vector<int64_t> nodeRank_;  ///< per r column, its node's rank
  std::vector<int64_t> nodePoint_; ///< per r column, the rank its clone goes before
  llvm::DenseMap<std::pair<int64_t, int64_t>, int> nodeColumn_; ///< (rank, point) -> column
  std::vector<Hoist> hoists_; ///< per g column
  /// Per candidate: its hoist points, ascending, and their g columns.
  std::vector<std::vector<std::pair<int64_t, int>>> hoistsOf_;
  std::vector<double> objective_, upper_;
  std::vector<MilpProblem::Row> structural_; ///< drop and operand rows
  /// Per candidate: the ranks [first, second] dropping it takes its bytes off
  /// (with its own clone at its point; a hoist to q gives back [q, second]).
  std::vector<std::pair<int64_t, int64_t>> covers_;
  /// Ranks where the set of candidates covering a rank changes, ascending.
  std::vector<int64_t> cuts_;
  bool peakBound_ = true; ///< the budget bounds the peak (else the saved activations)
  double secondsUnit_ = 1, bytesUnit_ = 1;
};

} // namespace graphopt
