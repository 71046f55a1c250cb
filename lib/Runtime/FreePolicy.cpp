//===- FreePolicy.cpp - When the executor drops each value ----------------===//
#include "graphopt/Runtime/FreePolicy.h"

namespace graphopt {

FreePolicy computeFreePolicy(const Graph &graph) {
  FreePolicy policy;
  policy.freedAfter_ = NodeMap<llvm::SmallVector<const Value *, 4>>(graph);
  policy.lastUser_ = ValueMap<const Node *>(graph, nullptr);

  // The last reader of each value: later nodes overwrite earlier ones.
  for (const Node &n : graph.nodes())
    for (const Value *v : n.operandValues())
      policy.lastUser_[v] = &n;
  for (const Node &n : graph.nodes())
    for (unsigned i = 0; i < n.numOutputs(); ++i)
      if (!policy.lastUser_.lookup(n.output(i)))
        policy.lastUser_[n.output(i)] = &n; // never read: dropped right after its node
  for (const GraphOutput &out : graph.outputs())
    policy.lastUser_[out.value] = nullptr;

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
