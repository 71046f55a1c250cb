//===- EditedAliases.h - Alias facts a pass keeps right while it edits -*- C++ -*-===//
//
// A pass that asks alias questions while it edits (cse, canonicalize,
// reinplace) takes the pass manager's cached facts (AliasAnalysis) and, when
// the manager holds them, its cached storage roots (StorageRootsAnalysis),
// and tells both each edit. The roots stay exact, so the pass may preserve
// StorageRootsAnalysis; the full facts only stay conservative, so it may not
// preserve AliasAnalysis (AliasAnalysis.h).
//
// Both are taken before the first edit: after it the manager no longer hands
// out what it cached for the graph as it was.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Pass/AnalysisManager.h"

namespace graphopt {

class EditedAliases {
public:
  static absl::StatusOr<EditedAliases> take(const Graph &graph, AnalysisManager &analyses) {
    auto facts = analyses.getResultForUpdate<AliasAnalysis>(graph);
    if (!facts.ok())
      return facts.status();
    return EditedAliases(**facts, analyses.getCachedResultForUpdate<StorageRootsAnalysis>(graph));
  }

  AliasInfo &facts() { return *facts_; }
  const AliasInfo &facts() const { return *facts_; }

  /// AliasInfo::noteReplaced, told to both.
  void noteReplaced(const Value *old, const Value *replacement) {
    facts_->noteReplaced(old, replacement);
    if (roots_)
      roots_->noteReplaced(old, replacement);
  }
  /// AliasInfo::noteReaderReplaced (the roots have no readers to move).
  void noteReaderReplaced(const Node *from, const Node *to) { facts_->noteReaderReplaced(from, to); }

private:
  EditedAliases(AliasInfo &facts, AliasInfo *roots) : facts_(&facts), roots_(roots) {}
  AliasInfo *facts_;
  AliasInfo *roots_; ///< null where the manager had none cached
};

} // namespace graphopt
