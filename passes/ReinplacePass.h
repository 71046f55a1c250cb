//===- ReinplacePass.h - Functional ops into their in-place variants -*- C++ -*-===//
//
// A graph from torch.export is functional: every op makes a fresh tensor, even
// where eager PyTorch would have written into one that dies. The decomposed
// embedding backward is the costly case: `full` makes a zero gradient and
// `index_put` copies it before accumulating, so two copies of the embedding
// table's gradient are live at the end of the step (94 MiB each on BERT-base,
// 154 MiB on GPT-2). This pass calls the in-place variant instead
// (`index_put` -> `index_put_`, `mul.Tensor` -> `mul_.Tensor`) where nothing
// can tell the difference, so the result reuses its first operand's storage.
// Inductor's reinplace pass (torch/_inductor/fx_passes/reinplace.py) does the
// same for its graphs.
//
// A node `r = op(s, ...)` becomes `r = op_(s, ...)` when all of these hold:
//   - op is pure (OpEffects: no writes, no aliasing result, not random, no
//     side effects) and has one result;
//   - the registry has `op_` with the same overload name, whose schema is op's
//     with `Tensor(a!) self` first and one `Tensor(a!)` result, and which is
//     not tagged inplace_view (squeeze_, t_: they change metadata, not data);
//   - r's type equals s's type (dtype, sizes, strides, device): no broadcast of
//     s, no type promotion, and r's declared strides stay true;
//   - s is the only handle on its storage and this node its last reader: s is
//     not a graph input, its one use is this node's first argument (so it is
//     not a graph output and no view of it exists), and it was made fresh by
//     a non-aliasing op, or by a node this rule made in place whose own first
//     operand satisfied the rule (chains: mul -> sub -> view reuse one buffer).
// The in-place variant computes the same bits as the functional one (the
// functional kernel is the in-place one on a fresh copy), so `--verify
// --bitwise` holds.
//
// The peak can only go down: s would have been freed after this node, and r
// now lives in its storage instead of a new one. Run it after checkpoint
// (`checkpoint{...},reinplace`): the checkpoint planner never recomputes ops
// that write in place, so an in-place node in the forward would be kept.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"

namespace graphopt {

class StorageUses;

class ReinplacePass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "reinplace"; }
  static llvm::StringRef passDescription() {
    return "call the in-place variant of a functional op whose first operand dies there "
           "(index_put -> index_put_): the result reuses its storage";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;

private:
  /// `r = op(s, ...)` -> `r = op_(s, ...)`; returns the new node.
  absl::StatusOr<const Node *> callInPlace(Graph &graph, Node &node,
                                           const c10::OperatorHandle &inplace,
                                           StorageUses &storages);
  /// `r = X_scatter(s, src, ...)` -> `copy_(X(s, ...), src)`, r's readers
  /// reading s; returns the copy_, or null (nothing changed) when the part's
  /// type is not known or src does not match it.
  absl::StatusOr<const Node *> scatterInPlace(Graph &graph, Node &node,
                                              const c10::OperatorHandle &view,
                                              StorageUses &storages);
};

} // namespace graphopt
