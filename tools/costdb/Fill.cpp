//===- Fill.cpp - The cost database filled until a model is predicted -----===//
#include "Fill.h"

#include "graphopt/Cost/Attribution.h"
#include "graphopt/Analysis/ModelRun.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <chrono>

namespace graphopt {

absl::StatusOr<const ProfileResult *>
profileForAttribution(ImportedModel &model, llvm::StringRef path, c10::Device device, unsigned runs,
                      AnalysisManager &analyses, std::function<absl::Status(unsigned)> beforeRun) {
  const Graph &graph = *model.graph;
  ModelRunOptions options;
  options.device = device;
  auto context =
      makeModelExecutionContext(graph, graph, model.weights, model.exampleInputs, options);
  if (!context.ok())
    return absl::Status(context.status().code(),
                        absl::StrCat(path.str(), ": ", context.status().message()));
  analyses.setExecutionContextProvider(
      [context = *context]() -> absl::StatusOr<ExecutionContext> { return context; });
  ProfileAnalysis::Options popts;
  popts.runs = runs;
  popts.beforeRun = std::move(beforeRun);
  auto result = analyses.getResult<ProfileAnalysis>(graph, popts);
  if (!result.ok())
    return absl::Status(result.status().code(),
                        absl::StrCat(path.str(), ": ", result.status().message()));
  return *result;
}

namespace {

/// A configuration of the model that misses: its nodes' measured time.
struct Miss {
  const Node *node = nullptr; ///< its first node: the configuration is taken from it
  double seconds = 0;
  int64_t nodes = 0;
};

/// Where the model's measured node time that misses stands.
struct Misses {
  std::vector<Miss> measurable; ///< by configuration, most time first
  double exactButOff = 0;       ///< measured exactly, still off: in-step context
  double unmeasurable = 0;      ///< no configuration (collective, data-dependent operand)
  double triedAndFailed = 0;    ///< measured this run but did not run
};

Misses missesOf(const StepAttribution &a, const std::set<std::string> &tried) {
  Misses m;
  llvm::StringMap<size_t> index;
  for (const NodeAttribution &n : a.nodes) {
    if (n.measuredSeconds <= 0 || n.accurate(a.tolerance))
      continue;
    if (n.how == CostModel::How::Exact || n.how == CostModel::How::InStep) {
      m.exactButOff += n.measuredSeconds;
      continue;
    }
    if (n.configKey.empty()) {
      m.unmeasurable += n.measuredSeconds;
      continue;
    }
    if (tried.count(n.configKey)) {
      m.triedAndFailed += n.measuredSeconds;
      continue;
    }
    auto [it, fresh] = index.try_emplace(n.configKey, m.measurable.size());
    if (fresh)
      m.measurable.push_back({n.node, 0, 0});
    m.measurable[it->second].seconds += n.measuredSeconds;
    ++m.measurable[it->second].nodes;
  }
  std::stable_sort(m.measurable.begin(), m.measurable.end(),
                   [](const Miss &x, const Miss &y) { return x.seconds > y.seconds; });
  return m;
}

std::string ms(double seconds) { return llvm::formatv("{0:f3} ms", seconds * 1e3).str(); }

/// What one round of the loop measured.
struct RoundCounts {
  size_t measured = 0, neighbours = 0, failed = 0;
  double covered = 0; ///< the missed time of the configurations measured
};

/// A round's measuring step: the configurations that miss most (up to --per-round), each
/// with its neighbours, until the time budget is spent.
absl::StatusOr<RoundCounts> measureMisses(const Misses &last, const std::string &modelPath,
                                          const std::string &source,
                                          const std::string &neighbourSource,
                                          ConfigMeasurer &measurer, const FillOptions &options,
                                          llvm::function_ref<double()> elapsed,
                                          std::set<std::string> &tried, llvm::raw_ostream &os) {
  RoundCounts now;
  for (size_t i = 0; i < last.measurable.size() && i < options.perRound; ++i) {
    if (elapsed() >= options.budgetSeconds)
      break;
    const Miss &miss = last.measurable[i];
    auto config = operatorConfigOf(*miss.node); // had a key in attributeStep: it has one
    if (!config.ok())
      return config.status();
    tried.insert(config->key);
    os << llvm::formatv("  {0,-40} {1,4} nodes, {2,12} missed\n", config->op,
                        std::to_string(miss.nodes), ms(miss.seconds));
    auto outcome = measurer.measure(*config, source, miss.nodes, modelPath);
    if (!outcome.ok())
      return outcome.status();
    now.covered += miss.seconds;
    now.measured += *outcome != ConfigMeasurer::Outcome::Failed;
    now.failed += *outcome == ConfigMeasurer::Outcome::Failed;
    if (!options.neighbours)
      continue;
    for (const OperatorConfig &n : neighbourConfigs(*config, options.neighbourOptions)) {
      if (elapsed() >= options.budgetSeconds)
        break;
      auto o = measurer.measure(n, neighbourSource, 0, modelPath);
      if (!o.ok())
        return o.status();
      now.neighbours += *o == ConfigMeasurer::Outcome::Measured;
      now.failed += *o == ConfigMeasurer::Outcome::Failed;
    }
  }
  return now;
}

/// The loop's last report where the target was not met: where the missed time stands.
void printNotMet(const Misses &last, const FillOptions &options, llvm::raw_ostream &os) {
  os << llvm::formatv("not met: {0} of node time measured exactly but off by more than {1:f0}% "
                      "in the step (it runs at another speed there than alone: measure "
                      "--in-step records such times), {2} "
                      "unmeasurable, {3} that did not run, {4} not measured yet\n",
                      ms(last.exactButOff), 100 * options.tolerance, ms(last.unmeasurable),
                      ms(last.triedAndFailed), [&] {
                        double s = 0;
                        for (const Miss &m : last.measurable)
                          s += m.seconds;
                        return ms(s);
                      }());
}

} // namespace

absl::StatusOr<FillResult> fillDatabase(const std::string &dbPath, const std::string &modelPath,
                                        c10::Device device, ConfigMeasurer &measurer,
                                        const FillOptions &options, llvm::raw_ostream &os) {
  auto imported = importModel(modelPath);
  if (!imported.ok())
    return imported.status();
  const Graph &graph = *imported->graph;
  AnalysisManager analyses;
  auto profile =
      profileForAttribution(*imported, modelPath, device, options.profileRuns, analyses);
  if (!profile.ok())
    return profile.status();
  std::string source =
      options.source.empty() ? llvm::sys::path::stem(modelPath).str() : options.source;
  std::string neighbourSource = source + ":neighbours";
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  os << llvm::formatv("{0}: {1} nodes, measured step {2}, node time {3}; target: {4:f0}% of "
                      "the node time within {5:f0}%\n",
                      modelPath, std::to_string(graph.numNodes()), ms((*profile)->stepSeconds),
                      ms((*profile)->sumNodeSeconds), 100 * options.target,
                      100 * options.tolerance);

  FillResult result;
  std::set<std::string> tried;
  Misses last;
  for (unsigned round = 0;; ++round) {
    auto model = loadCostModel(dbPath, device, {});
    if (!model.ok())
      return model.status();
    StepAttribution a = attributeStep(graph, *model, *profile, options.tolerance);
    result.accurateShare = a.accurateShare();
    last = missesOf(a, tried);
    os << llvm::formatv("round {0}: accurate {1:f1}% ({2} of {3} nodes), predicted/measured step "
                        "{4:f3}, from {5} measurements\n",
                        std::to_string(round), 100 * a.accurateShare(), std::to_string(a.accurateNodes),
                        std::to_string(a.nodes.size()),
                        std::max(a.predictedOverMeasured(), 0.0),
                        std::to_string(a.entries));
    if (a.accurateShare() >= options.target) {
      result.targetMet = true;
      os << "target met\n";
      break;
    }
    if (round == options.maxRounds) {
      os << "stopped: " << options.maxRounds << " rounds (--rounds)\n";
      break;
    }
    if (elapsed() >= options.budgetSeconds) {
      os << llvm::formatv("stopped: the time budget ({0:f0} s, --time-budget) is spent\n",
                          options.budgetSeconds);
      break;
    }
    if (last.measurable.empty()) {
      os << "stopped: nothing left that measuring can fix\n";
      break;
    }
    auto now = measureMisses(last, modelPath, source, neighbourSource, measurer, options, elapsed,
                             tried, os);
    if (!now.ok())
      return now.status();
    result.measured += now->measured;
    result.neighboursMeasured += now->neighbours;
    result.failed += now->failed;
    os << llvm::formatv("  measured {0} configurations carrying {1} of missed time, {2} "
                        "neighbours{3}; {4:f1} s so far\n",
                        std::to_string(now->measured), ms(now->covered),
                        std::to_string(now->neighbours),
                        now->failed ? absl::StrCat(", ", now->failed, " did not run") : "",
                        elapsed());
  }
  if (!result.targetMet)
    printNotMet(last, options, os);
  return result;
}

} // namespace graphopt
