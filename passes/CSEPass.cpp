//===- CSEPass.cpp - Common subexpression elimination ---------------------===//
#include "CSEPass.h"
#include "EditedAliases.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Analysis/PeakTracker.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/Hashing.h>
#include <llvm/ADT/StringSet.h>


namespace graphopt {

namespace {

/// Operators whose two tensor operands commute exactly (bit for bit: IEEE
/// addition and multiplication are commutative, comparisons and bitwise ops
/// are symmetric). Not maximum/minimum: on +0.0 and -0.0 they return the
/// second operand, so swapping changes the sign of a zero.
bool isCommutativeOperator(const c10::FunctionSchema &schema) {
  static const llvm::StringSet<> ops = {
      "aten::mul.Tensor",         "aten::eq.Tensor",          "aten::ne.Tensor",
      "aten::logical_and",        "aten::logical_or",         "aten::logical_xor",
      "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor",  "aten::bitwise_xor.Tensor",
      "aten::add.Tensor",
  };
  std::string name = schema.name();
  if (!schema.overload_name().empty())
    name += "." + schema.overload_name();
  return ops.contains(name);
}

/// Whether `n`'s first two operands may be swapped; operator answers are
/// cached by schema (the name lookup is the costly part on large graphs).
bool isCommutative(const Node &n,
                   llvm::DenseMap<const c10::FunctionSchema *, bool> &byOperator) {
  if (n.numArgs() < 2 || !n.arg(0).isValue() || !n.arg(1).isValue())
    return false;
  auto [it, inserted] = byOperator.try_emplace(&n.schema(), false);
  if (inserted)
    it->second = isCommutativeOperator(n.schema());
  if (!it->second)
    return false;
  if (n.schema().name() == "aten::add") { // a + alpha * b commutes only for alpha 1
    if (n.numArgs() < 3 || !n.arg(2).isConstant())
      return false;
    const Constant &alpha = n.arg(2).getConstant();
    return (alpha.kind() == ConstantKind::Int && alpha.asInt() == 1) ||
           (alpha.kind() == ConstantKind::Float && alpha.asFloat() == 1.0);
  }
  return true;
}

/// A call as value numbering sees it: the node, and whether its first two
/// operands are read swapped (commutative normalisation: lower value id first).
struct CallKey {
  const Node *node;
  bool swapped;
  size_t hash;
};

const Argument &argOf(const CallKey &k, unsigned i) {
  if (k.swapped && i < 2)
    return k.node->arg(1 - i);
  return k.node->arg(i);
}

CallKey makeKey(const Node &n, llvm::DenseMap<const c10::FunctionSchema *, bool> *commutative) {
  CallKey k{&n, false, 0};
  if (commutative && isCommutative(n, *commutative))
    k.swapped = n.arg(1).getValue()->id() < n.arg(0).getValue()->id();
  llvm::hash_code h = llvm::hash_value(&n.schema());
  for (unsigned i = 0; i < n.numArgs(); ++i)
    h = llvm::hash_combine(h, hash_value(argOf(k, i)));
  k.hash = static_cast<size_t>(h);
  return k;
}

} // namespace
} // namespace graphopt

template <> struct llvm::DenseMapInfo<graphopt::CallKey> {
  using CallKey = graphopt::CallKey;
  static CallKey getEmptyKey() { return {DenseMapInfo<const graphopt::Node *>::getEmptyKey(), false, 0}; }
  static CallKey getTombstoneKey() {
    return {DenseMapInfo<const graphopt::Node *>::getTombstoneKey(), false, 0};
  }
  static unsigned getHashValue(const CallKey &k) { return static_cast<unsigned>(k.hash); }
  static bool isEqual(const CallKey &a, const CallKey &b) {
    if (a.node == b.node)
      return a.swapped == b.swapped;
    if (a.node == getEmptyKey().node || a.node == getTombstoneKey().node ||
        b.node == getEmptyKey().node || b.node == getTombstoneKey().node)
      return false;
    if (a.hash != b.hash || &a.node->schema() != &b.node->schema() ||
        a.node->numArgs() != b.node->numArgs())
      return false;
    for (unsigned i = 0; i < a.node->numArgs(); ++i)
      if (!graphopt::sameArgument(graphopt::argOf(a, i), graphopt::argOf(b, i)))
        return false;
    return true;
  }
};

