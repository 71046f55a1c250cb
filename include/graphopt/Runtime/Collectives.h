//===- Collectives.h - Collectives and their process groups ------*- C++ -*-===//
//
// graph-opt runs the functional collectives torch.export and torch.compile
// emit (_c10d_functional::all_reduce, all_gather_into_tensor,
// reduce_scatter_tensor, all_to_all_single, broadcast, their coalesced and
// in-place / out= forms, and wait_tensor) as it runs any operator: a boxed
// call through the dispatcher. Each names its process group by a string
// (`group_name`), which c10d resolves through its registry, where
// torch.distributed.init_process_group registered the group in this process
// (`python -m graph_opt` under torchrun does, docs/Distributed.md). A
// collective returns at once with its output still being written; the
// matching wait_tensor waits for it (and returns the same tensor), so the
// nodes between the two run while the data moves.
//
// Before a run the executor checks what would otherwise fail half way, or
// hang: every group a collective names is registered here, and a collective's
// `group_size` is its group's size.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <llvm/ADT/SmallVector.h>

#include <optional>
#include <string>

namespace graphopt {

/// True for a functional collective (_c10d_functional::*, including
/// wait_tensor, and _c10d_functional_autograd::*).
bool isCollective(const Node &node);
/// The number of ranks of process group `name` in this process; NotFound
/// when torch.distributed has registered no group of that name here.
absl::StatusOr<int> processGroupSize(const std::string &name);
/// The attribute a rewrite puts on a collective whose arithmetic assumes a
/// world size its arguments do not carry (data-parallel's all_reduce, whose
/// sum is divided by it): the number of ranks (an int). checkProcessGroups
/// refuses to run it on a group of another size.
inline constexpr llvm::StringLiteral kWorldSizeAttr = "world_size";
/// `given` when set, else the size of process group `group` in this process:
/// the world a rewrite plans for (data-parallel, shard-parameters); the error
/// says to give world=N when there is neither.
absl::StatusOr<int64_t> worldSize(std::optional<int64_t> given, const std::string &group);
/// This process's rank in process group `name`; NotFound as processGroupSize.
absl::StatusOr<int> processGroupRank(const std::string &name);
/// The process group the first collective of `graph` names ("" when it has none).
std::string firstGroupName(const Graph &graph);
/// True for _c10d_functional::wait_tensor.
bool isWait(const Node &node);
/// True for a collective whose backend holds its tensor inputs until the
/// wait for its result (all-gather, reduce-scatter, all-to-all and their
/// coalesced forms): the storage stays allocated that long, whoever else
/// drops it. all_reduce and broadcast work on a copy of their input.
bool holdsInputsUntilWaited(const Node &node);
/// The wait_tensor nodes that wait for `output` (a collective's result).
llvm::SmallVector<const Node *, 1> waitsFor(const Value &output);
/// Every collective's process group is registered in this process and has
/// the size its `group_size` argument says; the error names the node, the
/// group and how to run collectives (torchrun ... -m graph_opt).
absl::Status checkProcessGroups(const Graph &graph);

} // namespace graphopt
