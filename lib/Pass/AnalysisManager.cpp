//===- AnalysisManager.cpp - Invalidation and the execution context -------===//
#include "graphopt/Pass/AnalysisManager.h"

#include <algorithm>

namespace graphopt {

void AnalysisManager::invalidate(const Graph &graph, const PreservedAnalyses &preserved) {
  if (!preserved.areAllPreserved())
    dropWhere(
        [&](const Key &k) { return k.graph == graph.uid() && !preserved.isPreserved(k.analysis); });
  // What the pass preserved is right for the graph as the pass left it.
  for (auto &[key, entry] : results_)
    if (key.graph == graph.uid())
      entry.epoch = graph.editEpoch();
}

absl::Status AnalysisManager::checkPreserved(const Graph &graph,
                                             const PreservedAnalyses &preserved) const {
  for (const auto &[key, entry] : results_) {
    if (key.graph != graph.uid() || !entry.check || !preserved.isPreserved(key.analysis) ||
        entry.epoch != graph.editEpoch())
      continue;
    absl::StatusOr<std::string> why = entry.check(graph, entry.result.get());
    if (!why.ok())
      return why.status();
    if (!why->empty())
      return absl::InternalError(absl::StrCat(
          "it said it preserved analysis '", entry.name,
          "', but the result kept differs from one computed afresh: ", *why));
  }
  return absl::OkStatus();
}

void AnalysisManager::dropStale(const Graph &graph) {
  std::set<Key> stale;
  for (const auto &[key, entry] : results_)
    if (key.graph == graph.uid() && entry.epoch != graph.editEpoch())
      stale.insert(key);
  if (!stale.empty())
    dropWhere([&](const Key &k) { return stale.count(k) != 0; });
}

void AnalysisManager::dropWhere(const std::function<bool(const Key &)> &pred) {
  std::vector<Key> work;
  for (const auto &[key, entry] : results_)
    if (pred(key))
      work.push_back(key);
  while (!work.empty()) {
    Key key = std::move(work.back());
    work.pop_back();
    auto it = results_.find(key);
    if (it == results_.end())
      continue; // dropped already, through another path
    for (const Key &dependant : it->second.dependants)
      work.push_back(dependant);
    retired_.push_back(std::move(it->second.result));
    results_.erase(it);
  }
}

absl::StatusOr<const ExecutionContext *> AnalysisManager::executionContext() {
  if (!context_ && provider_) {
    auto made = provider_();
    if (!made.ok())
      return made.status();
    context_ = std::make_unique<ExecutionContext>(std::move(*made));
    provider_ = nullptr;
  }
  if (!context_)
    return absl::FailedPreconditionError("no weights and example inputs were given to run the graph with");
  return context_.get();
}

absl::StatusOr<AnalysisManager::RunSetup> AnalysisManager::setupToRun(const Graph &graph,
                                                                      llvm::StringRef purpose) {
  auto made = executionContext();
  if (!made.ok() || !(*made)->weights)
    return absl::FailedPreconditionError(absl::StrCat(
        purpose.str(), " runs the graph: ",
        made.ok() ? "no weights were given" : std::string(made.status().message())));
  auto inputs = (*made)->inputsFor(graph);
  if (!inputs.ok())
    return inputs.status();
  return RunSetup{*made, std::move(*inputs)};
}

} // namespace graphopt

namespace graphopt {

absl::StatusOr<std::vector<at::Tensor>> ExecutionContext::inputsFor(const Graph &graph) const {
  if (inputNames.empty())
    return inputs;
  std::vector<at::Tensor> out;
  for (const GraphInput &in : graph.inputs()) {
    if (in.role != InputRole::UserInput)
      continue;
    // Stand-ins and example inputs are tensors; a scalar input has neither.
    if (!in.value->isTensor())
      return absl::FailedPreconditionError(absl::StrCat(
          "graph @", graph.name().str(), " takes the scalar user input %", in.value->name().str(),
          ", and graph-opt runs only graphs whose user inputs are tensors"));
    auto it = std::find(inputNames.begin(), inputNames.end(), in.value->name().str());
    if (it == inputNames.end() || static_cast<size_t>(it - inputNames.begin()) >= inputs.size())
      return absl::FailedPreconditionError(absl::StrCat(
          "graph @", graph.name().str(), " takes user input %", in.value->name().str(),
          ", which the model as read did not have, so there is no example value for it"));
    out.push_back(inputs[it - inputNames.begin()]);
  }
  return out;
}

} // namespace graphopt
