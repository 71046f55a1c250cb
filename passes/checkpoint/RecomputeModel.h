//===- RecomputeModel.h - What dropping activations and recomputing them costs -*- C++ -*-===//
//
// The planners' view of a joint training graph (docs/Checkpointing.md):
//
//   - candidates: activation storages (made in forward, read in backward,
//     owned by a value, not a graph output) that could be dropped after their
//     last forward use and made again in backward;
//   - a plan: the set of candidates dropped;
//   - its recomputation (`closure`): every dropped storage's values that
//     backward reads are made again by clones of their producers, placed just
//     before the first node that needs them, and shared by every backward
//     reader, as the activation was. A clone reads each operand as is when it
//     is still live there (a graph input, or a storage the plan keeps that is
//     not freed yet), or the dropped value's own clone while that lives, else
//     a clone of it made at the same point and freed when used (chains of
//     recomputation). A value two points need is made twice rather than held
//     between them: recomputation never extends a lifetime (μ-TWO's rule);
//     the planners see the repeated time and prefer plans that avoid it.
//     A plan may also hold a forward storage backward does not read, for
//     clones to read (torch's partitioner saves such values);
//   - its cost: the clones' measured (or estimated) time; its memory: the
//     liveness simulation of the rewritten graph (`simulate`), not a guess.
//
// What never runs again: operators that write an argument, operators with
// side effects (collectives, asserts), values whose storage is written in
// place after they are made, and reads of anything written between the
// original read and the clone. Random operators are not run again either: a
// second draw would differ. native_dropout is the exception, replayed two
// ways, both bit for bit: from the mask its forward call drew, where the
// mask is kept (output = input * mask * scale, the arithmetic of its CPU
// kernel), else from the generator's state taken just before the forward
// call (graphopt::rng_state, a few KiB saved instead of the mask; the clone
// is graphopt::native_dropout_replay: GraphoptOps.h), so that its mask can be
// dropped too. Other random operators' outputs stay saved.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/BitVector.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/SmallVector.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace graphopt {

struct ModelBlocks;
class PlanState;
class RecomputeRelaxation;

/// An activation storage that a plan may drop.
struct CheckpointCandidate {
  const Value *storage = nullptr; ///< the value owning the storage
  int64_t bytes = 0;
  int64_t created = -1;
  int64_t lastForwardUse = -1;   ///< last forward read of any value in the storage (or `created`)
  int64_t firstBackwardUse = -1; ///< first non-forward read of any value in it
  int64_t lastBackwardUse = -1;
  /// The values in the storage that backward reads (the storage owner and views of it).
  std::vector<const Value *> backwardValues;
  /// Every value in the storage made in forward (backward's readers and the rest).
  std::vector<const Value *> values;
  /// Recomputing it alone, from what the unoptimised graph keeps: seconds and nodes.
  double standaloneSeconds = 0;
  unsigned standaloneNodes = 0;
};

/// The clones a plan needs, in the order they are inserted.
struct RecomputeSet {
  /// How a clone of native_dropout draws its mask.
  enum class Dropout : uint8_t {
    None,     ///< not a dropout
    Mask,     ///< the forward call's mask, kept: input * mask * scale
    RngState, ///< drawn again from the generator state saved before the forward call
  };
  struct Clone {
    const Node *original = nullptr;
    int64_t before = -1; ///< inserted just before the node of this rank
    Dropout dropout = Dropout::None;
  };
  std::vector<Clone> clones; ///< sorted by (before, original rank)
  double seconds = 0;        ///< the originals' time, summed over the clones
  /// A dropped value's own clone: made before its first backward use
  /// (`before`), read by every backward use, and by recomputations up to its
  /// last backward use (`until`).
  struct Redirect {
    const Value *value = nullptr;
    int64_t before = -1, until = -1;
  };
  std::vector<Redirect> redirected;
};

/// What a budget bounds.
enum class BoundedMemory : uint8_t {
  /// The step's peak above the graph inputs (weights, optimizer state, the
  /// batch): what graph-opt --run measures; gradients and temporaries count.
  PeakAboveInputs,
  /// The activations saved for backward (liveness kind ACT) at their highest:
  /// what torch.compile's activation_memory_budget bounds.
  SavedActivations,
};

