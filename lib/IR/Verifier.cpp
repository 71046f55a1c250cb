//===- Verifier.cpp - Structural verification of a Graph ------------------===//
#include "graphopt/IR/Verifier.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/SchemaUtils.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringSet.h>

namespace graphopt {

namespace {

class Verifier {
public:
  explicit Verifier(const Graph &g) : graph_(g) {}

  std::vector<VerifierDiagnostic> run() {
    seenNames_.reserve(allValues_.size());
    checkInputs();
    for (const Node &n : graph_.nodes())
      checkNode(n);
    checkOutputs();
    checkUseLists();
    checkTotalBytes();
    return std::move(diags_);
  }

private:
  /// Analyses add up the bytes of values live at once; with every value's
  /// bytes summing to at most 2^62, no such sum can overflow.
  void checkTotalBytes() {
    constexpr int64_t kLimit = int64_t(1) << 62;
    int64_t total = 0;
    for (const Value *v : allValues_)
      if (v->isTensor() && v->type().isKnown() &&
          (__builtin_add_overflow(total, v->tensorType().storageBytes(), &total) || total > kLimit)) {
        report(nullptr, absl::StrCat("the graph's tensors together take more than 2^62 bytes (%",
                                     v->name().str(), " passes it); graph-opt cannot count them"));
        return;
      }
  }

  void report(const Node *n, std::string message) {
    diags_.push_back({n, n ? absl::StrCat("node ", n->describe(), ": ", message) : message});
  }

  void checkName(const Node *n, const Value *v, llvm::StringRef what) {
    if (v->name().empty())
      report(n, absl::StrCat(what.str(), " has an empty name"));
    else if (!seenNames_.insert(v->name()).second)
      report(n, absl::StrCat(what.str(), " %", v->name().str(), ": value name is not unique"));
  }

  void checkType(const Node *n, const Value *v, llvm::StringRef what) {
    if (!v->type().isKnown()) {
      report(n, absl::StrCat(what.str(), " %", v->name().str(), " has no type"));
      return;
    }
    if (!v->isTensor())
      return;
    if (absl::Status st = validateTensorType(v->tensorType()); !st.ok())
      report(n, absl::StrCat(what.str(), " %", v->name().str(), ": ", st.message()));
  }

  void checkInputs() {
    for (const GraphInput &in : graph_.inputs()) {
      std::string what = absl::StrCat("graph input");
      checkName(nullptr, in.value, what);
      checkType(nullptr, in.value, what);
      defined_[in.value] = 1;
      if (in.value->graph() != &graph_ || !in.value->isGraphInput())
        report(nullptr, absl::StrCat("graph input %", in.value->name().str(),
                                     " does not belong to this graph"));
      bool needsTarget = in.role == InputRole::Parameter || in.role == InputRole::Buffer ||
                         in.role == InputRole::OptimizerState;
      if (needsTarget && in.target.empty())
        report(nullptr, absl::StrCat("graph input %", in.value->name().str(), " is ",
                                     in.role == InputRole::OptimizerState ? "an " : "a ",
                                     inputRoleName(in.role).str(), " but names no target"));
      if (in.tiedTo)
        checkTie(in);
      if (!in.target.empty())
        inputsByTarget_[in.target] = &in;
      inputsByName_[in.value->name()] = &in;
    }
  }

  /// A tied input names an earlier, untied input (the rule Graph::tieInput
  /// enforces) with the same storage span.
  void checkTie(const GraphInput &in) {
    const Value *to = in.tiedTo;
    if (absl::Status st = graph_.checkTie(in.value->index(), to); !st.ok()) {
      report(nullptr, std::string(st.message()));
      return;
    }
    if (!in.value->isTensor() || !to->isTensor() || !in.value->type().isKnown() ||
        !to->type().isKnown())
      return; // reported by checkType, or not a tensor: nothing to compare
    int64_t a = in.value->tensorType().storageBytes(), b = to->tensorType().storageBytes();
    if (a != b)
      report(nullptr, absl::StrCat("graph input %", in.value->name().str(), " is tied to %",
                                   to->name().str(), ", but they span ", a, " and ", b,
                                   " storage bytes (tied inputs share one storage)"));
  }

