//===- Liveness.cpp - Activation lifetimes and simulated peak memory ------===//
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/Analysis/MeasuredScratch.h"

#include "graphopt/IR/OpEffects.h"
#include "graphopt/Runtime/FreePolicy.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/Support/Format.h>

#include <optional>

namespace graphopt {

llvm::StringRef memoryKindName(MemoryKind kind) {
  static const char *const names[] = {"PARAM", "GRAD", "ACT", "OPT_STATE", "OTHER", "SCRATCH"};
  return names[static_cast<int>(kind)];
}

absl::StatusOr<LivenessResult> LivenessAnalysis::run(const Graph &graph, AnalysisManager &analyses,
                                                     const Options &options) {
  // The storage roots come from the cache: a pass before may have kept them.
  auto roots = analyses.getResult<StorageRootsAnalysis>(graph);
  if (!roots.ok())
    return roots.status();
  if (options.scratch == Scratch::None)
    return compute(graph, {}, *roots);
  auto scratch = analyses.getResult<MeasuredScratchAnalysis>(graph);
  if (!scratch.ok())
    return scratch.status();
  return compute(graph, (*scratch)->bytes, *roots);
}

namespace {

/// What LivenessAnalysis::compute builds up, step by step, besides the result.
struct LivenessBuilder {
  LivenessBuilder(const Graph &graph, LivenessResult &r, const AliasInfo *roots)
      : graph(graph), r(r),
        own(roots ? std::nullopt : std::optional<AliasInfo>(std::in_place, graph, AliasFacts::RootsOnly)),
        aliases(roots ? *roots : *own) {}
  const Graph &graph;
  LivenessResult &r;
  std::optional<AliasInfo> own; ///< where no roots were given
  /// The one alias model every pass asks: a value's storage roots.
  const AliasInfo &aliases;
  std::vector<Value *> all;
  std::vector<uint32_t> storageOf;    // slot of the value owning the storage
  /// A value that may live in more than one storage (a result that may alias
  /// any of several operands): the other roots' slots, which it keeps alive too.
  llvm::DenseMap<uint32_t, llvm::SmallVector<uint32_t, 2>> otherRoots;
  std::vector<uint8_t> madeInForward; // by value slot

