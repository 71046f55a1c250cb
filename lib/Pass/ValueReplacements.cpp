#include "graphopt/Pass/ValueReplacements.h"

#include "graphopt/IR/Graph.h"

#include <llvm/ADT/DenseMap.h>

namespace graphopt {

void ValueReplacements::begin(const Graph &graph) {
  if (begun_)
    return;
  begun_ = true;
  givenIdBound_ = graph.valueIdBound();
}

void ValueReplacements::note(const Value &old, const Value &replacement) {
  entries_.push_back({old.id(), replacement.id(), old.name().str(), replacement.name().str()});
}

std::vector<std::pair<std::string, std::string>> ValueReplacements::composed() const {
  llvm::DenseMap<unsigned, size_t> replacedBy; // old id -> its entry
  for (size_t i = 0; i < entries_.size(); ++i)
    replacedBy.try_emplace(entries_[i].oldId, i);
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry &e = entries_[i];
    if (replacedBy.lookup(e.oldId) != i || e.oldId >= givenIdBound_)
      continue; // replaced before (a record that says so twice), or made by the run
    // A replaced value has no readers left, so a chain has no cycle; the bound
    // only guards a record that says otherwise.
    const Entry *last = &e;
    for (size_t steps = 0; steps < entries_.size(); ++steps) {
      auto it = replacedBy.find(last->newId);
      if (it == replacedBy.end())
        break;
      last = &entries_[it->second];
    }
    if (last->newId < givenIdBound_)
      out.emplace_back(e.oldName, last->newName);
  }
  return out;
}

} // namespace graphopt
