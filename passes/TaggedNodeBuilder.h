//===- TaggedNodeBuilder.h - Nodes a rewrite adds, each marked ---*- C++ -*-===//
//
// data-parallel and shard-parameters mark every node they add with one
// attribute (data_parallel = "bucket 0", shard_parameters = "gather
// fc1.weight"), which says in the printed graph what each node is for and
// lets a pass refuse a graph rewritten already. Collectives get the output
// type they are given (their kernels need a process group, so type inference
// cannot run them); other operators are typed by inference.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/TypeInference.h"

#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include <iterator>
#include <string>
#include <vector>

namespace graphopt {

/// The node after `node`, or null at the end of the graph.
inline Node *nodeAfter(Graph &graph, Node *node) {
  auto it = std::next(node->getIterator());
  return it == graph.nodes().end() ? nullptr : &*it;
}

/// Before `before`, or at the end of the graph when it is null, in `phase`.
inline InsertionPoint beforeOrAtEnd(Graph &graph, Node *before, Phase phase) {
  return before ? InsertionPoint::before(before, phase) : InsertionPoint::atEnd(graph, phase);
}

class TaggedNodeBuilder {
public:
  TaggedNodeBuilder(Graph &graph, llvm::StringRef attr) : g_(graph), attr_(attr.str()) {}

  /// A node with the output types given (inferred after it is made when `infer`).
  absl::StatusOr<Node *> node(llvm::StringRef op, llvm::ArrayRef<Argument> args,
                              std::vector<ValueType> types, const InsertionPoint &where,
                              const std::string &tag, const std::string &name, bool infer) {
    auto n = g_.createNode(op, args, types, where, std::vector<std::string>(types.size(), name));
    if (!n.ok())
      return n.status();
    (*n)->setAttr(attr_, Constant::ofString(tag));
    if (infer)
      if (absl::Status st = inferNodeTypes(**n); !st.ok())
        return absl::InternalError(absl::StrCat("typing ", (*n)->describe(), ": ", st.message()));
    return *n;
  }
  /// One result of a given type: a collective.
  absl::StatusOr<Value *> typed(llvm::StringRef op, llvm::ArrayRef<Argument> args,
                                const ValueType &type, const InsertionPoint &where,
                                const std::string &tag, const std::string &name) {
    auto n = node(op, args, {type}, where, tag, name, /*infer=*/false);
    if (!n.ok())
      return n.status();
    return (*n)->output(0);
  }
  /// One result typed by inference.
  absl::StatusOr<Value *> inferred(llvm::StringRef op, llvm::ArrayRef<Argument> args,
                                   const InsertionPoint &where, const std::string &tag,
                                   const std::string &name) {
    auto n = node(op, args, {ValueType::unknownTensor()}, where, tag, name, /*infer=*/true);
    if (!n.ok())
      return n.status();
    return (*n)->output(0);
  }

private:
  Graph &g_;
  std::string attr_;
};

} // namespace graphopt
