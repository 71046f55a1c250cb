//===- MilpFormulation.cpp - checkpoint{planner=milp}'s mixed-integer program ---===//
#include "checkpoint/MilpFormulation.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

namespace graphopt {

namespace {

/// A tie-break per column, in objective units (the costliest node is 1):
/// among plans of equal time, fewer clones, drops and hoists (views and other
/// free nodes cost 0 seconds). Far below any node time that matters, so the
/// gap CBC proves is still the gap on seconds.
constexpr double kTieBreak = 1e-7;

} // namespace

// PlanState::available and grow, for one clone: what it reads as is whatever
// the plan, and what it may need made at its point too.
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
    bool kept = s->created < 0 || liveAt(*s);
    // A dropped candidate's own clone serves the values backward reads, from
    // where it is made to each value's last backward use.
    bool served = ci >= 0 && l->firstBackwardUse >= 0 && def->phase() == Phase::Forward &&
                  p <= l->lastBackwardUse;
    bool own = served && model_.candidates()[ci].firstBackwardUse <= p;
    if (kept && (ci < 0 || own)) { // read as is, dropped or not
      if (model_.writtenBetween(s->value, rank, p))
        return false; // the closure refuses to read a value written since
      continue;
    }
    if (isReplayableDropout(*def) && o == def->output(1))
      return false; // a mask that is gone cannot be drawn again
    bool early = ci >= 0 && p < model_.candidates()[ci].firstBackwardUse;
    out.push_back({def, ci, kept, own, served && !own, early});
  }
  return true;
}

struct CheckpointMilp::Reachable {
  using Key = std::pair<const Node *, int64_t>;
  llvm::DenseMap<Key, int> hops;
  std::vector<Key> order; // discovery order: the columns' order, deterministic
  std::map<std::pair<int32_t, int64_t>, int> hoistHops; // (candidate, point) -> hops
  std::vector<std::pair<int32_t, int64_t>> hoistOrder;
};

class CheckpointMilp::RowSet {
public:
  explicit RowSet(std::vector<MilpProblem::Row> &rows) : rows_(rows) {}
  void add(std::vector<int> cols, std::vector<double> coefs, double rhs) {
    coefs.push_back(rhs);
    if (!seen_.insert({cols, coefs}).second)
      return;
    coefs.pop_back();
    rows_.push_back({std::move(cols), std::move(coefs), rhs});
  }

private:
  std::vector<MilpProblem::Row> &rows_;
  std::set<std::pair<std::vector<int>, std::vector<double>>> seen_; // each row once
};

CheckpointMilp::CheckpointMilp(const RecomputeModel &model, size_t maxColumns) : model_(model) {
  numCandidates_ = model.candidates().size();
  Reachable reached = reachablePairs();
  cutChains(reached, maxColumns);
  addColumns(reached);
  RowSet rows(structural_);
  addOwnCloneRows(rows);
  addOperandRows(rows);
  scaleUnits();
  computeCovers();
}

// The (node, point) pairs chains may reach, and how many candidates a
// chain passes through to get there (0-1 breadth first: an operand made
// whatever the plan costs no hop, one made only for some plans one). A
// clone that may read a candidate before its point makes that point a
// hoist of it, whose own clone is reached from there.
CheckpointMilp::Reachable CheckpointMilp::reachablePairs() const {
  using Key = Reachable::Key;
  auto candidates = model_.candidates();
  Reachable reached;
  llvm::DenseMap<Key, int> &hops = reached.hops;
  std::deque<std::pair<Key, int>> queue;
  auto reach = [&](Key k, int h, bool front) {
    auto [it, inserted] = hops.try_emplace(k, h);
    if (inserted)
      reached.order.push_back(k);
    else if (it->second <= h)
      return;
    it->second = h;
    if (front)
      queue.emplace_front(k, h);
    else
      queue.emplace_back(k, h);
  };
  auto ownAt = [&](int32_t c, int64_t p, int h) {
    for (const Value *v : candidates[c].backwardValues)
      reach({v->definingNode(), p}, h, false);
  };
  for (size_t c = 0; c < numCandidates_; ++c)
    ownAt(static_cast<int32_t>(c), candidates[c].firstBackwardUse, 0);
  std::vector<Operand> operands;
  while (!queue.empty()) {
    auto [k, h] = queue.front();
    queue.pop_front();
    if (hops[k] < h || !operandsOf(*k.first, k.second, operands))
      continue;
    for (const Operand &o : operands) {
      reach({o.def, k.second}, o.always() ? h : h + 1, o.always());
      if (o.early) { // its own clone could be made here instead, sharing this one
        auto [it, inserted] = reached.hoistHops.try_emplace({o.candidate, k.second}, h + 1);
        if (inserted)
          reached.hoistOrder.push_back(it->first);
        if (inserted || h + 1 < it->second) {
          it->second = std::min(it->second, h + 1);
          ownAt(o.candidate, k.second, h + 1);
        }
      }
    }
  }
  return reached;
}

