//===- Attribution.cpp - A step's time, operator by operator, from the cost database ===//
#include "graphopt/Cost/Attribution.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/MapVector.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cmath>

namespace graphopt {

namespace {

struct OpSummary {
  std::string op;
  size_t nodes = 0;
  double measured = 0, predicted = 0;
  double accurate = 0; ///< measured time of its nodes predicted within the tolerance
  size_t byHow[CostModel::kHows] = {};
};

std::vector<OpSummary> byOperator(const StepAttribution &a) {
  llvm::MapVector<llvm::StringRef, OpSummary> ops;
  for (const NodeAttribution &n : a.nodes) {
    OpSummary &s = ops[n.op];
    s.op = n.op;
    ++s.nodes;
    s.measured += std::max(n.measuredSeconds, 0.0);
    s.predicted += n.predictedSeconds;
    if (n.accurate(a.tolerance))
      s.accurate += n.measuredSeconds;
    ++s.byHow[static_cast<int>(n.how)];
  }
  std::vector<OpSummary> out;
  for (auto &[name, s] : ops)
    out.push_back(std::move(s));
  bool measured = a.measuredStepSeconds >= 0;
  std::stable_sort(out.begin(), out.end(), [&](const OpSummary &x, const OpSummary &y) {
    return measured ? x.measured > y.measured : x.predicted > y.predicted;
  });
  return out;
}

std::string howCounts(const OpSummary &s) {
  std::string text;
  for (int h = 0; h < CostModel::kHows; ++h)
    if (s.byHow[h])
      absl::StrAppend(&text, text.empty() ? "" : " ", s.byHow[h], " ",
                      CostModel::howName(static_cast<CostModel::How>(h)).str());
  return text;
}

std::string csvField(llvm::StringRef s) {
  if (!s.contains(',') && !s.contains('"') && !s.contains('\n'))
    return s.str();
  std::string q = "\"";
  for (char c : s)
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

double ratioOrNegative(double num, double den) { return den > 0 ? num / den : -1; }

} // namespace

bool NodeAttribution::accurate(double tolerance) const {
  return how != CostModel::How::Missing && measuredSeconds > 0 &&
         std::abs(predictedSeconds - measuredSeconds) <= tolerance * measuredSeconds;
}

double StepAttribution::explainedShare() const {
  return ratioOrNegative(explainedSeconds, measuredNodeSeconds);
}
double StepAttribution::exactShare() const {
  return ratioOrNegative(exactSeconds, measuredNodeSeconds);
}
double StepAttribution::accurateShare() const {
  return ratioOrNegative(accurateSeconds, measuredNodeSeconds);
}
double StepAttribution::predictedOverMeasured() const {
  return ratioOrNegative(predictedSeconds, measuredStepSeconds);
}

StepAttribution attributeStep(const Graph &graph, const CostModel &model,
                              const ProfileResult *profile, double tolerance) {
  StepAttribution a;
  a.tolerance = tolerance;
  a.entries = model.size();
  a.implausible = model.implausible().size();
  a.balance = model.balance();
  a.machine = model.machine();
  a.speed = model.speed();
  bool allJoules = true;
  size_t rank = 0;
  for (const Node &node : graph.nodes()) {
    NodeAttribution n;
    n.node = &node;
    n.op = node.opName();
    if (profile && rank < profile->nodes.size())
      n.measuredSeconds = profile->nodes[rank].seconds;
    ++rank;
    auto config = operatorConfigOf(node);
    if (!config.ok()) {
      n.note = std::string(config.status().message());
    } else {
      n.configKey = config->key;
      CostModel::Prediction p = model.predict(*config);
      n.how = p.how;
      if (p.how == CostModel::How::Missing)
        n.note = "no measurement of this operator";
      n.predictedSeconds = p.seconds;
      n.predictedJoules = p.joules;
      n.nearest = p.nearest;
      n.work = config->work;
      n.context = p.context;
    }
    if (n.how != CostModel::How::Missing) {
      a.predictedSeconds += n.predictedSeconds;
      ++a.predictedNodes;
      if (n.predictedJoules)
        a.predictedJoules = a.predictedJoules.value_or(0) + *n.predictedJoules;
      else
        allJoules = false;
      a.explainedSeconds += std::max(n.measuredSeconds, 0.0);
      if (n.how == CostModel::How::Exact) {
        ++a.exactNodes;
        a.exactSeconds += std::max(n.measuredSeconds, 0.0);
      }
      if (n.accurate(tolerance)) {
        ++a.accurateNodes;
        a.accurateSeconds += n.measuredSeconds;
      }
    }
    a.nodes.push_back(std::move(n));
  }
  if (!allJoules)
    a.predictedJoules.reset();
  if (profile) {
    a.measuredStepSeconds = profile->stepSeconds;
    a.measuredNodeSeconds = profile->sumNodeSeconds;
  }
  return a;
}

void printAttribution(llvm::raw_ostream &os, const StepAttribution &a) {
  bool measured = a.measuredStepSeconds >= 0;
  os << "predicted from " << a.entries << " measurements on " << a.machine << "\n";
  if (a.implausible > 0)
    os << a.implausible << " measurement" << (a.implausible == 1 ? "" : "s")
       << " far slower than a configuration of their family with more work (the machine in a "
          "slow mode; measure --remeasure times them again): not interpolated from\n";
  if (a.balance > 0)
    os << llvm::formatv("roofline: {0:f1} FLOPs per byte; a compute-bound call under it is priced "
                        "as bound by its bytes\n",
                        a.balance);
  if (a.speedProbes > 0)
    os << llvm::formatv("calibrated: the machine takes {0:f3}x the database's times now (median "
                        "of {1} probes, quartiles {2:f3}-{3:f3}); predictions scaled by it\n",
                        a.speed, a.speedProbes, a.speedQ1, a.speedQ3);
  std::string tolerance = absl::StrCat(std::llround(100 * a.tolerance), "%");
  os << llvm::formatv("{0,-42} {1,6} {2,12} {3,12} {4,10}  {5}\n", "operator", "nodes",
                      measured ? "measured ms" : "", "predicted ms", measured ? "within " + tolerance : "",
                      "how");
  std::vector<OpSummary> ops = byOperator(a);
  size_t shown = 0;
  for (const OpSummary &s : ops) {
    if (shown++ == 25) {
      os << "  ... " << ops.size() - 25 << " more operators (the CSV has every node)\n";
      break;
    }
    // The share of the operator's measured time its accurate nodes carry.
    std::string accurate =
        measured && s.measured > 0 ? llvm::formatv("{0:f0}%", 100 * s.accurate / s.measured).str()
                                   : "";
    os << llvm::formatv("{0,-42} {1,6} {2,12} {3,12:f3} {4,10}  {5}\n", s.op,
                        std::to_string(s.nodes),
                        measured ? llvm::formatv("{0:f3}", s.measured * 1e3).str() : "",
                        s.predicted * 1e3, accurate, howCounts(s));
  }
  os << llvm::formatv("predicted step: {0:f3} ms", a.predictedSeconds * 1e3);
  if (a.predictedJoules)
    os << llvm::formatv(", {0:f4} J", *a.predictedJoules);
  else
    os << " (no energy: the measurements have no energy sensor's figures)";
  os << "\n";
  if (measured) {
    os << llvm::formatv("measured step: {0:f3} ms; predicted/measured {1:f3}\n",
                        a.measuredStepSeconds * 1e3, std::max(a.predictedOverMeasured(), 0.0));
    os << llvm::formatv("the nodes' medians add up to {0:f3} ms, {1:f1}% of the step\n",
                        a.measuredNodeSeconds * 1e3,
                        a.measuredStepSeconds > 0 ? 100 * a.measuredNodeSeconds / a.measuredStepSeconds
                                                  : 0);
    os << llvm::formatv("attributed: {0:f1}% of the measured node time ({1} of {2} nodes); "
                        "measured exactly: {3:f1}% ({4} nodes)\n",
                        100 * a.explainedShare(), std::to_string(a.predictedNodes),
                        std::to_string(a.nodes.size()), 100 * a.exactShare(),
                        std::to_string(a.exactNodes));
    os << llvm::formatv("accurate: {0:f1}% of the measured node time predicted within {1} of "
                        "what it measured, node by node ({2} of {3} nodes)\n",
                        100 * a.accurateShare(), tolerance,
                        std::to_string(a.accurateNodes), std::to_string(a.nodes.size()));
  } else {
    os << "predicted " << a.predictedNodes << " of " << a.nodes.size() << " nodes, "
       << a.exactNodes << " measured exactly\n";
  }
  OpSummary all;
  for (const NodeAttribution &n : a.nodes)
    ++all.byHow[static_cast<int>(n.how)];
  os << "nodes by how they were predicted: " << howCounts(all) << "\n";
  llvm::MapVector<llvm::StringRef, std::pair<size_t, std::string>> missing;
  for (const NodeAttribution &n : a.nodes)
    if (n.how == CostModel::How::Missing) {
      auto &m = missing[n.op];
      ++m.first;
      m.second = n.note;
    }
  for (auto &[op, m] : missing)
    os << "not in the database: " << op << " (" << m.first << " nodes): " << m.second << "\n";
}

std::string attributionCsv(const StepAttribution &a) {
  std::string out = "rank,node,operator,how,predicted_s,predicted_j,measured_s,note,predicted_over_measured,work,context,speed\n";
  size_t rank = 0;
  for (const NodeAttribution &n : a.nodes) {
    absl::StrAppend(&out, rank++, ",", csvField(n.node->label()),
                    ",", csvField(n.op), ",", CostModel::howName(n.how).str(), ",",
                    llvm::formatv("{0:e6}", n.predictedSeconds).str(), ",",
                    n.predictedJoules ? llvm::formatv("{0:e6}", *n.predictedJoules).str() : "",
                    ",",
                    n.measuredSeconds >= 0 ? llvm::formatv("{0:e6}", n.measuredSeconds).str() : "",
                    ",", csvField(n.note), ",",
                    n.how != CostModel::How::Missing && n.measuredSeconds > 0
                        ? llvm::formatv("{0:f4}", n.predictedSeconds / n.measuredSeconds).str()
                        : "",
                    ",", n.configKey.empty() ? "" : llvm::formatv("{0:e6}", n.work).str(), ",",
                    n.how != CostModel::How::Missing ? llvm::formatv("{0:e6}", n.context).str() : "",
                    ",", llvm::formatv("{0:f4}", a.speed).str(), "\n");
  }
  return out;
}

std::string attributionJson(const StepAttribution &a, llvm::StringRef model) {
  auto orNull = [](double v) { return v < 0 ? llvm::json::Value(nullptr) : llvm::json::Value(v); };
  llvm::json::Array ops;
  for (const OpSummary &s : byOperator(a)) {
    llvm::json::Object how;
    for (int h = 0; h < CostModel::kHows; ++h)
      how[CostModel::howName(static_cast<CostModel::How>(h))] = static_cast<int64_t>(s.byHow[h]);
    ops.push_back(llvm::json::Object{{"operator", s.op},
                                     {"nodes", static_cast<int64_t>(s.nodes)},
                                     {"measured_seconds", a.measuredStepSeconds >= 0
                                                              ? llvm::json::Value(s.measured)
                                                              : llvm::json::Value(nullptr)},
                                     {"predicted_seconds", s.predicted},
                                     {"accurate_seconds", a.measuredStepSeconds >= 0
                                                              ? llvm::json::Value(s.accurate)
                                                              : llvm::json::Value(nullptr)},
                                     {"how", std::move(how)}});
  }
  llvm::json::Object doc{
      {"format", "graph-opt-attribution/1"},
      {"model", model},
      {"machine", a.machine},
      {"measurements", static_cast<int64_t>(a.entries)},
      {"implausible_measurements", static_cast<int64_t>(a.implausible)},
      {"balance_flops_per_byte", a.balance > 0 ? llvm::json::Value(a.balance) : llvm::json::Value(nullptr)},
      {"nodes", static_cast<int64_t>(a.nodes.size())},
      {"predicted_nodes", static_cast<int64_t>(a.predictedNodes)},
      {"exact_nodes", static_cast<int64_t>(a.exactNodes)},
      {"predicted_step_seconds", a.predictedSeconds},
      {"predicted_step_joules",
       a.predictedJoules ? llvm::json::Value(*a.predictedJoules) : llvm::json::Value(nullptr)},
      {"measured_step_seconds", orNull(a.measuredStepSeconds)},
      {"measured_node_seconds", orNull(a.measuredNodeSeconds)},
      {"attributed_share", orNull(a.explainedShare())},
      {"exact_share", orNull(a.exactShare())},
      {"tolerance", a.tolerance},
      {"accurate_nodes", static_cast<int64_t>(a.accurateNodes)},
      {"accurate_share", orNull(a.accurateShare())},
      {"predicted_over_measured_step", orNull(a.predictedOverMeasured())},
      {"speed_factor", a.speed},
      {"speed_probes", static_cast<int64_t>(a.speedProbes)},
      {"speed_quartiles", a.speedProbes > 0 ? llvm::json::Value(llvm::json::Array{a.speedQ1, a.speedQ3})
                                            : llvm::json::Value(nullptr)},
      {"operators", std::move(ops)}};
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))).str() + "\n";
}

absl::StatusOr<CostModel> loadCostModel(const std::string &path, c10::Device device,
                                        const std::set<std::string> &excluded) {
  auto db = CostDatabase::open(path, /*create=*/false);
  if (!db.ok())
    return db.status();
  MachineInfo here = MachineInfo::current(device);
  auto id = (*db)->findMachine(here);
  if (!id.ok())
    return id.status();
  if (!*id) {
    auto all = (*db)->machines();
    std::string known;
    if (all.ok())
      for (const auto &[i, m] : *all)
        absl::StrAppend(&known, known.empty() ? "" : "; ", m.describe());
    return absl::NotFoundError(absl::StrCat(path, ": no measurements made on ", here.describe(),
                                            known.empty() ? "" : "; it has ", known,
                                            " (measure with graph-opt-costdb measure here)"));
  }
  auto entries = (*db)->entries(**id);
  if (!entries.ok())
    return entries.status();
  return CostModel(std::move(*entries), excluded, here.describe());
}

} // namespace graphopt
