//===- LivenessPass.cpp - The liveness analysis as a pass -----------------===//
#include "LivenessPass.h"

#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/Collectives.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <map>

namespace graphopt {

namespace {

/// The layer a value came from: its defining node's `module` (graph inputs have none).
std::string moduleOf(const Value &v) {
  return v.definingNode() ? stringAttr(*v.definingNode(), "module") : std::string();
}

/// Bytes live at the peak, by the module of the node that made them (graph
/// inputs, which no layer makes, are left out), largest first.
llvm::json::Array bytesByModuleAtPeak(const LivenessResult &r) {
  std::map<std::string, int64_t> bytes;
  for (const ValueLiveness &l : r.values)
    if (l.created >= 0 && l.bytes > 0 && l.created <= r.peakNode && l.freedAfter >= r.peakNode)
      bytes[moduleOf(*l.value)] += l.bytes;
  std::vector<std::pair<std::string, int64_t>> rows(bytes.begin(), bytes.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  llvm::json::Array out;
  for (const auto &[module, n] : rows)
    out.push_back(llvm::json::Object{{"module", module.empty() ? "(no module)" : module},
                                     {"bytes", n}});
  return out;
}

/// What the step's collectives hold (null without any): their output buffers,
/// how much of them is live at the peak, and the most bytes in flight at once
/// (issued and not yet waited for: the backend writes them meanwhile).
llvm::json::Value communicationOf(const Graph &graph, const LivenessResult &r) {
  int64_t collectives = 0, bytes = 0, atPeak = 0;
  std::vector<int64_t> inFlight(r.timeline.size(), 0);
  for (const Node &n : graph.nodes()) {
    if (!isCollective(n) || isWait(n))
      continue;
    ++collectives;
    const int64_t issued = r.rank.lookup(&n);
    for (const Value *v : n.outputs()) {
      const ValueLiveness *l = r.lookup(v);
      if (!l)
        continue;
      bytes += l->bytes;
      if (l->created <= r.peakNode && l->freedAfter >= r.peakNode)
        atPeak += l->bytes;
      int64_t waited = issued;
      for (const Node *w : waitsFor(*v))
        waited = std::max(waited, r.rank.lookup(w));
      for (int64_t i = issued; i < waited && i < static_cast<int64_t>(inFlight.size()); ++i)
        inFlight[i] += l->bytes;
    }
  }
  if (collectives == 0)
    return nullptr;
  return llvm::json::Object{
      {"collectives", collectives},
      {"buffer_bytes", bytes},
      {"buffers_at_peak_bytes", atPeak},
      {"most_in_flight_bytes",
       inFlight.empty() ? 0 : *std::max_element(inFlight.begin(), inFlight.end())}};
}

absl::Status writeReports(const Graph &graph, const LivenessResult &r, llvm::StringRef dir) {
  std::string values = "value,kind,bytes,storage,created,last_forward_use,first_backward_use,"
                       "last_backward_use,freed_after,module\n";
  for (const ValueLiveness &l : r.values)
    absl::StrAppend(&values, l.value->name().str(), ",", memoryKindName(l.kind).str(), ",", l.bytes,
                    ",", l.storage->name().str(), ",", l.created, ",", l.lastForwardUse, ",",
                    l.firstBackwardUse, ",", l.lastBackwardUse, ",", l.freedAfter, ",",
                    moduleOf(*l.value), "\n");
  std::string timeline = "node,index,phase,live_bytes,scratch_bytes,module\n";
  int64_t i = 0;
  for (const Node &n : graph.nodes()) {
    absl::StrAppend(&timeline, n.label(), ",", i, ",",
                    phaseName(n.phase()).str(), ",", r.timeline[i], ",",
                    r.scratch.empty() ? 0 : r.scratch[i], ",", stringAttr(n, "module"), "\n");
    ++i;
  }
  llvm::json::Object breakdown;
  for (int kind = 0; kind < kNumMemoryKinds; ++kind)
    breakdown[memoryKindName(static_cast<MemoryKind>(kind))] = r.breakdown[kind];
  llvm::json::Object summary{{"graph", graph.name()},
                             {"nodes", static_cast<int64_t>(graph.numNodes())},
                             {"input_bytes", r.inputBytes},
                             {"peak_bytes", r.peakBytes},
                             {"peak_node", r.peakNode},
                             {"scratch", r.scratch.empty() ? "none" : "measured"},
                             {"breakdown_at_peak", std::move(breakdown)},
                             {"by_module_at_peak", bytesByModuleAtPeak(r)},
                             {"communication", communicationOf(graph, r)}};
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(summary))) << "\n";
  return writeReportFiles(dir, {{"liveness_values.csv", values},
                                {"liveness_timeline.csv", timeline},
                                {"liveness.json", os.str()}});
}

} // namespace

absl::Status LivenessPass::analyze(const Graph &graph, AnalysisManager &analyses) {
  auto r = analyses.getResult<LivenessAnalysis>(graph, {scratch_.get()});
  if (!r.ok()) {
    if (scratch_.get() == Scratch::Measured)
      return absl::Status(r.status().code(),
                          absl::StrCat("liveness{scratch=measured}: ", r.status().message()));
    return r.status();
  }
  setStatistic("peak bytes (simulated)", (*r)->peakBytes);
  if (!(*r)->scratch.empty() && (*r)->peakNode >= 0)
    setStatistic("scratch bytes at the peak (measured)", (*r)->scratch[(*r)->peakNode]);
  if (!reportDirectory().empty())
    return writeReports(graph, **r, reportDirectory());
  return absl::OkStatus();
}

GRAPHOPT_REGISTER_PASS(LivenessPass);

} // namespace graphopt
