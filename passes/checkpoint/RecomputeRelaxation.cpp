//===- RecomputeRelaxation.cpp - A lower bound on every recomputation plan ----===//
#include "checkpoint/RecomputeRelaxation.h"

#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/IR/GraphoptOps.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

namespace graphopt {

namespace {

/// Among plans of equal time, fewer free nodes run again and fewer values
/// held. In objective units, where the costliest node is 1: far below any
/// time that matters.
constexpr double kTieBreak = 1e-7;

/// `n`'s X column in `nodeColumn`, or -1.
int columnOfNode(const llvm::DenseMap<const Node *, int> &nodeColumn, const Node *n) {
  auto it = nodeColumn.find(n);
  return it == nodeColumn.end() ? -1 : it->second;
}

} // namespace

RecomputeRelaxation::RecomputeRelaxation(const RecomputeModel &model) : model_(model) {
  const int64_t numNodes = static_cast<int64_t>(model.baseline().timeline.size());
  const int64_t backwardStart = model.backwardStart();
  const NodeColumns nodeColumn = addNodeColumns(backwardStart);
  addStorageColumns(backwardStart);
  addCandidateIntervals(nodeColumn, backwardStart);
  addStorageIntervals(nodeColumn, backwardStart);
  addCuts(numNodes);
  chooseUnits();
}

// X columns: forward nodes that own a storage and may run again.
RecomputeRelaxation::NodeColumns RecomputeRelaxation::addNodeColumns(int64_t backwardStart) {
  const LivenessResult &live = model_.baseline();
  NodeColumns nodeColumn;
  for (int64_t r = 0; r < backwardStart; ++r) {
    const Node *n = model_.nodeAt(r);
    if (n->phase() != Phase::Forward || !model_.whyNotRecomputable(*n).empty())
      continue;
    bool owns = false;
    for (const Value *v : n->outputs())
      if (const ValueLiveness *l = live.lookup(v); l && l->storage == v)
        owns = true;
    if (!owns)
      continue; // views: free, and there when their storage is
    nodeColumn[n] = static_cast<int>(nodes_.size());
    nodes_.push_back(n);
    objective_.push_back(model_.seconds()[r]);
  }
  return nodeColumn;
}

// Z columns: the forward storages that are gone by backward, backward does
// not read, and some node that may run again reads.
void RecomputeRelaxation::addStorageColumns(int64_t backwardStart) {
  const LivenessResult &live = model_.baseline();
  const int numX = static_cast<int>(nodes_.size());
  llvm::DenseMap<const Value *, int> storageColumn;
  for (int x = 0; x < numX; ++x)
    for (const Value *o : nodes_[x]->operandValues()) {
      const ValueLiveness *l = live.lookup(o);
      const ValueLiveness *s = l ? live.lookup(l->storage) : nullptr;
      if (!s || s->created < 0 || s->freedAfter >= backwardStart ||
          model_.candidateOf(s->value) >= 0)
        continue; // a graph input, live into backward anyway, or a candidate: always there
      auto [it, inserted] =
          storageColumn.try_emplace(s->value, numX + static_cast<int>(storages_.size()));
      if (inserted) {
        storages_.push_back(s->value);
        objective_.push_back(0);
      }
      structural_.push_back({{it->second, x}, {1, -1}, 0}); // Z_s >= X_n
    }
}

// Memory: dropped candidates free their bytes where any plan could.
void RecomputeRelaxation::addCandidateIntervals(const NodeColumns &nodeColumn,
                                                int64_t backwardStart) {
  for (const CheckpointCandidate &c : model_.candidates())
    if (int x = columnOfNode(nodeColumn, c.storage->definingNode()); x >= 0) {
      auto [first, last] = freedRanksOf(model_, model_.boundedMemory(), c);
      if (first > last)
        continue;
      intervals_.push_back({first, last, x, c.bytes});
      // A dropout's mask dropped leaves the generator's state saved in its
      // place (replayed from it), from the dropout through forward at least;
      // a plan that keeps the mask saves less still (the mask is larger).
      const Node *def = c.storage->definingNode();
      if (model_.replaysRngStates() && isReplayableDropout(*def) && c.storage == def->output(1)) {
        const int64_t from = std::max(first, c.created), to = std::min(last, backwardStart - 1);
        if (from <= to)
          intervals_.push_back({from, to, x, -kRngStateBytes});
      }
    }
}

// A held storage costs its bytes from where it was freed (the saved
// activations: from where it was made, as it is one now) to the start of
// backward.
void RecomputeRelaxation::addStorageIntervals(const NodeColumns &nodeColumn,
                                              int64_t backwardStart) {
  const LivenessResult &live = model_.baseline();
  const int numX = static_cast<int>(nodes_.size());
  const bool peakBound = model_.boundedMemory() == BoundedMemory::PeakAboveInputs;
  for (size_t k = 0; k < storages_.size(); ++k) {
    const ValueLiveness *s = live.lookup(storages_[k]);
    const int z = numX + static_cast<int>(k);
    const int x = columnOfNode(nodeColumn, storages_[k]->definingNode());
    if (x >= 0)
      structural_.push_back({{z, x}, {1, -1}, 0}); // Z_s >= X_owner(s)
    const int64_t first = peakBound ? s->freedAfter + 1 : s->created, last = backwardStart - 1;
    if (first > last || s->bytes <= 0)
      continue;
    intervals_.push_back({first, last, z, -s->bytes});
    if (x >= 0) // made again rather than held: no bytes kept
      intervals_.push_back({first, last, x, s->bytes});
  }
}

void RecomputeRelaxation::addCuts(int64_t numNodes) {
  cuts_ = {0, numNodes};
  for (const Interval &i : intervals_) {
    cuts_.push_back(i.first);
    cuts_.push_back(i.last + 1);
  }
  llvm::erase_if(cuts_, [&](int64_t r) { return r < 0 || r > numNodes; });
  std::sort(cuts_.begin(), cuts_.end());
  cuts_.erase(std::unique(cuts_.begin(), cuts_.end()), cuts_.end());
  // Each interval has a coefficient in every run of ranks it covers.
  for (const Interval &i : intervals_) {
    auto from = std::lower_bound(cuts_.begin(), cuts_.end(), i.first);
    auto to = std::upper_bound(cuts_.begin(), cuts_.end(), i.last);
    memoryNonzeros_ += static_cast<size_t>(to - from);
  }
}

// Units: the costliest node's seconds, the largest interval's bytes (CBC's
// tolerances then mean the same for microseconds as for seconds).
void RecomputeRelaxation::chooseUnits() {
  double maxSeconds = 0;
  for (double s : objective_)
    maxSeconds = std::max(maxSeconds, s);
  secondsUnit_ = maxSeconds > 0 ? maxSeconds : 1;
  // The tie-break goes on the columns that cost nothing else, so that it
  // takes little off the bound (lowerBoundSeconds).
  for (double &s : objective_) {
    s /= secondsUnit_;
    if (s == 0) {
      s = kTieBreak;
      ++tieBroken_;
    }
  }
  int64_t maxBytes = 1;
  for (const Interval &i : intervals_)
    maxBytes = std::max(maxBytes, std::abs(i.bytes));
  bytesUnit_ = static_cast<double>(maxBytes);
}

bool RecomputeRelaxation::addMemoryRow(MilpProblem &p, int64_t first, int64_t high,
                                       int64_t budget) const {
  std::map<int, int64_t> bytesOf; // column -> bytes it takes off here
  int64_t freeable = 0;           // everything dropped, nothing held
  for (const Interval &iv : intervals_)
    if (iv.first <= first && first <= iv.last) {
      bytesOf[iv.column] += iv.bytes;
      if (iv.column < static_cast<int>(nodes_.size()) && iv.bytes > 0)
        freeable += iv.bytes;
    }
  if (freeable < high - budget)
    return false;
  MilpProblem::Row row;
  for (auto [column, bytes] : bytesOf)
    if (bytes != 0) {
      row.columns.push_back(column);
      row.coefficients.push_back(static_cast<double>(bytes) / bytesUnit_);
    }
  row.rhs = static_cast<double>(high - budget) / bytesUnit_;
  p.rows.push_back(std::move(row));
  ++p.memoryRows;
  return true;
}

std::optional<MilpProblem> RecomputeRelaxation::problem(int64_t budget) const {
  bool partial = false;
  return problem(budget, std::numeric_limits<size_t>::max(), partial);
}

std::optional<MilpProblem> RecomputeRelaxation::problem(int64_t budget, size_t maxNonzeros,
                                                        bool &partial) const {
  llvm::ArrayRef<int64_t> base = model_.boundedTimeline();
  MilpProblem p;
  p.objective = objective_;
  p.upper.assign(objective_.size(), 1);
  p.rows = structural_;
  // The runs over the budget, each with how high it reaches and how many
  // coefficients its row has (intervals covering it, by a difference array).
  struct Run {
    int64_t first, high;
    size_t nonzeros;
  };
  std::vector<int64_t> covering(cuts_.size() + 1, 0);
  for (const Interval &i : intervals_) {
    covering[std::lower_bound(cuts_.begin(), cuts_.end(), i.first) - cuts_.begin()] += 1;
    covering[std::upper_bound(cuts_.begin(), cuts_.end(), i.last) - cuts_.begin()] -= 1;
  }
  std::vector<Run> over;
  size_t total = 0;
  int64_t count = 0;
  for (size_t i = 0; i + 1 < cuts_.size(); ++i) {
    count += covering[i];
    const int64_t first = cuts_[i], end = cuts_[i + 1];
    int64_t high = INT64_MIN;
    for (int64_t t = first; t < end; ++t)
      high = std::max(high, base[t]);
    if (high <= budget)
      continue;
    over.push_back({first, high, static_cast<size_t>(count)});
    total += static_cast<size_t>(count);
  }
  partial = total > maxNonzeros;
  if (partial) // the runs furthest over first; ties in rank order
    std::stable_sort(over.begin(), over.end(),
                     [](const Run &a, const Run &b) { return a.high > b.high; });
  size_t kept = 0;
  for (const Run &run : over) {
    if (partial && kept + run.nonzeros > maxNonzeros && p.memoryRows > 0)
      break;
    if (!addMemoryRow(p, run.first, run.high, budget))
      return std::nullopt;
    kept += run.nonzeros;
  }
  return p;
}

RecomputeRelaxation::Decoded RecomputeRelaxation::decode(llvm::ArrayRef<double> columns) const {
  llvm::DenseMap<const Node *, bool> runsAgain;
  for (size_t x = 0; x < nodes_.size(); ++x)
    runsAgain[nodes_[x]] = columns[x] > 0.5;
  Decoded plan;
  auto candidates = model_.candidates();
  for (size_t c = 0; c < candidates.size(); ++c)
    if (runsAgain.lookup(candidates[c].storage->definingNode()))
      plan.dropped.push_back(static_cast<int32_t>(c));
  for (size_t k = 0; k < storages_.size(); ++k)
    if (columns[nodes_.size() + k] > 0.5 && !runsAgain.lookup(storages_[k]->definingNode()))
      plan.held.push_back(storages_[k]);
  return plan;
}

std::vector<double> RecomputeRelaxation::pointOf(const RecomputeSet &set,
                                                 llvm::ArrayRef<const Value *> held) const {
  const LivenessResult &live = model_.baseline();
  // A held storage no clone reads is not kept longer (RecomputeModel::closure).
  llvm::DenseSet<const Node *> cloned;
  llvm::DenseSet<const Value *> read;
  for (const RecomputeSet::Clone &c : set.clones) {
    cloned.insert(c.original);
    for (const Value *o : c.original->operandValues())
      if (const ValueLiveness *l = live.lookup(o))
        read.insert(l->storage);
  }
  std::vector<double> x(objective_.size(), 0);
  for (size_t k = 0; k < nodes_.size(); ++k)
    x[k] = cloned.contains(nodes_[k]) ? 1 : 0;
  for (size_t k = 0; k < storages_.size(); ++k)
    x[nodes_.size() + k] =
        (llvm::is_contained(held, storages_[k]) && read.contains(storages_[k])) ||
        cloned.contains(storages_[k]->definingNode());
  return x;
}

double RecomputeRelaxation::objectiveOf(double seconds) const {
  return seconds / secondsUnit_ + kTieBreak * static_cast<double>(tieBroken_);
}

double RecomputeRelaxation::lowerBoundSeconds(double solverBound) const {
  if (!std::isfinite(solverBound))
    return 0;
  return std::max(0.0, solverBound - kTieBreak * static_cast<double>(tieBroken_)) * secondsUnit_;
}

const RecomputeRelaxation &relaxationOf(const RecomputeModel &model) {
  if (!model.relaxation_ || &model.relaxation_->model() != &model)
    model.relaxation_ = std::make_shared<const RecomputeRelaxation>(model);
  return *model.relaxation_;
}

} // namespace graphopt
