//===- RecomputeModel.cpp - What dropping activations and recomputing them costs ---===//
#include "checkpoint/RecomputeModel.h"

#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/IR/IRMap.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cmath>
#include <mutex>

namespace graphopt {

namespace {

double dropoutScale(const Node &node) {
  const Constant &c = node.arg(1).getConstant();
  double p = c.kind() == ConstantKind::Float ? c.asFloat() : static_cast<double>(c.asInt());
  double keep = 1.0 - p;
  return keep == 0 ? 0.0 : 1.0 / keep; // as native_dropout_cpu computes it
}

/// The bounded memory of `live` at each rank, inputs left out.
std::vector<int64_t> boundedOf(const LivenessResult &live, BoundedMemory bounded) {
  std::vector<int64_t> out;
  out.reserve(live.timeline.size());
  if (bounded == BoundedMemory::PeakAboveInputs) {
    for (int64_t bytes : live.timeline)
      out.push_back(bytes - live.inputBytes);
    return out;
  }
  for (const auto &kinds : liveBytesByKind(live))
    out.push_back(kinds[static_cast<int>(MemoryKind::Act)]);
  return out;
}

} // namespace

int64_t RecomputeModel::boundedPeak() const {
  return boundedTimeline_.empty() ? 0
                                  : *std::max_element(boundedTimeline_.begin(), boundedTimeline_.end());
}

absl::StatusOr<RecomputeModel> RecomputeModel::build(const Graph &graph, std::vector<double> seconds,
                                                     std::vector<int64_t> scratch,
                                                     BoundedMemory bounded,
                                                     bool replayRngStates) {
  RecomputeModel m;
  m.graph_ = &graph;
  m.bounded_ = bounded;
  m.replayRngStates_ = replayRngStates;
  const size_t numNodes = graph.numNodes();
  if (seconds.size() != numNodes)
    return absl::InternalError(absl::StrCat("checkpoint: node times for ", seconds.size(),
                                            " nodes, the graph has ", numNodes));
  m.backwardStart_ = -1;
  for (const Node &n : graph.nodes()) {
    if (m.backwardStart_ < 0 && n.phase() != Phase::Forward)
      m.backwardStart_ = static_cast<int64_t>(m.nodes_.size());
    m.nodes_.push_back(&n);
  }
  if (m.backwardStart_ < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("@", graph.name().str(),
                     " has no backward nodes: checkpointing needs a joint training graph "
                     "(export it with tools/export/export_model.py --mode train)"));
  auto live = LivenessAnalysis::compute(graph, scratch);
  if (!live.ok())
    return live.status();
  m.baseline_ = std::move(*live);
  m.boundedTimeline_ = boundedOf(m.baseline_, bounded);
  m.peakTimeline_ = bounded == BoundedMemory::PeakAboveInputs
                        ? m.boundedTimeline_
                        : boundedOf(m.baseline_, BoundedMemory::PeakAboveInputs);
  m.seconds_ = std::move(seconds);
  m.scratch_ = std::move(scratch);

  // In-place writes, by the storage they land in.
  m.aliases_.emplace(graph);
  m.writesInPlace_ = llvm::any_of(graph.nodes(), [&](const Node &n) {
    return !m.aliases_->rootsWrittenBy(n).empty();
  });

  m.addCandidates();
  // Keep those that can be made again, each on its own.
  std::vector<std::string> why(m.candidates_.size());
  PlanState none(m); // nothing dropped: what each costs alone
  for (size_t i = 0; i < m.candidates_.size(); ++i)
    why[i] = m.priceAlone(static_cast<int32_t>(i), none);
  m.keepDroppable(why);
  return m;
}

// Candidates: activation storages, with the uses of every value in them.
void RecomputeModel::addCandidates() {
  candidateIndex_ = ValueMap<int32_t>(*graph_, -1);
  const int64_t end = static_cast<int64_t>(graph_->numNodes());
  for (const ValueLiveness &l : baseline_.values)
    if (l.kind == MemoryKind::Act && l.storage == l.value && l.created >= 0 && l.bytes > 0) {
      if (l.freedAfter >= end) {
        excluded_.emplace_back(l.value, "a graph output: kept to the end of the step");
        continue;
      }
      CheckpointCandidate c;
      c.storage = l.value;
      c.bytes = l.bytes;
      c.created = l.created;
      c.lastForwardUse = l.created;
      candidateIndex_[l.value] = static_cast<int32_t>(candidates_.size());
      candidates_.push_back(std::move(c));
    }
  for (const ValueLiveness &l : baseline_.values) {
    int32_t ci = candidateIndex_.lookup(l.storage);
    if (ci < 0)
      continue;
    CheckpointCandidate &c = candidates_[ci];
    // Views made in backward are backward's own: made from a forward value
    // (a backward use of it), they follow it to its clone.
    if (l.value->definingNode()->phase() != Phase::Forward)
      continue;
    c.lastForwardUse = std::max(c.lastForwardUse, l.lastForwardUse);
    c.values.push_back(l.value);
    if (l.firstBackwardUse >= 0) {
      c.backwardValues.push_back(l.value);
      if (c.firstBackwardUse < 0 || l.firstBackwardUse < c.firstBackwardUse)
        c.firstBackwardUse = l.firstBackwardUse;
      c.lastBackwardUse = std::max(c.lastBackwardUse, l.lastBackwardUse);
    }
  }
}

std::string RecomputeModel::priceAlone(int32_t i, PlanState &none) {
  CheckpointCandidate &c = candidates_[i];
  if (int64_t w = aliases_->firstWriteOf(c.storage); w >= 0)
    return absl::StrCat("written in place by ", nodes_[w]->describe());
  // Dropping a mask saves the generator's state instead (replayed from it).
  if (const Node *d = c.storage->definingNode();
      replayRngStates_ && isReplayableDropout(*d) && c.storage == d->output(1) &&
      c.bytes <= kRngStateBytes)
    return absl::StrCat("the mask of ", d->describe(), ": no larger than the RNG state (",
                        kRngStateBytes, " bytes) its replay would keep instead");
  // So does dropping an output whose mask backward does not keep.
  if (const Node *d = c.storage->definingNode();
      replayRngStates_ && isReplayableDropout(*d) && c.storage == d->output(0) &&
      baseline_.lookup(d->output(1))->firstBackwardUse < 0 && c.bytes <= kRngStateBytes)
    return absl::StrCat("the output of ", d->describe(), ", whose mask is not kept: no larger "
                        "than the RNG state (", kRngStateBytes,
                        " bytes) its replay would keep instead");
  auto alone = none.marginal(i);
  if (!alone.ok())
    return std::string(alone.status().message());
  c.standaloneSeconds = alone->first;
  c.standaloneNodes = alone->second;
  return "";
}

void RecomputeModel::keepDroppable(const std::vector<std::string> &why) {
  std::vector<CheckpointCandidate> kept;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const Value *storage = candidates_[i].storage;
    if (!why[i].empty()) {
      candidateIndex_[storage] = -1;
      excluded_.emplace_back(storage, why[i]);
      continue;
    }
    candidateIndex_[storage] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(candidates_[i]));
  }
  candidates_ = std::move(kept);
}

