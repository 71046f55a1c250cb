//===- ShardParametersPass.h - Parameters sharded over the ranks -*- C++ -*-===//
//
// shard-parameters{group=0,world=N,keep=0}: ZeRO-3 / FSDP for a single-process
// training step. Each rank holds 1/world of every trained parameter (a graph
// input of target "<parameter>@shard:<group>", type [ceil(numel/world)],
// Runtime/ParameterShards.h); an optimizer added after it (add-optimizer)
// then keeps 1/world of the state too.
//
//   - Forward: each parameter is all-gathered before its first use and the
//     whole tensor rebuilt from the gathered buffer (slice, view); the buffer
//     dies after its last forward use. The gather of the next parameter is
//     issued before the current one's first use, so it moves while that
//     parameter's nodes run (FSDP's prefetch of one).
//   - Backward: a parameter backward reads is gathered again before its first
//     backward use (a collective recomputed on purpose), unless it is kept:
//     `keep=` bytes (or a share of all gathered bytes) of gathered parameters
//     stay alive from forward to backward instead, those with the shortest
//     wait between their last forward and first backward use first (least
//     memory held per gather saved; keep=100% is reshard_after_forward=False).
//   - Gradients: each is flattened, padded to world * chunk elements and
//     reduce-scattered (summed) as soon as backward makes it; it is waited
//     for (and divided by the world size) once the next one is issued, since
//     the backend holds the whole gradient until then. The gradient output
//     becomes the rank's shard of the averaged gradient.
//
// Tied parameters (one storage, several inputs) are gathered once; each keeps
// its own gradient, reduce-scattered, and its shard input is tied to the
// owner's (add-optimizer then sums their gradients into one update).
// A parameter the step returns is returned as a view of its forward gather
// (a copy of its values). Parameters without a gradient stay whole; buffers
// are not sharded. Refused: a graph with an optimizer already (run
// shard-parameters first), one that is data-parallel or sharded already,
// parameters that are not dense and contiguous or are written in place, a tie
// between inputs of different types.
// docs/Distributed.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"
#include "graphopt/Pass/PassOption.h"

#include <optional>

namespace graphopt {

class ShardParametersPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "shard-parameters"; }
  static llvm::StringRef passDescription() {
    return "hold 1/world of every parameter per rank: all-gather before use, gather again for "
           "backward, reduce-scatter gradients (ZeRO-3 / FSDP)";
  }
  /// Fuzzed on two simulated ranks.
  static PassTraits passTraits() {
    return {/*insideCompile=*/false,
            "",
            {{"shard-parameters{world=2}", false, /*world=*/2, /*bitwise=*/false}}};
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;

  /// The attribute on every node the pass adds: what it does for which
  /// parameter ("gather fc1.weight", "gather again fc1.weight",
  /// "reduce-scatter fc1.weight").
  static constexpr llvm::StringLiteral kAttr = "shard_parameters";

protected:
  absl::Status validateOptions() override;

private:
  PassOption<std::string> group_{this, "group",
                                 "the process group's name (torch.distributed's default: 0)", "0"};
  PassOption<std::optional<int64_t>> world_{
      this, "world", "ranks the parameters are sharded over (unset: the size of `group` here)",
      std::nullopt};
  PassOption<MemoryAmount> keep_{
      this, "keep",
      "gathered parameters kept from forward to backward instead of gathered again: bytes, or "
      "a share of all parameters backward reads (100% = never gather twice)",
      MemoryAmount::bytes(0)};
};

} // namespace graphopt