  void checkOperand(const Node &n, const Value *v, unsigned argIndex) {
    const auto &schemaArgs = n.schema().arguments();
    std::string argName = argIndex < schemaArgs.size() ? schemaArgs[argIndex].name()
                                                       : absl::StrCat("#", argIndex);
    if (!v) {
      report(&n, absl::StrCat("argument '", argName, "' is a null value"));
      return;
    }
    // Only values of this graph are safe to inspect; a foreign one is still alive
    // (erasing a used value is refused), so naming it is fine.
    if (!isOurs(v)) {
      report(&n, absl::StrCat("argument '", argName, "' uses %", v->name().str(),
                              ", which is not a value of this graph (dangling use)"));
      return;
    }
    if (!defined_.lookup(v))
      report(&n, absl::StrCat("argument '", argName, "' uses %", v->name().str(),
                              " before its definition"));
  }

  void checkNode(const Node &n) {
    if (n.graph() != &graph_)
      report(&n, "node does not belong to this graph");
    // Phases run forward, then backward, then optimizer.
    if (n.phase() < maxPhase_)
      report(&n, absl::StrCat("phase ", phaseName(n.phase()).str(), " after phase ",
                              phaseName(maxPhase_).str(), ": phases must appear in order"));
    maxPhase_ = std::max(maxPhase_, n.phase());

    const c10::FunctionSchema &schema = n.schema();
    const auto &schemaArgs = schema.arguments();
    if (n.numArgs() != schemaArgs.size()) {
      report(&n, absl::StrCat("has ", n.numArgs(), " arguments but the schema of ", n.opName(),
                              " has ", schemaArgs.size(), ": ", c10::toString(schema)));
    }
    for (unsigned i = 0; i < n.numArgs(); ++i) {
      const Argument &a = n.arg(i);
      if (a.isValue())
        checkOperand(n, a.getValue(), i);
      else if (a.isList())
        for (const Value *v : a.getList())
          if (v)
            checkOperand(n, v, i);
      if (i < schemaArgs.size()) {
        absl::Status st = checkArgument(a, schemaArgs[i]);
        if (!st.ok())
          report(&n, std::string(st.message()));
      }
    }

    const auto &returns = schema.returns();
    bool listReturn = returnsTensorList(schema);
    if (!listReturn && n.numOutputs() != returns.size())
      report(&n, absl::StrCat("has ", n.numOutputs(), " outputs but ", n.opName(), " returns ",
                              returns.size()));
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      const Value *out = n.output(i);
      checkName(&n, out, "output");
      checkType(&n, out, "output");
      if (out->definingNode() != &n || out->index() != i)
        report(&n, absl::StrCat("output %", out->name().str(), " does not point back at its node"));
      if (out->type().isKnown() && (listReturn || i < returns.size())) {
        absl::Status st = checkReturnValue(*out, returns[listReturn ? 0 : i]);
        if (!st.ok())
          report(&n, std::string(st.message()));
      }
      defined_[out] = 1;
    }
  }

  void checkOutputs() {
    for (unsigned i = 0; i < graph_.outputs().size(); ++i) {
      const GraphOutput &out = graph_.outputs()[i];
      std::string what = absl::StrCat("graph output ", i, " (", outputRoleName(out.role).str(), ")");
      if (!out.value || !isOurs(out.value)) {
        report(nullptr, absl::StrCat(what, " is not a value of this graph (dangling use)"));
        continue;
      }
      if (!defined_.lookup(out.value))
        report(nullptr, absl::StrCat(what, " uses %", out.value->name().str(), " before its definition"));
      auto targetRole = [&](InputRole want) {
        auto it = inputsByTarget_.find(out.target);
        if (out.target.empty() || it == inputsByTarget_.end() || it->second->role != want)
          report(nullptr, absl::StrCat(what, " %", out.value->name().str(), " names '", out.target,
                                       "', which is not a ", inputRoleName(want).str(),
                                       " input"));
      };
      switch (out.role) {
      case OutputRole::Gradient:
        targetRole(InputRole::Parameter);
        break;
      case OutputRole::BufferMutation:
        targetRole(InputRole::Buffer);
        break;
      case OutputRole::InputGradient: {
        auto it = inputsByName_.find(out.target);
        if (it == inputsByName_.end() || it->second->role != InputRole::UserInput)
          report(nullptr, absl::StrCat(what, " %", out.value->name().str(), " names '", out.target,
                                       "', which is not a user input"));
        break;
      }
      case OutputRole::Loss:
        // The loss is what a step minimises: one number (the driver prints it).
        if (out.value->isTensor() && out.value->type().isKnown() &&
            out.value->tensorType().numel() != 1)
          report(nullptr, absl::StrCat(what, " %", out.value->name().str(), " has ",
                                       out.value->tensorType().numel(),
                                       " elements; a loss is one number"));
        break;
      default:
        break;
      }
    }
  }

