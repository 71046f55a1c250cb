//===- RewriteLegality.h - What a rewrite may do, asked one way -*- C++ -*-===//
//
// The shared legality predicates. Every pass that erases, merges, replaces,
// writes in place or recomputes asks these, on the operator effects
// (IR/OpEffects.h) and the alias analysis (AliasAnalysis.h), instead of
// deriving an aliasing rule of its own (docs/WritingAPass.md, "Rewriting
// safely"). Each answers with the reason it refuses, for statistics and
// reports, or null / "" when the rewrite is allowed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Alias/AliasAnalysis.h"

#include <string>

namespace graphopt {

/// May erase: why `node` must stay even when nothing reads its results
/// (side effects, random draws that later draws depend on, writes in place,
/// which include writes to graph inputs), or null when it may go.
const char *whyNotErasable(const Node &node);

/// May merge: why `later`, a call equal to `earlier` (same operator, equal
/// arguments), may not be replaced by it, or "" when every use of its
/// results may read earlier's instead. Refused: random or side-effecting
/// operators, calls that write, a write between the two to a storage an
/// operand lives in, results written in place (through any view), results of
/// different types, and a merge that would make two graph outputs one storage.
std::string whyNotMergeable(const AliasInfo &aa, const Node &earlier, const Node &later);
/// The reason whyNotMergeable gives when only the graph outputs stand in the
/// way (every other condition holds): the readers of `later` may still read
/// `earlier`, with both calls kept for the outputs (cse does that).
extern const char kOutputsWouldShareStorage[];

/// May replace a copy: whether `y`, a fresh result equal to `x` when it is
/// made (a clone, x * 1, a same-type _to_copy), may be replaced by `x` at
/// every use (the copy-elision rule, docs/RedundantOps.md): same type; y's
/// storage never written; x's not written after y is made; no graph output
/// would alias a graph input or another output it did not; and no larger
/// base kept alive (x a view of more bytes than y) nor one that
/// aten::as_strided addresses by absolute offset.
bool mayReplaceCopy(const AliasInfo &aa, const Value &y, const Value &x);

/// May write in place: why `node` may not write its operand `self` in place
/// of making a new result, or null when it may. self's storage must be the
/// graph's own (not an input's), never a graph output, read last by `node`
/// and only once there, and no larger than self (a view of a larger base
/// would keep the whole base alive as long as the result: the peak could rise).
const char *whyNotWritableInPlace(const AliasInfo &aa, const Node &node, const Value &self);

/// PyTorch runs it: why PyTorch would refuse an in-place write to `written`
/// by a node that also reads `operand` (`written.add_(operand)`; `operand`
/// may be `written` itself), or null when it runs. autograd refuses a write
/// to a parameter (a leaf that requires grad) or a view of one; TensorIterator
/// refuses a written tensor that overlaps itself (stride 0 over more than one
/// element) and an operand that shares some of its bytes with another layout
/// (at::assert_no_partial_overlap; the same layout is a full overlap and runs).
const char *whyPyTorchRefusesWrite(const AliasInfo &aa, const Value &written,
                                   const Value &operand);
/// whyPyTorchRefusesWrite for each value `node` writes against each of its
/// tensor operands; null for a node that writes nothing.
const char *whyPyTorchRefusesWrites(const AliasInfo &aa, const Node &node);

/// May recompute: why a second call of `node` would not give what the first
/// did (side effects, writes in place, random draws), or "" when it may be
/// recomputed. aten::native_dropout in training with a constant p is
/// recomputable: it is replayed from the mask its first call drew.
std::string whyNotRecomputable(const Node &node);
/// aten::native_dropout in training, with a constant p: its recomputation is
/// `input * mask * scale` from the saved mask.
bool isReplayableDropout(const Node &node);

/// May move: why `node` may not run at another position (before or after
/// other nodes that do not read its results or write what it reads), or null.
/// Nodes that write, draw random numbers or act outside the graph keep their place.
const char *whyNotMovable(const Node &node);

} // namespace graphopt
