//===- OpEffects.cpp - What an operator does besides computing results ----===//
#include "graphopt/IR/OpEffects.h"

#include "graphopt/IR/NodeResults.h"

#include <ATen/core/enum_tag.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/StringSet.h>
#include <torch/csrc/utils/schema_info.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace graphopt {

namespace {

/// Operators that act outside the graph although their schema does not say so.
bool hasSideEffects(const c10::FunctionSchema &schema) {
  static const llvm::StringSet<> namespaces = {
      "c10d", "_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "profiler",
  };
  static const llvm::StringSet<> operators = {
      "aten::_assert_async",
      "aten::_assert_scalar",
      "aten::_assert_tensor_metadata",
      "aten::_functional_assert_async",
      "aten::_functional_assert_scalar",
      "aten::_functional_sym_constrain_range",
      "aten::_functional_sym_constrain_range_for_size",
      "aten::_print",
      "aten::record_stream",
      "aten::sym_constrain_range",
      "aten::sym_constrain_range_for_size",
      // checkpoint's copies between device and host (GraphoptOps.h): each
      // issues a copy on a stream or waits for one, where it was placed.
      "graphopt::offload",
      "graphopt::reload",
      "graphopt::reload_wait",
  };
  llvm::StringRef name = schema.name();
  if (operators.contains(name))
    return true;
  auto [ns, rest] = name.split("::");
  return !rest.empty() && namespaces.contains(ns);
}

OpEffects computeEffects(const c10::OperatorHandle &op) {
  const c10::FunctionSchema &schema = op.schema();
  const auto &args = schema.arguments();
  OpEffects e;
  for (unsigned i = 0; i < args.size(); ++i)
    if (schema.is_mutable({c10::SchemaArgType::input, i}))
      e.writes.push_back(i);

  torch::utils::SchemaInfo info(schema);
  e.returnAliases.resize(schema.returns().size());
  for (unsigned r = 0; r < schema.returns().size(); ++r)
    for (unsigned i = 0; i < args.size(); ++i) {
      // may_contain_alias also sees list returns of views (aten::split's
      // `Tensor(a)[]` from `Tensor(a -> *) self`), which may_alias misses.
      bool alias = false;
      try {
        alias = info.may_contain_alias({c10::SchemaArgType::output, r}, {c10::SchemaArgType::input, i});
      } catch (const std::exception &) {
        alias = schema.may_alias({c10::SchemaArgType::output, r}, {c10::SchemaArgType::input, i});
      }
      if (alias)
        e.returnAliases[r].push_back(i);
    }

  // aten::_unsafe_view returns a view of its input (the same storage), but its
  // schema carries no alias annotation because autograd does not track it as
  // one; writes through either reach the same storage, so it aliases here.
  if (schema.name() == "aten::_unsafe_view" && schema.overload_name().empty() &&
      !e.returnAliases.empty() && e.returnAliases[0].empty())
    e.returnAliases[0].push_back(0);
  // _c10d_functional::wait_tensor returns the tensor it waited for (its
  // collective's output, which the backend writes until then), and its schema
  // does not say so: liveness and the memory plans must see one storage.
  if (schema.name() == "_c10d_functional::wait_tensor" && !e.returnAliases.empty() &&
      e.returnAliases[0].empty() && !args.empty())
    e.returnAliases[0].push_back(0);

  // Writes that depend on a training flag (aten::batch_norm's running
  // statistics): SchemaInfo knows them once told the flag is set.
  for (unsigned i = 0; i < args.size(); ++i) {
    if ((args[i].name() == "training" || args[i].name() == "train") &&
        args[i].type()->kind() == c10::TypeKind::BoolType) {
      e.trainingArg = static_cast<int>(i);
      break;
    }
  }
  if (e.trainingArg >= 0) {
    try {
      torch::utils::SchemaInfo training(schema);
      training.addArgumentValue(args[e.trainingArg].name(), c10::IValue(true));
      for (unsigned i = 0; i < args.size(); ++i)
        if (!e.writesArg(i) && training.is_mutable({c10::SchemaArgType::input, i}))
          e.writesWhenTraining.push_back(i);
    } catch (const std::exception &) {
      // SchemaInfo could not answer: only the annotated writes are known.
    }
    if (e.writesWhenTraining.empty())
      e.trainingArg = -1;
  }

  e.random = op.hasTag(at::Tag::nondeterministic_seeded);
  e.sideEffects = hasSideEffects(schema) || (schema.returns().empty() && e.writes.empty());
  return e;
}

void appendUnique(llvm::SmallVectorImpl<Value *> &out, Value *v) {
  if (v && std::find(out.begin(), out.end(), v) == out.end())
    out.push_back(v);
}

void appendArgumentValues(const Argument &a, llvm::SmallVectorImpl<Value *> &out) {
  if (a.isValue())
    appendUnique(out, a.getValue());
  else if (a.isList())
    for (Value *v : a.getList())
      appendUnique(out, v);
}

} // namespace

