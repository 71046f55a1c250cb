//===- Planner.cpp - Checkpoint planners, registered by name --------------===//
#include "checkpoint/Planner.h"

#include "graphopt/Pass/PassOption.h"

#include <algorithm>

namespace graphopt {

PlannerRegistry &PlannerRegistry::instance() {
  static PlannerRegistry registry;
  return registry;
}

void PlannerRegistry::add(Entry entry) {
  // Two planners of one name would make planner= ambiguous: a build error in
  // effect (registrations run before main).
  if (find(entry.name))
    std::abort();
  entries_.push_back(std::move(entry));
}

bool PlannerRegistry::remove(llvm::StringRef name) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry &e) { return e.name == name; });
  if (it == entries_.end())
    return false;
  entries_.erase(it);
  return true;
}

const Planner *PlannerRegistry::find(llvm::StringRef name) const {
  for (const Entry &e : entries_)
    if (e.name == name)
      return e.planner.get();
  return nullptr;
}

std::vector<const PlannerRegistry::Entry *> PlannerRegistry::entries() const {
  std::vector<const Entry *> out;
  for (const Entry &e : entries_)
    out.push_back(&e);
  std::sort(out.begin(), out.end(),
            [](const Entry *a, const Entry *b) { return a->name < b->name; });
  return out;
}

std::string PlannerRegistry::namesText() const {
  std::vector<std::string> names;
  for (const Entry *e : entries())
    names.push_back(e->name);
  return detail::joinChoices(names);
}

} // namespace graphopt