  uint32_t slot(const Value *v) const { return static_cast<uint32_t>(r.slot.lookup(v)); }
  ValueLiveness &info(const Value *v) { return r.values[slot(v)]; }
};

/// Gives every value its slot and entry, each its own storage to begin with.
void indexValues(LivenessBuilder &b) {
  LivenessResult &r = b.r;
  b.all = b.graph.allValues();
  const std::vector<Value *> &all = b.all;
  // Value ids index plain vectors (ValueMap): no pointer hashing, and ids grow
  // along the graph, so the lookups stay close together in memory.
  r.values.resize(all.size());
  r.slot = ValueMap<int32_t>(b.graph, -1);
  for (size_t i = 0; i < all.size(); ++i)
    r.slot[all[i]] = static_cast<int32_t>(i);
  r.rank = NodeMap<int64_t>(b.graph, -1);
  b.storageOf.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    r.values[i].value = all[i];
    b.storageOf[i] = static_cast<uint32_t>(i);
  }
  // Tied graph inputs (one storage under two parameter names) live in the
  // storage of the input they are tied to: counted once.
  for (const GraphInput &in : b.graph.inputs())
    if (const Value *owner = b.graph.storageOwner(in.value); owner != in.value)
      b.storageOf[b.slot(in.value)] = b.slot(owner);
}

/// Creation, uses by phase, storage sharing.
void recordCreationAndUses(LivenessBuilder &b) {
  LivenessResult &r = b.r;
  b.madeInForward.assign(b.all.size(), 0);
  int64_t k = 0;
  for (const Node &n : b.graph.nodes()) {
    r.rank[&n] = k;
    for (const Value *v : n.operandValues()) {
      ValueLiveness &l = b.info(v);
      if (n.phase() == Phase::Forward) {
        l.lastForwardUse = k;
      } else {
        if (l.firstBackwardUse < 0)
          l.firstBackwardUse = k;
        l.lastBackwardUse = k;
      }
    }
    for (unsigned o = 0; o < n.numOutputs(); ++o) {
      const Value *v = n.output(o);
      uint32_t out = b.slot(v);
      r.values[out].created = k;
      b.madeInForward[out] = n.phase() == Phase::Forward;
      if (!v->isTensor() || b.aliases.ownsStorage(v))
        continue;
      // A view or an in-place result: it lives in its roots' storage (the
      // first one's bytes), and keeps every root alive while it is.
      llvm::SmallVector<const Value *, 2> roots = b.aliases.roots(v);
      roots.erase(std::remove(roots.begin(), roots.end(), v), roots.end());
      if (roots.empty())
        continue;
      b.storageOf[out] = b.storageOf[b.slot(roots.front())];
      for (size_t i = 1; i < roots.size(); ++i)
        if (uint32_t s = b.storageOf[b.slot(roots[i])]; s != b.storageOf[out])
          b.otherRoots[out].push_back(s);
    }
    ++k;
  }
}

/// Bytes and the end of each storage's life: when the executor drops the last
/// value in it (the shared free policy: after its last use, right after
/// creation if never read), the end for graph inputs and for graph outputs
/// (which it never drops).
void computeStorageLifetimes(LivenessBuilder &b, int64_t numNodes) {
  LivenessResult &r = b.r;
  const std::vector<Value *> &all = b.all;
  const std::vector<uint32_t> &storageOf = b.storageOf;
  ValueMap<const Node *> lastUser = computeLastUsers(b.graph);
  std::vector<int64_t> end(all.size(), -1); // by storage slot
  for (size_t i = 0; i < all.size(); ++i) {
    ValueLiveness &l = r.values[i];
    const Node *dropper = lastUser.lookup(l.value);
    int64_t e = l.value->isGraphInput() || !dropper ? numNodes : r.rank.lookup(dropper);
    end[storageOf[i]] = std::max(end[storageOf[i]], e);
    if (auto other = b.otherRoots.find(static_cast<uint32_t>(i)); other != b.otherRoots.end())
      for (uint32_t s : other->second)
        end[s] = std::max(end[s], e);
    l.storage = all[storageOf[i]];
    if (storageOf[i] == i && l.value->isTensor())
      l.bytes = l.value->tensorType().storageBytes();
    // graphopt::offload's copy is in host memory: no part of the device's.
    if (l.bytes && l.value->definingNode() && isHostCopy(*l.value->definingNode()))
      std::swap(l.bytes, l.hostBytes);
  }
  for (size_t i = 0; i < all.size(); ++i)
    r.values[i].freedAfter = end[storageOf[i]];
}

/// Kinds (MemoryKind) of every value.
void classifyKinds(LivenessBuilder &b) {
  LivenessResult &r = b.r;
  const std::vector<uint32_t> &storageOf = b.storageOf;
  const size_t numValues = b.all.size();
  std::vector<uint8_t> isGradient(numValues, 0); // by storage slot
  for (const GraphOutput &out : b.graph.outputs())
    if (out.role == OutputRole::Gradient || out.role == OutputRole::InputGradient)
      isGradient[storageOf[b.slot(out.value)]] = 1;
  for (const GraphInput &in : b.graph.inputs()) {
    ValueLiveness &l = b.info(in.value);
    l.kind = in.role == InputRole::Parameter        ? MemoryKind::Param
             : in.role == InputRole::OptimizerState ? MemoryKind::OptState
                                                    : MemoryKind::Other;
  }
  for (size_t i = 0; i < numValues; ++i) {
    ValueLiveness &l = r.values[i];
    if (l.created < 0) // a graph input
      continue;
    if (isGradient[storageOf[i]])
      l.kind = MemoryKind::Grad;
    else if (b.madeInForward[i] && l.firstBackwardUse >= 0)
      l.kind = MemoryKind::Act;
  }
  // A view used in backward keeps its base alive as an activation too.
  for (size_t i = 0; i < numValues; ++i) {
    ValueLiveness &base = r.values[storageOf[i]];
    if (r.values[i].kind == MemoryKind::Act && storageOf[i] != i && base.kind == MemoryKind::Other &&
        base.created >= 0)
      base.kind = MemoryKind::Act;
  }
}

/// The timeline: storages live from creation through `freedAfter`.
void computeTimeline(LivenessResult &r, int64_t numNodes) {
  std::vector<int64_t> delta(numNodes + 2, 0);
  for (const ValueLiveness &l : r.values) {
    if (!l.bytes)
      continue;
    if (l.created < 0) { // a graph input
      r.inputBytes += l.bytes;
      continue;
    }
    delta[l.created] += l.bytes;
    delta[std::min(l.freedAfter, numNodes) + 1] -= l.bytes;
  }
  r.timeline.resize(numNodes);
  int64_t live = r.inputBytes;
  r.peakBytes = r.inputBytes;
  for (int64_t i = 0; i < numNodes; ++i) {
    live += delta[i];
    r.timeline[i] = live + (r.scratch.empty() ? 0 : r.scratch[i]);
    if (r.timeline[i] > r.peakBytes || r.peakNode < 0) {
      r.peakBytes = std::max(r.peakBytes, r.timeline[i]);
      r.peakNode = i;
    }
  }
}

/// What is live at the peak, by kind (the same storages the timeline summed).
void computePeakBreakdown(LivenessResult &r) {
  for (const ValueLiveness &l : r.values) {
    if (!l.bytes)
      continue;
    bool liveAtPeak = l.created < 0 ||
                      (r.peakNode >= 0 && l.created <= r.peakNode && l.freedAfter >= r.peakNode);
    if (liveAtPeak)
      r.breakdown[static_cast<int>(l.kind)] += l.bytes;
  }
  if (r.peakNode >= 0 && !r.scratch.empty())
    r.breakdown[static_cast<int>(MemoryKind::Scratch)] = r.scratch[r.peakNode];
}

} // namespace

