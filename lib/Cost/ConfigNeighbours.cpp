//===- ConfigNeighbours.cpp - An operator configuration at nearby sizes ---===//
#include "graphopt/Cost/ConfigNeighbours.h"

#include "graphopt/IR/TypeInference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

namespace graphopt {

namespace {

/// Whether the schema declares the argument a size: SymInt, SymInt? or a
/// list of them (torch marks every argument that can carry a symbolic shape).
/// Give it the argument's real_type(): type() reads SymInt as int.
bool declaresSize(const c10::TypePtr &type) {
  c10::TypePtr t = type;
  if (auto optional = t->cast<c10::OptionalType>())
    t = optional->getElementType();
  if (auto list = t->cast<c10::ListType>()) {
    t = list->getElementType();
    if (auto optional = t->cast<c10::OptionalType>())
      t = optional->getElementType();
  }
  return t->kind() == c10::TypeKind::SymIntType;
}

/// Dense strides for `sizes` in the dimension order of `like` (innermost: the
/// smallest stride), its broadcast dimensions (stride 0) kept broadcast.
llvm::SmallVector<int64_t, 4> denseStridesLike(const TensorType &like,
                                               llvm::ArrayRef<int64_t> sizes) {
  size_t rank = sizes.size();
  llvm::SmallVector<int64_t, 4> strides(rank, 0);
  if (like.strides.size() != rank)
    return TensorType::contiguousStrides(sizes);
  std::vector<size_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  // Innermost first; among equal strides the later dimension is inner, as in row-major.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return like.strides[a] != like.strides[b] ? like.strides[a] < like.strides[b] : a > b;
  });
  int64_t stride = 1;
  for (size_t d : order) {
    if (like.strides[d] == 0 && like.sizes[d] != 1)
      continue; // broadcast
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

/// The sizes worth scaling, from the operands' sizes and the size arguments
/// (expand's or new_zeros' sizes say what the result will be): at least
/// minSize, most used first, then largest.
std::vector<int64_t> sizesToScale(const Graph &graph, const NeighbourOptions &options) {
  std::map<int64_t, int> uses;
  auto count = [&](int64_t s) {
    if (s >= options.minSize)
      ++uses[s];
  };
  for (const GraphInput &in : graph.inputs())
    if (in.value->isTensor())
      for (int64_t s : in.value->tensorType().sizes)
        count(s);
  const Node &node = *graph.nodes().begin();
  const auto &schemaArgs = node.schema().arguments();
  for (unsigned i = 0; i < node.numArgs() && i < schemaArgs.size(); ++i) {
    const Argument &a = node.arg(i);
    if (!a.isConstant() || !declaresSize(schemaArgs[i].real_type()))
      continue;
    if (a.getConstant().kind() == ConstantKind::Int)
      count(a.getConstant().asInt());
    else if (a.getConstant().kind() == ConstantKind::IntList)
      for (int64_t s : a.getConstant().asIntList())
        count(s);
  }
  std::vector<std::pair<int64_t, int>> ranked(uses.begin(), uses.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first > b.first;
  });
  std::vector<int64_t> out;
  for (size_t i = 0; i < ranked.size() && i < options.sizesScaled; ++i)
    out.push_back(ranked[i].first);
  return out;
}

/// The configuration with every `from` size (operands and size arguments)
/// made `to`; nullopt when the operator rejects it.
std::optional<OperatorConfig> scaled(const OperatorConfig &config, int64_t from, int64_t to) {
  std::unique_ptr<Graph> graph = config.graph->clone();
  for (const GraphInput &in : graph->inputs()) {
    if (!in.value->isTensor())
      continue;
    TensorType t = in.value->tensorType();
    llvm::SmallVector<int64_t, 4> sizes(t.sizes.begin(), t.sizes.end());
    for (int64_t &s : sizes)
      if (s == from)
        s = to;
    t.strides = denseStridesLike(t, sizes);
    t.sizes = sizes;
    t.storageOffset = 0;
    in.value->setType(ValueType::ofTensor(std::move(t)));
  }
  Node &node = *graph->nodes().begin();
  const auto &schemaArgs = node.schema().arguments();
  for (unsigned i = 0; i < node.numArgs() && i < schemaArgs.size(); ++i) {
    const Argument &a = node.arg(i);
    if (!a.isConstant() || !declaresSize(schemaArgs[i].real_type()))
      continue;
    const Constant &c = a.getConstant();
    if (c.kind() == ConstantKind::Int && c.asInt() == from) {
      node.setArg(i, Argument::constant(Constant::ofInt(to)));
    } else if (c.kind() == ConstantKind::IntList) {
      std::vector<int64_t> list(c.asIntList().begin(), c.asIntList().end());
      if (std::find(list.begin(), list.end(), from) == list.end())
        continue;
      std::replace(list.begin(), list.end(), from, to);
      node.setArg(i, Argument::constant(Constant::ofIntList(list)));
    }
  }
  for (Value *out : node.outputs())
    if (out->isTensor())
      out->setType(ValueType::unknownTensor());
  if (!inferNodeTypes(node).ok())
    return std::nullopt;
  auto neighbour = operatorConfigOfGraph(std::move(graph));
  if (!neighbour.ok())
    return std::nullopt;
  return std::move(*neighbour);
}

} // namespace

std::vector<OperatorConfig> neighbourConfigs(const OperatorConfig &config,
                                             const NeighbourOptions &options) {
  std::vector<OperatorConfig> out;
  if (!config.graph || config.graph->numNodes() != 1)
    return out;
  std::set<std::string> seen = {config.key};
  for (int64_t from : sizesToScale(*config.graph, options))
    for (double factor : options.factors) {
      int64_t to = std::max<int64_t>(1, std::llround(static_cast<double>(from) * factor));
      if (to == from)
        continue;
      std::optional<OperatorConfig> n = scaled(config, from, to);
      if (n && seen.insert(n->key).second)
        out.push_back(std::move(*n));
    }
  return out;
}

} // namespace graphopt
