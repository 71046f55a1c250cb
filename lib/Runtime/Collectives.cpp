//===- Collectives.cpp - Collectives and their process groups -------------===//
#include "graphopt/Runtime/Collectives.h"


#include <absl/strings/str_cat.h>
#include <llvm/ADT/StringMap.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include <optional>

namespace graphopt {

namespace {

/// The constant argument `name` of `node`'s schema, if it has one.
const Constant *constantArgument(const Node &node, const char *name) {
  std::optional<int> i = node.schema().argumentIndexWithName(name);
  if (!i || static_cast<unsigned>(*i) >= node.numArgs() || !node.arg(*i).isConstant())
    return nullptr;
  return &node.arg(*i).getConstant();
}

std::string howToRun() {
  return "collectives run on a torch.distributed process group, which `python -m graph_opt` "
         "creates under torchrun (torchrun --nproc-per-node N -m graph_opt -- IN.pt2 ...; "
         "docs/Distributed.md)";
}

/// torch.distributed's group `name` in this process.
absl::StatusOr<c10::intrusive_ptr<c10d::ProcessGroup>> resolveGroup(const std::string &name) {
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  try {
    pg = c10d::resolve_process_group(name);
  } catch (...) { // c10d's "could not resolve": said below, with what to do
  }
  if (!pg)
    return absl::NotFoundError(
        absl::StrCat("process group \"", name, "\" is not registered in this process: ", howToRun()));
  return pg;
}

} // namespace

absl::StatusOr<int> processGroupSize(const std::string &name) {
  auto pg = resolveGroup(name);
  if (!pg.ok())
    return pg.status();
  return (*pg)->getSize();
}

absl::StatusOr<int64_t> worldSize(std::optional<int64_t> given, const std::string &group) {
  if (given)
    return *given;
  auto size = processGroupSize(group);
  if (!size.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("world= is not given and ", size.status().message(),
                     "; give world=N to rewrite the step for N ranks without them"));
  return *size;
}

absl::StatusOr<int> processGroupRank(const std::string &name) {
  auto pg = resolveGroup(name);
  if (!pg.ok())
    return pg.status();
  return (*pg)->getRank();
}

bool holdsInputsUntilWaited(const Node &node) {
  if (!isCollective(node) || isWait(node))
    return false;
  const std::string name = node.opName(); // a StringRef to the returned string would dangle
  llvm::StringRef op = llvm::StringRef(name).substr(name.find("::") + 2);
  return !op.startswith("all_reduce") && !op.startswith("broadcast");
}

std::string firstGroupName(const Graph &graph) {
  for (const Node &n : graph.nodes())
    if (isCollective(n))
      if (const Constant *group = constantArgument(n, "group_name");
          group && group->kind() == ConstantKind::String)
        return group->asString();
  return "";
}

bool isWait(const Node &node) {
  return llvm::StringRef(node.schema().name()) == "_c10d_functional::wait_tensor";
}

llvm::SmallVector<const Node *, 1> waitsFor(const Value &output) {
  llvm::SmallVector<const Node *, 1> waits;
  for (const Use &u : output.uses())
    if (u.user && isWait(*u.user))
      waits.push_back(u.user);
  return waits;
}

bool isCollective(const Node &node) {
  llvm::StringRef ns = llvm::StringRef(node.schema().name()).split("::").first;
  return ns == "_c10d_functional" || ns == "_c10d_functional_autograd";
}

absl::Status checkProcessGroups(const Graph &graph) {
  llvm::StringMap<int> sizes; // group name -> its size, once resolved
  for (const Node &n : graph.nodes()) {
    if (!isCollective(n))
      continue;
    const Constant *group = constantArgument(n, "group_name");
    if (!group)
      continue; // wait_tensor
    const std::string where = absl::StrCat("node ", n.describe());
    if (group->kind() != ConstantKind::String)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": its group_name is not a string constant"));
    const std::string &name = group->asString();
    auto it = sizes.find(name);
    if (it == sizes.end()) {
      auto size = processGroupSize(name);
      if (!size.ok())
        return absl::FailedPreconditionError(absl::StrCat(where, ": ", size.status().message()));
      it = sizes.try_emplace(name, *size).first;
    }
    if (const Constant *size = constantArgument(n, "group_size");
        size && size->kind() == ConstantKind::Int && size->asInt() != it->second)
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": group_size=", size->asInt(), " but process group \"", name, "\" has ",
          it->second, " ranks: the graph was made for another world size"));
    if (const Constant *world = n.attr(kWorldSizeAttr);
        world && world->kind() == ConstantKind::Int && world->asInt() != it->second)
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": the graph was rewritten for ", world->asInt(), " ranks (", kWorldSizeAttr.str(),
          " = ", world->asInt(), ") but process group \"", name, "\" has ", it->second,
          ": rewrite it again with world=", it->second, " or run it on ", world->asInt(),
          " ranks"));
  }
  return absl::OkStatus();
}

} // namespace graphopt
