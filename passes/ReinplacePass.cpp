//===- ReinplacePass.cpp - Functional ops into their in-place variants -----===//
#include "ReinplacePass.h"
#include "EditedAliases.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/Pass/PassRegistry.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/enum_tag.h>
#include <absl/strings/str_cat.h>

#include <unordered_map>
#include <mutex>
#include <optional>

namespace graphopt {

namespace {

/// True when `inplace` is `functional` with its first argument and its one
/// result written in place: the same arguments (names, types, keyword-only
/// marks) otherwise.
bool isInPlaceVariantOf(const c10::FunctionSchema &inplace, const c10::FunctionSchema &functional) {
  const auto &args = inplace.arguments();
  const auto &fargs = functional.arguments();
  if (args.size() != fargs.size() || args.empty() || inplace.returns().size() != 1 ||
      functional.returns().size() != 1)
    return false;
  const c10::AliasInfo *self = args[0].alias_info();
  const c10::AliasInfo *ret = inplace.returns()[0].alias_info();
  if (!self || !self->isWrite() || !ret || !ret->isWrite() ||
      args[0].type()->kind() != c10::TypeKind::TensorType)
    return false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name() != fargs[i].name() || args[i].kwarg_only() != fargs[i].kwarg_only() ||
        args[i].type()->str() != fargs[i].type()->str())
      return false;
    if (i > 0 && args[i].alias_info()) // only self may be written or aliased
      return false;
  }
  return true;
}

/// An operator found for each operator, looked up once (thread safe).
class PerOperator {
public:
  using Find = std::optional<c10::OperatorHandle> (*)(const c10::OperatorHandle &);
  explicit PerOperator(Find find) : find_(find) {}
  std::optional<c10::OperatorHandle> operator()(const c10::OperatorHandle &op) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = found_.try_emplace(op.operator_name());
    if (inserted)
      it->second = find_(op);
    return it->second;
  }

private:
  Find find_;
  std::mutex mutex_;
  std::unordered_map<c10::OperatorName, std::optional<c10::OperatorHandle>> found_;
};

/// The in-place variant of `op` (`aten::mul.Tensor` -> `aten::mul_.Tensor`),
/// if the registry has one that computes the same thing into its first argument.
std::optional<c10::OperatorHandle> findInPlaceVariant(const c10::OperatorHandle &op) {
  const c10::OperatorName &name = op.operator_name();
  if (name.name.empty() || name.name.back() == '_')
    return std::nullopt;
  auto handle = c10::Dispatcher::singleton().findSchema({name.name + "_", name.overload_name});
  if (handle && !handle->hasTag(at::Tag::inplace_view) &&
      isInPlaceVariantOf(handle->schema(), op.schema()))
    return *handle;
  return std::nullopt;
}

/// The view op that selects what `scatter` writes (`aten::slice_scatter` ->
/// `aten::slice.Tensor`): named as `scatter` without `_scatter`, taking
/// `scatter`'s arguments less `src` (its second), returning one view of its
/// first.
std::optional<c10::OperatorHandle> findViewOfScatter(const c10::OperatorHandle &op) {
  llvm::StringRef name = op.operator_name().name;
  const c10::FunctionSchema &scatter = op.schema();
  const auto &sargs = scatter.arguments();
  if (!name.consume_back("_scatter") || sargs.size() < 2 || sargs[1].name() != "src" ||
      scatter.returns().size() != 1)
    return std::nullopt;
  for (const char *overload : {"", "Tensor", "int"}) {
    auto view = c10::Dispatcher::singleton().findSchema({name.str(), overload});
    if (!view)
      continue;
    const auto &vargs = view->schema().arguments();
    const auto &rets = view->schema().returns();
    if (vargs.size() + 1 != sargs.size() || rets.size() != 1 || !rets[0].alias_info() ||
        rets[0].alias_info()->isWrite() || !vargs[0].alias_info())
      continue;
    bool same = true;
    for (size_t i = 0; i < vargs.size() && same; ++i) {
      const c10::Argument &a = sargs[i == 0 ? 0 : i + 1];
      same = vargs[i].name() == a.name() && vargs[i].type()->str() == a.type()->str();
    }
    if (same)
      return *view;
  }
  return std::nullopt;
}

} // namespace

