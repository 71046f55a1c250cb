//===- RecomputeSimulation.cpp - A plan's liveness without rewriting a graph ------===//
//
// RecomputeModel::simulate: the memory timeline of the graph a RecomputeSet
// rewrites to, computed from the model's graph, its liveness and the clones'
// ranks, without making the rewritten graph. It follows what apply() would
// build (the clones before their ranks, each reading what CloneWriter::source
// gives, backward's uses of dropped values redirected to their own clones,
// one graphopt::rng_state per replayed dropout before its forward call) and
// what LivenessAnalysis would find on it (the executor's free-after-last-use
// policy, storages through views, kinds), in arrays indexed by value. At 100k
// nodes a rewrite-and-restore simulation was a third of a second, most of it
// making and erasing nodes; this is one walk of the graph's uses and one of
// the clones' (docs/Checkpointing.md, "The default pipeline at scale").
// simulateByRewrite (RecomputeModel.cpp) is the reference; the checkpoint
// tests compare the two on every model and many plans.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/RecomputeModel.h"

#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/Runtime/Collectives.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace graphopt {

namespace {

/// One value of the rewritten graph: the model's own (indexed by their
/// liveness slot) or a clone's output or an RNG state (appended after them).
struct VirtualValue {
  int64_t created = -1;  ///< position in the rewritten graph; -1 for graph inputs
  int64_t lastUse = -1;  ///< position of the node after which it is dropped
  bool keptToEnd = false; ///< a graph input or output
  bool madeInForward = false;
  bool readInBackward = false;
  int64_t bytes = 0;    ///< the storage it owns (0 for a view)
  int32_t storage = -1; ///< the value whose storage it lives in
};

class RewriteSimulator {
public:
  RewriteSimulator(const RecomputeModel &model, const AliasInfo &aliases,
                   const RecomputeSet &set)
      : model_(model), live_(model.baseline()), aliases_(aliases), set_(set) {}

  absl::StatusOr<Simulation> run();

private:
  using Key = std::pair<const Value *, int64_t>;
  int32_t slot(const Value *v) const { return live_.slot.lookup(v); }
  int64_t rankOf(const Node *n) const { return live_.rank.lookup(n); }
  /// Positions: every inserted node is anchored before an original rank.
  void placeNodes();
  int64_t positionOf(int64_t rank) const { return rank + insertedUpTo_[rank + 1]; }
  int32_t newValue(int64_t position, bool forward);
  /// CloneWriter::source: what a clone made before rank `p` reads for `v`.
  int32_t source(const Value *v, int64_t p) const;
  /// What original node `n` reads for operand `v`: outside forward, a dropped
  /// value's own clone in place of the value.
  int32_t readByOriginal(const Value *v, const Node &n) const;
  void read(int32_t value, int64_t position, bool forward);
  /// The storage of `out`, the rewritten graph's output `o` of (a copy of)
  /// `n`, whose operands are read as `resolve` gives them: its own when `o`
  /// owns one, else that of the operand it views (other roots kept alive by it).
  template <typename Resolve> void assignStorage(int32_t out, const Value *o, const Node &n,
                                                 Resolve resolve);
  absl::Status addClones();
  void addOriginalUses();
  Simulation timeline();

