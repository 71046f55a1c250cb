//===- ProfileReport.cpp - The profile's files: CSV, JSON, Chrome trace ---===//
#include "ProfileReport.h"

#include "graphopt/Runtime/Collectives.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/Support/JSON.h>

namespace graphopt {

namespace {

/// Seconds and ratios in CSV: enough digits to sum without losing time.
std::string num(double x) { return absl::StrFormat("%.9g", x); }

llvm::json::Object byKind(const std::array<int64_t, kNumMemoryKinds> &bytes) {
  llvm::json::Object o;
  for (int k = 0; k < kNumMemoryKinds; ++k)
    o[memoryKindName(static_cast<MemoryKind>(k))] = bytes[k];
  return o;
}

std::string pretty(llvm::json::Value v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:1}", v) << "\n";
  return os.str();
}

struct Reports {
  std::string nodeCsv, activationCsv, json, trace;
  std::string traceName = "trace.json"; ///< trace_rank_R.json on a rank of a process group
};

/// A collective from its call to the end of the wait for it, by node rank.
struct Transfer {
  size_t issue, wait;
  int64_t bytes;
};

std::vector<Transfer> transfersOf(const ProfileResult &p) {
  llvm::DenseMap<const Node *, size_t> rankOf;
  for (size_t r = 0; r < p.nodes.size(); ++r)
    rankOf[p.nodes[r].node] = r;
  std::vector<Transfer> out;
  for (size_t r = 0; r < p.nodes.size(); ++r) {
    const Node &n = *p.nodes[r].node;
    if (!isCollective(n) || isWait(n))
      continue;
    size_t wait = r;
    for (const Value *v : n.outputs())
      for (const Node *w : waitsFor(*v))
        if (auto it = rankOf.find(w); it != rankOf.end())
          wait = std::max(wait, it->second);
    out.push_back({r, wait, p.nodes[r].outputBytes});
  }
  return out;
}

/// profile.json's "communication": what the step's collectives cost it (node
/// medians): the calls that issue them and the waits, which block until the
/// data has moved, and the compute that ran while they were in flight.
llvm::json::Value communicationSummary(const Graph &graph, const ProfileResult &p,
                                       const std::vector<Transfer> &transfers) {
  if (transfers.empty())
    return nullptr;
  int64_t bytes = 0;
  double callSeconds = 0, waitSeconds = 0, overlapped = 0;
  for (const Transfer &t : transfers) {
    bytes += t.bytes;
    callSeconds += p.nodes[t.issue].seconds;
    if (t.wait != t.issue)
      waitSeconds += p.nodes[t.wait].seconds;
    for (size_t r = t.issue + 1; r < t.wait; ++r)
      overlapped += p.nodes[r].seconds;
  }
  const std::string group = firstGroupName(graph);
  auto rank = processGroupRank(group);
  auto size = processGroupSize(group);
  return llvm::json::Object{
      {"collectives", static_cast<int64_t>(transfers.size())},
      {"bytes", bytes},
      {"group", group},
      {"rank", rank.ok() ? llvm::json::Value(*rank) : nullptr},
      {"world_size", size.ok() ? llvm::json::Value(*size) : nullptr},
      {"call_time_s", callSeconds},
      {"wait_time_s", waitSeconds},
      {"overlapped_compute_s", overlapped}};
}

/// node_stats.csv (into `csv`) and the node rows of profile.json.
llvm::json::Array nodeRows(const ProfileResult &p, std::string &csv) {
  csv = "rank,node_name,node_type,gtype,median_run_time_s,median_peak_mem_bytes,"
        "median_active_mem_bytes,device\n";
  llvm::json::Array nodes;
  for (size_t rank = 0; rank < p.nodes.size(); ++rank) {
    const NodeStats &s = p.nodes[rank];
    const Node &n = *s.node;
    std::string name = n.label();
    llvm::StringRef type = memoryKindName(s.kind);
    llvm::StringRef gtype = phaseName(n.phase());
    absl::StrAppend(&csv, rank, ",", name, ",", type.str(), ",", gtype.str(), ",",
                    num(s.seconds), ",", s.peakBytes, ",", s.activeBytes, ",", p.device, "\n");
    nodes.push_back(llvm::json::Object{
        {"rank", static_cast<int64_t>(rank)},
        {"node_name", name},
        {"op", n.opName()},
        {"node_type", type},
        {"gtype", gtype},
        {"median_run_time_s", s.seconds},
        {"median_peak_mem_bytes", s.peakBytes},
        {"median_active_mem_bytes", s.activeBytes},
        {"output_bytes", s.outputBytes},
        {"scratch_bytes", s.scratchBytes},
        {"device", p.device},
        {"module", stringAttr(n, "module")},
        {"source", stringAttr(n, "source")},
        {"live_bytes_by_kind", byKind(p.liveByKind[rank])}});
  }

  return nodes;
}

/// activation_stats.csv (into `csv`) and the activation rows of profile.json.
llvm::json::Array activationRows(const ProfileResult &p, const ProfileReportOptions &options,
                                 std::string &csv) {
  csv = "activation_name,creation_rank,last_fw_use_rank,first_bw_use_rank,"
        "last_bw_use_rank,median_mem_size_bytes,inactive_time_s,recomp_time_s,"
        "recomp_memory_bytes,recompute_ratio,swap_time_s\n";
  llvm::json::Array activations;
  for (const ActivationStats &a : p.activations) {
    std::string name = a.value->name().str();
    // μ-TWO's swap time: out to host memory and back, at the given bandwidth.
    const double swapSeconds = 2.0 * static_cast<double>(a.bytes) / options.swapBytesPerSecond;
    absl::StrAppend(&csv, name, ",", a.creationRank, ",", a.lastForwardUseRank, ",",
                    a.firstBackwardUseRank, ",", a.lastBackwardUseRank, ",", a.bytes, ",",
                    num(a.inactiveSeconds), ",", num(a.recomputeSeconds), ",",
                    a.recomputeMemoryBytes, ",", num(a.recomputeRatio), ",", num(swapSeconds),
                    "\n");
    activations.push_back(llvm::json::Object{
        {"activation_name", name},
        {"creation_rank", a.creationRank},
        {"last_fw_use_rank", a.lastForwardUseRank},
        {"first_bw_use_rank", a.firstBackwardUseRank},
        {"last_bw_use_rank", a.lastBackwardUseRank},
        {"median_mem_size_bytes", a.bytes},
        {"inactive_time_s", a.inactiveSeconds},
        {"recomp_time_s", a.recomputeSeconds},
        {"recomp_memory_bytes", a.recomputeMemoryBytes},
        {"recompute_ratio", a.recomputeRatio},
        {"swap_time_s", swapSeconds},
        {"recompute_nodes", static_cast<int64_t>(a.recomputeNodes)},
        {"recomputable", a.recomputable},
        {"module", stringAttr(*a.value->definingNode(), "module")}});
  }

  return activations;
}

/// profile.json's top level, around its node and activation rows.
llvm::json::Object summaryOf(const Graph &graph, const ProfileResult &p,
                             const ProfileReportOptions &options, llvm::json::Value communication,
                             llvm::json::Array nodes, llvm::json::Array activations) {
  llvm::json::Value limit = nullptr;
  if (options.memoryLimitBytes > 0)
    limit = options.memoryLimitBytes;
  return llvm::json::Object{
      {"format", "graph-opt-profile/1"},
      {"graph", graph.name()},
      {"device", p.device},
      {"time_source", p.timeSource},
      {"memory_source", p.memorySource},
      {"warmup_runs", static_cast<int64_t>(p.warmupRuns)},
      {"measured_runs", static_cast<int64_t>(p.measuredRuns)},
      {"num_nodes", static_cast<int64_t>(p.nodes.size())},
      {"step_time_s", p.stepSeconds},
      {"swap_bandwidth_bytes_per_second", options.swapBytesPerSecond},
      {"profiled_step_time_s", p.profiledStepSeconds},
      {"sum_node_time_s", p.sumNodeSeconds},
      {"run_node_time_s", p.runNodeSeconds},
      {"profiler_overhead_per_node_s", p.overheadPerNodeSeconds},
      {"input_bytes", p.inputBytes},
      {"peak_bytes", p.peakBytes},
      {"peak_rank", p.peakRank},
      {"simulated_peak_bytes", p.simulatedPeakBytes},
      {"unattributed_at_peak_bytes", p.unattributedAtPeak},
      {"memory_limit_bytes", std::move(limit)},
      {"forward_end_rank", p.forwardEndRank},
      {"backward_end_rank", p.backwardEndRank},
      {"breakdown_at_peak", byKind(p.breakdownAtPeak)},
      {"communication", std::move(communication)},
      {"nodes", std::move(nodes)},
      {"activations", std::move(activations)}};
}

/// trace.json's events: microseconds; one slice per node, counters at each
/// node's start, and the collectives on a track of their own.
llvm::json::Array traceEvents(const Graph &graph, const ProfileResult &p,
                              const std::vector<Transfer> &transfers) {
  llvm::json::Array events;
  events.push_back(llvm::json::Object{
      {"name", "process_name"}, {"ph", "M"}, {"pid", 1},
      {"args", llvm::json::Object{{"name", absl::StrCat("graph-opt profile: ", graph.name().str(),
                                                        " (", p.device, ")")}}}});
  events.push_back(llvm::json::Object{{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1},
                                      {"args", llvm::json::Object{{"name", "nodes"}}}});
  const ProfiledStep &step = p.trace;
  for (size_t rank = 0; rank < step.start.size() && rank < p.nodes.size(); ++rank) {
    const Node &n = *p.nodes[rank].node;
    double ts = step.start[rank] * 1e6;
    events.push_back(llvm::json::Object{
        {"name", n.label()},
        {"cat", phaseName(n.phase())},
        {"ph", "X"},
        {"ts", ts},
        {"dur", step.seconds[rank] * 1e6},
        {"pid", 1},
        {"tid", 1},
        {"args", llvm::json::Object{{"rank", static_cast<int64_t>(rank)},
                                    {"op", n.opName()},
                                    {"phase", phaseName(n.phase())},
                                    {"module", stringAttr(n, "module")},
                                    {"source", stringAttr(n, "source")}}}});
    events.push_back(llvm::json::Object{{"name", "live memory by kind (simulated, bytes)"},
                                        {"ph", "C"},
                                        {"ts", ts},
                                        {"pid", 1},
                                        {"args", byKind(p.liveByKind[rank])}});
    events.push_back(llvm::json::Object{{"name", "live memory (measured, bytes)"},
                                        {"ph", "C"},
                                        {"ts", ts},
                                        {"pid", 1},
                                        {"args", llvm::json::Object{{"live", step.liveBytes[rank]}}}});
  }
  // Communication on a track of its own: each collective from its call to
  // the end of its wait, beside the nodes that ran meanwhile.
  if (!transfers.empty())
    events.push_back(llvm::json::Object{{"name", "thread_name"}, {"ph", "M"}, {"pid", 1},
                                        {"tid", 2},
                                        {"args", llvm::json::Object{{"name", "communication"}}}});
  for (const Transfer &t : transfers) {
    if (t.issue >= step.start.size() || t.wait >= step.start.size())
      continue;
    const Node &n = *p.nodes[t.issue].node;
    const double begin = step.start[t.issue];
    const double end = step.start[t.wait] + step.seconds[t.wait];
    events.push_back(llvm::json::Object{
        {"name", absl::StrCat(n.label(), " (", n.opName(), ")")},
        {"cat", "communication"},
        {"ph", "X"},
        {"ts", begin * 1e6},
        {"dur", (end - begin) * 1e6},
        {"pid", 1},
        {"tid", 2},
        {"args", llvm::json::Object{{"bytes", t.bytes},
                                    {"issued_at_rank", static_cast<int64_t>(t.issue)},
                                    {"waited_at_rank", static_cast<int64_t>(t.wait)},
                                    {"wait_s", t.wait != t.issue ? step.seconds[t.wait] : 0.0}}}});
  }
  return events;
}

Reports render(const Graph &graph, const ProfileResult &p, const ProfileReportOptions &options) {
  Reports out;
  llvm::json::Array nodes = nodeRows(p, out.nodeCsv);
  llvm::json::Array activations = activationRows(p, options, out.activationCsv);
  const std::vector<Transfer> transfers = transfersOf(p);
  llvm::json::Value communication = communicationSummary(graph, p, transfers);
  if (const llvm::json::Object *c = communication.getAsObject())
    if (llvm::Optional<int64_t> rank = c->getInteger("rank"))
      out.traceName = absl::StrCat("trace_rank_", *rank, ".json");
  out.json = pretty(summaryOf(graph, p, options, std::move(communication), std::move(nodes),
                              std::move(activations)));
  out.trace = pretty(llvm::json::Object{{"traceEvents", traceEvents(graph, p, transfers)},
                                        {"displayTimeUnit", "ms"}});
  return out;
}

} // namespace


absl::Status writeProfileReports(const Graph &graph, const ProfileResult &profile,
                                 llvm::StringRef dir, const ProfileReportOptions &options,
                                 llvm::ArrayRef<FileToWrite> extra) {
  Reports r = render(graph, profile, options);
  std::vector<FileToWrite> files = {{"node_stats.csv", r.nodeCsv},
                                    {"activation_stats.csv", r.activationCsv},
                                    {"profile.json", r.json},
                                    {r.traceName, r.trace}};
  files.insert(files.end(), extra.begin(), extra.end());
  return writeReportFiles(dir, files);
}

} // namespace graphopt
