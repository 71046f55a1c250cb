//===- ModelBlocks.cpp - A model's repeated blocks, from its module paths -===//
#include "checkpoint/ModelBlocks.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>

#include <absl/strings/str_cat.h>
#include <c10/core/ScalarType.h>
#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>

namespace graphopt {
namespace {

/// Repeats shorter than this many forward nodes are not blocks (q, k and v's
/// projections side by side are not layers).
constexpr size_t kMinBlockNodes = 6;
/// Periods are tried up to this many comparisons in all (every period up to
/// half the forward up to 3.1k forward nodes).
constexpr size_t kMaxRepeatWork = 5'000'000;
/// Repeats found one after another (a ResNet's stages: one per shape).
constexpr unsigned kMaxRepeatRounds = 8;

/// Whether a path component is a container index (`3`).
bool isIndex(llvm::StringRef component) {
  return !component.empty() && llvm::all_of(component, [](char c) { return llvm::isDigit(c); });
}

/// Calls `f(componentStart, componentEnd)` for each component of a dotted path.
template <typename F> void forEachComponent(llvm::StringRef path, F f) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('.', start);
    if (end == llvm::StringRef::npos)
      end = path.size();
    f(start, end);
    start = end + 1;
  }
}

/// A forward node's shape signature, hashed.
uint64_t tokenOf(const Node &n) { return std::hash<std::string>()(shapeSignature(n)); }

/// Forward positions [start, start + length) repeating with `period`.
struct Repeat {
  size_t start = 0, period = 0, length = 0;
  size_t copies() const { return period ? length / period : 0; }
  size_t covered() const { return period * copies(); }
};

/// The repeat covering the most uncovered positions of `tokens` (the smallest
/// period among equals), or none (no copies).
Repeat longestRepeat(const std::vector<uint64_t> &tokens, const std::vector<uint8_t> &covered) {
  const size_t m = tokens.size();
  Repeat best;
  const size_t maxPeriod =
      std::min(m / 2, std::max<size_t>(kMinBlockNodes, kMaxRepeatWork / std::max<size_t>(m, 1)));
  for (size_t period = kMinBlockNodes; period <= maxPeriod; ++period) {
    // Runs of positions i matching i + period: a run of r from i0 is
    // floor((r + period) / period) copies from i0.
    size_t runStart = 0, run = 0;
    for (size_t i = 0; i + period <= m; ++i) {
      const bool same = i + period < m && !covered[i] && !covered[i + period] &&
                        tokens[i] == tokens[i + period];
      if (same) {
        if (run++ == 0)
          runStart = i;
        continue;
      }
      if (Repeat r{runStart, period, run + period}; run > 0 && r.copies() >= 2 &&
                                                      r.covered() > best.covered())
        best = r;
      run = 0;
    }
  }
  return best;
}

/// Where in `repeat` the blocks begin: of the `period` shifts that keep at
/// least two whole blocks, the one whose cuts the fewest forward values cross
/// (a layer's boundary is where one value, the residual stream, passes on).
size_t bestShift(const Repeat &repeat, const std::vector<int64_t> &crossing) {
  size_t best = 0;
  double fewest = std::numeric_limits<double>::infinity();
  for (size_t shift = 0; shift < repeat.period; ++shift) {
    const size_t blocks = (repeat.length - shift) / repeat.period;
    if (blocks < 2)
      break;
    int64_t cuts = 0;
    for (size_t b = 0; b <= blocks; ++b)
      cuts += crossing[repeat.start + shift + b * repeat.period];
    // Per cut, so that a shift keeping one block fewer is not favoured for that.
    if (const double perCut = static_cast<double>(cuts) / static_cast<double>(blocks + 1);
        perCut < fewest) {
      fewest = perCut;
      best = shift;
    }
  }
  return best;
}

} // namespace

std::string shapeSignature(const Node &n) {
  std::string s = n.opName();
  s += '(';
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    const Value *v = n.output(i);
    if (v->isTensor()) {
      s += c10::toString(v->tensorType().dtype);
      for (int64_t d : v->tensorType().sizes)
        absl::StrAppend(&s, "x", d);
    }
    s += ';';
  }
  s += ')';
  return s;
}