  const RecomputeModel &model_;
  const LivenessResult &live_;
  const AliasInfo &aliases_;
  const RecomputeSet &set_;
  std::vector<VirtualValue> values_;
  llvm::DenseMap<int32_t, llvm::SmallVector<int32_t, 2>> otherRoots_;
  /// Inserted nodes anchored before ranks < r (insertedUpTo_[r]).
  std::vector<int64_t> insertedUpTo_;
  /// Per clone (set_.clones' order) its position; RNG states by dropout rank.
  std::vector<int64_t> clonePosition_;
  llvm::DenseMap<int64_t, int64_t> statePosition_;
  llvm::DenseMap<int64_t, int32_t> stateValue_;
  llvm::DenseMap<Key, int32_t> made_;
  llvm::DenseMap<const Value *, const RecomputeSet::Redirect *> own_;
  /// Per position: the rank of the node whose scratch it is charged, and
  /// whether it is an original node (the timeline by original rank).
  std::vector<int64_t> chargedRank_;
  std::vector<uint8_t> isOriginal_;
  int64_t numPositions_ = 0;
};

void RewriteSimulator::placeNodes() {
  const int64_t n = static_cast<int64_t>(model_.graph().numNodes());
  std::vector<int64_t> anchored(n + 1, 0);
  for (const RecomputeSet::Clone &c : set_.clones)
    ++anchored[c.before];
  // One RNG state per replayed dropout, just before its forward call.
  for (const RecomputeSet::Clone &c : set_.clones)
    if (c.dropout == RecomputeSet::Dropout::RngState) {
      int64_t d = rankOf(c.original);
      if (statePosition_.try_emplace(d, -1).second)
        ++anchored[d];
    }
  insertedUpTo_.assign(n + 2, 0);
  for (int64_t r = 0; r <= n; ++r)
    insertedUpTo_[r + 1] = insertedUpTo_[r] + anchored[r];
  numPositions_ = n + insertedUpTo_[n + 1];
  chargedRank_.assign(numPositions_, -1);
  isOriginal_.assign(numPositions_, 0);
  for (int64_t r = 0; r < n; ++r) {
    chargedRank_[positionOf(r)] = r;
    isOriginal_[positionOf(r)] = 1;
  }
  // Clones at one anchor in the set's order, after any RNG state there
  // (states anchor at forward ranks, clones at backward ones: never both).
  std::vector<int64_t> next(n + 1, 0);
  for (auto &[d, pos] : statePosition_) {
    pos = d + insertedUpTo_[d] + next[d]++;
    chargedRank_[pos] = d; // charged as the dropout, as apply() marks it
  }
  clonePosition_.reserve(set_.clones.size());
  for (const RecomputeSet::Clone &c : set_.clones) {
    int64_t pos = c.before + insertedUpTo_[c.before] + next[c.before]++;
    clonePosition_.push_back(pos);
    chargedRank_[pos] = rankOf(c.original);
  }
}

int32_t RewriteSimulator::newValue(int64_t position, bool forward) {
  VirtualValue v;
  v.created = position;
  v.lastUse = position; // dropped right after its node unless read later
  v.madeInForward = forward;
  values_.push_back(v);
  int32_t id = static_cast<int32_t>(values_.size() - 1);
  values_.back().storage = id;
  return id;
}

int32_t RewriteSimulator::source(const Value *v, int64_t p) const {
  if (auto it = made_.find({v, p}); it != made_.end())
    return it->second;
  if (auto it = own_.find(v); it != own_.end() && it->second->before <= p && p <= it->second->until)
    if (auto m = made_.find({v, it->second->before}); m != made_.end())
      return m->second;
  return slot(v);
}

int32_t RewriteSimulator::readByOriginal(const Value *v, const Node &n) const {
  if (n.phase() != Phase::Forward)
    if (auto it = own_.find(v); it != own_.end())
      if (auto m = made_.find({v, it->second->before}); m != made_.end())
        return m->second;
  return slot(v);
}

void RewriteSimulator::read(int32_t value, int64_t position, bool forward) {
  VirtualValue &v = values_[value];
  v.lastUse = std::max(v.lastUse, position);
  if (!forward)
    v.readInBackward = true;
}

template <typename Resolve>
void RewriteSimulator::assignStorage(int32_t out, const Value *o, const Node &n,
                                     Resolve resolve) {
  VirtualValue &v = values_[out];
  v.storage = out;
  if (!o->isTensor())
    return;
  if (aliases_.ownsStorage(o)) {
    v.bytes = live_.lookup(o)->bytes + live_.lookup(o)->hostBytes;
    if (isHostCopy(n)) // graphopt::offload's copy lives in host memory
      v.bytes = 0;
    return;
  }
  llvm::SmallVector<const Value *, 2> roots = aliases_.roots(o);
  roots.erase(std::remove(roots.begin(), roots.end(), o), roots.end());
  llvm::SmallVector<int32_t, 2> storages;
  for (const Value *root : roots) {
    // The operand this output views into `root` through, as the rewrite reads it.
    int32_t s = values_[slot(root)].storage;
    for (const Value *x : n.operandValues())
      if (live_.lookup(x)->storage == live_.lookup(root)->storage) {
        s = values_[resolve(x)].storage;
        break;
      }
    if (std::find(storages.begin(), storages.end(), s) == storages.end())
      storages.push_back(s);
  }
  if (storages.empty())
    return;
  v.storage = storages.front();
  for (size_t i = 1; i < storages.size(); ++i)
    otherRoots_[out].push_back(storages[i]);
}

absl::Status RewriteSimulator::addClones() {
  for (const RecomputeSet::Redirect &r : set_.redirected)
    own_[r.value] = &r;
  for (size_t i = 0; i < set_.clones.size(); ++i) {
    const RecomputeSet::Clone &c = set_.clones[i];
    const Node &n = *c.original;
    const int64_t pos = clonePosition_[i];
    const bool forward = model_.nodeAt(c.before)->phase() == Phase::Forward;
    const int64_t p = c.before;
    auto resolve = [&](const Value *x) { return source(x, p); };
    if (c.dropout == RecomputeSet::Dropout::Mask) {
      // native_dropout_backward(input, mask): the output only.
      read(source(n.arg(0).getValue(), p), pos, forward);
      read(source(n.output(1), p), pos, forward);
      int32_t out = newValue(pos, forward);
      assignStorage(out, n.output(0), n, resolve);
      made_[{n.output(0), p}] = out;
      continue;
    }
    if (c.dropout == RecomputeSet::Dropout::RngState) {
      const int64_t d = rankOf(&n);
      auto [it, first] = stateValue_.try_emplace(d, -1);
      if (first) { // graphopt::rng_state(input) before the forward call
        const int64_t at = statePosition_.lookup(d);
        it->second = newValue(at, model_.nodeAt(d)->phase() == Phase::Forward);
        values_[it->second].bytes = kRngStateBytes;
        read(slot(n.arg(0).getValue()), at, model_.nodeAt(d)->phase() == Phase::Forward);
      }
      read(source(n.arg(0).getValue(), p), pos, forward);
      read(it->second, pos, forward);
      for (unsigned o = 0; o < 2; ++o) {
        int32_t out = newValue(pos, forward);
        assignStorage(out, n.output(o), n, resolve);
        made_[{n.output(o), p}] = out;
      }
      continue;
    }
    for (const Value *x : n.operandValues())
      read(source(x, p), pos, forward);
    for (unsigned o = 0; o < n.numOutputs(); ++o) {
      int32_t out = newValue(pos, forward);
      assignStorage(out, n.output(o), n, resolve);
      made_[{n.output(o), p}] = out;
    }
  }
  for (const RecomputeSet::Redirect &r : set_.redirected)
    if (!made_.count({r.value, r.before}))
      return absl::InternalError(absl::StrCat("checkpoint: %", r.value->name().str(),
                                              " is dropped but never recomputed"));
  return absl::OkStatus();
}

void RewriteSimulator::addOriginalUses() {
  const int64_t n = static_cast<int64_t>(model_.graph().numNodes());
  for (int64_t r = 0; r < n; ++r) {
    const Node &node = *model_.nodeAt(r);
    const int64_t pos = positionOf(r);
    const bool forward = node.phase() == Phase::Forward;
    for (const Value *x : node.operandValues())
      read(readByOriginal(x, node), pos, forward);
    // A view lives in what it views (made in backward of a dropped value: its
    // clone's storage), and keeps every root it may view alive.
    auto resolve = [&](const Value *x) { return readByOriginal(x, node); };
    for (const Value *o : node.outputs())
      if (o->isTensor() && !aliases_.ownsStorage(o))
        assignStorage(slot(o), o, node, resolve);
    // A collective's backend holds its inputs until the wait for its result.
    if (isWait(node) && node.numArgs() > 0 && node.arg(0).isValue() && node.arg(0).getValue())
      if (const Node *collective = node.arg(0).getValue()->definingNode();
          collective && holdsInputsUntilWaited(*collective))
        for (const Value *x : collective->operandValues()) { // a lifetime, not a read
          VirtualValue &v = values_[readByOriginal(x, *collective)];
          v.lastUse = std::max(v.lastUse, pos);
        }
  }
}

Simulation RewriteSimulator::timeline() {
  const Graph &graph = model_.graph();
  const int64_t numValues = static_cast<int64_t>(values_.size());
  for (const GraphOutput &out : graph.outputs())
    values_[slot(out.value)].keptToEnd = true;
  // Lifetimes per storage, then kinds as LivenessAnalysis classifies them.
  std::vector<int64_t> end(numValues, -1);
  std::vector<uint8_t> isGradient(numValues, 0);
  for (const GraphOutput &out : graph.outputs())
    if (out.role == OutputRole::Gradient || out.role == OutputRole::InputGradient)
      isGradient[values_[slot(out.value)].storage] = 1;
  for (int32_t i = 0; i < numValues; ++i) {
    const VirtualValue &v = values_[i];
    int64_t e = v.keptToEnd || v.created < 0 ? numPositions_ : v.lastUse;
    end[v.storage] = std::max(end[v.storage], e);
    if (auto other = otherRoots_.find(i); other != otherRoots_.end())
      for (int32_t s : other->second)
        end[s] = std::max(end[s], e);
  }
  std::vector<uint8_t> act(numValues, 0);
  for (int32_t i = 0; i < numValues; ++i) {
    const VirtualValue &v = values_[i];
    act[i] = v.created >= 0 && !isGradient[v.storage] && v.madeInForward && v.readInBackward;
  }
  for (int32_t i = 0; i < numValues; ++i) { // a view read in backward keeps its base an activation
    const VirtualValue &v = values_[i];
    const VirtualValue &base = values_[v.storage];
    if (act[i] && v.storage != i && !act[v.storage] && !isGradient[v.storage] &&
        base.created >= 0)
      act[v.storage] = 1;
  }
  std::vector<int64_t> all(numPositions_ + 2, 0), acts(numPositions_ + 2, 0);
  for (int32_t i = 0; i < numValues; ++i) { // graph inputs are left out: the peak is above them
    const VirtualValue &v = values_[i];
    if (!v.bytes || v.storage != i || v.created < 0)
      continue;
    const int64_t last = std::min(end[i], numPositions_) + 1;
    all[v.created] += v.bytes;
    all[last] -= v.bytes;
    if (act[i]) {
      acts[v.created] += v.bytes;
      acts[std::min(end[i], numPositions_ - 1) + 1] -= v.bytes;
    }
  }
  llvm::ArrayRef<int64_t> scratch = model_.scratch();
  const BoundedMemory bounded = model_.boundedMemory();
  const int64_t numRanks = static_cast<int64_t>(graph.numNodes());
  Simulation sim;
  sim.boundedByRank.assign(numRanks, 0);
  std::vector<int64_t> aboveByRank(numRanks, 0);
  int64_t liveAll = 0, liveActs = 0, peak = -1, pendingBounded = 0, pendingAbove = 0;
  for (int64_t i = 0; i < numPositions_; ++i) {
    liveAll += all[i];
    liveActs += acts[i];
    const int64_t above = liveAll + (scratch.empty() ? 0 : scratch[chargedRank_[i]]);
    if (above > peak || sim.peakNode < 0) {
      peak = std::max(peak, above);
      sim.peakNode = i;
    }
    sim.savedActivations = std::max(sim.savedActivations, liveActs);
    const int64_t b = bounded == BoundedMemory::PeakAboveInputs ? above : liveActs;
    sim.bounded = std::max(sim.bounded, b);
    pendingBounded = std::max(pendingBounded, b);
    pendingAbove = std::max(pendingAbove, above);
    if (isOriginal_[i]) {
      sim.boundedByRank[chargedRank_[i]] = pendingBounded;
      aboveByRank[chargedRank_[i]] = pendingAbove;
      pendingBounded = pendingAbove = 0;
    }
  }
  sim.peakAboveInputs = std::max<int64_t>(peak, 0);
  sim.peakAboveInputsByRank =
      bounded == BoundedMemory::PeakAboveInputs ? sim.boundedByRank : std::move(aboveByRank);
  return sim;
}

absl::StatusOr<Simulation> RewriteSimulator::run() {
  values_.resize(live_.values.size());
  for (size_t i = 0; i < live_.values.size(); ++i) {
    const ValueLiveness &l = live_.values[i];
    VirtualValue &v = values_[i];
    v.bytes = l.bytes;
    v.storage = live_.slot.lookup(l.storage);
    if (const Node *def = l.value->definingNode()) {
      v.created = -2; // set below, once positions are known
      v.madeInForward = def->phase() == Phase::Forward;
    }
  }
  placeNodes();
  for (size_t i = 0; i < live_.values.size(); ++i)
    if (values_[i].created == -2) {
      values_[i].created = positionOf(live_.values[i].created);
      values_[i].lastUse = values_[i].created; // dropped after its node unless read
    }
  if (absl::Status st = addClones(); !st.ok())
    return st;
  addOriginalUses();
  return timeline();
}

} // namespace

absl::StatusOr<Simulation> RecomputeModel::simulate(const RecomputeSet &set) const {
  // GRAPHOPT_SIMULATE_BY_REWRITE=1: every simulation by rewriting a copy (the
  // reference, several times slower), to compare plans and planning times.
  static const bool byRewrite = [] {
    const char *env = std::getenv("GRAPHOPT_SIMULATE_BY_REWRITE");
    return env && *env && std::string(env) != "0";
  }();
  if (byRewrite)
    return simulateByRewrite(set);
  RewriteSimulator simulator(*this, *aliases_, set);
  return simulator.run();
}

} // namespace graphopt