absl::StatusOr<bool> ReinplacePass::transform(Graph &graph, AnalysisManager &analyses) {
  static PerOperator inPlaceVariant(findInPlaceVariant), viewOfScatter(findViewOfScatter);
  // Under --verify-each the promise that the peak cannot rise is checked.
  int64_t peakBefore = -1;
  if (verifyingEach()) {
    auto live = analyses.getResult<LivenessAnalysis>(graph);
    if (!live.ok())
      return live.status();
    peakBefore = (*live)->peakBytes;
  }
  // Kept right while rewriting: each rewrite is told to them.
  auto edited = EditedAliases::take(graph, analyses);
  if (!edited.ok())
    return edited.status();
  EditedAliases &aliases = *edited;
  int64_t bytesReused = 0;
  const uint64_t epochAtStart = graph.editEpoch();
  for (auto it = graph.nodes().begin(); it != graph.nodes().end();) {
    Node &n = *it++;
    if (n.numOutputs() != 1 || n.numArgs() == 0 || !n.arg(0).isValue() || !isPure(n))
      continue;
    std::optional<c10::OperatorHandle> inplace = inPlaceVariant(n.op());
    std::optional<c10::OperatorHandle> view = inplace ? std::nullopt : viewOfScatter(n.op());
    if (!inplace && !view)
      continue;
    Value *self = n.arg(0).getValue();
    if (const char *why = whyNotWritableInPlace(aliases.facts(), n, *self)) {
      addStatistic(absl::StrCat("kept: ", why));
      continue;
    }
    if (n.output(0)->type() != self->type()) {
      addStatistic("kept: result type differs from the first operand's");
      continue;
    }
    // The rewrite erases n: its replacement reads what n read, and the
    // storage now also holds the result, so its readers count for it.
    // (n is erased by the rewrite: name the operator first.)
    const c10::OperatorName name = (inplace ? *inplace : n.op()).operator_name();
    if (inplace) {
      if (absl::Status st = callInPlace(graph, n, *inplace, aliases); !st.ok())
        return st;
    } else {
      absl::StatusOr<bool> done = scatterInPlace(graph, n, *view, aliases);
      if (!done.ok())
        return done.status();
      if (!*done)
        continue;
    }
    bytesReused += self->tensorType().storageBytes();
    addStatistic("reinplaced nodes");
    addStatistic(absl::StrCat("reinplaced ", name.name, name.overload_name.empty() ? "" : ".",
                              name.overload_name));
  }
  addStatistic("bytes no longer allocated", bytesReused);
  // Whether anything was edited: a rewrite, or a scatter kept after all,
  // whose view node was made and erased (ids consumed).
  const bool changed = graph.editEpoch() != epochAtStart;
  if (changed && peakBefore >= 0) {
    absl::StatusOr<LivenessResult> after = LivenessAnalysis::compute(graph);
    if (!after.ok())
      return after.status();
    if (after->peakBytes > peakBefore)
      return absl::InternalError(absl::StrCat(
          "reinplace raised the simulated peak from ", peakBefore, " to ", after->peakBytes,
          " bytes, which its rules promise cannot happen"));
  }
  return changed;
}

PreservedAnalyses ReinplacePass::preservedAnalyses() const {
  return PreservedAnalyses::none().preserve<StorageRootsAnalysis>();
}

absl::Status ReinplacePass::callInPlace(Graph &graph, Node &n, const c10::OperatorHandle &inplace,
                                        EditedAliases &aliases) {
  Value *result = n.output(0);
  std::string name = result->name().str();
  Node *replacement = graph.createNode(inplace, n.args(), {result->type()}, n.phase(),
                                       {name + "_inplace"}, &n);
  for (const Node::Attribute &a : n.attrs())
    replacement->setAttr(a.first, a.second);
  result->replaceAllUsesWith(replacement->output(0));
  aliases.noteReaderReplaced(&n, replacement);
  aliases.noteReplaced(result, replacement->output(0));
  if (absl::Status st = graph.eraseNode(&n); !st.ok())
    return st;
  replacement->output(0)->setName(name);
  return absl::OkStatus();
}

absl::StatusOr<bool> ReinplacePass::scatterInPlace(Graph &graph, Node &n,
                                                   const c10::OperatorHandle &view,
                                                   EditedAliases &aliases) {
  // r = slice_scatter(s, src, dim, start, end, step)  becomes
  //   v = slice(s, dim, start, end, step); copy_(v, src)
  // and r's readers read s, which now holds r.
  Value *self = n.arg(0).getValue();
  Value *src = n.arg(1).isValue() ? n.arg(1).getValue() : nullptr;
  if (!src || !src->isTensor())
    return false;
  llvm::SmallVector<Argument, 6> viewArgs{n.arg(0)};
  for (unsigned i = 2; i < n.numArgs(); ++i)
    viewArgs.push_back(n.arg(i));
  Node *slice = graph.createNode(view, viewArgs, {ValueType::unknownTensor()}, n.phase(),
                                 {self->name().str() + "_part"}, &n);
  auto keep = [&](const char *why) -> absl::StatusOr<bool> {
    addStatistic(absl::StrCat("kept: ", why));
    if (absl::Status st = graph.eraseNode(slice); !st.ok())
      return st;
    return false;
  };
  if (!inferNodeTypes(*slice).ok())
    return keep("the written part's type is unknown");
  const TensorType &part = slice->output(0)->tensorType();
  // copy_ would broadcast or convert a src that does not match the part;
  // the scatter op would have refused it.
  if (part.sizes != src->tensorType().sizes || part.dtype != src->tensorType().dtype)
    return keep("src does not match the part it replaces");
  absl::StatusOr<Node *> copy =
      graph.createNode("aten::copy_", {Argument::value(slice->output(0)), Argument::value(src),
                                        Argument::constant(Constant::ofBool(false))},
                       {slice->output(0)->type()}, n.phase(), {}, &n);
  if (!copy.ok())
    return copy.status();
  for (const Node::Attribute &a : n.attrs()) {
    slice->setAttr(a.first, a.second);
    (*copy)->setAttr(a.first, a.second);
  }
  n.output(0)->replaceAllUsesWith(self);
  aliases.noteReaderReplaced(&n, *copy);
  aliases.noteReplaced(n.output(0), self);
  if (absl::Status st = graph.eraseNode(&n); !st.ok())
    return st;
  return true;
}

GRAPHOPT_REGISTER_PASS(ReinplacePass);

} // namespace graphopt