// Past maxColumns (r and g columns together), cut chains at the most hops that fit.
void CheckpointMilp::cutChains(const Reachable &reached, size_t maxColumns) {
  if (reached.order.size() + reached.hoistOrder.size() <= maxColumns)
    return;
  std::vector<int> sorted;
  for (const Reachable::Key &k : reached.order)
    sorted.push_back(reached.hops.lookup(k));
  for (const auto &ch : reached.hoistOrder)
    sorted.push_back(reached.hoistHops.at(ch));
  std::sort(sorted.begin(), sorted.end());
  maxHops_ = std::max(0, sorted[maxColumns] - 1);
}

int CheckpointMilp::nodeColumnOf(const Node *n, int64_t p) const {
  auto it = nodeColumn_.find({model_.baseline().rank.lookup(n), p});
  return it == nodeColumn_.end() ? -1 : it->second;
}

// Columns: the candidates, the reachable (node, point) pairs, the hoists.
void CheckpointMilp::addColumns(const Reachable &reached) {
  const LivenessResult &live = model_.baseline();
  auto candidates = model_.candidates();
  objective_.assign(numCandidates_, kTieBreak);
  upper_.assign(numCandidates_, 1);
  for (const Reachable::Key &k : reached.order)
    if (withinHops(reached.hops.lookup(k))) {
      int64_t rank = live.rank.lookup(k.first);
      nodeColumn_[{rank, k.second}] = static_cast<int>(upper_.size());
      nodeRank_.push_back(rank);
      nodePoint_.push_back(k.second);
      objective_.push_back(model_.seconds()[rank]);
      upper_.push_back(1);
    }
  // g_{c,k}: c's own clone is made at its k-th hoist point or earlier (a
  // prefix, so each operand and memory row needs one g, not every hoist).
  std::vector<std::vector<int64_t>> points(numCandidates_);
  for (auto [c, q] : reached.hoistOrder) {
    bool reachable = withinHops(reached.hoistHops.at({c, q}));
    for (const Value *v : candidates[c].backwardValues)
      reachable = reachable && nodeColumnOf(v->definingNode(), q) >= 0;
    if (reachable) // else its own clone there was cut: no such hoist
      points[c].push_back(q);
  }
  hoistsOf_.resize(numCandidates_);
  for (size_t c = 0; c < numCandidates_; ++c) {
    std::sort(points[c].begin(), points[c].end());
    for (int64_t q : points[c]) {
      hoistsOf_[c].emplace_back(q, static_cast<int>(upper_.size()));
      hoists_.push_back({static_cast<int32_t>(c), q});
      objective_.push_back(0); // scaled with the others below: a tie-break only
      upper_.push_back(1);
    }
  }
}

