//===- DataParallelPass.h - A training step made data-parallel ---*- C++ -*-===//
//
// data-parallel{bucket=25MiB,group=0,world=N}: turns a single-process
// training step into one rank's step of data-parallel training, as
// torch.nn.parallel.DistributedDataParallel's reducer does: every rank runs
// the same graph on its own shard of the batch, and the parameters'
// gradients are averaged over the ranks before anything reads them.
//
// Gradients (the outputs of role `gradient`) are put in buckets in the order
// backward makes them, one dtype and device per bucket, a bucket closed once
// it holds `bucket` bytes. Right after a bucket's last gradient is made, its
// gradients are flattened into one buffer and all-reduced (summed):
//
//   %dp_flat = aten::cat([reshape(%g1, [-1]), reshape(%g2, [-1]), ...])
//   %dp_sum  = _c10d_functional::all_reduce(%dp_flat, "sum", "0")
//
// so the collective runs while the rest of backward does. The wait, and the
// division by the world size (gloo has no "avg"), come just before the first
// node of the optimizer phase that reads one of the bucket's gradients
// (add-optimizer's update), else at the end of the step; the buffer is split
// back into one tensor per gradient (copies: graph outputs never share a
// storage), which the gradient outputs and the optimizer read. Nodes of
// backward that read a gradient keep the local one.
//
// The world size is `world=`, else the size of process group `group` when
// this process has it (python -m graph_opt under torchrun). A graph that is
// already data-parallel (it has the pass's collectives) is refused, as is a
// gradient output with no known tensor type. docs/Distributed.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"
#include "graphopt/Pass/PassOption.h"

#include <optional>

namespace graphopt {

class DataParallelPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "data-parallel"; }
  static llvm::StringRef passDescription() {
    return "average the gradients over the ranks (all-reduce in buckets, overlapped with "
           "backward), as DistributedDataParallel does";
  }
  /// Fuzzed on two simulated ranks; a bucket of 256 bytes makes several
  /// buckets on most graphs.
  static PassTraits passTraits() {
    return {/*insideCompile=*/false,
            "",
            {{"data-parallel{world=2,bucket=256}", false, /*world=*/2, /*bitwise=*/false}}};
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;

  /// The attribute on every node the pass adds: "bucket N" (the bucket's number).
  static constexpr llvm::StringLiteral kAttr = "data_parallel";

protected:
  absl::Status validateOptions() override;

private:
  PassOption<MemoryAmount> bucket_{this, "bucket",
                                   "bytes of gradients per all-reduce (DDP's bucket_cap_mb)",
                                   MemoryAmount::bytes(25 << 20)};
  PassOption<std::string> group_{this, "group",
                                 "the process group's name (torch.distributed's default: 0)", "0"};
  PassOption<std::optional<int64_t>> world_{
      this, "world",
      "ranks the gradients are averaged over (unset: the size of `group` in this process)",
      std::nullopt};
};

} // namespace graphopt
