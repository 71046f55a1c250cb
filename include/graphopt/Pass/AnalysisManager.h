//===- AnalysisManager.h - Cached analysis results ---------------*- C++ -*-===//
//
// An analysis is a struct with
//   static llvm::StringRef analysisName();
//   using Result = ...;
//   static absl::StatusOr<Result> run(const Graph &graph);
// or, for an analysis that builds on others or needs to run the graph,
//   static absl::StatusOr<Result> run(const Graph &graph, AnalysisManager &analyses);
// `get<A>(graph)` computes it once and caches the result until a pass changes
// the graph, when the GraphOptimizer calls `invalidate()`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/Pass/ExecutionContext.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace graphopt {

class AnalysisManager;

namespace detail {
template <typename A, typename = void> struct RunsWithAnalyses : std::false_type {};
template <typename A>
struct RunsWithAnalyses<A, std::void_t<decltype(A::run(std::declval<const Graph &>(),
                                                       std::declval<AnalysisManager &>()))>>
    : std::true_type {};
} // namespace detail

class AnalysisManager {
public:
  template <typename A> absl::StatusOr<const typename A::Result *> get(const Graph &graph) {
    std::string key = A::analysisName().str();
    auto it = results_.find(key);
    if (it != results_.end() && it->second.graph == &graph)
      return static_cast<const typename A::Result *>(it->second.result.get());
    absl::StatusOr<typename A::Result> result = [&] {
      if constexpr (detail::RunsWithAnalyses<A>::value)
        return A::run(graph, *this);
      else
        return A::run(graph);
    }();
    if (!result.ok())
      return result.status();
    ++computations_;
    auto stored = std::make_shared<typename A::Result>(std::move(*result));
    results_[key] = {&graph, stored};
    return stored.get();
  }

  /// Drops every cached result (the graph changed).
  void invalidate() { results_.clear(); }
  /// Drops one cached result (its inputs changed, e.g. a measurement was added).
  void invalidate(llvm::StringRef analysisName) { results_.erase(analysisName.str()); }
  bool isCached(llvm::StringRef analysisName) const { return results_.count(analysisName.str()) != 0; }
  /// How many times an analysis was computed (not served from the cache).
  size_t computations() const { return computations_; }

  /// What analyses that measure the graph need to run it.
  void setExecutionContext(ExecutionContext context) {
    context_ = std::make_unique<ExecutionContext>(std::move(context));
  }
  /// The same, made only when first asked for: preparing it may cost (seeded
  /// stand-in weights for a whole model) and most pipelines never run the graph.
  using ContextProvider = std::function<absl::StatusOr<ExecutionContext>()>;
  void setExecutionContextProvider(ContextProvider provider) {
    context_.reset();
    provider_ = std::move(provider);
  }
  /// The context, making it on first use; an error when none was given or
  /// making it failed.
  absl::StatusOr<const ExecutionContext *> executionContext() {
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

private:
  struct Cached {
    const Graph *graph;
    std::shared_ptr<void> result;
  };
  std::map<std::string, Cached> results_;
  size_t computations_ = 0;
  std::unique_ptr<ExecutionContext> context_;
  ContextProvider provider_;
};

} // namespace graphopt
