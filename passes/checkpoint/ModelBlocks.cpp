//===- ModelBlocks.cpp - A model's repeated blocks, from its module paths -===//
#include "checkpoint/ModelBlocks.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>

#include <set>

namespace graphopt {
namespace {

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

} // namespace

ModelBlocks findBlocks(const RecomputeModel &model) {
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
  return blocks;
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
