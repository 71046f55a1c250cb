//===- CanonicalizeRules.h - The folds of the canonicalize pass ---*- C++ -*-===//
//
// One small named rule per pattern (transpose-pair, inverse-permute,
// same-shape-view, alias, detach, clone, mul-one, div-one, add-zero,
// sub-zero, to-same, cat-single). A rule looks at one node and names an
// existing value that may replace the node's only output, or nothing; the
// driver (CanonicalizePass.cpp) does the replacing, erasing and revisiting.
//
// Two kinds of fold, with different conditions:
//   - view folds: the node's output is already a view of the value that
//     replaces it, with the same metadata; the only condition is type
//     equality (dtype, sizes, strides, device);
//   - copy folds (clone, _to_copy, cat of one tensor, x * 1, x + 0, ...): the
//     output owns fresh storage; replacing it by the value it copies is
//     allowed only under mayReplaceCopy (Analysis/RewriteLegality.h).
//
// The rules consult a FoldContext: facts about the whole graph computed once
// per transform (the alias analysis, which values may live off the execution
// device), which stay right while the driver folds (see FoldContext).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "EditedAliases.h"
#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/IR/Graph.h"
#include "graphopt/IR/IRMap.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

namespace graphopt::canonicalize {

/// Whole-graph facts the rules consult, computed once per transform: the
/// alias analysis (storage roots, writes, positions) and which values may live
/// off the execution device.
///
/// They stay right while the driver folds:
///   - folds add no nodes and erase only nodes that write nothing, so the
///     positions keep their order and no write appears or disappears;
///   - a view fold replaces y by the x it is a view of: every value rooted at
///     y was already rooted at x's roots, so no storage root changes; y's
///     device is x's, so the device facts hold too;
///   - a copy fold replaces a fresh y by x only if y's storage is never
///     written (mayReplaceCopy (b)): the values that were views of y are
///     now views of x, which the driver tells the alias analysis
///     (noteReplaced), and none of them is written, so no storage gains or
///     loses a write. A copy fold never moves data between devices (to-same
///     refuses that), so y and x are on the same device.
class FoldContext {
public:
  /// `aliases`: the pass manager's, which the driver keeps up to date.
  FoldContext(Graph &graph, EditedAliases aliases);

  Graph &graph() const { return graph_; }
  /// The graph's alias analysis.
  const AliasInfo &aliases() const { return aliases_.facts(); }
  /// What the driver tells each fold (and the cached storage roots with it).
  EditedAliases &edits() { return aliases_; }
  /// Whether `v` may live somewhere else than the execution device at run
  /// time: made by a node with an explicit device argument, or computed from
  /// such a value (graph inputs are on the execution device).
  bool mayBeOffExecutionDevice(const Value *v) const { return offDevice_.lookup(v) != 0; }

private:
  Graph &graph_;
  EditedAliases aliases_;
  ValueMap<uint8_t> offDevice_;
};

/// An operator a rule matches: schema name and overload name ("" for the
/// default overload); `anyOverload` matches every overload of the name.
struct OpName {
  llvm::StringLiteral name;
  llvm::StringLiteral overload;
  bool anyOverload = false;
};

struct Rule {
  /// The name in statistics ("folded <name>") and in the docs.
  llvm::StringLiteral name;
  /// The operators it matches; match() is only asked about nodes calling one.
  llvm::ArrayRef<OpName> ops;
  /// The existing value that may replace `node`'s only output, or null.
  Value *(*match)(Node &node, const FoldContext &ctx);
};

/// Every rule, in the order the driver tries them.
llvm::ArrayRef<Rule> allRules();

/// Whether `rule` matches the operator of `schema` (by name and overload).
bool ruleMatchesOperator(const Rule &rule, const c10::FunctionSchema &schema);

} // namespace graphopt::canonicalize
