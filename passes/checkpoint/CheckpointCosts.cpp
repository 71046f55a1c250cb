//===- CheckpointCosts.cpp - What each node costs the checkpoint planners -===//
#include "checkpoint/CheckpointCosts.h"

#include "checkpoint/FlopCost.h"
#include "checkpoint/InductorCost.h"

#include "graphopt/Cost/Attribution.h"
#include "graphopt/Analysis/MeasuredScratch.h"
#include "graphopt/Analysis/Profile.h"
#include "graphopt/Runtime/CudaBackend.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/MapVector.h>

#include <cstdlib>

namespace graphopt {

std::string costDatabasePath(const CostOptions &options) {
  std::string path = options.db;
  if (path.empty() && options.cost == CostSource::Db)
    if (const char *env = std::getenv("GRAPHOPT_COSTDB"))
      path = env;
  return path;
}

namespace {

/// cost=db: each node's time predicted by the cost database, the FLOP
/// model's where it has none (said in `source`). `predicted` gets the
/// database's own prediction per rank (none where the FLOP model priced it).
absl::StatusOr<std::vector<double>>
databaseNodeSeconds(const Graph &graph, const CostOptions &options, std::string &source,
                    std::vector<std::optional<double>> &predicted) {
  std::string path = costDatabasePath(options);
  if (path.empty())
    return absl::InvalidArgumentError(
        "cost=db needs the database: db=FILE or $GRAPHOPT_COSTDB (graph-opt-costdb measure makes "
        "one)");
  // The device graph-opt runs on by default; nothing runs here, so the model
  // may be too large for this machine.
  auto model = loadCostModel(path, defaultDevice(), {});
  if (!model.ok())
    return model.status();
  StepAttribution attributed = attributeStep(graph, *model, nullptr);
  std::vector<double> seconds;
  llvm::MapVector<llvm::StringRef, size_t> missing;
  for (const NodeAttribution &n : attributed.nodes) {
    predicted.push_back(n.how != CostModel::How::Missing
                               ? std::optional<double>(n.predictedSeconds)
                               : std::nullopt);
    if (n.how != CostModel::How::Missing) {
      seconds.push_back(n.predictedSeconds);
      continue;
    }
    // Not in the database: the FLOP model, said so in the report.
    seconds.push_back(estimateFlops(*n.node) / kNominalFlopsPerSecond);
    ++missing[n.op];
  }
  source = absl::StrCat("db: ", path, " (", attributed.machine, "): ", attributed.predictedNodes,
                                " nodes predicted, ", attributed.exactNodes, " measured exactly");
  if (!missing.empty()) {
    std::vector<std::string> ops;
    for (auto &[op, count] : missing)
      ops.push_back(absl::StrCat(op.str(), " x", count));
    absl::StrAppend(&source, "; from the FLOP model (not in the database): ",
                    absl::StrJoin(ops, ", "));
  }
  return seconds;
}

} // namespace

absl::StatusOr<NodeCosts> checkpointNodeCosts(const Graph &graph, AnalysisManager &analyses,
                                              const CostOptions &options) {
  NodeCosts costs;
  if (options.cost == CostSource::Profile) {
    auto profile = analyses.getResult<ProfileAnalysis>(graph);
    if (!profile.ok())
      return absl::Status(profile.status().code(),
                          absl::StrCat(profile.status().message(),
                                       " (checkpoint{cost=flops} plans without running the graph)"));
    for (const NodeStats &s : (*profile)->nodes) {
      costs.seconds.push_back(s.seconds);
      costs.scratch.push_back(s.scratchBytes);
    }
    costs.source = absl::StrCat("profile: median of ", (*profile)->measuredRuns, " runs on ",
                                  (*profile)->device);
    costs.stepSeconds = (*profile)->stepSeconds;
    costs.pricedBy.assign(costs.seconds.size(), "profile");
  } else if (options.cost == CostSource::Db) {
    std::vector<std::optional<double>> fromDb;
    auto predicted = databaseNodeSeconds(graph, options, costs.source, fromDb);
    if (!predicted.ok())
      return predicted.status();
    costs.seconds = std::move(*predicted);
    for (const std::optional<double> &s : fromDb)
      costs.pricedBy.push_back(s ? "db" : "flops (not in the db)");
  } else if (options.cost == CostSource::Inductor) {
    std::vector<std::optional<double>> fromDb;
    std::string dbSource;
    if (!costDatabasePath(options).empty()) {
      auto predicted = databaseNodeSeconds(graph, options, costs.source, fromDb);
      if (!predicted.ok())
        return predicted.status();
      dbSource = std::move(costs.source);
    }
    const MachineRates &rates = measuredCpuRates();
    InductorPrices prices = inductorNodeSeconds(graph, rates, fromDb.empty() ? nullptr : &fromDb);
    costs.seconds = std::move(prices.seconds);
    for (PriceSource source : prices.sources)
      costs.pricedBy.push_back(priceSourceName(source));
    costs.source = absl::StrFormat(
        "inductor: fusing operators by the bytes they read at %.1f GB/s, matrix products, "
        "convolutions and attention by %sa roofline at %.1f GFLOP/s (rates measured on this "
        "machine's CPU)",
        rates.bytesPerSecond / 1e9, dbSource.empty() ? "" : "the database where it has them, else ",
        rates.flopsPerSecond / 1e9);
    if (!dbSource.empty())
      absl::StrAppend(&costs.source, "; ", dbSource);
  } else {
    costs.seconds = estimatedNodeSeconds(graph);
    costs.source = "flops: estimated at a nominal 100 GFLOP/s";
    costs.pricedBy.assign(costs.seconds.size(), "flops");
  }
  if (options.cost != CostSource::Profile)
    for (double s : costs.seconds)
      costs.stepSeconds += s;
  // Scratch bytes are what a run allocates, not a timing: measured, they are
  // the same in every run, so plans on FLOP costs stay reproducible.
  if (options.scratch == ScratchSource::None) {
    costs.scratch.clear();
  } else if (options.scratch == ScratchSource::Measured && options.cost != CostSource::Profile) {
    auto scratch = analyses.getResult<MeasuredScratchAnalysis>(graph);
    if (!scratch.ok())
      return scratch.status();
    costs.scratch = (*scratch)->bytes;
    absl::StrAppend(&costs.source, "; scratch measured on ", (*scratch)->device);
  }
  return costs;
}

} // namespace graphopt