absl::StatusOr<LivenessResult> LivenessAnalysis::compute(const Graph &graph,
                                                         llvm::ArrayRef<int64_t> scratch,
                                                         const AliasInfo *roots) {
  LivenessResult r;
  const int64_t numNodes = static_cast<int64_t>(graph.numNodes());
  if (!scratch.empty() && static_cast<int64_t>(scratch.size()) != numNodes)
    return absl::InternalError(absl::StrCat("liveness: scratch measured for ", scratch.size(),
                                            " nodes, the graph has ", numNodes));
  r.scratch.assign(scratch.begin(), scratch.end());
  LivenessBuilder builder(graph, r, roots);
  indexValues(builder);
  recordCreationAndUses(builder);
  computeStorageLifetimes(builder, numNodes);
  classifyKinds(builder);
  computeTimeline(r, numNodes);
  computePeakBreakdown(r);
  return r;
}

std::vector<std::array<int64_t, kNumMemoryKinds>> liveBytesByKind(const LivenessResult &r,
                                                                 int64_t granularity) {
  const int64_t numNodes = static_cast<int64_t>(r.timeline.size());
  std::vector<std::array<int64_t, kNumMemoryKinds>> delta(numNodes + 1);
  std::array<int64_t, kNumMemoryKinds> inputs{};
  for (const ValueLiveness &l : r.values) {
    if (!l.bytes)
      continue;
    int kind = static_cast<int>(l.kind);
    if (l.created < 0) {
      inputs[kind] += l.bytes;
      continue;
    }
    int64_t bytes = (l.bytes + granularity - 1) / granularity * granularity;
    delta[l.created][kind] += bytes;
    delta[std::min(l.freedAfter, numNodes - 1) + 1][kind] -= bytes;
  }
  std::vector<std::array<int64_t, kNumMemoryKinds>> live(numNodes);
  std::array<int64_t, kNumMemoryKinds> now = inputs;
  for (int64_t i = 0; i < numNodes; ++i) {
    for (int k = 0; k < kNumMemoryKinds; ++k)
      now[k] += delta[i][k];
    live[i] = now;
    if (!r.scratch.empty())
      live[i][static_cast<int>(MemoryKind::Scratch)] = r.scratch[i];
  }
  return live;
}

void printLivenessReport(llvm::raw_ostream &os, const LivenessResult &r, size_t top) {
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  os << llvm::format("simulated peak: %.2f MiB (%.2f MiB above weights and inputs)",
                     mib(r.peakBytes), mib(r.peakBytes - r.inputBytes));
  if (r.peakNode >= 0)
    os << " while node " << r.peakNode << " runs";
  os << "\nbreakdown at the peak:\n";
  for (int kind = 0; kind < kNumMemoryKinds; ++kind) {
    auto name = memoryKindName(static_cast<MemoryKind>(kind)).str();
    if (static_cast<MemoryKind>(kind) == MemoryKind::Scratch && r.scratch.empty())
      os << llvm::format("  %-10s %14s  (liveness{scratch=measured} measures it)\n", name.c_str(),
                         static_cast<const char *>("not measured"));
    else
      os << llvm::format("  %-10s %10.2f MiB\n", name.c_str(), mib(r.breakdown[kind]));
  }
  std::vector<const ValueLiveness *> acts;
  for (const ValueLiveness &l : r.values)
    if (l.kind == MemoryKind::Act && l.bytes > 0)
      acts.push_back(&l);
  std::stable_sort(acts.begin(), acts.end(),
                   [](const ValueLiveness *a, const ValueLiveness *b) { return a->bytes > b->bytes; });
  os << "largest activations (made in forward, kept for backward):\n";
  for (size_t i = 0; i < acts.size() && i < top; ++i)
    os << llvm::format("  %10.2f MiB  %%%s  %s  live %lld..%lld\n", mib(acts[i]->bytes),
                       acts[i]->value->name().str().c_str(),
                       acts[i]->value->definingNode()->opName().c_str(),
                       static_cast<long long>(acts[i]->created),
                       static_cast<long long>(acts[i]->freedAfter));
}

} // namespace graphopt
