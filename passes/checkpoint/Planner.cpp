//===- Planner.cpp - Checkpoint planners, registered by name --------------===//
#include "checkpoint/Planner.h"

#include "graphopt/Pass/PassOption.h"
#include "graphopt/Support/NamedEntries.h"

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

bool PlannerRegistry::remove(llvm::StringRef name) { return eraseNamed(entries_, name); }

const Planner *PlannerRegistry::find(llvm::StringRef name) const {
  const Entry *e = findNamed(entries_, name);
  return e ? e->planner.get() : nullptr;
}

std::vector<const PlannerRegistry::Entry *> PlannerRegistry::entries() const {
  return sortedByName(entries_, [](const Entry &) { return true; });
}

std::string PlannerRegistry::namesText() const {
  std::vector<std::string> names;
  for (const Entry *e : entries())
    names.push_back(e->name);
  return detail::joinChoices(names);
}

} // namespace graphopt