int32_t RecomputeModel::candidateOf(const Value *storage) const {
  return candidateIndex_.lookup(storage);
}

std::string RecomputeModel::whyNotRecomputable(const Node &node) const {
  if (node.phase() != Phase::Forward)
    return "it is not a forward node";
  return graphopt::whyNotRecomputable(node); // the shared rule (RewriteLegality.h)
}

bool RecomputeModel::writtenBetween(const Value *v, int64_t after, int64_t before) const {
  return aliases_->writtenBetween(v, after, before);
}

PlanState::PlanState(const RecomputeModel &model)
    : model_(&model), dropped_(model.candidates().size(), 0) {
  ownAt_.reserve(model.candidates().size());
  for (const CheckpointCandidate &c : model.candidates())
    ownAt_.push_back(c.firstBackwardUse);
}

void PlanState::hold(const Value *storage) { held_.insert(storage); }

bool PlanState::isCloned(const Node *n, int64_t p) const {
  auto it = clonedAt_.find(n); // its ranks are sorted (add)
  return it != clonedAt_.end() && std::binary_search(it->second.begin(), it->second.end(), p);
}

absl::Status PlanState::add(int32_t c) {
  Clones added;
  dropped_[c] = 1;
  if (absl::Status st = grow(c, added); !st.ok()) {
    dropped_[c] = 0;
    return st;
  }
  order_.push_back(c);
  cloneCount_ += added.size();
  // Each node's ranks kept sorted, so that walks over them (grow) do not
  // depend on the set's hash order.
  for (auto [n, p] : added) {
    auto &ranks = clonedAt_[n];
    ranks.insert(std::upper_bound(ranks.begin(), ranks.end(), p), p);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<double, unsigned>> PlanState::marginal(int32_t c) {
  Clones added; // only clones not planned yet
  dropped_[c] = 1;
  absl::Status st = grow(c, added);
  dropped_[c] = 0;
  if (!st.ok())
    return st;
  // Summed in whole picoseconds: exact, so the same in any order (the set's
  // order depends on where nodes live in memory) without sorting it.
  int64_t picoseconds = 0;
  for (auto [n, p] : added)
    picoseconds += std::llround(model_->seconds_[model_->baseline_.rank.lookup(n)] * 1e12);
  return std::make_pair(static_cast<double>(picoseconds) * 1e-12,
                        static_cast<unsigned>(added.size()));
}

std::vector<PlanState::Clone> PlanState::inRankOrder(std::vector<Clone> clones) const {
  const LivenessResult &live = model_->baseline_;
  // Sorted on (rank made before, rank of the node) looked up once per clone:
  // the greedy sorts every candidate's marginal clones, and lookups in the
  // comparator were a sixth of its time.
  std::vector<std::pair<std::pair<int64_t, int64_t>, const Node *>> keyed;
  keyed.reserve(clones.size());
  for (auto [n, p] : clones)
    keyed.push_back({{p, live.rank.lookup(n)}, n});
  std::sort(keyed.begin(), keyed.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i)
    clones[i] = {keyed[i].second, keyed[i].first.first};
  return clones;
}

std::vector<PlanState::Clone> PlanState::plannedClones() const {
  std::vector<Clone> clones;
  for (auto &[n, ranks] : clonedAt_)
    for (int64_t p : ranks)
      clones.push_back({n, p});
  return inRankOrder(std::move(clones));
}

RecomputeSet PlanState::result() const {
  const LivenessResult &live = model_->baseline_;
  RecomputeSet set;
  for (auto [n, p] : plannedClones()) {
    set.clones.push_back({n, p, dropoutReplay(n, p)});
    set.seconds += model_->seconds_[live.rank.lookup(n)];
  }
  for (size_t c = 0; c < dropped_.size(); ++c)
    if (dropped_[c]) {
      const CheckpointCandidate &cand = model_->candidates_[c];
      for (const Value *v : cand.backwardValues)
        set.redirected.push_back({v, ownAt_[c], live.lookup(v)->lastBackwardUse});
    }
  return set;
}

/// Readable at rank `p` without a new clone: a graph input; a value whose
/// storage the plan keeps and is not freed before `p`, or holds; or a
/// dropped value backward reads, while its own clone lives.
bool PlanState::available(const Value *v, int64_t p) const {
  const LivenessResult &live = model_->baseline_;
  const ValueLiveness *l = live.lookup(v);
  const ValueLiveness *s = live.lookup(l->storage);
  if (s->created < 0)
    return true;
  int32_t ci = model_->candidateOf(s->value);
  if (ci >= 0 && dropped_[ci])
    return l->firstBackwardUse >= 0 && v->definingNode()->phase() == Phase::Forward &&
           ownAt_[ci] <= p && p <= l->lastBackwardUse;
  return s->created < p && (s->freedAfter >= p || held_.contains(s->value));
}

RecomputeSet::Dropout PlanState::dropoutReplay(const Node *n, int64_t p) const {
  if (!isReplayableDropout(*n))
    return RecomputeSet::Dropout::None;
  const Value *mask = n->output(1);
  int32_t ci = model_->candidateOf(model_->baseline_.lookup(mask)->storage);
  bool ownClone = ci >= 0 && dropped_[ci] && ownAt_[ci] == p;
  return available(mask, p) && !ownClone ? RecomputeSet::Dropout::Mask
                                         : RecomputeSet::Dropout::RngState;
}

// Walks back from what backward reads of candidate `c` (its own clones, at
// its first backward use) and from the clones already planned that read it,
// to values readable there, recording in `added` each clone (node, rank) the
// plan does not have yet.
absl::Status PlanState::grow(int32_t c, Clones &added) {
  const LivenessResult &live = model_->baseline_;
  const CheckpointCandidate &cand = model_->candidates_[c];
  std::vector<std::pair<const Value *, int64_t>> work;
  for (const Value *v : cand.backwardValues)
    work.emplace_back(v, ownAt_[c]);
  if (!clonedAt_.empty())
    for (const Value *v : cand.values)
      for (const Use &u : v->uses())
        if (u.user)
          if (auto it = clonedAt_.find(u.user); it != clonedAt_.end())
            for (int64_t p : it->second)
              work.emplace_back(v, p);
  auto refuse = [&](const std::string &why) {
    return absl::FailedPreconditionError(
        absl::StrCat("%", cand.storage->name().str(), " cannot be recomputed: ", why));
  };
  while (!work.empty()) {
    auto [v, p] = work.back();
    work.pop_back();
    const Node *n = v->definingNode();
    bool own = n && n->phase() == Phase::Forward && live.lookup(v)->storage == cand.storage &&
               p == ownAt_[c];
    if (!own && available(v, p))
      continue;
    if (!n)
      return refuse(absl::StrCat("it needs the graph input %", v->name().str(),
                                 ", written in place before then"));
    if (std::string why = model_->whyNotRecomputable(*n); !why.empty())
      return refuse(absl::StrCat("it needs %", v->name().str(), ", and ", why));
    // A storage written in place after it was made holds what the write
    // left: running its node again gives what it held before the write. Asked
    // before the clone check: a clone made for another output of the same node
    // (max.dim's indices) gives this output's value from before the write too.
    if (model_->aliases_->firstWriteOf(v) >= 0)
      return refuse(absl::StrCat("it needs %", v->name().str(),
                                 ", which is written in place: a second call would give what it "
                                 "held before the write"));
    // A clone makes all of its node's outputs: one per (node, rank).
    if (isCloned(n, p) || added.count({n, p}))
      continue;
    added.insert({n, p});
    int64_t rank = live.rank.lookup(n);
    // A dropout is replayed from its mask where that is kept, else from the
    // RNG state taken before its forward call, when the model allows that.
    if (isReplayableDropout(*n) && !model_->replayRngStates_) {
      if (v == n->output(1))
        return refuse(absl::StrCat("it is the mask ", n->describe(),
                                   " drew: a second draw would differ"));
      const Value *mask = n->output(1);
      if (!available(mask, p))
        return refuse(absl::StrCat("replaying ", n->describe(), " needs its mask %",
                                   mask->name().str(), ", which is not kept"));
    }
    for (const Value *o : n->operandValues()) {
      if (!available(o, p)) {
        work.emplace_back(o, p);
        continue;
      }
      if (model_->writtenBetween(o, rank, p))
        return refuse(absl::StrCat("it reads %", o->name().str(),
                                   ", which is written in place before backward needs it"));
    }
  }
  return absl::OkStatus();
}

std::vector<PlanState::Repeat> PlanState::repeats() const {
  const LivenessResult &live = model_->baseline_;
  llvm::DenseMap<int32_t, Repeat> byCandidate;
  for (auto [n, p] : plannedClones())
    for (const Value *out : n->outputs()) {
      int32_t d = model_->candidateOf(live.lookup(out)->storage);
      if (d < 0 || !dropped_[d] || p >= ownAt_[d])
        continue;
      auto [it, inserted] = byCandidate.try_emplace(d, Repeat{d, p, 0});
      it->second.earliest = std::min(it->second.earliest, p);
      it->second.seconds += model_->seconds_[live.rank.lookup(n)];
    }
  std::vector<Repeat> out;
  for (auto &[d, r] : byCandidate)
    out.push_back(r);
  std::sort(out.begin(), out.end(), [](const Repeat &a, const Repeat &b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.candidate < b.candidate;
  });
  return out;
}

absl::StatusOr<PlanState> PlanState::hoisted(int32_t c, int64_t p) const {
  return hoisted({{c, p}});
}

absl::StatusOr<PlanState> PlanState::rebuilt(std::vector<int64_t> ownAt, int32_t leave) const {
  PlanState next(*model_);
  next.ownAt_ = std::move(ownAt);
  next.held_ = held_;
  for (int32_t d : order_)
    if (d != leave)
      if (absl::Status st = next.add(d); !st.ok())
        return st;
  return next;
}

absl::StatusOr<PlanState>
PlanState::hoisted(llvm::ArrayRef<std::pair<int32_t, int64_t>> points) const {
  std::vector<int64_t> ownAt = ownAt_;
  for (auto [c, p] : points)
    ownAt[c] = std::min(ownAt[c], p);
  return rebuilt(std::move(ownAt));
}

std::vector<std::pair<int32_t, int64_t>> PlanState::repeatPoints() const {
  std::vector<std::pair<int32_t, int64_t>> points;
  for (const Repeat &r : repeats())
    points.emplace_back(r.candidate, r.earliest);
  return points;
}

unsigned PlanState::hoistEveryRepeat(unsigned maxRounds) {
  unsigned hoists = 0;
  for (unsigned round = 0; round < maxRounds; ++round) {
    std::vector<std::pair<int32_t, int64_t>> points = repeatPoints();
    if (points.empty())
      break;
    auto shared = hoisted(points);
    if (!shared.ok())
      break;
    *this = std::move(*shared);
    hoists += static_cast<unsigned>(points.size());
  }
  return hoists;
}

absl::StatusOr<PlanState>
PlanState::withOwnAt(llvm::ArrayRef<std::pair<int32_t, int64_t>> points) const {
  std::vector<int64_t> ownAt = ownAt_;
  for (auto [c, p] : points)
    ownAt[c] = std::min(p, model_->candidates_[c].firstBackwardUse);
  return rebuilt(std::move(ownAt));
}

absl::StatusOr<PlanState> PlanState::without(int32_t c) const {
  std::vector<int64_t> ownAt = ownAt_;
  ownAt[c] = model_->candidates_[c].firstBackwardUse;
  return rebuilt(std::move(ownAt), c);
}

absl::StatusOr<RecomputeSet> RecomputeModel::closure(llvm::ArrayRef<int32_t> dropped,
                                                      llvm::ArrayRef<const Value *> held) const {
  PlanState state(*this);
  for (const Value *v : held)
    state.hold(v);
  for (int32_t c : dropped)
    if (absl::Status st = state.add(c); !st.ok())
      return st;
  return state.result();
}

namespace {

/// RecomputeModel::apply's rewrite of `target`: the clones made so far, by
/// (value of the model's graph, rank made before), and what each new clone
/// reads.
class CloneWriter {
public:
  CloneWriter(Graph &target, std::vector<Node *> at, const RecomputeSet &set,
              const ValueMap<Value *> *cloneMap, NodeMap<int64_t> *sourceRank,
              const AliasInfo &aliases)
      : target_(target), at_(std::move(at)), cloneMap_(cloneMap), sourceRank_(sourceRank),
        aliases_(aliases), operands_(target, nullptr) {
    for (const RecomputeSet::Redirect &r : set.redirected)
      own_[r.value] = &r;
  }

  /// Adds clone `c` of the node of rank `rank`.
  absl::Status add(const RecomputeSet::Clone &c, int64_t rank);
  /// Backward reads each dropped value from its own clone.
  absl::Status redirectBackwardUses(const RecomputeSet &set);

private:
  Value *inTarget(const Value *v) const {
    return cloneMap_ ? cloneMap_->lookup(v) : const_cast<Value *>(v);
  }
  /// What a clone made before rank `p` reads for `v`: a clone made there, the
  /// dropped value's own clone while it lives, or (null) `v` itself. A value
  /// written in place is always read itself: a clone of its node (made for
  /// another output, as max.dim's indices) holds what it held before the write,
  /// and the plan reads such a value only where the original holds it.
  Value *source(const Value *v, int64_t p) const;
  /// The generator's state taken just before a dropout's forward call (one
  /// per dropout, made on first need), for the clones that replay it.
  absl::StatusOr<Value *> stateBefore(Node &dropout, int64_t rank);
  // The three ways of making a clone (RecomputeSet::Dropout).
  absl::StatusOr<Node *> maskProduct(const RecomputeSet::Clone &c, Node &original,
                                     InsertionPoint where);
  absl::StatusOr<Node *> replay(const RecomputeSet::Clone &c, Node &original, int64_t rank,
                                InsertionPoint where);
  absl::StatusOr<Node *> copy(const RecomputeSet::Clone &c, Node &original,
                              InsertionPoint where);

  Graph &target_;
  const std::vector<Node *> at_; ///< target's node of each rank, before any insertion
  const ValueMap<Value *> *cloneMap_;
  NodeMap<int64_t> *sourceRank_;
  const AliasInfo &aliases_; ///< of the graph the plan was made for
  llvm::DenseMap<std::pair<const Value *, int64_t>, Value *> made_;
  llvm::DenseMap<const Value *, const RecomputeSet::Redirect *> own_;
  llvm::DenseMap<int64_t, Value *> states_;
  ValueMap<Value *> operands_; ///< for cloneNode: target operand -> what to read
};

Value *CloneWriter::source(const Value *v, int64_t p) const {
  if (aliases_.firstWriteOf(v) >= 0)
    return nullptr;
  if (auto it = made_.find({v, p}); it != made_.end())
    return it->second;
  if (auto it = own_.find(v); it != own_.end() && it->second->before <= p && p <= it->second->until)
    if (auto m = made_.find({v, it->second->before}); m != made_.end())
      return m->second;
  return nullptr;
}

absl::StatusOr<Value *> CloneWriter::stateBefore(Node &dropout, int64_t rank) {
  if (auto it = states_.find(rank); it != states_.end())
    return it->second;
  auto made = target_.createNode(
      kRngStateOp, {Argument::value(dropout.arg(0).getValue())},
      {ValueType::ofTensor(TensorType::contiguous(at::kByte, {kRngStateBytes}, c10::Device(c10::kCPU)))},
      InsertionPoint::before(&dropout), {absl::StrCat(dropout.output(1)->name().str(), "_rng")});
  if (!made.ok())
    return made.status();
  if (sourceRank_)
    (*sourceRank_)[*made] = rank; // charged as the dropout: no original of its own
  states_[rank] = (*made)->output(0);
  return (*made)->output(0);
}

// output = input * mask * scale: native_dropout_cpu's arithmetic, with
// the mask its forward call drew (kept, or its own clone).
absl::StatusOr<Node *> CloneWriter::maskProduct(const RecomputeSet::Clone &c, Node &original,
                                                InsertionPoint where) {
  Value *input = source(c.original->arg(0).getValue(), c.before);
  Value *mask = source(c.original->output(1), c.before);
  auto madeNode = target_.createNode(
      "aten::native_dropout_backward",
      {Argument::value(input ? input : original.arg(0).getValue()),
       Argument::value(mask ? mask : original.output(1)),
       Argument::constant(Constant::ofFloat(dropoutScale(original)))},
      {original.output(0)->type()}, where, {original.output(0)->name().str()});
  if (!madeNode.ok())
    return madeNode.status();
  Node *clone = *madeNode;
  made_[{c.original->output(0), c.before}] = clone->output(0);
  return clone;
}

// Drawn again from the generator's state just before the forward call.
absl::StatusOr<Node *> CloneWriter::replay(const RecomputeSet::Clone &c, Node &original,
                                           int64_t rank, InsertionPoint where) {
  auto state = stateBefore(original, rank);
  if (!state.ok())
    return state.status();
  Value *input = source(c.original->arg(0).getValue(), c.before);
  auto madeNode = target_.createNode(
      "graphopt::native_dropout_replay",
      {Argument::value(input ? input : original.arg(0).getValue()), original.arg(1),
       original.arg(2), Argument::value(*state)},
      {original.output(0)->type(), original.output(1)->type()}, where,
      {original.output(0)->name().str(), original.output(1)->name().str()});
  if (!madeNode.ok())
    return madeNode.status();
  Node *clone = *madeNode;
  for (unsigned i = 0; i < 2; ++i)
    made_[{c.original->output(i), c.before}] = clone->output(i);
  return clone;
}

absl::StatusOr<Node *> CloneWriter::copy(const RecomputeSet::Clone &c, Node &original,
                                         InsertionPoint where) {
  llvm::SmallVector<Value *, 4> set;
  for (const Value *o : c.original->operandValues())
    if (Value *src = source(o, c.before)) {
      operands_[inTarget(o)] = src;
      set.push_back(inTarget(o));
    }
  auto madeNode = target_.cloneNode(original, operands_, where);
  for (Value *v : set)
    operands_[v] = nullptr;
  if (!madeNode.ok())
    return madeNode.status();
  Node *clone = *madeNode;
  for (unsigned i = 0; i < clone->numOutputs(); ++i) {
    made_[{c.original->output(i), c.before}] = clone->output(i);
    operands_[original.output(i)] = nullptr; // cloneNode recorded it: forget it
  }
  return clone;
}

absl::Status CloneWriter::add(const RecomputeSet::Clone &c, int64_t rank) {
  Node &original = *at_[rank];
  InsertionPoint where = InsertionPoint::before(at_[c.before]);
  absl::StatusOr<Node *> clone =
      c.dropout == RecomputeSet::Dropout::Mask       ? maskProduct(c, original, where)
      : c.dropout == RecomputeSet::Dropout::RngState ? replay(c, original, rank, where)
                                                     : copy(c, original, where);
  if (!clone.ok())
    return clone.status();
  markRecomputeOf(**clone, *original.output(0));
  if (sourceRank_)
    (*sourceRank_)[*clone] = rank;
  return absl::OkStatus();
}

absl::Status CloneWriter::redirectBackwardUses(const RecomputeSet &set) {
  for (const RecomputeSet::Redirect &r : set.redirected) {
    auto it = made_.find({r.value, r.before});
    if (it == made_.end())
      return absl::InternalError(absl::StrCat("checkpoint: %", r.value->name().str(),
                                              " is dropped but never recomputed"));
    inTarget(r.value)->replaceUsesWithIf(
        it->second, [](const Use &u) { return u.user && u.user->phase() != Phase::Forward; });
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<unsigned> RecomputeModel::apply(const RecomputeSet &set, Graph &target,
                                               const ValueMap<Value *> *cloneMap,
                                               NodeMap<int64_t> *sourceRank) const {
  std::vector<Node *> at; // target's node of each rank, before any insertion
  for (Node &n : target.nodes())
    at.push_back(&n);
  if (at.size() != nodes_.size())
    return absl::InternalError(absl::StrCat("checkpoint: the graph to rewrite has ", at.size(),
                                            " nodes, the plan was made for ", nodes_.size()));
  if (sourceRank) {
    *sourceRank = NodeMap<int64_t>(target, -1);
    for (size_t r = 0; r < at.size(); ++r)
      (*sourceRank)[at[r]] = static_cast<int64_t>(r);
  }
  CloneWriter writer(target, std::move(at), set, cloneMap, sourceRank, *aliases_);
  unsigned added = 0;
  for (const RecomputeSet::Clone &c : set.clones) {
    if (absl::Status st = writer.add(c, baseline_.rank.lookup(c.original)); !st.ok())
      return st;
    ++added;
  }
  if (absl::Status st = writer.redirectBackwardUses(set); !st.ok())
    return st;
  return added;
}

/// The copy of the model's graph that simulations rewrite and then restore
/// (RecomputeModel::simulate), so that a simulation costs the clones and the
/// liveness pass, not a copy of the whole graph made and freed each time
/// (that was a third of the greedy's planning time on BERT-base).
struct RecomputeModel::ScratchCopy {
  std::mutex mutex;
  std::unique_ptr<Graph> graph;
  ValueMap<Value *> map; ///< the model's values -> the copy's
};

namespace {

/// Takes the clones `apply` inserted out of `copy` again: the uses it
/// redirected to them point back at the originals (a clone's output i stands
/// for its original's output i), then the inserted nodes go, last first.
absl::Status restoreCopy(Graph &copy, const NodeMap<uint8_t> &isOriginal,
                         const NodeMap<int64_t> &source, llvm::ArrayRef<Node *> originals) {
  std::vector<Node *> inserted;
  for (Node &n : copy.nodes())
    if (!isOriginal.lookup(&n))
      inserted.push_back(&n);
  auto byOriginal = [&](const Use &u) { return u.user && isOriginal.lookup(u.user); };
  for (Node *n : inserted) {
    const int64_t rank = source.lookup(n);
    if (rank < 0 || rank >= static_cast<int64_t>(originals.size()))
      continue;
    const Node *original = originals[rank];
    for (unsigned i = 0; i < n->numOutputs() && i < original->numOutputs(); ++i)
      n->output(i)->replaceUsesWithIf(const_cast<Value *>(original->output(i)), byOriginal);
  }
  for (auto it = inserted.rbegin(); it != inserted.rend(); ++it)
    if (absl::Status st = copy.eraseNode(*it); !st.ok())
      return st;
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<Simulation> RecomputeModel::simulateByRewrite(const RecomputeSet &set) const {
  if (!scratchCopy_)
    scratchCopy_ = std::make_shared<ScratchCopy>();
  ScratchCopy &scratchCopy = *scratchCopy_;
  std::lock_guard<std::mutex> lock(scratchCopy.mutex);
  // Ids are not reused: a copy rewritten many times is made again before its
  // id-indexed maps grow much past the graph's.
  if (!scratchCopy.graph ||
      scratchCopy.graph->valueIdBound() > 4 * graph_->valueIdBound() + 4096 ||
      scratchCopy.graph->nodeIdBound() > 4 * graph_->nodeIdBound() + 4096) {
    scratchCopy.map = ValueMap<Value *>();
    scratchCopy.graph = graph_->clone(&scratchCopy.map);
  }
  Graph *copy = scratchCopy.graph.get();
  const ValueMap<Value *> &map = scratchCopy.map;
  std::vector<Node *> originals;
  NodeMap<uint8_t> isOriginal(*copy, 0);
  for (Node &n : copy->nodes()) {
    isOriginal[&n] = 1;
    originals.push_back(&n);
  }
  NodeMap<int64_t> source;
  // Whatever happens below, the copy is left as the model's graph again, or
  // dropped to be made afresh next time.
  struct Restore {
    ScratchCopy &scratch;
    const NodeMap<uint8_t> &isOriginal;
    const NodeMap<int64_t> &source;
    llvm::ArrayRef<Node *> originals;
    ~Restore() {
      if (!restoreCopy(*scratch.graph, isOriginal, source, originals).ok() ||
          scratch.graph->numNodes() != originals.size())
        scratch.graph.reset();
    }
  } restore{scratchCopy, isOriginal, source, originals};
  auto added = apply(set, *copy, &map, &source);
  if (!added.ok())
    return added.status();
  return simulationOfRewrite(*copy, source,
                             [&](const Node &n) { return isOriginal.lookup(&n) != 0; });
}

absl::StatusOr<Simulation> RecomputeModel::simulateRewritten(const NodeMap<int64_t> &source) const {
  return simulationOfRewrite(*graph_, source, [&](const Node &n) {
    const int64_t r = source.lookup(&n);
    return r >= 0 && nodes_[r] == &n;
  });
}

absl::StatusOr<Simulation>
RecomputeModel::simulationOfRewrite(const Graph &rewritten, const NodeMap<int64_t> &source,
                                    llvm::function_ref<bool(const Node &)> isOriginal) const {
  std::vector<int64_t> scratch;
  if (!scratch_.empty())
    for (const Node &n : rewritten.nodes())
      scratch.push_back(scratch_[source.lookup(&n)]);
  auto live = LivenessAnalysis::compute(rewritten, scratch);
  if (!live.ok())
    return live.status();
  Simulation sim;
  sim.peakAboveInputs = live->peakBytes - live->inputBytes;
  sim.peakNode = live->peakNode;
  std::vector<int64_t> saved = boundedOf(*live, BoundedMemory::SavedActivations);
  std::vector<int64_t> above = boundedOf(*live, BoundedMemory::PeakAboveInputs);
  for (int64_t bytes : saved)
    sim.savedActivations = std::max(sim.savedActivations, bytes);
  const std::vector<int64_t> &bounded =
      bounded_ == BoundedMemory::PeakAboveInputs ? above : saved;
  for (int64_t bytes : bounded)
    sim.bounded = std::max(sim.bounded, bytes);
  // Each original rank takes the highest of itself and the clones before it.
  auto byOriginalRank = [&](const std::vector<int64_t> &timeline) {
    std::vector<int64_t> out(nodes_.size(), 0);
    int64_t pending = 0;
    size_t k = 0;
    for (const Node &n : rewritten.nodes()) {
      pending = std::max(pending, timeline[k++]);
      if (isOriginal(n)) {
        out[source.lookup(&n)] = pending;
        pending = 0;
      }
    }
    return out;
  };
  sim.boundedByRank = byOriginalRank(bounded);
  sim.peakAboveInputsByRank =
      bounded_ == BoundedMemory::PeakAboveInputs ? sim.boundedByRank : byOriginalRank(above);
  return sim;
}

std::pair<int64_t, int64_t> freedRanksOf(const RecomputeModel &model, BoundedMemory kind,
                                         const CheckpointCandidate &c) {
  if (kind == BoundedMemory::SavedActivations)
    return {c.created, model.baseline().lookup(c.storage)->freedAfter};
  return {c.lastForwardUse + 1, c.firstBackwardUse - 1};
}

} // namespace graphopt