ModelBlocks repeatedBlocks(const RecomputeModel &model) {
  ModelBlocks blocks;
  const int64_t n = static_cast<int64_t>(model.graph().numNodes());
  blocks.blockOfRank.assign(n, -1);
  std::vector<int64_t> forward; // forward ranks, in order
  for (int64_t r = 0; r < n; ++r)
    if (model.nodeAt(r)->phase() == Phase::Forward)
      forward.push_back(r);
  const size_t m = forward.size();
  std::vector<uint64_t> tokens(m);
  llvm::DenseMap<const Node *, size_t> position;
  for (size_t i = 0; i < m; ++i) {
    tokens[i] = tokenOf(*model.nodeAt(forward[i]));
    position[model.nodeAt(forward[i])] = i;
  }
  // crossing[p]: the forward values made before position p and read in
  // forward at p or later.
  std::vector<int64_t> crossing(m + 1, 0);
  for (size_t i = 0; i < m; ++i) {
    const Node *node = model.nodeAt(forward[i]);
    for (unsigned o = 0; o < node->numOutputs(); ++o) {
      size_t last = i;
      for (const Use &u : node->output(o)->uses())
        if (auto it = position.find(u.user); u.user && it != position.end())
          last = std::max(last, it->second);
      if (last > i) {
        crossing[i + 1] += 1;
        crossing[last + 1] -= 1;
      }
    }
  }
  for (size_t p = 1; p <= m; ++p)
    crossing[p] += crossing[p - 1];

  std::vector<uint8_t> covered(m, 0);
  for (unsigned round = 0; round < kMaxRepeatRounds; ++round) {
    Repeat repeat = longestRepeat(tokens, covered);
    if (repeat.copies() < 2)
      break;
    const size_t shift = bestShift(repeat, crossing);
    const size_t first = repeat.start + shift;
    const size_t copies = (repeat.length - shift) / repeat.period;
    for (size_t b = 0; b < copies; ++b) {
      const size_t from = first + b * repeat.period;
      const int32_t index = static_cast<int32_t>(blocks.names.size());
      blocks.names.push_back(absl::StrCat("repeat ", round, ".", b, " (from ",
                                          model.nodeAt(forward[from])->valueOrOperator(), ")"));
      for (size_t i = from; i < from + repeat.period; ++i) {
        covered[i] = 1;
        blocks.blockOfRank[forward[i]] = index;
      }
    }
    // What the shift left out stays out of later rounds' blocks too.
    for (size_t i = repeat.start; i < repeat.start + repeat.length; ++i)
      covered[i] = 1;
  }
  // Blocks in forward order, as from module paths.
  std::vector<int32_t> order(blocks.names.size());
  std::vector<int64_t> firstRank(blocks.names.size(), n);
  for (int64_t r = n - 1; r >= 0; --r)
    if (blocks.blockOfRank[r] >= 0)
      firstRank[blocks.blockOfRank[r]] = r;
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return firstRank[a] < firstRank[b]; });
  std::vector<int32_t> renumber(order.size());
  ModelBlocks sorted;
  for (size_t i = 0; i < order.size(); ++i) {
    renumber[order[i]] = static_cast<int32_t>(i);
    sorted.names.push_back(blocks.names[order[i]]);
  }
  sorted.blockOfRank = std::move(blocks.blockOfRank);
  for (int32_t &b : sorted.blockOfRank)
    if (b >= 0)
      b = renumber[b];
  sorted.fromShapes = true;
  return sorted;
}

namespace {

ModelBlocks blocksOf(const RecomputeModel &model) {
  const int64_t n = static_cast<int64_t>(model.graph().numNodes());
  std::vector<std::string> paths(n);
  // A parent path (`bert.encoder.layer.`) -> the indices seen under it.
  llvm::StringMap<std::set<std::string>> indices;
  for (int64_t r = 0; r < n; ++r) {
    paths[r] = stringAttr(*model.nodeAt(r), "module");
    llvm::StringRef path = paths[r];
    if (path.empty())
      continue;
    forEachComponent(path, [&](size_t start, size_t end) {
      if (llvm::StringRef c = path.slice(start, end); isIndex(c))
        indices[path.take_front(start)].insert(c.str());
    });
  }
  ModelBlocks blocks;
  blocks.blockOfRank.assign(n, -1);
  llvm::StringMap<int32_t> blockIndex;
  for (int64_t r = 0; r < n; ++r) {
    llvm::StringRef path = paths[r];
    size_t blockEnd = 0; // the end of the deepest repeated component, 0 if none
    forEachComponent(path, [&](size_t start, size_t end) {
      if (!isIndex(path.slice(start, end)))
        return;
      auto it = indices.find(path.take_front(start));
      if (it != indices.end() && it->second.size() >= 2)
        blockEnd = end;
    });
    if (blockEnd == 0)
      continue;
    llvm::StringRef name = path.take_front(blockEnd);
    auto [it, added] = blockIndex.try_emplace(name, static_cast<int32_t>(blocks.names.size()));
    if (added)
      blocks.names.push_back(name.str());
    blocks.blockOfRank[r] = it->second;
  }
  if (blocks.names.empty())
    return repeatedBlocks(model);
  return blocks;
}

} // namespace

const ModelBlocks &findBlocks(const RecomputeModel &model) {
  if (!model.blocks_)
    model.blocks_ = std::make_shared<const ModelBlocks>(blocksOf(model));
  return *model.blocks_;
}

std::vector<int32_t> blockInteriors(const RecomputeModel &model, const ModelBlocks &blocks) {
  std::vector<int32_t> interiors;
  if (blocks.names.empty())
    return interiors;
  auto candidates = model.candidates();
  for (size_t c = 0; c < candidates.size(); ++c) {
    const int32_t block = blocks.blockOfRank[candidates[c].created];
    if (block < 0)
      continue;
    bool inside = true;
    for (const Value *v : candidates[c].values)
      for (const Use &u : v->uses()) {
        if (!u.user) { // a graph output
          inside = false;
          continue;
        }
        if (u.user->phase() != Phase::Forward)
          continue;
        inside = inside && blocks.blockOfRank[model.baseline().rank.lookup(u.user)] == block;
      }
    if (inside)
      interiors.push_back(static_cast<int32_t>(c));
  }
  return interiors;
}

} // namespace graphopt
