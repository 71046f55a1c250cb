//===- ReinplacePass.h - Functional ops into their in-place variants -*- C++ -*-===//
//
// A graph from torch.export is functional: every op makes a fresh tensor, even
// where eager PyTorch would have written into one that dies. The decomposed
// embedding backward is the costly case: `full` makes a zero gradient and
// `index_put` copies it before accumulating, so two copies of the embedding
// table's gradient are live at the end of the step (89 MiB each on BERT-base,
// 147 MiB on GPT-2). This pass calls the in-place variant instead
// (`index_put` -> `index_put_`, `mul.Tensor` -> `mul_.Tensor`; `slice_scatter`
// -> `copy_` into a slice) where nothing can tell the difference, so the
// result reuses its first operand's storage. Inductor's reinplace pass
// (torch/_inductor/fx_passes/reinplace.py) does the same for its graphs.
//
// A node `r = op(s, ...)` is rewritten when all of these hold:
//   - op is pure (OpEffects: no writes, no aliasing result, not random, no
//     side effects) and has one result;
//   - the registry has `op_` with the same overload name, whose schema is op's
//     with `Tensor(a!) self` first and one `Tensor(a!)` result, and which is
//     not tagged inplace_view (squeeze_, t_: they change metadata, not data);
//     or op is `X_scatter(self, src, ...)` and the view `X(self, ...)` exists;
//   - r's type equals s's type (dtype, sizes, strides, device): no broadcast of
//     s, no type promotion, and r's declared strides stay true;
//   - s's storage is not a graph input's, no graph output is rooted in it,
//     this node is the last to read any value rooted in it (s, its views,
//     earlier in-place results), reading it once, and the storage spans no
//     more bytes than s (a view of a larger base would keep the whole base
//     alive as long as r): whyNotWritableInPlace (Analysis/RewriteLegality.h),
//     on the alias analysis the pass keeps up to date.
// One walk in order; a rewrite moves what is known of r's storage into s's,
// so chains reuse one buffer and a view of r keeps later nodes off it.
// The in-place variant computes the same bits as the functional one (the
// functional kernel is the in-place one on a fresh copy), so `--verify
// --bitwise` holds.
//
// The peak can only go down: s's storage would have been freed after this
// node, it is no larger than r's would be, and r now lives in it instead of
// a new one. Under --verify-each the pass checks this on the simulated peak.
// Run it after checkpoint (`checkpoint{...},reinplace`): the checkpoint
// planner never recomputes ops that write in place, so an in-place node in
// the forward would be kept.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"

namespace graphopt {

class EditedAliases;

class ReinplacePass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "reinplace"; }
  static llvm::StringRef passDescription() {
    return "call the in-place variant of a functional op whose first operand dies there "
           "(index_put -> index_put_): the result reuses its storage";
  }
  /// Not inside torch.compile (why below); fuzzed alone and after the
  /// default pipeline's other passes.
  static PassTraits passTraits() {
    return {/*insideCompile=*/false,
            "Inductor reuses dying buffers itself (its own reinplacing and memory planning); "
            "graph-opt's in-place rewrite cannot be carried to the joint graph",
            {{"reinplace", /*peakMustNotRise=*/true},
             {"repeat{cse,canonicalize,dce},checkpoint{activations=30%,cost=flops,unmet=closest},"
              "reinplace"}}};
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;
  /// The storage roots, told every rewrite (a result now lives in its
  /// operand's storage). Not the alias facts: the writes it adds are not in them.
  PreservedAnalyses preservedAnalyses() const override;

private:
  /// `r = op(s, ...)` -> `r = op_(s, ...)`.
  absl::Status callInPlace(Graph &graph, Node &node, const c10::OperatorHandle &inplace,
                           EditedAliases &aliases);
  /// `r = X_scatter(s, src, ...)` -> `copy_(X(s, ...), src)`, r's readers
  /// reading s; false (nothing changed) when the part's type is not known or
  /// src does not match it.
  absl::StatusOr<bool> scatterInPlace(Graph &graph, Node &node, const c10::OperatorHandle &view,
                                      EditedAliases &aliases);
};

} // namespace graphopt
