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

#include <ATen/core/Tensor.h>
#include <llvm/ADT/StringRef.h>

#include <optional>
#include <string>

namespace graphopt {

inline constexpr llvm::StringLiteral kShardTargetMarker = "@shard:";

/// What a shard's target names: the whole parameter and the group it is sharded over.
struct ShardTarget {
  std::string parameter;
  std::string group;
};

/// The target of `parameter`'s shard over process group `group`.
inline std::string shardTarget(llvm::StringRef parameter, llvm::StringRef group) {
  return parameter.str() + kShardTargetMarker.str() + group.str();
}

/// The parameter and group a shard's target names, or nullopt for any other target.
inline std::optional<ShardTarget> parseShardTarget(llvm::StringRef target) {
  size_t at = target.rfind(kShardTargetMarker);
  if (at == llvm::StringRef::npos || at == 0 || at + kShardTargetMarker.size() == target.size())
    return std::nullopt;
  return ShardTarget{target.take_front(at).str(),
                     target.drop_front(at + kShardTargetMarker.size()).str()};
}

/// Elements per rank of a tensor of `numel` elements sharded over `world` ranks.
inline int64_t shardElements(int64_t numel, int64_t world) { return (numel + world - 1) / world; }

/// Rank `rank`'s shard of `whole` over `world` ranks (a new tensor, 1-D).
at::Tensor shardOf(const at::Tensor &whole, int64_t world, int64_t rank);

} // namespace graphopt
