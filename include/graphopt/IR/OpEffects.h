//===- OpEffects.h - What an operator does besides computing results -*- C++ -*-===//
//
// Operator effects in one place, read from the operator's schema and tags and
// cached per operator, so every pass and the executor ask the same question
// the same way:
//
//   - writes: the arguments it writes in place (`Tensor(a!) self`, also inside
//     lists: `Tensor(a!)[] self` of the _foreach_ ops), and those it writes only
//     when it trains (aten::batch_norm's running statistics, which its schema
//     does not annotate: torch::utils::SchemaInfo knows them);
//   - aliases: for each schema return, the arguments whose storage it may share
//     (views such as aten::view, aten::t, aten::expand, aten::split; in-place
//     and out= operators returning the tensor they wrote; aten::_unsafe_view,
//     a view whose schema does not say so);
//   - view: aliases an argument and writes nothing;
//   - random: tagged at::Tag::nondeterministic_seeded (dropout, bernoulli,
//     randn, ...): two calls with equal arguments differ;
//   - side effects: collectives (c10d, _c10d_functional), asserts, prints,
//     profiler ranges, and any operator that returns nothing and writes
//     nothing (it can only be there for what it does outside the graph);
//   - pure: none of the above, so a call may be removed when its results are
//     unused, merged with an equal call, or moved.
//
// Node-level queries add what depends on the node's arguments: the training
// flag of a training-only write, the values written and aliased, and whether
// the node has an effect visible outside the graph (a side effect, or a write
// to a graph input, directly or through a view of it, e.g. `copy_` into an
// input).
//
// (hash_value for Constant and Argument, for value numbering, lives beside
// their equality: Constant.h, Graph.h.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

namespace graphopt {

/// The effects of one operator, from its schema and tags.
struct OpEffects {
  /// Schema argument indices the operator always writes in place.
  llvm::SmallVector<unsigned, 2> writes;
  /// Schema argument indices it writes only when `trainingArg` is true
  /// (aten::batch_norm's running_mean and running_var).
  llvm::SmallVector<unsigned, 2> writesWhenTraining;
  /// The `training` / `train` argument that decides writesWhenTraining; -1: none.
  int trainingArg = -1;
  /// Per schema return: the argument indices whose storage it may share.
  llvm::SmallVector<llvm::SmallVector<unsigned, 1>, 1> returnAliases;
  /// Tagged at::Tag::nondeterministic_seeded: draws from the RNG.
  bool random = false;
  /// Acts outside the graph: collectives, asserts, prints, profiler ops, or
  /// returns nothing and writes nothing.
  bool sideEffects = false;

  /// Writes some argument, at least in some calls.
  bool mayWrite() const { return !writes.empty() || !writesWhenTraining.empty(); }
  /// Some return may share storage with an argument.
  bool mayAlias() const;
  /// Some return aliases an argument and nothing is written (aten::view, aten::t).
  bool isView() const { return mayAlias() && !mayWrite(); }
  /// No writes, no aliasing returns, not random, no side effects.
  bool isPure() const { return !mayWrite() && !mayAlias() && !random && !sideEffects; }
  /// Schema argument `arg` is always written.
  bool writesArg(unsigned arg) const;
  /// The arguments schema return `ret` may alias (empty beyond the returns).
  llvm::ArrayRef<unsigned> aliasesOfReturn(unsigned ret) const;
};

/// The effects of `op`, computed on first use and cached per operator (thread safe).
const OpEffects &opEffects(const c10::OperatorHandle &op);
/// Same, for the schema `op` was resolved with (the cache key).
inline const OpEffects &opEffects(const Node &node) { return opEffects(node.op()); }
/// Treats every overload of `name` ("prims::inductor_seeds") as random from now on. For
/// operators whose nondeterministic_seeded tag exists only in Python (torch._prims and
/// Inductor's prims set OpOverload.tags there, the C++ registration lacks it): graph_opt.from_fx
/// declares those it meets, so that no pass merges, clones or recomputes them.
void declareRandomOperator(llvm::StringRef name);

// --- per node ----------------------------------------------------------------

/// True when `node` writes schema argument `arg`: always-written ones, and
/// training-only ones when its training flag is true or not a constant.
bool writesArgument(const Node &node, unsigned arg);
/// The values `node` writes in place (every element of a written list), in
/// argument order, without duplicates.
llvm::SmallVector<Value *, 2> writtenValues(const Node &node);
/// The operands output `out` of `node` may share storage with.
llvm::SmallVector<Value *, 2> aliasedOperands(const Node &node, unsigned out);
/// The values whose storage `v` may share by being a view of it, followed back
/// through chains of views to values that alias nothing (graph inputs or
/// outputs of non-aliasing nodes); `v` itself when it aliases nothing.
llvm::SmallVector<const Value *, 2> storageRoots(const Value *v);
/// True when `node` writes a graph input, directly or through a view of it.
bool writesGraphInput(const Node &node);
/// True when `node` has an effect outside the graph: a side-effecting operator,
/// or a write to a graph input. Such a node may not be removed even when its
/// results are unused.
bool hasExternalEffect(const Node &node);
/// True when `node` is pure: its operator is and it writes nothing.
bool isPure(const Node &node);
/// The indices of the graph inputs a run of `graph` writes in place (directly
/// or through views), in input order. Buffer-mutation outputs are not writes.
llvm::SmallVector<unsigned, 4> mutatedGraphInputs(const Graph &graph);

} // namespace graphopt
