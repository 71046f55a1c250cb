//===- Pass.cpp - Pass options and the registry ---------------------------===//
#include "graphopt/Pass/Pass.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Support/NamedEntries.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>

namespace graphopt {

absl::Status OptimizationPass::setOptions(const PassOptions &options) {
  for (PassOptionBase *o : declaredOptions_)
    o->reset();
  for (const auto &[key, value] : options) {
    // C++17 lambdas cannot capture a structured binding (clang refuses it).
    const std::string &wanted = key;
    auto it = std::find_if(declaredOptions_.begin(), declaredOptions_.end(),
                           [&](const PassOptionBase *o) { return o->name() == wanted; });
    if (it == declaredOptions_.end()) {
      std::vector<std::string> known;
      for (const PassOptionBase *o : declaredOptions_)
        known.push_back(absl::StrCat(o->name().str(), "=", o->accepts()));
      return absl::InvalidArgumentError(absl::StrCat(
          "pass '", name().str(), "' has no option '", key, "'",
          known.empty() ? "; it takes none" : absl::StrCat("; it has: ", absl::StrJoin(known, "; "))));
    }
    if (absl::Status st = (*it)->parse(value); !st.ok())
      return absl::InvalidArgumentError(absl::StrCat("pass '", name().str(), "': option '", key,
                                                     "' ", st.message(), ", got '", value, "'"));
  }
  if (absl::Status st = validateOptions(); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat("pass '", name().str(), "': ", st.message()));
  return absl::OkStatus();
}

PassOptions OptimizationPass::options() const {
  PassOptions out;
  for (const PassOptionBase *o : declaredOptions_)
    if (!o->isDefault())
      out.emplace_back(o->name().str(), o->print());
  return out;
}

PassRegistry &PassRegistry::instance() {
  static PassRegistry registry;
  return registry;
}

void PassRegistry::add(Entry entry) { entries_.push_back(std::move(entry)); }

bool PassRegistry::remove(llvm::StringRef name) { return eraseNamed(entries_, name); }

const PassRegistry::Entry *PassRegistry::find(llvm::StringRef name) const {
  return findNamed(entries_, name);
}

absl::StatusOr<std::unique_ptr<OptimizationPass>> PassRegistry::create(llvm::StringRef name) const {
  for (const Entry &e : entries_)
    if (e.name == name)
      return e.create();
  std::vector<std::string> known;
  for (const Entry *e : entries())
    known.push_back(e->name);
  return absl::NotFoundError(absl::StrCat("unknown pass '", name.str(), "'; known passes: ",
                                          known.empty() ? "(none)" : absl::StrJoin(known, ", ")));
}

std::vector<const PassRegistry::Entry *> PassRegistry::entries(bool includeHidden) const {
  return sortedByName(entries_, [&](const Entry &e) { return includeHidden || !e.hidden; });
}

} // namespace graphopt