namespace graphopt {
namespace {

/// The memory a merge changes, on the liveness timeline: the later call's
/// results are not made, and the earlier call's results live until the later
/// ones would have been freed.
class MergeMemory {
public:
  explicit MergeMemory(const LivenessResult &liveness)
      : liveness_(liveness), tracker_(liveness.timeline), startPeak_(tracker_.peak()) {
    freedAfter_.reserve(liveness.values.size());
    for (const ValueLiveness &v : liveness.values)
      freedAfter_.push_back(v.freedAfter);
  }

  /// Applies the merge of `later` into `earlier`; returns the peak after it.
  int64_t apply(const Node &earlier, const Node &later, bool undo = false) {
    int64_t rank = liveness_.rank.lookup(&later);
    int64_t sign = undo ? -1 : 1;
    forEachStorage(earlier, later, [&](int64_t bytes, int64_t &aFreed, int64_t bFreed) {
      tracker_.add(rank, bFreed, -sign * bytes);
      if (bFreed > aFreed)
        tracker_.add(aFreed + 1, bFreed, sign * bytes);
    });
    return tracker_.peak();
  }
  /// Makes an applied merge permanent: the earlier storage now lives as long.
  void commit(const Node &earlier, const Node &later) {
    forEachStorage(earlier, later, [](int64_t, int64_t &aFreed, int64_t bFreed) {
      aFreed = std::max(aFreed, bFreed);
    });
  }
  int64_t peak() const { return tracker_.peak(); }
  int64_t startPeak() const { return startPeak_; }

private:
  /// Calls `fn(bytes, earlier's freedAfter, later's freedAfter)` for each
  /// pair of results that own storage. Views own no bytes: both alias the
  /// same base, whose lifetime already spans both sets of uses. (Equal calls
  /// with equal result types own equal bytes.)
  template <typename Fn> void forEachStorage(const Node &earlier, const Node &later, Fn fn) {
    for (unsigned i = 0; i < later.numOutputs(); ++i) {
      const ValueLiveness *a = liveness_.lookup(earlier.output(i));
      const ValueLiveness *b = liveness_.lookup(later.output(i));
      if (!a || !b || b->bytes == 0 || a->bytes == 0 || b->storage != b->value)
        continue;
      fn(b->bytes, freedAfter_[liveness_.slot.lookup(a->storage)],
         freedAfter_[liveness_.slot.lookup(b->value)]);
    }
  }

