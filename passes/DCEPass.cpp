//===- DCEPass.cpp - Dead code elimination --------------------------------===//
#include "DCEPass.h"

#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/Support/WithColor.h>

#include <algorithm>

namespace graphopt {

namespace {

bool hasUsedOutput(const Node &n) {
  for (unsigned i = 0; i < n.numOutputs(); ++i)
    if (n.output(i)->hasUses())
      return true;
  return false;
}

} // namespace

absl::StatusOr<bool> DCEPass::transform(Graph &graph, AnalysisManager &) {
  bool changed = false;
  int64_t removed = 0;
  // From the end: erasing a node may leave its operands' definitions dead,
  // and those come earlier, so one walk removes whole chains.
  // (begin() is read each time: the first node may be erased.)
  for (auto it = graph.nodes().end(); it != graph.nodes().begin();) {
    Node &n = *--it;
    if (hasUsedOutput(n))
      continue;
    if (const char *reason = whyNotErasable(n)) {
      if (n.numOutputs() > 0) // nodes with results nobody reads, kept for what they do
        addStatistic(absl::StrCat("kept unused: ", reason));
      continue;
    }
    ++it; // `it` points at n: step past it before erasing
    if (absl::Status st = graph.eraseNode(&n); !st.ok())
      return st;
    ++removed;
    changed = true;
  }
  addStatistic("removed nodes", removed);

  std::vector<std::string> unused;
  for (unsigned i = graph.inputs().size(); i-- > 0;) {
    const GraphInput &in = graph.inputs()[i];
    // An input another one is tied to holds that one's storage: it is used.
    auto tiedTo = [&](const GraphInput &other) { return other.tiedTo == in.value; };
    if (in.value->hasUses() || llvm::any_of(graph.inputs(), tiedTo))
      continue;
    std::string name = in.value->name().str();
    if (inputs_.get()) {
      if (absl::Status st = graph.eraseInput(i); !st.ok())
        return st;
      addStatistic("removed inputs");
      changed = true;
      continue;
    }
    unused.push_back("%" + name);
    if (countedInputs_.insert(name).second)
      addStatistic("unused inputs kept");
  }
  if (!unused.empty() && !inputs_.get()) {
    std::reverse(unused.begin(), unused.end());
    std::string key = absl::StrJoin(unused, ",");
    if (remarked_.insert(key).second)
      llvm::WithColor::remark(remarks(), "graph-opt")
          << "dce: " << unused.size() << " unused graph input" << (unused.size() == 1 ? "" : "s") << " kept: "
          << absl::StrJoin(unused.begin(), unused.begin() + std::min<size_t>(unused.size(), 8), ", ")
          << (unused.size() > 8 ? ", ..." : "") << " (dce{inputs=true} removes them)\n";
  }
  return changed;
}

GRAPHOPT_REGISTER_PASS(DCEPass);

} // namespace graphopt
