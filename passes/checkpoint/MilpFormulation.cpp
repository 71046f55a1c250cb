//===- MilpFormulation.cpp - checkpoint{planner=milp}'s mixed-integer program ---===//
#include "checkpoint/MilpFormulation.h"

#include "graphopt/IR/OpEffects.h"

#include <algorithm>
#include <deque>
#include <set>

namespace graphopt {

namespace {

/// A tie-break per column, in objective units (the costliest node is 1):
/// among plans of equal time, fewer clones and fewer drops (views and other
/// free nodes cost 0 seconds). Far below any node time that matters, so the
/// gap CBC proves is still the gap on seconds.
constexpr double kTieBreak = 1e-7;

} // namespace

bool CheckpointMilp::writtenBetween(const Value *storage, int64_t after, int64_t before) const {
  auto it = writes_.find(storage);
  if (it == writes_.end())
    return false;
  for (int64_t w : it->second)
    if (after < w && w < before)
      return true;
  return false;
}

// PlanState::available and grow, for one clone: what it reads as is, what
// must be made at its point too, and when.
bool CheckpointMilp::operandsOf(const Node &n, int64_t p, std::vector<Operand> &out) const {
  const LivenessResult &live = model_.baseline();
  out.clear();
  if (!model_.whyNotRecomputable(n).empty())
    return false;
  auto liveAt = [&](const ValueLiveness &s) { return s.created < p && p <= s.freedAfter; };
  if (isReplayableDropout(n)) { // replayed from its mask, which must be there
    const ValueLiveness *mask = live.lookup(live.lookup(n.output(1))->storage);
    if (model_.candidateOf(mask->value) >= 0 || !liveAt(*mask))
      return false;
  }
  const int64_t rank = live.rank.lookup(&n);
  for (const Value *o : n.operandValues()) {
    const ValueLiveness *l = live.lookup(o);
    const ValueLiveness *s = l ? live.lookup(l->storage) : nullptr;
    if (!s)
      return false;
    const int32_t ci = model_.candidateOf(s->value);
    const Node *def = o->definingNode();
    // Read as is: a graph input, a storage kept and live at p, or a dropped
    // value's own clone while it lives (its candidate's point to its last use).
    bool kept = s->created < 0 || liveAt(*s);
    bool ownClone = ci >= 0 && l->firstBackwardUse >= 0 && def->phase() == Phase::Forward &&
                    model_.candidates()[ci].firstBackwardUse <= p && p <= l->lastBackwardUse;
    if (kept && (ci < 0 || ownClone)) {
      if (writtenBetween(s->value, rank, p))
        return false; // the closure refuses to read a value written since
      continue;
    }
    if (isReplayableDropout(*def) && o == def->output(1))
      return false; // a mask that is gone cannot be drawn again
    out.push_back({def, ci, kept ? Need::IfDropped : ownClone ? Need::IfKept : Need::Always});
  }
  return true;
}

CheckpointMilp::CheckpointMilp(const RecomputeModel &model, size_t maxColumns) : model_(model) {
  const LivenessResult &live = model.baseline();
  const int64_t numNodes = static_cast<int64_t>(live.timeline.size());
  auto candidates = model.candidates();
  numCandidates_ = candidates.size();
  for (int64_t r = 0; r < numNodes; ++r)
    for (Value *w : writtenValues(*model.nodeAt(r)))
      if (const ValueLiveness *l = live.lookup(w))
        writes_[l->storage].push_back(r);

  // The (node, point) pairs chains may reach, and how many candidates a
  // chain passes through to get there (0-1 breadth first: an operand made
  // whatever is dropped costs no hop, one made only for some drops costs one).
  using Key = std::pair<const Node *, int64_t>;
  llvm::DenseMap<Key, int> hops;
  std::vector<Key> order; // discovery order: the columns' order, deterministic
  std::deque<std::pair<Key, int>> queue;
  auto reach = [&](Key k, int h, bool front) {
    auto [it, inserted] = hops.try_emplace(k, h);
    if (inserted)
      order.push_back(k);
    else if (it->second <= h)
      return;
    it->second = h;
    if (front)
      queue.emplace_front(k, h);
    else
      queue.emplace_back(k, h);
  };
  for (const CheckpointCandidate &c : candidates)
    for (const Value *v : c.backwardValues)
      reach({v->definingNode(), c.firstBackwardUse}, 0, false);
  std::vector<Operand> operands;
  while (!queue.empty()) {
    auto [k, h] = queue.front();
    queue.pop_front();
    if (hops[k] < h || !operandsOf(*k.first, k.second, operands))
      continue;
    for (const Operand &o : operands)
      reach({o.def, k.second}, o.need == Need::Always ? h : h + 1, o.need == Need::Always);
  }
  // Past maxColumns, cut chains at the most hops that fit.
  if (order.size() > maxColumns) {
    std::vector<int> sorted;
    for (const Key &k : order)
      sorted.push_back(hops[k]);
    std::sort(sorted.begin(), sorted.end());
    maxHops_ = std::max(0, sorted[maxColumns] - 1);
  }
  auto within = [&](const Key &k) {
    auto it = hops.find(k);
    return it != hops.end() && (maxHops_ < 0 || it->second <= maxHops_);
  };

  // Columns: the candidates, then the reachable (node, point) pairs.
  objective_.assign(numCandidates_, kTieBreak);
  upper_.assign(numCandidates_, 1);
  for (const Key &k : order)
    if (within(k)) {
      int64_t rank = live.rank.lookup(k.first);
      nodeColumn_[{rank, k.second}] = static_cast<int>(upper_.size());
      nodeRank_.push_back(rank);
      nodePoint_.push_back(k.second);
      objective_.push_back(model.seconds()[rank]);
      upper_.push_back(1);
    }
  auto columnOf = [&](const Node *n, int64_t p) {
    auto it = nodeColumn_.find({live.rank.lookup(n), p});
    return it == nodeColumn_.end() ? -1 : it->second;
  };
  std::set<std::vector<int>> seen; // each operand row once
  auto addRow = [&](std::vector<int> cols, std::vector<double> coefs, double rhs) {
    std::vector<int> key = cols;
    for (double c : coefs)
      key.push_back(static_cast<int>(c));
    if (seen.insert(key).second)
      structural_.push_back({std::move(cols), std::move(coefs), rhs});
  };
  // Drop: c's values that backward reads are made at its point.
  for (size_t c = 0; c < numCandidates_; ++c)
    for (const Value *v : candidates[c].backwardValues)
      addRow({columnOf(v->definingNode(), candidates[c].firstBackwardUse), static_cast<int>(c)},
             {1, -1}, 0);
  // Operands: made at the same point when the clone cannot read them.
  for (size_t k = 0; k < nodeRank_.size(); ++k) {
    const int col = static_cast<int>(numCandidates_ + k);
    const int64_t p = nodePoint_[k];
    if (!operandsOf(*model.nodeAt(nodeRank_[k]), p, operands)) {
      upper_[col] = 0;
      continue;
    }
    for (const Operand &o : operands) {
      int def = columnOf(o.def, p);
      switch (o.need) {
      case Need::Always: // r_def >= r_n (never cut: it costs no hop)
        if (def >= 0)
          addRow({def, col}, {1, -1}, 0);
        else
          upper_[col] = 0;
        break;
      case Need::IfDropped: // r_def >= r_n + d_s - 1; cut: r_n + d_s <= 1
        if (def >= 0)
          addRow({def, col, o.candidate}, {1, -1, -1}, -1);
        else
          addRow({col, o.candidate}, {-1, -1}, -1);
        break;
      case Need::IfKept: // r_def >= r_n - d_s; cut: r_n <= d_s
        if (def >= 0)
          addRow({def, col, o.candidate}, {1, -1, 1}, 0);
        else
          addRow({col, o.candidate}, {-1, 1}, 0);
        break;
      }
    }
  }

  // Objective in units of the costliest node, so CBC's tolerances mean the
  // same for microseconds (flops estimates) as for seconds.
  double maxSeconds = 0;
  for (size_t k = numCandidates_; k < objective_.size(); ++k)
    maxSeconds = std::max(maxSeconds, objective_[k]);
  secondsUnit_ = maxSeconds > 0 ? maxSeconds : 1;
  for (size_t k = numCandidates_; k < objective_.size(); ++k)
    objective_[k] = objective_[k] / secondsUnit_ + kTieBreak;
  int64_t maxBytes = 1;
  for (const CheckpointCandidate &c : candidates)
    maxBytes = std::max(maxBytes, c.bytes);
  bytesUnit_ = static_cast<double>(maxBytes);

  // Where dropping each candidate takes its bytes off the bounded memory. The
  // peak: between its last forward use and its point (its clone is made
  // there). The saved activations: its whole life, as its storage is no
  // longer read in backward (not an activation any more) and its clone is
  // made in backward (not one either).
  const bool activations = model.boundedMemory() == BoundedMemory::SavedActivations;
  for (const CheckpointCandidate &c : candidates)
    covers_.push_back(activations
                          ? std::make_pair(c.created, live.lookup(c.storage)->freedAfter)
                          : std::make_pair(c.lastForwardUse + 1, c.firstBackwardUse - 1));
  // The covering set changes only where an interval begins or ends.
  cuts_ = {0, numNodes};
  for (auto [from, to] : covers_)
    if (from <= to) {
      cuts_.push_back(from);
      cuts_.push_back(to + 1);
    }
  llvm::erase_if(cuts_, [&](int64_t r) { return r < 0 || r > numNodes; });
  std::sort(cuts_.begin(), cuts_.end());
  cuts_.erase(std::unique(cuts_.begin(), cuts_.end()), cuts_.end());
}

std::optional<MilpProblem> CheckpointMilp::problem(int64_t budget,
                                                   llvm::ArrayRef<int64_t> adjust) const {
  llvm::ArrayRef<int64_t> base = model_.boundedTimeline();
  auto candidates = model_.candidates();
  MilpProblem p;
  p.objective = objective_;
  p.upper = upper_;
  p.rows = structural_;
  for (size_t i = 0; i + 1 < cuts_.size(); ++i) {
    const int64_t first = cuts_[i], end = cuts_[i + 1];
    int64_t high = INT64_MIN;
    for (int64_t t = first; t < end; ++t)
      high = std::max(high, base[t] + (adjust.empty() ? 0 : adjust[t]));
    if (high <= budget)
      continue;
    MilpProblem::Row row;
    int64_t coverable = 0;
    for (size_t c = 0; c < candidates.size(); ++c)
      if (covers_[c].first <= first && first <= covers_[c].second) {
        row.columns.push_back(static_cast<int>(c));
        row.coefficients.push_back(static_cast<double>(candidates[c].bytes) / bytesUnit_);
        coverable += candidates[c].bytes;
      }
    if (coverable < high - budget)
      return std::nullopt; // dropping all of them is not enough
    row.rhs = static_cast<double>(high - budget) / bytesUnit_;
    p.rows.push_back(std::move(row));
    ++p.memoryRows;
  }
  return p;
}

std::vector<double> CheckpointMilp::columnsOf(llvm::ArrayRef<int32_t> dropped,
                                              const RecomputeSet &set) const {
  std::vector<double> x(upper_.size(), 0);
  for (int32_t c : dropped)
    x[c] = 1;
  for (const RecomputeSet::Clone &clone : set.clones) {
    auto it = nodeColumn_.find({model_.baseline().rank.lookup(clone.original), clone.before});
    if (it == nodeColumn_.end() || upper_[it->second] == 0)
      return {};
    x[it->second] = 1;
  }
  return x;
}

std::vector<int64_t> CheckpointMilp::modelledTimeline(llvm::ArrayRef<int32_t> dropped) const {
  std::vector<int64_t> timeline = model_.boundedTimeline().vec();
  std::vector<int64_t> delta(timeline.size() + 1, 0);
  for (int32_t ci : dropped) {
    auto [from, to] = covers_[ci];
    if (from <= to) {
      delta[from] -= model_.candidates()[ci].bytes;
      delta[to + 1] += model_.candidates()[ci].bytes;
    }
  }
  int64_t running = 0;
  for (size_t t = 0; t < timeline.size(); ++t)
    timeline[t] += running += delta[t];
  return timeline;
}

} // namespace graphopt