/// A rewritten graph's simulation, in numbers.
struct Simulation {
  int64_t peakAboveInputs = 0; ///< the simulated peak less the graph inputs
  int64_t savedActivations = 0; ///< the highest of the activations saved for backward
  int64_t bounded = 0;         ///< the highest of the bounded memory
  int64_t peakNode = -1;       ///< the rank in the rewritten graph
  /// Per original rank: the bounded memory at it and at the clones before it (highest).
  std::vector<int64_t> boundedByRank;
  /// The same for the peak above the inputs (equal to boundedByRank when
  /// that is the bounded memory): a second bound's timeline.
  std::vector<int64_t> peakAboveInputsByRank;
};

class RecomputeModel {
public:
  /// `seconds` and `scratch` are per node rank (scratch may be empty: graph
  /// memory only). Fails on a graph without a backward phase.
  /// `replayRngStates`: a dropout's mask may be dropped, the dropout then
  /// replayed from an RNG state; false keeps every mask (the MILP's model).
  static absl::StatusOr<RecomputeModel> build(const Graph &graph, std::vector<double> seconds,
                                              std::vector<int64_t> scratch,
                                              BoundedMemory bounded = BoundedMemory::PeakAboveInputs,
                                              bool replayRngStates = true);
  bool replaysRngStates() const { return replayRngStates_; }
  /// Some node of the graph writes a storage in place (a functional graph,
  /// as torch.export's joint graphs are, has none).
  bool writesInPlace() const { return writesInPlace_; }
  BoundedMemory boundedMemory() const { return bounded_; }
  /// The bounded memory at each rank of the unoptimised graph (inputs left out).
  llvm::ArrayRef<int64_t> boundedTimeline() const { return boundedTimeline_; }
  /// Its highest value: what a plan must bring down to the budget.
  int64_t boundedPeak() const;
  /// The memory above the inputs at each rank of the unoptimised graph,
  /// whichever memory is bounded.
  llvm::ArrayRef<int64_t> peakAboveInputsTimeline() const { return peakTimeline_; }

  const Graph &graph() const { return *graph_; }
  /// The unoptimised graph's simulation (with scratch when given).
  const LivenessResult &baseline() const { return baseline_; }
  llvm::ArrayRef<CheckpointCandidate> candidates() const { return candidates_; }
  llvm::ArrayRef<double> seconds() const { return seconds_; }
  llvm::ArrayRef<int64_t> scratch() const { return scratch_; }
  const Node *nodeAt(int64_t rank) const { return nodes_[rank]; }
  /// The rank of the first node not in forward (a model always has one).
  int64_t backwardStart() const { return backwardStart_; }
  /// The candidate index of a storage owner, or -1.
  int32_t candidateOf(const Value *storage) const;
  /// Candidates that can never be dropped, with why (for the report).
  llvm::ArrayRef<std::pair<const Value *, std::string>> excluded() const { return excluded_; }
  /// Why `node` may not run again ("" when it may); the MILP planner asks it of every node.
  std::string whyNotRecomputable(const Node &node) const;

  /// True when some node writes `v`'s storage at a rank in (after, before).
  bool writtenBetween(const Value *v, int64_t after, int64_t before) const;
  /// The recomputation `dropped` (candidate indices) needs; an error names
  /// the value that cannot be made again and why. `held`: storages (their
  /// owning values, made in forward) the plan keeps for recomputations to
  /// read although backward does not read them (torch's plans save such
  /// values: the narrow end of a chain); their lifetime extends to the last
  /// clone that reads them.
  absl::StatusOr<RecomputeSet> closure(llvm::ArrayRef<int32_t> dropped,
                                       llvm::ArrayRef<const Value *> held = {}) const;

