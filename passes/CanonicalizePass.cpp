//===- CanonicalizePass.cpp - Folding no-ops and simple algebra -----------===//
//
// The driver: a greedy worklist over the rules of CanonicalizeRules.cpp, run
// to a fixpoint (MLIR's applyPatternsAndFoldGreedily is the model).
//
//===----------------------------------------------------------------------===//
#include "CanonicalizePass.h"
#include "CanonicalizeRules.h"

#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace graphopt {

namespace {

using canonicalize::FoldContext;
using canonicalize::Rule;

/// The rules of each operator, found by schema name and overload once per
/// operator (keyed by its registered schema, as OpEffects' cache is).
class RuleIndex {
public:
  llvm::ArrayRef<const Rule *> rulesFor(const Node &node) {
    auto [it, inserted] = byOperator_.try_emplace(&node.schema());
    if (inserted)
      for (const Rule &rule : canonicalize::allRules())
        if (canonicalize::ruleMatchesOperator(rule, node.schema()))
          it->second.push_back(&rule);
    return it->second;
  }

private:
  llvm::DenseMap<const c10::FunctionSchema *, llvm::SmallVector<const Rule *, 1>> byOperator_;
};

/// Whether the node's operator may be folded away at all, whatever a rule
/// says: only what may also be erased (nothing random: that would shift every
/// later random draw; nothing with side effects; nothing that writes). The
/// matched operators are pure or views; this keeps a future overload from
/// slipping through.
bool mayFold(const Node &node) {
  return node.numOutputs() == 1 && node.output()->isTensor() && !whyNotErasable(node);
}

/// Whether an unused node may be erased.
bool mayEraseUnused(const Node &node) {
  return !whyNotErasable(node) &&
         llvm::none_of(node.outputs(), [](const Value *v) { return v->hasUses(); });
}

/// The driver's worklist: every node of `graph`, in reverse so that nodes
/// first come off the stack in graph order; each marked in `queued`.
std::vector<std::pair<Node *, unsigned>> initialWorklist(Graph &graph,
                                                         std::vector<uint8_t> &queued) {
  std::vector<std::pair<Node *, unsigned>> work;
  work.reserve(graph.numNodes());
  for (Node &n : graph.nodes())
    work.emplace_back(&n, n.id());
  std::reverse(work.begin(), work.end());
  for (const auto &[n, id] : work)
    queued[id] = 1;
  return work;
}

/// The first of the node's rules that folds it, with the value it folds to
/// in `x`; null when none does.
const Rule *firstFold(RuleIndex &index, Node &node, FoldContext &ctx, Value *&x) {
  for (const Rule *rule : index.rulesFor(node))
    if ((x = rule->match(node, ctx)))
      return rule;
  return nullptr;
}

/// The step after a fold: erases `node` (whose output has no uses left), then
/// every operand's defining node that this leaves unused and that may go,
/// marking each in `erased`; `onDeadOperand` is told of each of the latter.
absl::Status eraseWithDeadOperands(Graph &graph, Node *node, std::vector<uint8_t> &erased,
                                   llvm::function_ref<void()> onDeadOperand) {
  llvm::SmallVector<Node *, 4> dead{node};
  while (!dead.empty()) {
    Node *d = dead.pop_back_val();
    llvm::SmallVector<Value *, 4> operands = d->operandValues();
    const unsigned id = d->id();
    if (absl::Status st = graph.eraseNode(d); !st.ok()) // refused: `d` is intact
      return absl::InternalError(
          absl::StrCat("canonicalize: could not erase ", d->describe(), ": ", st.message()));
    erased[id] = 1;
    if (d != node)
      onDeadOperand();
    for (Value *v : operands) {
      Node *def = v->definingNode();
      if (def && !erased[def->id()] && !llvm::is_contained(dead, def) && mayEraseUnused(*def))
        dead.push_back(def);
    }
  }
  return absl::OkStatus();
}

} // namespace

absl::Status CanonicalizePass::validateOptions() {
  if (maxRewrites_.get() && *maxRewrites_.get() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("option 'max-rewrites' must be >= 0, got ", *maxRewrites_.get()));
  return absl::OkStatus();
}

absl::StatusOr<bool> CanonicalizePass::transform(Graph &graph, AnalysisManager &analyses) {
  const int64_t cap =
      maxRewrites_.get().value_or(10 * static_cast<int64_t>(graph.numNodes()) + 100);
  auto aliases = EditedAliases::take(graph, analyses);
  if (!aliases.ok())
    return aliases.status();
  FoldContext ctx(graph, *aliases);
  RuleIndex index;

  // The worklist is a stack, filled in reverse so that nodes first come off
  // it in graph order; the users of a value that just gained uses are pushed
  // and so looked at next. Entries carry the node's id, so an entry whose
  // node was erased is skipped without touching it.
  std::vector<uint8_t> queued(graph.nodeIdBound(), 0), erased(graph.nodeIdBound(), 0);
  std::vector<std::pair<Node *, unsigned>> work = initialWorklist(graph, queued);
  auto push = [&](Node *n) {
    if (!queued[n->id()] && !erased[n->id()]) {
      queued[n->id()] = 1;
      work.emplace_back(n, n->id());
    }
  };

  int64_t rewrites = 0;
  while (!work.empty()) {
    auto [node, id] = work.back();
    work.pop_back();
    if (erased[id])
      continue;
    queued[id] = 0;
    if (!mayFold(*node))
      continue;
    Value *x = nullptr;
    const Rule *fired = firstFold(index, *node, ctx, x);
    if (!fired)
      continue;
    if (rewrites >= cap)
      return absl::ResourceExhaustedError(absl::StrCat(
          "canonicalize reached its rewrite cap, max-rewrites=", cap, ", before a fixpoint: ",
          node->describe(), " would still fold by rule '", fired->name.str(),
          "' (raise max-rewrites; a cap that a graph keeps hitting means rules that undo each "
          "other)"));
    ++rewrites;
    addStatistic(absl::StrCat("folded ", fired->name.str()));
    // Every use of y, graph outputs included, now reads x; x's users, old and
    // new, may now match (t(t(x)) once the inner pair folded to x).
    node->output()->replaceAllUsesWith(x);
    ctx.edits().noteReplaced(node->output(), x);
    analyses.replacements(graph).note(*node->output(), *x);
    for (const Use &u : x->uses())
      if (u.user && u.user != node)
        push(u.user);
    if (absl::Status st = eraseWithDeadOperands(graph, node, erased,
                                                [&] { addStatistic("erased dead operands"); });
        !st.ok())
      return st;
  }
  return rewrites > 0;
}

GRAPHOPT_REGISTER_PASS(CanonicalizePass);

} // namespace graphopt