bool OpEffects::mayAlias() const {
  return std::any_of(returnAliases.begin(), returnAliases.end(),
                     [](const auto &args) { return !args.empty(); });
}

bool OpEffects::writesArg(unsigned arg) const {
  return std::find(writes.begin(), writes.end(), arg) != writes.end();
}

llvm::ArrayRef<unsigned> OpEffects::aliasesOfReturn(unsigned ret) const {
  return ret < returnAliases.size() ? llvm::ArrayRef<unsigned>(returnAliases[ret])
                                    : llvm::ArrayRef<unsigned>();
}

namespace {

/// Effects per operator, keyed by the registered schema (which lives as long as the
/// operator's registration), and the operators declared random beyond their tags.
struct EffectsCache {
  std::mutex mutex;
  llvm::DenseMap<const c10::FunctionSchema *, std::unique_ptr<OpEffects>> byOperator;
  llvm::StringSet<> declaredRandom;

  static EffectsCache &get() {
    static EffectsCache cache;
    return cache;
  }
};

} // namespace

const OpEffects &opEffects(const c10::OperatorHandle &op) {
  EffectsCache &cache = EffectsCache::get();
  std::lock_guard<std::mutex> lock(cache.mutex);
  std::unique_ptr<OpEffects> &slot = cache.byOperator[&op.schema()];
  if (!slot) {
    slot = std::make_unique<OpEffects>(computeEffects(op));
    slot->random |= cache.declaredRandom.contains(op.schema().name());
  }
  return *slot;
}

void declareRandomOperator(llvm::StringRef name) {
  EffectsCache &cache = EffectsCache::get();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.declaredRandom.insert(name);
  for (auto &[schema, effects] : cache.byOperator)
    if (schema->name() == name)
      effects->random = true;
}

bool writesArgument(const Node &node, unsigned arg) {
  const OpEffects &e = opEffects(node);
  if (e.writesArg(arg))
    return true;
  if (std::find(e.writesWhenTraining.begin(), e.writesWhenTraining.end(), arg) ==
      e.writesWhenTraining.end())
    return false;
  if (e.trainingArg < 0 || static_cast<unsigned>(e.trainingArg) >= node.numArgs())
    return true;
  const Argument &flag = node.arg(e.trainingArg);
  if (flag.isConstant() && flag.getConstant().kind() == ConstantKind::Bool)
    return flag.getConstant().asBool();
  return true; // not known before the run: assume it trains
}

llvm::SmallVector<Value *, 2> writtenValues(const Node &node) {
  llvm::SmallVector<Value *, 2> out;
  const OpEffects &e = opEffects(node);
  if (!e.mayWrite())
    return out;
  for (unsigned i = 0; i < node.numArgs(); ++i)
    if (writesArgument(node, i))
      appendArgumentValues(node.arg(i), out);
  return out;
}

llvm::SmallVector<Value *, 2> aliasedOperands(const Node &node, unsigned out) {
  llvm::SmallVector<Value *, 2> result;
  const OpEffects &e = opEffects(node);
  for (unsigned i : e.aliasesOfReturn(returnIndexOfOutput(node.schema(), out)))
    if (i < node.numArgs())
      appendArgumentValues(node.arg(i), result);
  llvm::erase_if(result, [](Value *v) { return !v->isTensor(); });
  return result;
}

llvm::SmallVector<const Value *, 2> storageRoots(const Value *v) {
  llvm::SmallVector<const Value *, 2> roots;
  llvm::SmallPtrSet<const Value *, 8> seen;
  llvm::SmallVector<const Value *, 4> work{v};
  while (!work.empty()) {
    const Value *cur = work.pop_back_val();
    if (!seen.insert(cur).second)
      continue;
    llvm::SmallVector<Value *, 2> bases;
    if (const Node *def = cur->definingNode())
      bases = aliasedOperands(*def, cur->index());
    if (bases.empty())
      roots.push_back(cur);
    else
      work.append(bases.begin(), bases.end());
  }
  return roots;
}

bool writesGraphInput(const Node &node) {
  for (Value *w : writtenValues(node))
    for (const Value *root : storageRoots(w))
      if (root->isGraphInput())
        return true;
  return false;
}

bool hasExternalEffect(const Node &node) {
  return opEffects(node).sideEffects || writesGraphInput(node);
}

bool isPure(const Node &node) { return opEffects(node).isPure(); }

llvm::SmallVector<unsigned, 4> mutatedGraphInputs(const Graph &graph) {
  std::vector<uint8_t> mutated(graph.inputs().size(), 0);
  for (const Node &n : graph.nodes())
    for (Value *w : writtenValues(n))
      for (const Value *root : storageRoots(w))
        if (root->isGraphInput() && root->index() < mutated.size())
          mutated[root->index()] = 1;
  llvm::SmallVector<unsigned, 4> result;
  for (unsigned i = 0; i < mutated.size(); ++i)
    if (mutated[i])
      result.push_back(i);
  return result;
}

} // namespace graphopt
