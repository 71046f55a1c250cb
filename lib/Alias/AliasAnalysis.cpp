//===- AliasAnalysis.cpp - Storage, views and writes of one graph ---------===//
#include "graphopt/Alias/AliasAnalysis.h"

#include "graphopt/IR/OpEffects.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <limits>

namespace graphopt {

namespace {

void appendUnique(llvm::SmallVectorImpl<unsigned> &out, unsigned id) {
  if (!llvm::is_contained(out, id))
    out.push_back(id);
}

/// Chains of views are as deep as the graph at most; a cycle of redirects
/// would be a bug, and this bound turns it into a wrong answer rather than a hang.
constexpr unsigned kMaxRedirectDepth = 1u << 16;

/// Every byte of a storage: what a value of unknown type may touch.
constexpr std::pair<int64_t, int64_t> kAllBytes{0, std::numeric_limits<int64_t>::max()};

/// Two [first, end) byte ranges share a byte (an empty range meets nothing).
bool meet(std::pair<int64_t, int64_t> a, std::pair<int64_t, int64_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

/// The smallest range holding both.
std::pair<int64_t, int64_t> joined(std::pair<int64_t, int64_t> a, std::pair<int64_t, int64_t> b) {
  return {std::min(a.first, b.first), std::max(a.second, b.second)};
}

} // namespace

AliasInfo::AliasInfo(const Graph &graph, AliasFacts facts)
    : graph_(&graph), facts_(facts), rank_(graph, -1), roots_(graph), analysed_(graph, 0),
      writtenThrough_(graph, 0), valueOfId_(graph.valueIdBound(), nullptr) {
  const bool all = facts == AliasFacts::All;
  if (all)
    storages_.resize(graph.valueIdBound());
  for (const GraphInput &in : graph.inputs()) {
    const Value *owner = graph.storageOwner(in.value);
    roots_[in.value] = {owner->id()};
    analysed_[in.value] = 1;
    remember(in.value);
    remember(owner);
  }
  int64_t rank = 0;
  for (const Node &n : graph.nodes()) {
    rank_[&n] = rank;
    // Reads: nodes come in order, so the last one seen is the last reader.
    if (all)
      for (Value *v : n.operandValues())
        for (unsigned root : roots_.lookup(v))
          storage(root).lastReader = {n.id(), rank};
    // Writes: each storage written, at this rank; each value on the chain
    // of views from the written value back to its roots is written through.
    if (all) {
      for (Value *w : writtenValues(n)) {
        std::pair<int64_t, int64_t> bytes = byteRange(w);
        for (unsigned root : roots_.lookup(w)) {
          std::vector<StorageFacts::Write> &writes = storage(root).writes;
          if (writes.empty() || writes.back().rank != rank)
            writes.push_back({rank, bytes});
          else
            writes.back().bytes = joined(writes.back().bytes, bytes);
        }
        llvm::SmallVector<const Value *, 4> work{w};
        while (!work.empty()) {
          const Value *v = work.pop_back_val();
          if (writtenThrough_.lookup(v))
            continue;
          writtenThrough_[v] = 1;
          if (const Node *def = v->definingNode())
            for (Value *base : aliasedOperands(*def, v->index()))
              work.push_back(base);
        }
      }
    }
    for (unsigned o = 0; o < n.numOutputs(); ++o) {
      Value *out = n.output(o);
      remember(out);
      Roots ids;
      for (Value *base : aliasedOperands(n, o))
        for (unsigned root : roots_.lookup(base))
          appendUnique(ids, root);
      if (ids.empty())
        ids.push_back(out->id());
      roots_[out] = std::move(ids);
      analysed_[out] = 1;
    }
    ++rank;
  }
  if (all)
    for (const GraphOutput &o : graph.outputs())
      for (unsigned root : roots_.lookup(o.value))
        storage(root).escapes = true;
}

// --- storage ------------------------------------------------------------------

void AliasInfo::rawRoots(const Value *v, Roots &out) const {
  if (analysed_.lookup(v)) {
    for (unsigned id : roots_.lookup(v))
      appendUnique(out, id);
    return;
  }
  remember(v);
  const Node *def = v->definingNode();
  if (!def) {
    const Value *owner = graph_->storageOwner(v);
    remember(owner);
    appendUnique(out, owner->id());
    return;
  }
  llvm::SmallVector<Value *, 2> bases = aliasedOperands(*def, v->index());
  if (bases.empty()) {
    appendUnique(out, v->id());
    return;
  }
  for (Value *base : bases)
    rawRoots(base, out);
}

void AliasInfo::resolve(unsigned id, Roots &out, unsigned depth) const {
  auto it = redirects_.find(id);
  if (it == redirects_.end() || depth > kMaxRedirectDepth) {
    appendUnique(out, id);
    return;
  }
  for (unsigned to : it->second)
    resolve(to, out, depth + 1);
}

AliasInfo::Roots AliasInfo::rootIds(const Value *v) const {
  Roots raw, resolved;
  rawRoots(v, raw);
  for (unsigned id : raw)
    resolve(id, resolved);
  return resolved;
}

llvm::SmallVector<unsigned, 2> AliasInfo::rootValueIds(const Value *v) const {
  Roots ids = rootIds(v);
  llvm::sort(ids);
  return llvm::SmallVector<unsigned, 2>(ids.begin(), ids.end());
}

llvm::SmallVector<const Value *, 2> AliasInfo::roots(const Value *v) const {
  llvm::SmallVector<const Value *, 2> out;
  for (unsigned id : rootIds(v))
    out.push_back(valueOfId(id));
  return out;
}

bool AliasInfo::ownsStorage(const Value *v) const {
  Roots ids = rootIds(v);
  return ids.size() == 1 && ids.front() == v->id();
}

bool AliasInfo::mayShareStorage(const Value *a, const Value *b) const {
  Roots ra = rootIds(a);
  for (unsigned id : rootIds(b))
    if (llvm::is_contained(ra, id))
      return true;
  return false;
}

bool AliasInfo::isRootedInGraphInput(const Value *v) const {
  return llvm::any_of(roots(v), [](const Value *r) { return r->isGraphInput(); });
}

llvm::SmallVector<const Value *, 8> AliasInfo::viewsOf(const Value *v) const {
  llvm::SmallVector<const Value *, 8> values{v};
  for (size_t i = 0; i < values.size(); ++i)
    for (const Use &u : values[i]->uses()) {
      if (!u.user)
        continue;
      for (unsigned o = 0; o < u.user->numOutputs(); ++o) {
        Value *out = u.user->output(o);
        if (!llvm::is_contained(values, out) &&
            llvm::is_contained(aliasedOperands(*u.user, o), values[i]))
          values.push_back(out);
      }
    }
  return values;
}

int64_t AliasInfo::storageBytesKeptAlive(const Value *v) const {
  int64_t bytes = 0;
  for (const Value *root : roots(v))
    if (root->isTensor())
      bytes = std::max(bytes, root->tensorType().storageBytes());
  return bytes;
}

// --- writes -------------------------------------------------------------------

bool AliasInfo::isWrittenThrough(const Value *v) const {
  assert(facts_ == AliasFacts::All && "a roots-only AliasInfo has no writes");
  if (analysed_.lookup(v))
    return writtenThrough_.lookup(v) != 0;
  for (const Value *view : viewsOf(v))
    for (const Use &u : view->uses())
      if (u.user && llvm::is_contained(writtenValues(*u.user), view))
        return true;
  return false;
}

llvm::SmallVector<const Value *, 2> AliasInfo::rootsWrittenBy(const Node &node) const {
  llvm::SmallVector<const Value *, 2> result;
  for (Value *w : writtenValues(node))
    for (const Value *root : roots(w))
      if (!llvm::is_contained(result, root))
        result.push_back(root);
  return result;
}

llvm::SmallVector<unsigned, 4> AliasInfo::writtenGraphInputs() const {
  llvm::SmallVector<unsigned, 4> result;
  for (unsigned i = 0; i < graph_->inputs().size(); ++i)
    if (isWrittenThrough(graph_->inputs()[i].value))
      result.push_back(i);
  return result;
}

const AliasInfo::StorageFacts *AliasInfo::factsOf(unsigned rootId) const {
  assert(facts_ == AliasFacts::All && "a roots-only AliasInfo has no reads, writes or escapes");
  return rootId < storages_.size() ? &storages_[rootId] : nullptr;
}

std::pair<int64_t, int64_t> AliasInfo::byteRange(const Value *v) {
  // An empty tensor spans nothing, but a write to one may resize it: all.
  if (!v->isTensor() || !v->tensorType().isKnown() || v->tensorType().numel() == 0)
    return kAllBytes;
  return v->tensorType().storageByteRange();
}

bool AliasInfo::mayOverlap(const Value *a, const Value *b) const {
  return mayShareStorage(a, b) && meet(byteRange(a), byteRange(b));
}

bool AliasInfo::writtenBetween(const Value *v, int64_t after, int64_t before) const {
  std::pair<int64_t, int64_t> read = byteRange(v);
  for (unsigned root : rootIds(v))
    if (const StorageFacts *f = factsOf(root)) {
      auto it = std::upper_bound(
          f->writes.begin(), f->writes.end(), after,
          [](int64_t rank, const StorageFacts::Write &w) { return rank < w.rank; });
      for (; it != f->writes.end() && it->rank < before; ++it)
        if (meet(it->bytes, read))
          return true;
    }
  return false;
}

int64_t AliasInfo::firstWriteOf(const Value *v) const {
  int64_t first = -1;
  for (unsigned root : rootIds(v))
    if (const StorageFacts *f = factsOf(root); f && !f->writes.empty())
      first = first < 0 ? f->writes.front().rank : std::min(first, f->writes.front().rank);
  return first;
}

int64_t AliasInfo::lastWriteOf(const Value *v) const {
  int64_t last = -1;
  for (unsigned root : rootIds(v))
    if (const StorageFacts *f = factsOf(root); f && !f->writes.empty())
      last = std::max(last, f->writes.back().rank);
  return last;
}

// --- reads and graph outputs ------------------------------------------------------

bool AliasInfo::isLastReader(const Value *root, const Node &node) const {
  Roots ids;
  resolve(root->id(), ids);
  // The readers at the highest rank must all be `node`.
  StorageFacts::Reader last;
  bool mine = false;
  for (unsigned id : ids) {
    const StorageFacts *f = factsOf(id);
    if (!f || f->lastReader.rank < 0 || f->lastReader.rank < last.rank)
      continue;
    bool self = f->lastReader.nodeId == node.id();
    mine = f->lastReader.rank > last.rank ? self : mine && self;
    last = f->lastReader;
  }
  return mine;
}

bool AliasInfo::reachesGraphOutput(const Value *v) const {
  return llvm::any_of(rootIds(v), [&](unsigned id) {
    const StorageFacts *f = factsOf(id);
    return f && f->escapes;
  });
}

unsigned AliasInfo::readsOf(const Node &node, const Value *root) const {
  Roots target;
  resolve(root->id(), target);
  unsigned reads = 0;
  for (const Value *v : node.operandValues()) {
    Roots ids = rootIds(v);
    reads += llvm::any_of(ids, [&](unsigned id) { return llvm::is_contained(target, id); });
  }
  return reads;
}

// --- updates ----------------------------------------------------------------------

void AliasInfo::noteReplaced(const Value *old, const Value *replacement) {
  remember(replacement);
  if (!ownsStorage(old)) {
    // A view replaced by a value in the same storages (a view folded into
    // its base, equal views merged): nothing moves.
    Roots from = rootIds(old), to = rootIds(replacement);
    if (from.size() == to.size() &&
        llvm::all_of(from, [&](unsigned id) { return llvm::is_contained(to, id); }))
      return;
    // Otherwise the values viewing it were given its roots, which are not
    // the replacement's: follow them on the fly from now on.
    for (const Value *v : viewsOf(replacement))
      if (v != replacement)
        analysed_[v] = 0;
    return;
  }
  Roots into = rootIds(replacement);
  llvm::erase_value(into, old->id());
  if (into.empty())
    return;
  if (old->id() < storages_.size()) {
    StorageFacts moved = std::exchange(storages_[old->id()], StorageFacts());
    for (unsigned id : into) {
      StorageFacts &f = storage(id);
      f.escapes |= moved.escapes;
      if (moved.lastReader.rank > f.lastReader.rank)
        f.lastReader = moved.lastReader;
      // Old's byte ranges were in its own storage's terms, not replacement's:
      // they become the whole storage.
      std::vector<StorageFacts::Write> merged, moving = moved.writes;
      for (StorageFacts::Write &w : moving)
        w.bytes = kAllBytes;
      auto byRank = [](const StorageFacts::Write &a, const StorageFacts::Write &b) {
        return a.rank < b.rank;
      };
      std::merge(f.writes.begin(), f.writes.end(), moving.begin(), moving.end(),
                 std::back_inserter(merged), byRank);
      f.writes.clear();
      for (const StorageFacts::Write &w : merged)
        if (!f.writes.empty() && f.writes.back().rank == w.rank)
          f.writes.back().bytes = joined(f.writes.back().bytes, w.bytes);
        else
          f.writes.push_back(w);
    }
  }
  redirects_[old->id()] = std::move(into);
}

void AliasInfo::noteReaderReplaced(const Node *from, const Node *to) {
  for (StorageFacts &facts : storages_)
    if (facts.lastReader.nodeId == from->id())
      facts.lastReader.nodeId = to->id();
}

// --- as a cached analysis ---------------------------------------------------------

std::string StorageRootsAnalysis::whyDiffers(const Graph &graph, const AliasInfo &kept,
                                             const AliasInfo &fresh) {
  // Compared by id: a root the kept result names may have been erased since.
  llvm::DenseMap<unsigned, const Value *> byId;
  for (const GraphInput &in : graph.inputs())
    byId[in.value->id()] = in.value;
  for (const Node &n : graph.nodes())
    for (const Value *v : n.outputs())
      byId[v->id()] = v;
  auto names = [&](llvm::ArrayRef<unsigned> ids) {
    std::vector<std::string> out;
    for (unsigned id : ids) {
      const Value *r = byId.lookup(id);
      out.push_back(r ? "%" + r->name().str() : absl::StrCat("erased value #", id));
    }
    return absl::StrJoin(out, ", ");
  };
  auto differs = [&](const Value *v) -> std::string {
    if (!v->isTensor())
      return "";
    llvm::SmallVector<unsigned, 2> was = kept.rootValueIds(v), is = fresh.rootValueIds(v);
    return was == is ? ""
                     : absl::StrCat("%", v->name().str(), " lives in ", names(is), ", not ",
                                    names(was));
  };
  for (const GraphInput &in : graph.inputs())
    if (std::string why = differs(in.value); !why.empty())
      return why;
  for (const Node &n : graph.nodes())
    for (const Value *v : n.outputs())
      if (std::string why = differs(v); !why.empty())
        return why;
  return "";
}

// --- graph outputs --------------------------------------------------------------

std::set<std::pair<unsigned, unsigned>> outputsSharingStorage(const Graph &graph) {
  return outputsSharingStorage(graph, AliasInfo(graph, AliasFacts::RootsOnly));
}

std::set<std::pair<unsigned, unsigned>> outputsSharingStorage(const Graph &graph,
                                                              const AliasInfo &aa) {
  llvm::DenseMap<const Value *, llvm::SmallVector<unsigned, 2>> outputsOfRoot;
  for (unsigned i = 0; i < graph.outputs().size(); ++i) {
    const Value *v = graph.outputs()[i].value;
    if (v->isTensor())
      for (const Value *r : aa.roots(v))
        outputsOfRoot[r].push_back(i);
  }
  std::set<std::pair<unsigned, unsigned>> pairs;
  for (auto &[root, outputs] : outputsOfRoot)
    for (size_t a = 0; a < outputs.size(); ++a)
      for (size_t b = a + 1; b < outputs.size(); ++b)
        pairs.insert({std::min(outputs[a], outputs[b]), std::max(outputs[a], outputs[b])});
  return pairs;
}

} // namespace graphopt
