//===- NamedEntries.h - Lookups in a registry's list of named entries -*- C++ -*-===//
//
// The pass registry (Pass/PassRegistry.h) and the checkpoint planners'
// (passes/checkpoint/Planner.h) keep their entries in registration order in a
// vector of structs with a `name`; these find, remove and sort them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/StringRef.h>

#include <algorithm>
#include <vector>

namespace graphopt {

/// The entry named `name`, or null.
template <typename E>
const E *findNamed(const std::vector<E> &entries, llvm::StringRef name) {
  auto it = std::find_if(entries.begin(), entries.end(),
                         [&](const E &e) { return e.name == name; });
  return it == entries.end() ? nullptr : &*it;
}

/// Removes the entry named `name`; false where there is none.
template <typename E> bool eraseNamed(std::vector<E> &entries, llvm::StringRef name) {
  auto it = std::find_if(entries.begin(), entries.end(),
                         [&](const E &e) { return e.name == name; });
  if (it == entries.end())
    return false;
  entries.erase(it);
  return true;
}

/// The entries (those `keep` accepts), sorted by name.
template <typename E, typename Keep>
std::vector<const E *> sortedByName(const std::vector<E> &entries, Keep keep) {
  std::vector<const E *> out;
  for (const E &e : entries)
    if (keep(e))
      out.push_back(&e);
  std::sort(out.begin(), out.end(), [](const E *a, const E *b) { return a->name < b->name; });
  return out;
}

} // namespace graphopt
