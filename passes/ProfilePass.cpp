//===- ProfilePass.cpp - Measured per-node time and memory as a pass ------===//
#include "ProfilePass.h"
#include "ProfileReport.h"

#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>

namespace graphopt {

absl::Status ProfilePass::validateOptions() {
  if (runs_.get() == 0)
    return absl::InvalidArgumentError("runs must be at least 1 (medians of measured runs)");
  if (memoryLimit_.get().isPercent())
    return absl::InvalidArgumentError(
        "memory-limit must be an amount of bytes (e.g. 2GiB), not a share");
  return absl::OkStatus();
}

absl::Status ProfilePass::analyze(const Graph &graph, AnalysisManager &analyses) {
  auto r = analyses.getResult<ProfileAnalysis>(graph, {warmup_.get(), runs_.get()});
  if (!r.ok())
    return r.status();
  const ProfileResult &p = **r;
  setStatistic("peak bytes (measured)", p.peakBytes);
  setStatistic("step time (us, median, unprofiled)", static_cast<int64_t>(p.stepSeconds * 1e6));
  setStatistic("activations", static_cast<int64_t>(p.activations.size()));
  if (reportDirectory().empty())
    return absl::OkStatus();
  ProfileReportOptions options;
  options.memoryLimitBytes = memoryLimit_.get().byteValue();
  options.swapBytesPerSecond = swapBandwidth_.get().bytesPerSecond;
  return writeProfileReports(graph, p, reportDirectory(), options);
}

GRAPHOPT_REGISTER_PASS(ProfilePass);

} // namespace graphopt