  /// Rewrites `target` (this model's graph, or a clone of it made with
  /// `cloneMap`): inserts the clones, marked recompute_of, and points the
  /// backward uses at them. Returns the number of nodes added.
  /// `sourceRank`, when given, receives for every node of `target` the rank
  /// of the node it is or recomputes.
  absl::StatusOr<unsigned> apply(const RecomputeSet &set, Graph &target,
                                 const ValueMap<Value *> *cloneMap = nullptr,
                                 NodeMap<int64_t> *sourceRank = nullptr) const;
  /// The liveness simulation of the graph `set` rewrites to, clones charged
  /// their original's scratch, computed without making that graph
  /// (RecomputeSimulation.cpp): linear in the graph's uses and the clones.
  absl::StatusOr<Simulation> simulate(const RecomputeSet &set) const;
  /// The same by rewriting a copy of the graph and running LivenessAnalysis
  /// on it (this graph is untouched): the reference simulate() is tested
  /// against, and the check of a plan before the pass rewrites the graph.
  absl::StatusOr<Simulation> simulateByRewrite(const RecomputeSet &set) const;
  /// The same on this model's own graph after apply() rewrote it (`source`,
  /// apply's sourceRank): the pass's check of the plan it applied, without
  /// rewriting a copy first (at 100k nodes that copy was a tenth of the pass).
  absl::StatusOr<Simulation> simulateRewritten(const NodeMap<int64_t> &source) const;

private:
  friend class PlanState;
  /// The Simulation of `rewritten` (a plan applied to this model's graph or
  /// a copy of it; `source`, apply's sourceRank): its liveness, each
  /// original rank taking the highest of itself and the clones before it.
  absl::StatusOr<Simulation>
  simulationOfRewrite(const Graph &rewritten, const NodeMap<int64_t> &source,
                      llvm::function_ref<bool(const Node &)> isOriginal) const;
  friend const ModelBlocks &findBlocks(const RecomputeModel &model);
  friend const RecomputeRelaxation &relaxationOf(const RecomputeModel &model);
  friend std::vector<llvm::BitVector> &givenUpStartsOf(const RecomputeModel &model);
  RecomputeModel() = default;
  // build()'s steps, after the liveness and the aliases.
  /// The candidates and their values' uses (candidates_, candidateIndex_).
  void addCandidates();
  /// Prices candidate `i` alone (its standalone seconds and nodes, with
  /// nothing else dropped: `none`); why it cannot be dropped where it cannot,
  /// else empty.
  std::string priceAlone(int32_t i, PlanState &none);
  /// Keeps the candidates `why` has no reason against; the others excluded.
  void keepDroppable(const std::vector<std::string> &why);
  /// findBlocks' result, found on first use (ModelBlocks.h). Like every
  /// other member it assumes the graph does not change after build().
  mutable std::shared_ptr<const ModelBlocks> blocks_;
  /// relaxationOf's result (RecomputeRelaxation.h), made on first use; it
  /// refers to the model it was made from, so a copy or a moved-to model
  /// makes its own.
  mutable std::shared_ptr<const RecomputeRelaxation> relaxation_;
  /// givenUpStartsOf's sets (GreedyPlanner.cpp), shared by copies.
  mutable std::shared_ptr<std::vector<llvm::BitVector>> givenUpStarts_;
  struct ScratchCopy;
  /// The graph copy simulate() rewrites and restores (made on first use;
  /// shared by copies of this model, one simulation at a time). Like every
  /// other member it assumes the model's graph does not change after build().
  mutable std::shared_ptr<ScratchCopy> scratchCopy_;

  const Graph *graph_ = nullptr;
  BoundedMemory bounded_ = BoundedMemory::PeakAboveInputs;
  bool replayRngStates_ = true;
  bool writesInPlace_ = false;
  int64_t backwardStart_ = 0;
  LivenessResult baseline_;
  std::vector<int64_t> boundedTimeline_;
  std::vector<int64_t> peakTimeline_;
  std::vector<double> seconds_;
  std::vector<int64_t> scratch_;
  std::vector<const Node *> nodes_;
  std::vector<CheckpointCandidate> candidates_;
  ValueMap<int32_t> candidateIndex_;
  std::vector<std::pair<const Value *, std::string>> excluded_;
  /// Storages, views and in-place writes (ranks are the model's node ranks).
  std::optional<AliasInfo> aliases_;
};

/// The starts the greedy gave up on `model` (GreedyPlanner.cpp,
/// kMaxStartClonesPerNode), as sets of candidates, kept with the model across
/// the budgets planned on it: drops only add clones, so a start holding one
/// of these sets is given up too.
std::vector<llvm::BitVector> &givenUpStartsOf(const RecomputeModel &model);

/// The ranks where dropping candidate `c` lowers memory of `kind`. The peak
/// above the inputs: from its last forward use until its own clone is made.
/// The saved activations: its whole life, since neither it nor its clones
/// are saved for backward any more.
std::pair<int64_t, int64_t> freedRanksOf(const RecomputeModel &model, BoundedMemory kind,
                                         const CheckpointCandidate &c);

