//===- ShardTarget.h - How a sharded parameter's input is named -*- C++ -*-===//
//
// shard-parameters names the graph input of a sharded parameter
// "<parameter>@shard:<group>" (Runtime/ParameterShards.h cuts the shard
// itself); the importer, the runtime and the passes read the name.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/StringRef.h>

#include <cstdint>
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

} // namespace graphopt
