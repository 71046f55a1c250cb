//===- FreePolicy.cpp - When the executor drops each value ----------------===//
#include "graphopt/Runtime/FreePolicy.h"
#include "graphopt/Runtime/Collectives.h"

namespace graphopt {

ValueMap<const Node *> computeLastUsers(const Graph &graph) {
  ValueMap<const Node *> lastUser(graph, nullptr);
  // The last reader of each value: later nodes overwrite earlier ones. An
  // output nobody reads is dropped right after its node (its reader is never
  // later than its definition, so one pass settles both).
  for (const Node &n : graph.nodes()) {
    for (const Argument &a : n.args()) {
      if (a.isValue() && a.getValue())
        lastUser[a.getValue()] = &n;
      else if (a.isList())
        for (const Value *v : a.getList())
          if (v)
            lastUser[v] = &n;
    }
    for (unsigned i = 0; i < n.numOutputs(); ++i)
      lastUser[n.output(i)] = &n;
    // A collective's backend holds its inputs until the wait for its result:
    // the storage lives that long, so the wait is their last user.
    if (isWait(n) && n.numArgs() > 0 && n.arg(0).isValue() && n.arg(0).getValue())
      if (const Node *collective = n.arg(0).getValue()->definingNode();
          collective && holdsInputsUntilWaited(*collective))
        for (const Value *v : collective->operandValues())
          lastUser[v] = &n;
  }
  for (const GraphOutput &out : graph.outputs())
    lastUser[out.value] = nullptr;
  return lastUser;
}

FreePolicy computeFreePolicy(const Graph &graph) {
  FreePolicy policy;
  policy.freedAfter_ = NodeMap<llvm::SmallVector<const Value *, 4>>(graph);
  policy.lastUser_ = computeLastUsers(graph);

  for (const Node &n : graph.nodes()) {
    auto &list = policy.freedAfter_[&n];
    for (const Value *v : n.operandValues())
      if (policy.lastUser_.lookup(v) == &n && llvm::find(list, v) == list.end())
        list.push_back(v);
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      const Value *v = n.output(i);
      if (policy.lastUser_.lookup(v) == &n && llvm::find(list, v) == list.end())
        list.push_back(v);
    }
  }
  return policy;
}

} // namespace graphopt