// Own clones: g_{c,1} <= ... <= g_{c,K} <= d_c; made at q_k when g_k - g_{k-1}
// (g_0 = 0), at the candidate's point when d_c - g_K.
void CheckpointMilp::addOwnCloneRows(RowSet &rows) {
  auto candidates = model_.candidates();
  for (size_t c = 0; c < numCandidates_; ++c) {
    const int d = static_cast<int>(c);
    const auto &g = hoistsOf_[c];
    for (size_t k = 0; k < g.size(); ++k)
      rows.add({k + 1 < g.size() ? g[k + 1].second : d, g[k].second}, {1, -1}, 0);
    for (const Value *v : candidates[c].backwardValues) {
      int atPoint = nodeColumnOf(v->definingNode(), candidates[c].firstBackwardUse);
      if (g.empty())
        rows.add({atPoint, d}, {1, -1}, 0);
      else
        rows.add({atPoint, d, g.back().second}, {1, -1, 1}, 0);
      for (size_t k = 0; k < g.size(); ++k) {
        int at = nodeColumnOf(v->definingNode(), g[k].first);
        if (k == 0)
          rows.add({at, g[k].second}, {1, -1}, 0);
        else
          rows.add({at, g[k].second, g[k - 1].second}, {1, -1, 1}, 0);
      }
    }
  }
}

// Operands: r_{def(o),p} >= r_{n,p} - [o is there], where [o is there] =
// live (1 - d_s) + own d_s + hoistable g_{s,k} (k: its last hoist point <= p).
void CheckpointMilp::addOperandRows(RowSet &rows) {
  std::vector<Operand> operands;
  for (size_t k = 0; k < nodeRank_.size(); ++k) {
    const int col = static_cast<int>(numCandidates_ + k);
    const int64_t p = nodePoint_[k];
    if (!operandsOf(*model_.nodeAt(nodeRank_[k]), p, operands)) {
      upper_[col] = 0;
      continue;
    }
    for (const Operand &o : operands) {
      int def = nodeColumnOf(o.def, p);
      if (o.always() && def < 0) {
        upper_[col] = 0; // cannot happen (no hop), but never a clone without its operand
        continue;
      }
      std::vector<int> cols{col};
      std::vector<double> coefs{-1};
      if (def >= 0) { // a cut operand: the clone may not exist while it is missing
        cols.push_back(def);
        coefs.push_back(1);
      }
      if (o.candidate >= 0) {
        int own = o.own ? 1 : 0, lv = o.live ? 1 : 0;
        if (own != lv) {
          cols.push_back(o.candidate);
          coefs.push_back(own - lv);
        }
        if (int g = hoistedBy(o.candidate, p); o.hoistable && g >= 0) {
          cols.push_back(g);
          coefs.push_back(1);
        }
      }
      rows.add(cols, coefs, o.live ? -1 : 0);
    }
  }
}

// Objective in units of the costliest node, so CBC's tolerances mean the
// same for microseconds (flops estimates) as for seconds.
void CheckpointMilp::scaleUnits() {
  double maxSeconds = 0;
  for (size_t k = numCandidates_; k < numCandidates_ + nodeRank_.size(); ++k)
    maxSeconds = std::max(maxSeconds, objective_[k]);
  secondsUnit_ = maxSeconds > 0 ? maxSeconds : 1;
  for (size_t k = numCandidates_; k < objective_.size(); ++k)
    objective_[k] = objective_[k] / secondsUnit_ + kTieBreak;
  int64_t maxBytes = 1;
  for (const CheckpointCandidate &c : model_.candidates())
    maxBytes = std::max(maxBytes, c.bytes);
  bytesUnit_ = static_cast<double>(maxBytes);
}

