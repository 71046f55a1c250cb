//===- SpeedCalibration.cpp - How fast the machine runs now ----------------===//
#include "graphopt/Cost/SpeedCalibration.h"

#include "graphopt/IR/Parser.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cmath>

namespace graphopt {

bool SpeedCalibration::add(const CostEntry *entry, double weight) {
  auto graph = parseGraph(entry->key, absl::StrCat("calibration probe ", entry->op));
  if (!graph.ok())
    return false; // a key this build no longer reads: not a probe
  probes_.push_back({entry, weight, std::move(*graph), {}});
  return true;
}

absl::StatusOr<SpeedCalibration> SpeedCalibration::pick(const CostModel &model, size_t count,
                                                        double maxSeconds) {
  std::vector<const CostEntry *> short_;
  for (const CostEntry &e : model.entries())
    if (e.measured.medianSeconds > 0 && e.measured.medianSeconds <= maxSeconds)
      short_.push_back(&e);
  if (short_.empty() || count == 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "no measurement of at most ", maxSeconds * 1e3, " ms to calibrate the machine's speed with"));
  std::sort(short_.begin(), short_.end(), [](const CostEntry *a, const CostEntry *b) {
    return a->measured.medianSeconds != b->measured.medianSeconds
               ? a->measured.medianSeconds < b->measured.medianSeconds
               : a->key < b->key;
  });
  SpeedCalibration c;
  size_t n = std::min(count, short_.size());
  for (size_t i = 0; i < n; ++i) // evenly spaced ranks, the shortest and the longest included
    c.add(short_[n == 1 ? short_.size() / 2 : i * (short_.size() - 1) / (n - 1)], 1);
  if (c.probes_.empty())
    return absl::FailedPreconditionError("no measured configuration of the database parses");
  return c;
}

absl::StatusOr<SpeedCalibration> SpeedCalibration::pickForStep(const StepAttribution &step,
                                                               size_t count, double maxSeconds) {
  llvm::DenseMap<const CostEntry *, double> carried;
  for (const NodeAttribution &n : step.nodes)
    if (n.nearest && n.predictedSeconds > 0 && n.nearest->measured.medianSeconds > 0 &&
        n.nearest->measured.medianSeconds <= maxSeconds)
      carried[n.nearest] += n.predictedSeconds;
  std::vector<std::pair<const CostEntry *, double>> order(carried.begin(), carried.end());
  std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first->key < b.first->key;
  });
  SpeedCalibration c;
  for (const auto &[entry, weight] : order) {
    if (c.probes_.size() == count)
      break;
    c.add(entry, weight);
  }
  if (c.probes_.empty())
    return absl::FailedPreconditionError(
        "no prediction of the step rests on a measured configuration");
  return c;
}

absl::Status SpeedCalibration::retime(const OperatorTimingOptions &timing) {
  std::vector<Probe> kept;
  for (Probe &p : probes_) {
    auto t = timeGraph(*p.graph, timing, /*meter=*/nullptr);
    if (!t.ok() || !(t->medianSeconds > 0))
      continue;
    p.now.push_back(t->medianSeconds);
    kept.push_back(std::move(p));
  }
  probes_ = std::move(kept);
  if (probes_.empty())
    return absl::FailedPreconditionError("none of the calibration probes ran");
  return absl::OkStatus();
}

double SpeedCalibration::quantile(double q) const {
  // (ratio, weight) of each probe timed, sorted; the first ratio where the
  // cumulative weight reaches q of the total.
  std::vector<std::pair<double, double>> r;
  double total = 0;
  for (const Probe &p : probes_) {
    if (p.now.empty())
      continue;
    double logSum = 0;
    for (double t : p.now)
      logSum += std::log(t);
    r.emplace_back(std::exp(logSum / static_cast<double>(p.now.size())) /
                       p.entry->measured.medianSeconds,
                   p.weight);
    total += p.weight;
  }
  if (r.empty() || !(total > 0))
    return 1;
  std::sort(r.begin(), r.end());
  double cumulative = 0;
  for (const auto &[ratio, weight] : r) {
    cumulative += weight;
    if (cumulative >= q * total)
      return ratio;
  }
  return r.back().first;
}

} // namespace graphopt
