//===- AnalysisManager.h - Cached analysis results ---------------*- C++ -*-===//
//
// An analysis is a struct with
//   static llvm::StringRef analysisName();
//   using Result = ...;
//   static absl::StatusOr<Result> run(const Graph &graph);
// `get<A>(graph)` computes it once and caches the result until a pass changes
// the graph, when the GraphOptimizer calls `invalidate()`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <map>
#include <memory>
#include <string>

namespace graphopt {

class AnalysisManager {
public:
  template <typename A> absl::StatusOr<const typename A::Result *> get(const Graph &graph) {
    std::string key = A::analysisName().str();
    auto it = results_.find(key);
    if (it != results_.end() && it->second.graph == &graph)
      return static_cast<const typename A::Result *>(it->second.result.get());
    auto result = A::run(graph);
    if (!result.ok())
      return result.status();
    ++computations_;
    auto stored = std::make_shared<typename A::Result>(std::move(*result));
    results_[key] = {&graph, stored};
    return stored.get();
  }

  /// Drops every cached result (the graph changed).
  void invalidate() { results_.clear(); }
  bool isCached(llvm::StringRef analysisName) const { return results_.count(analysisName.str()) != 0; }
  /// How many times an analysis was computed (not served from the cache).
  size_t computations() const { return computations_; }

private:
  struct Cached {
    const Graph *graph;
    std::shared_ptr<void> result;
  };
  std::map<std::string, Cached> results_;
  size_t computations_ = 0;
};

} // namespace graphopt