// Where dropping each candidate takes its bytes off the bounded memory. The
// peak: between its last forward use and its own clone. The saved
// activations: its whole life, as its storage is no longer read in backward
// (not an activation any more) and its clone is made in backward (not one
// either), hoisted or not.
void CheckpointMilp::computeCovers() {
  const LivenessResult &live = model_.baseline();
  const int64_t numNodes = static_cast<int64_t>(live.timeline.size());
  peakBound_ = model_.boundedMemory() == BoundedMemory::PeakAboveInputs;
  for (const CheckpointCandidate &c : model_.candidates())
    covers_.push_back(peakBound_ ? std::make_pair(c.lastForwardUse + 1, c.firstBackwardUse - 1)
                                 : std::make_pair(c.created, live.lookup(c.storage)->freedAfter));
  // The coefficients change only where an interval begins or ends.
  cuts_ = {0, numNodes};
  for (auto [from, to] : covers_)
    if (from <= to) {
      cuts_.push_back(from);
      cuts_.push_back(to + 1);
    }
  for (const Hoist &h : hoists_)
    cuts_.push_back(h.point);
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
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (!(covers_[c].first <= first && first <= covers_[c].second))
        continue;
      double bytes = static_cast<double>(candidates[c].bytes) / bytesUnit_;
      row.columns.push_back(static_cast<int>(c));
      row.coefficients.push_back(bytes);
      coverable += candidates[c].bytes;
      if (int g = hoistedBy(static_cast<int32_t>(c), first); peakBound_ && g >= 0) {
        row.columns.push_back(g); // hoisted by then: held again
        row.coefficients.push_back(-bytes);
      }
    }
    if (coverable < high - budget)
      return std::nullopt; // dropping all of them is not enough
    row.rhs = static_cast<double>(high - budget) / bytesUnit_;
    p.rows.push_back(std::move(row));
    ++p.memoryRows;
  }
  return p;
}

int CheckpointMilp::hoistedBy(int32_t c, int64_t p) const {
  const auto &g = hoistsOf_[c];
  auto it = std::upper_bound(g.begin(), g.end(), p,
                             [](int64_t v, const auto &qg) { return v < qg.first; });
  return it == g.begin() ? -1 : std::prev(it)->second;
}

CheckpointMilp::Decoded CheckpointMilp::decode(llvm::ArrayRef<double> columns) const {
  Decoded plan;
  for (size_t c = 0; c < numCandidates_; ++c)
    if (columns[c] > 0.5)
      plan.dropped.push_back(static_cast<int32_t>(c));
  for (size_t c = 0; c < numCandidates_; ++c)
    for (auto [q, g] : hoistsOf_[c])
      if (columns[g] > 0.5) { // the first point it is made by
        plan.hoists.push_back({static_cast<int32_t>(c), q});
        break;
      }
  return plan;
}

std::vector<double> CheckpointMilp::columnsOf(llvm::ArrayRef<int32_t> dropped,
                                              const RecomputeSet &set) const {
  const LivenessResult &live = model_.baseline();
  std::vector<double> x(upper_.size(), 0);
  for (int32_t c : dropped)
    x[c] = 1;
  for (const RecomputeSet::Clone &clone : set.clones) {
    auto it = nodeColumn_.find({live.rank.lookup(clone.original), clone.before});
    if (it == nodeColumn_.end() || upper_[it->second] == 0)
      return {};
    x[it->second] = 1;
  }
  for (const RecomputeSet::Redirect &r : set.redirected) { // own clones made early: hoists
    int32_t c = model_.candidateOf(live.lookup(r.value)->storage);
    if (c < 0 || r.before >= model_.candidates()[c].firstBackwardUse)
      continue;
    const auto &g = hoistsOf_[c];
    if (llvm::none_of(g, [&](const auto &qg) { return qg.first == r.before; }))
      return {};
    for (auto [q, col] : g)
      if (q >= r.before)
        x[col] = 1;
  }
  return x;
}

std::vector<int64_t> CheckpointMilp::modelledTimeline(const Decoded &plan) const {
  std::vector<int64_t> timeline = model_.boundedTimeline().vec();
  std::vector<int64_t> delta(timeline.size() + 1, 0);
  auto add = [&](int64_t from, int64_t to, int64_t bytes) { // [from, to]
    if (from <= to) {
      delta[from] += bytes;
      delta[to + 1] -= bytes;
    }
  };
  for (int32_t c : plan.dropped)
    add(covers_[c].first, covers_[c].second, -model_.candidates()[c].bytes);
  if (peakBound_)
    for (const Hoist &h : plan.hoists)
      add(h.point, covers_[h.candidate].second, model_.candidates()[h.candidate].bytes);
  int64_t running = 0;
  for (size_t t = 0; t < timeline.size(); ++t)
    timeline[t] += running += delta[t];
  return timeline;
}

} // namespace graphopt
