//===- ProfilePass.cpp - Measured per-node time and memory as a pass ------===//
#include "ProfilePass.h"
#include "ProfileReport.h"

#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Support/FileIO.h"

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
  if (!db_.get().empty()) {
    auto context = analyses.executionContext();
    if (!context.ok())
      return context.status();
    auto model = loadCostModel(db_.get(), (*context)->device, {});
    if (!model.ok())
      return model.status();
    attribution_ = attributeStep(graph, *model, &p);
    graphName_ = graph.name().str();
    setStatistic("step time (us, predicted by the cost database)",
                 static_cast<int64_t>(attribution_->predictedSeconds * 1e6));
    setStatistic("step attributed by the cost database (%)",
                 static_cast<int64_t>(100 * attribution_->explainedShare()));
  }
  if (reportDirectory().empty())
    return absl::OkStatus();
  ProfileReportOptions options;
  options.memoryLimitBytes = memoryLimit_.get().byteValue();
  options.swapBytesPerSecond = swapBandwidth_.get().bytesPerSecond;
  std::string csv, json; // the attribution, written with the profile's files as one set
  std::vector<FileToWrite> attribution;
  if (attribution_) {
    csv = attributionCsv(*attribution_);
    json = attributionJson(*attribution_, graphName_);
    attribution = {{"attribution.csv", csv}, {"attribution.json", json}};
  }
  return writeProfileReports(graph, p, reportDirectory(), options, attribution);
}

void ProfilePass::printReport(llvm::raw_ostream &os) const {
  if (!attribution_)
    return;
  os << "profile @" << graphName_ << " against the cost database " << db_.get() << ":\n";
  printAttribution(os, *attribution_);
}

GRAPHOPT_REGISTER_PASS(ProfilePass);

} // namespace graphopt