  /// Every recorded use must match an actual operand, and every operand must be recorded.
  void checkUseLists() {
    // Operands that are not values of this graph were reported as dangling already.
    auto ours = [this](const Value *v) { return v && isOurs(v); };
    size_t operandCount = 0;
    for (const Node &n : graph_.nodes())
      for (unsigned i = 0; i < n.numArgs(); ++i) {
        const Argument &a = n.arg(i);
        if (a.isValue())
          operandCount += ours(a.getValue());
        else if (a.isList())
          operandCount += llvm::count_if(a.getList(), ours);
      }
    operandCount += llvm::count_if(graph_.outputs(), [&](const GraphOutput &o) { return ours(o.value); });
    size_t recorded = 0;
    for (const Value *v : allValues_) {
      for (const Use &u : v->uses()) {
        ++recorded;
        bool ok;
        if (!u.user) {
          ok = u.argIndex < graph_.outputs().size() && graph_.outputs()[u.argIndex].value == v;
        } else {
          ok = u.argIndex < u.user->numArgs();
          if (ok) {
            const Argument &a = u.user->arg(u.argIndex);
            ok = a.isValue() ? a.getValue() == v
                             : a.isList() && u.elemIndex < a.getList().size() &&
                                   a.getList()[u.elemIndex] == v;
          }
        }
        if (!ok)
          report(u.user, absl::StrCat("use list of %", v->name().str(),
                                      " records a use that the graph does not have"));
      }
    }
    if (recorded != operandCount)
      report(nullptr, absl::StrCat("use lists record ", recorded, " uses but the graph has ",
                                   operandCount, " operands"));
    if (unsigned n = graph_.useListInconsistencies())
      report(nullptr, absl::StrCat("use lists were found inconsistent ", n,
                                   n == 1 ? " time" : " times",
                                   " while editing (a use to remove was not recorded)"));
  }

  const Graph &graph_;
  std::vector<VerifierDiagnostic> diags_;
  /// Whether `v` is a value of this graph: one of allValues_ (ids are dense
  /// and unique within a graph, so a table by id answers without hashing).
  bool isOurs(const Value *v) const { return v->graph() == &graph_ && isValue_.lookup(v); }
  // Per value id (values of this graph only: check isOurs first).
  ValueMap<uint8_t> defined_{graph_, 0};
  std::vector<Value *> allValues_ = graph_.allValues();
  ValueMap<uint8_t> isValue_ = [this] {
    ValueMap<uint8_t> is(graph_, 0);
    for (const Value *v : allValues_)
      is[v] = 1;
    return is;
  }();
  /// Names of the values checked so far (the values own them: no copies).
  llvm::DenseSet<llvm::StringRef> seenNames_;
  llvm::StringMap<const GraphInput *> inputsByTarget_;
  llvm::StringMap<const GraphInput *> inputsByName_;
  Phase maxPhase_ = Phase::Forward;
};

} // namespace

std::vector<VerifierDiagnostic> collectVerifierDiagnostics(const Graph &graph) {
  return Verifier(graph).run();
}

absl::Status verifyGraph(const Graph &graph) {
  auto diags = collectVerifierDiagnostics(graph);
  if (diags.empty())
    return absl::OkStatus();
  std::vector<std::string> lines;
  for (const auto &d : diags)
    lines.push_back(d.message);
  return absl::FailedPreconditionError(absl::StrCat("graph @", graph.name().str(), " has ",
                                                    diags.size(), " verifier error",
                                                    diags.size() == 1 ? "" : "s", ":\n  ",
                                                    absl::StrJoin(lines, "\n  ")));
}

} // namespace graphopt
