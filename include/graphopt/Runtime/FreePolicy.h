//===- FreePolicy.h - When the executor drops each value ----------*- C++ -*-===//
//
// The executor's free-after-last-use policy, computed in one place so that
// the executor and the liveness analysis agree on it:
//
//   For every node N, freedAfter(N) lists the values whose last use N is,
//   i.e. that the executor drops right after N returns:
//     - each value N reads (an operand, or an element of a list operand) that
//       no later node reads, in the order N first reads them;
//     - then each output of N that no node reads at all (dead on arrival), in
//       output order;
//   except graph outputs, which are never freed (they are the run's result).
//   Each value appears once, at one node. Graph inputs are listed at their
//   last use too: the executor drops its reference there, although the
//   tensor stays while the caller or the WeightStore holds it (liveness
//   counts weights and inputs as live throughout). A graph input no node
//   reads, and a value read by no node and defined by none, appear nowhere.
//
// "Freed" means the executor drops its reference: the storage goes only when
// no other live value shares it (a view keeps its base's storage alive).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/IRMap.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

namespace graphopt {

class FreePolicy {
public:
  /// The values the executor drops right after `node` (see above).
  llvm::ArrayRef<const Value *> freedAfter(const Node &node) const { return freedAfter_.lookup(&node); }
  /// The node after which `value` is dropped; null for graph outputs and values never dropped.
  const Node *lastUser(const Value &value) const { return lastUser_.lookup(&value); }

private:
  friend FreePolicy computeFreePolicy(const Graph &graph);
  NodeMap<llvm::SmallVector<const Value *, 4>> freedAfter_;
  ValueMap<const Node *> lastUser_;
};

/// The free-after-last-use policy of `graph`, for its current node order.
FreePolicy computeFreePolicy(const Graph &graph);
/// Only FreePolicy::lastUser, for every value (cheaper: no per-node lists).
ValueMap<const Node *> computeLastUsers(const Graph &graph);

} // namespace graphopt
