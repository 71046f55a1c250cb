//===- ParameterShards.h - A parameter held as one rank's shard --*- C++ -*-===//
//
// shard-parameters (ZeRO-3 / FSDP) makes each rank hold 1/world of every
// parameter: the graph input of a sharded parameter has the target
// "<parameter>@shard:<group>" and the type [chunk], chunk = ceil(numel /
// world). Rank r's shard is the parameter flattened, padded with zeros to
// world * chunk elements, elements [r * chunk, (r + 1) * chunk): the layout
// all_gather_into_tensor puts back together and reduce_scatter_tensor splits
// a gradient into. The weight store keeps the whole parameter under its own
// name; the executor cuts this rank's shard from it on first use (rank and
// world from the process group) and keeps it under the shard's target, where
// an optimizer's updates accumulate. The verifier compares a shard of a
// gradient with the same cut of the original gradient. docs/Distributed.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/ShardTarget.h"

#include <ATen/core/Tensor.h>
#include <llvm/ADT/StringRef.h>

#include <optional>
#include <string>

namespace graphopt {

/// Rank `rank`'s shard of `whole` over `world` ranks (a new tensor, 1-D).
at::Tensor shardOf(const at::Tensor &whole, int64_t world, int64_t rank);

} // namespace graphopt