/// A plan under construction: the candidates dropped so far and the
/// recomputation they need, grown one candidate at a time (the greedy planner
/// asks what each next candidate would add before choosing).
class PlanState {
public:
  explicit PlanState(const RecomputeModel &model);
  /// Keeps forward storage `storage` (its owning value) for recomputations
  /// to read (RecomputeModel::closure's `held`); before any add().
  void hold(const Value *storage);
  /// Drops candidate `c` too; an error (and no change) when it cannot be recomputed.
  absl::Status add(int32_t c);
  /// What dropping `c` too would add: the seconds and number of the new clones.
  absl::StatusOr<std::pair<double, unsigned>> marginal(int32_t c);
  bool isDropped(int32_t c) const { return dropped_[c] != 0; }
  RecomputeSet result() const;

  /// Where a dropped candidate's own clone is made: its first backward use,
  /// unless hoisted earlier (the rank before which it is made).
  int64_t ownAt(int32_t c) const { return ownAt_[c]; }
  /// A dropped candidate whose values are also made again, for other
  /// recomputations, before its own clone: where the earliest is, and the
  /// seconds those repeats cost.
  struct Repeat {
    int32_t candidate;
    int64_t earliest;
    double seconds;
  };
  std::vector<Repeat> repeats() const;
  /// Where hoisting would share each repeat: (candidate, its earliest
  /// repeat), in repeats()' order (costliest first).
  std::vector<std::pair<int32_t, int64_t>> repeatPoints() const;
  /// The same plan with candidate `c`'s own clone made before rank `p` and
  /// shared with the recomputations from there on (held from `p`, not
  /// repeated); an error when the plan cannot be rebuilt so.
  absl::StatusOr<PlanState> hoisted(int32_t c, int64_t p) const;
  /// The same for several (candidate, point) pairs at once: one rebuild.
  absl::StatusOr<PlanState> hoisted(llvm::ArrayRef<std::pair<int32_t, int64_t>> points) const;
  /// Shares every repeat from its earliest point (as torch's backward makes
  /// each recomputed value once and keeps it), round after round while new
  /// repeats appear further up the chains (at most `maxRounds`); returns how
  /// many own clones were hoisted. No simulation: the caller checks the memory.
  unsigned hoistEveryRepeat(unsigned maxRounds = 16);
  /// The same plan with each (candidate, rank) pair's own clone made before
  /// that rank instead, earlier or later than now, at the latest at its
  /// first backward use: one rebuild.
  absl::StatusOr<PlanState> withOwnAt(llvm::ArrayRef<std::pair<int32_t, int64_t>> points) const;
  /// The plan with candidate `c` kept again (no longer dropped), the other
  /// drops and their own clones' points as they are: one rebuild.
  absl::StatusOr<PlanState> without(int32_t c) const;
  /// The dropped candidates, in the order added.
  llvm::ArrayRef<int32_t> dropped() const { return order_; }
  /// How many clones the plan needs so far.
  size_t cloneCount() const { return cloneCount_; }

private:
  /// A node cloned just before the node of some rank.
  using Clone = std::pair<const Node *, int64_t>;
  using Clones = llvm::DenseSet<Clone>;
  /// `clones` by (rank made before, rank of the node cloned): an order that
  /// does not depend on where nodes live in memory, so that sums of their
  /// seconds, and the choices made on those sums, repeat from run to run.
  std::vector<Clone> inRankOrder(std::vector<Clone> clones) const;
  /// The planned clones, inRankOrder.
  std::vector<Clone> plannedClones() const;
  bool available(const Value *v, int64_t p) const;
  /// How a clone of dropout `n` made before rank `p` draws its mask: from
  /// the kept mask where that is readable there (not counting this clone,
  /// when it is the mask's own), else from the RNG state.
  RecomputeSet::Dropout dropoutReplay(const Node *n, int64_t p) const;
  bool isCloned(const Node *n, int64_t p) const;
  absl::Status grow(int32_t c, Clones &added);
  /// This plan's drops (but `leave`) and held values, added again in order
  /// with their own clones made before `ownAt` (per candidate).
  absl::StatusOr<PlanState> rebuilt(std::vector<int64_t> ownAt, int32_t leave = -1) const;

  const RecomputeModel *model_;
  std::vector<uint8_t> dropped_;
  std::vector<int32_t> order_; ///< dropped candidates, in the order added
  std::vector<int64_t> ownAt_;
  llvm::DenseSet<const Value *> held_;
  /// Cloned node -> the ranks it is cloned before.
  llvm::DenseMap<const Node *, llvm::SmallVector<int64_t, 1>> clonedAt_;
  size_t cloneCount_ = 0; ///< the ranks in clonedAt_, all nodes together
};

} // namespace graphopt