  const LivenessResult &liveness_;
  PeakTracker tracker_;
  int64_t startPeak_;
  std::vector<int64_t> freedAfter_; ///< by liveness slot, updated by commits
};

/// `later` equals `earlier`, and merging them would make two graph outputs
/// one storage. When every result of `earlier` is returned (kept to the end
/// of the step anyway), the readers of `later` that only compute from it
/// (pure operators: no views, no writes) read `earlier` instead, so what is
/// computed from the two can still merge; `later` stays, for its outputs.
/// Memory does not change: both storages were alive to the end already.
/// Returns the number of uses moved (0: nothing changed).
unsigned mergeReaders(const AliasInfo &aa, Node &earlier, Node &later) {
  for (unsigned i = 0; i < earlier.numOutputs(); ++i)
    if (earlier.output(i)->isTensor() && !aa.reachesGraphOutput(earlier.output(i)))
      return 0;
  unsigned moved = 0;
  for (unsigned i = 0; i < later.numOutputs(); ++i) {
    auto pureReader = [](const Use &u) { return u.user && isPure(*u.user); };
    moved += static_cast<unsigned>(llvm::count_if(later.output(i)->uses(), pureReader));
    later.output(i)->replaceUsesWithIf(earlier.output(i), pureReader);
  }
  return moved;
}

std::string nodeLabel(const Node &n) {
  return n.numOutputs() ? n.output()->name().str() : absl::StrCat(n.opName(), "@", n.id());
}

/// The peak check of a mergeable pair: applies the merge of `later` into
/// `earlier` to `memory` unless it would raise the simulated peak above both
/// the peak when cse started and the peak so far (allowed across phases with
/// `allowAcross`). Returns why it is refused ("": applied); `statistic` names
/// the refusal.
std::string refuseIfPeakRises(MergeMemory &memory, const Node &earlier, const Node &later,
                              bool across, bool allowAcross, std::string &statistic) {
  int64_t limit = std::max(memory.startPeak(), memory.peak());
  int64_t after = memory.apply(earlier, later);
  if (after <= limit || (across && allowAcross))
    return "";
  memory.apply(earlier, later, /*undo=*/true);
  statistic = across ? "refused: would raise the peak (across phases)"
                     : "refused: would raise the peak (within a phase)";
  return absl::StrCat("would raise the simulated peak by ", after - limit, " bytes");
}

/// cse.csv: a row per decision.
std::string decisionsCsv(const std::vector<CSEPass::Decision> &decisions) {
  std::string csv = "kept,replaced,op,kept_phase,replaced_phase,decision,reason\n";
  for (const CSEPass::Decision &d : decisions)
    absl::StrAppend(&csv, d.kept, ",", d.replaced, ",", d.op, ",", d.keptPhase, ",",
                    d.replacedPhase, ",", d.decision, ",", d.reason,
                    "\n");
  return csv;
}

} // namespace

void CSEPass::record(const Node &kept, const Node &replaced, std::string reason,
                     std::string decision) {
  if (reportDirectory().empty())
    return;
  if (decision.empty())
    decision = reason.empty() ? "merged" : "refused";
  Decision d{nodeLabel(kept),
             nodeLabel(replaced),
             replaced.opName(),
             phaseName(kept.phase()).str(),
             phaseName(replaced.phase()).str(),
             std::move(reason),
             std::move(decision)};
  std::string id = absl::StrCat(d.kept, ",", d.replaced, ",", d.decision, ",", d.reason);
  if (recorded_.insert(id).second)
    decisions_.push_back(std::move(d));
}

absl::StatusOr<bool> CSEPass::transform(Graph &graph, AnalysisManager &analyses) {
  auto liveness = analyses.getResult<LivenessAnalysis>(graph, {});
  if (!liveness.ok())
    return liveness.status();
  MergeMemory memory(**liveness);
  // The manager's alias facts and storage roots, kept right while merging:
  // each merge is told to them (noteReplaced).
  auto edited = EditedAliases::take(graph, analyses);
  if (!edited.ok())
    return edited.status();
  AliasInfo &aliases = edited->facts();
  llvm::DenseMap<CallKey, Node *> table;
  llvm::DenseMap<const c10::FunctionSchema *, bool> commutative;
  bool changed = false;
  int64_t merged = 0, mergedAcross = 0;
  for (auto it = graph.nodes().begin(); it != graph.nodes().end();) {
    Node &n = *it++;
    if (n.numOutputs() == 0)
      continue; // nothing to reuse: asserts, prints, out-less writes
    auto [slot, inserted] =
        table.try_emplace(makeKey(n, commutative_.get() ? &commutative : nullptr), &n);
    if (inserted)
      continue;
    Node &earlier = *slot->second;
    std::string reason = whyNotMergeable(aliases, earlier, n);
    bool across = earlier.phase() != n.phase();
    std::string statistic = absl::StrCat("refused: ", reason);
    if (reason.empty())
      reason = refuseIfPeakRises(memory, earlier, n, across, acrossPhases_.get(), statistic);
    if (reason == kOutputsWouldShareStorage) {
      if (unsigned moved = mergeReaders(aliases, earlier, n)) {
        addStatistic("readers merged (both calls returned)");
        addStatistic("uses moved to the earlier call", moved);
        record(earlier, n, "", "readers merged");
        changed = true;
      }
    }
    if (!reason.empty()) {
      // Counted once per pair, although repeat{...} meets it every round.
      if (refusedPairs_.insert({earlier.id(), n.id()}).second)
        addStatistic(statistic);
      record(earlier, n, reason);
      // Later equal calls are closer to this one; but after merged readers
      // they merge into the earlier one, as those readers did.
      if (reason != kOutputsWouldShareStorage)
        slot->second = &n;
      continue;
    }
    memory.commit(earlier, n);
    record(earlier, n, "");
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      n.output(i)->replaceAllUsesWith(earlier.output(i));
      edited->noteReplaced(n.output(i), earlier.output(i));
      analyses.replacements(graph).note(*n.output(i), *earlier.output(i));
    }
    if (absl::Status st = graph.eraseNode(&n); !st.ok())
      return st;
    ++merged;
    mergedAcross += across;
    changed = true;
  }
  addStatistic("merged", merged);
  addStatistic("merged across phases", mergedAcross);
  setStatistic("simulated peak bytes before", memory.startPeak());
  setStatistic("simulated peak bytes after", memory.peak());

  if (!reportDirectory().empty())
    if (absl::Status st =
            writeReportFiles(reportDirectory(), {{"cse.csv", decisionsCsv(decisions_)}});
        !st.ok())
      return st;
  return changed;
}

GRAPHOPT_REGISTER_PASS(CSEPass);

} // namespace graphopt
