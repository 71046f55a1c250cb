//===- ActivationStats.cpp - μ-TWO metrics per activation -----------------===//
//
// For every activation (a storage made in forward and read in backward):
// when it is idle, and what recomputing it at its first backward use costs.
// The recomputation is the smallest one there is: from the activation's
// producer, walk back through operands and stop at every value still live at
// that point (graph inputs; values whose storage is not freed yet), so only
// what was freed is made again.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Analysis/Profile.h"

#include "graphopt/Alias/RewriteLegality.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>

namespace graphopt {

namespace {

/// Uses of one storage, over every value that lives in it.
struct StorageUses {
  int64_t lastForward = -1;
  int64_t firstBackward = -1;
  int64_t lastBackward = -1;
};

class RecomputeCost {
public:
  RecomputeCost(const Graph &graph, const LivenessResult &live, llvm::ArrayRef<NodeStats> nodes)
      : live_(live), nodes_(nodes), nodeOfRank_(graph.numNodes()) {
    for (const Node &n : graph.nodes())
      nodeOfRank_[live.rank.lookup(&n)] = &n;
  }

  /// Fills the recompute fields of `stats` for recomputing `target` at rank `at`.
  void compute(const ValueLiveness &target, int64_t at, ActivationStats &stats) {
    llvm::SmallVector<int64_t, 16> ranks = recomputedRanks(target, at);
    std::sort(ranks.begin(), ranks.end());
    stats.recomputeNodes = static_cast<unsigned>(ranks.size());
    for (int64_t rank : ranks) {
      const Node &n = *nodeOfRank_[rank];
      stats.recomputeSeconds += nodes_[rank].seconds;
      // Checkpoint's own rule: random ops are not (dropout is, from its mask).
      if (!whyNotRecomputable(n).empty())
        stats.recomputable = false;
    }
    stats.recomputeMemoryBytes = temporaryPeak(target, ranks);
  }

private:
  /// True when `v`'s storage is live (made and not yet freed) while node `at` runs.
  bool liveAt(const Value *v, const Value *targetStorage, int64_t at) const {
    const ValueLiveness *l = live_.lookup(v);
    if (l->storage == targetStorage)
      return false;
    return l->created < 0 || (l->created < at && l->freedAfter >= at);
  }

  /// The ranks of the nodes to run again, without duplicates.
  llvm::SmallVector<int64_t, 16> recomputedRanks(const ValueLiveness &target, int64_t at) {
    llvm::SmallVector<int64_t, 16> ranks;
    llvm::SmallVector<const Node *, 16> work{target.value->definingNode()};
    seen_.clear();
    while (!work.empty()) {
      const Node *n = work.pop_back_val();
      int64_t rank = live_.rank.lookup(n);
      if (!seen_.insert(rank).second)
        continue;
      ranks.push_back(rank);
      for (const Value *v : n->operandValues())
        if (!liveAt(v, target.storage, at))
          work.push_back(v->definingNode());
    }
    return ranks;
  }

  /// The most memory the recomputation holds beside the target: each
  /// recomputed output (but the target's storage) from its node to its last
  /// use in the recomputation, plus the running node's scratch.
  int64_t temporaryPeak(const ValueLiveness &target, llvm::ArrayRef<int64_t> ranks) const {
    llvm::DenseMap<const Value *, int64_t> lastUse; // storage -> last recomputed rank reading it
    for (int64_t rank : ranks)
      for (const Value *v : nodeOfRank_[rank]->operandValues())
        lastUse[live_.lookup(v)->storage] = rank;
    int64_t held = 0, peak = 0;
    llvm::SmallVector<std::pair<int64_t, int64_t>, 16> frees; // (rank, bytes)
    for (int64_t rank : ranks) {
      const Node &n = *nodeOfRank_[rank];
      for (const Value *out : n.outputs()) {
        const ValueLiveness *l = live_.lookup(out);
        if (!l->bytes || l->storage == target.storage)
          continue;
        held += l->bytes;
        auto it = lastUse.find(l->storage);
        frees.emplace_back(it == lastUse.end() ? rank : it->second, l->bytes);
      }
      peak = std::max(peak, held + nodes_[rank].scratchBytes);
      for (auto &[freeRank, bytes] : frees)
        if (freeRank == rank) {
          held -= bytes;
          bytes = 0;
        }
    }
    return peak;
  }

  const LivenessResult &live_;
  llvm::ArrayRef<NodeStats> nodes_;
  std::vector<const Node *> nodeOfRank_;
  llvm::DenseSet<int64_t> seen_;
};

} // namespace

std::vector<ActivationStats> computeActivationStats(const Graph &graph,
                                                    const LivenessResult &live,
                                                    llvm::ArrayRef<NodeStats> nodes) {
  // Uses per storage: a view read in backward keeps its base's storage.
  llvm::DenseMap<const Value *, StorageUses> uses;
  for (const ValueLiveness &l : live.values) {
    StorageUses &u = uses[l.storage];
    u.lastForward = std::max(u.lastForward, l.lastForwardUse);
    if (l.firstBackwardUse >= 0 && (u.firstBackward < 0 || l.firstBackwardUse < u.firstBackward))
      u.firstBackward = l.firstBackwardUse;
    u.lastBackward = std::max(u.lastBackward, l.lastBackwardUse);
  }
  // Time before each rank, so an interval's time is one subtraction.
  std::vector<double> timeBefore(nodes.size() + 1, 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    timeBefore[i + 1] = timeBefore[i] + nodes[i].seconds;

  RecomputeCost cost(graph, live, nodes);
  std::vector<ActivationStats> result;
  for (const ValueLiveness &l : live.values) {
    if (l.kind != MemoryKind::Act || l.storage != l.value || l.created < 0)
      continue;
    const StorageUses &u = uses[l.value];
    if (u.firstBackward < 0)
      continue;
    ActivationStats a;
    a.value = l.value;
    a.creationRank = l.created;
    a.lastForwardUseRank = std::max(u.lastForward, l.created);
    a.firstBackwardUseRank = u.firstBackward;
    a.lastBackwardUseRank = u.lastBackward;
    const NodeStats &producer = nodes[l.created];
    unsigned out = 0;
    while (out < l.value->definingNode()->numOutputs() &&
           l.value->definingNode()->output(out) != l.value)
      ++out;
    a.bytes = out < producer.outputStorageBytes.size() ? producer.outputStorageBytes[out] : l.bytes;
    if (a.firstBackwardUseRank > a.lastForwardUseRank + 1)
      a.inactiveSeconds = timeBefore[a.firstBackwardUseRank] - timeBefore[a.lastForwardUseRank + 1];
    cost.compute(l, a.firstBackwardUseRank, a);
    // A floor of 1 ns keeps the ratio finite for a recomputation too quick to time.
    if (a.recomputable)
      a.recomputeRatio = static_cast<double>(a.bytes) / std::max(a.recomputeSeconds, 1e-9);
    result.push_back(a);
  }
  std::stable_sort(result.begin(), result.end(), [](const ActivationStats &a, const ActivationStats &b) {
    return a.creationRank < b.creationRank;
  });
  return result;
}

} // namespace graphopt
