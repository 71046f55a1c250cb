//===- AnalysisManager.h - Typed, keyed, preservable analysis results -*- C++ -*-===//
//
// An analysis is a struct (LLVM's new pass manager is the model):
//
//   struct LivenessAnalysis {
//     static llvm::StringRef analysisName() { return "liveness"; }
//     using Result = LivenessResult;
//     struct Options {                         // optional
//       bool measuredScratch = false;
//       std::string cacheKey() const;          // equal keys: the same result
//     };
//     static absl::StatusOr<Result> run(const Graph &, AnalysisManager &, const Options &);
//   };
//
// `run` may also be `run(const Graph &)` or `run(const Graph &, AnalysisManager &)`
// for an analysis without options. A result is requested by type and options,
//
//   auto live = am.getResult<LivenessAnalysis>(graph, {/*measuredScratch=*/true});
//
// and cached per graph identity (Graph::uid(), not its address), analysis and
// options key, for the graph's edit epoch (Graph::editEpoch()): a result
// computed before an edit is never served, even if the pass that edited
// forgot to say so. An analysis depends on every analysis it requests from the
// manager while it runs; the manager records that, and drops a result with
// the ones it was computed from. After a pass changed the graph the optimizer
// calls `invalidate(graph, preserved)`: every result not preserved goes, and
// its dependants with it.
//
// A pass that edits may keep a result right instead of dropping it: it asks
// for it with `getResultForUpdate`, tells it each edit (AliasInfo's
// noteReplaced, say), and preserves it. A claim that is wrong would be served
// to every later pass, so an analysis may say how to check one:
//
//     static std::string whyDiffers(const Graph &, const Result &kept,
//                                   const Result &fresh);   // "" when equal
//
// and `checkPreserved` (run after each pass under --verify-each) computes such
// results afresh and compares.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/Pass/ExecutionContext.h"
#include "graphopt/Pass/PreservedAnalyses.h"
#include "graphopt/Pass/ValueReplacements.h"

#include <absl/strings/str_cat.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphopt {

class AnalysisManager;

namespace detail {
template <typename A, typename = void> struct HasOptions : std::false_type {};
template <typename A> struct HasOptions<A, std::void_t<typename A::Options>> : std::true_type {};

template <typename A, typename = void> struct RunsWithAnalyses : std::false_type {};
template <typename A>
struct RunsWithAnalyses<A, std::void_t<decltype(A::run(std::declval<const Graph &>(),
                                                       std::declval<AnalysisManager &>()))>>
    : std::true_type {};

/// The options type of an analysis, or an empty one.
struct NoOptions {
  std::string cacheKey() const { return ""; }
};
template <typename A, bool = HasOptions<A>::value> struct OptionsOf {
  using type = NoOptions;
};
template <typename A> struct OptionsOf<A, true> {
  using type = typename A::Options;
};
} // namespace detail

template <typename A> using AnalysisOptions = typename detail::OptionsOf<A>::type;

namespace detail {
template <typename A, typename = void> struct ComparesResults : std::false_type {};
template <typename A>
struct ComparesResults<A, std::void_t<decltype(A::whyDiffers(
                              std::declval<const Graph &>(), std::declval<const typename A::Result &>(),
                              std::declval<const typename A::Result &>()))>> : std::true_type {};
} // namespace detail

class AnalysisManager {
public:
  /// The result of analysis A with `options` on `graph`, computed on first
  /// request and cached until invalidated. An error from the analysis is
  /// returned and not cached.
  template <typename A>
  absl::StatusOr<const typename A::Result *> getResult(const Graph &graph,
                                                       const AnalysisOptions<A> &options = {}) {
    Key key{graph.uid(), analysisID<A>(), options.cacheKey()};
    // A result computed before the graph was last edited (and not
    // preserved by the pass that edited it) is never served.
    dropStale(graph);
    if (auto it = results_.find(key); it != results_.end()) {
      recordDependant(it->second);
      return static_cast<const typename A::Result *>(it->second.result.get());
    }
    for (const Key &k : computing_)
      if (k == key)
        return absl::InternalError(absl::StrCat("analysis '", A::analysisName().str(),
                                                "' depends on itself"));
    computing_.push_back(key);
    absl::StatusOr<typename A::Result> result = compute<A>(graph, options);
    computing_.pop_back();
    if (!result.ok())
      return result.status();
    ++computations_;
    Entry &e = results_[key];
    e.name = A::analysisName().str();
    e.result = std::make_shared<typename A::Result>(std::move(*result));
    e.sequence = ++sequence_;
    e.epoch = graph.editEpoch();
    if constexpr (detail::ComparesResults<A>::value)
      e.check = [options](const Graph &g, const void *kept) -> absl::StatusOr<std::string> {
        AnalysisManager fresh; // the result again, from nothing cached
        absl::StatusOr<typename A::Result> made = fresh.compute<A>(g, options);
        if (!made.ok())
          return made.status();
        return A::whyDiffers(g, *static_cast<const typename A::Result *>(kept), *made);
      };
    recordDependant(e);
    return static_cast<const typename A::Result *>(e.result.get());
  }

  /// The same result, for a pass that keeps it right while it edits (telling
  /// it each edit) and then preserves it. A pass that edits without keeping
  /// it right must not preserve it (it is dropped after the pass's change).
  template <typename A>
  absl::StatusOr<typename A::Result *> getResultForUpdate(const Graph &graph,
                                                          const AnalysisOptions<A> &options = {}) {
    auto result = getResult<A>(graph, options);
    if (!result.ok())
      return result.status();
    return const_cast<typename A::Result *>(*result);
  }
  /// The cached result for update, or null; never computes.
  template <typename A>
  typename A::Result *getCachedResultForUpdate(const Graph &graph,
                                               const AnalysisOptions<A> &options = {}) {
    return const_cast<typename A::Result *>(getCachedResult<A>(graph, options));
  }

  /// The cached result, or null; never computes.
  template <typename A>
  const typename A::Result *getCachedResult(const Graph &graph,
                                            const AnalysisOptions<A> &options = {}) const {
    auto it = results_.find(Key{graph.uid(), analysisID<A>(), options.cacheKey()});
    return it == results_.end() || it->second.epoch != graph.editEpoch()
               ? nullptr
               : static_cast<const typename A::Result *>(it->second.result.get());
  }
  template <typename A>
  bool isCached(const Graph &graph, const AnalysisOptions<A> &options = {}) const {
    return getCachedResult<A>(graph, options) != nullptr;
  }
  /// The most recently computed cached result of A on `graph`, whatever its
  /// options (e.g. the liveness the pipeline computed, for the driver's report).
  template <typename A> const typename A::Result *getLatestCachedResult(const Graph &graph) const {
    const Entry *latest = nullptr;
    for (const auto &[key, entry] : results_)
      if (key.graph == graph.uid() && key.analysis == analysisID<A>() &&
          entry.epoch == graph.editEpoch() && (!latest || entry.sequence > latest->sequence))
        latest = &entry;
    return latest ? static_cast<const typename A::Result *>(latest->result.get()) : nullptr;
  }

  /// Drops every result on `graph` that `preserved` does not keep, and every
  /// result computed from one dropped.
  void invalidate(const Graph &graph, const PreservedAnalyses &preserved);
  /// Drops every result on `graph`.
  void invalidate(const Graph &graph) { invalidate(graph, PreservedAnalyses::none()); }
  /// Computes afresh every result on `graph` that `preserved` kept and whose
  /// analysis can compare results (`whyDiffers`), and returns an error naming
  /// the first that differs from the one kept: a wrong preservation claim.
  absl::Status checkPreserved(const Graph &graph, const PreservedAnalyses &preserved) const;
  /// Drops everything.
  void clear() {
    results_.clear();
    retired_.clear();
  }
  /// Frees the results dropped as stale while a pass ran: the pass may still
  /// hold pointers to them until it returns (the pass manager calls this
  /// after each pass).
  void releaseRetired() { retired_.clear(); }

  /// How many results are cached (all graphs).
  size_t numCached() const { return results_.size(); }
  /// How many times an analysis was computed (not served from the cache).
  size_t computations() const { return computations_; }

  /// The equal values the passes run with this manager replaced in `graph`
  /// (cse's merges, canonicalize's folds), recorded as they made them: a
  /// run's record, kept across passes and never invalidated.
  ValueReplacements &replacements(const Graph &graph) { return replacements_[graph.uid()]; }
  const ValueReplacements *replacementsIfAny(const Graph &graph) const {
    auto it = replacements_.find(graph.uid());
    return it == replacements_.end() ? nullptr : &it->second;
  }

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
  absl::StatusOr<const ExecutionContext *> executionContext();
  /// The context with weights, and `graph`'s example inputs, for an analysis
  /// that runs `graph`; an error starts "`purpose` runs the graph: ".
  struct RunSetup {
    const ExecutionContext *context = nullptr;
    std::vector<at::Tensor> inputs;
  };
  absl::StatusOr<RunSetup> setupToRun(const Graph &graph, llvm::StringRef purpose);

private:
  template <typename A>
  absl::StatusOr<typename A::Result> compute(const Graph &graph, const AnalysisOptions<A> &options) {
    if constexpr (detail::HasOptions<A>::value)
      return A::run(graph, *this, options);
    else if constexpr (detail::RunsWithAnalyses<A>::value)
      return A::run(graph, *this);
    else
      return A::run(graph);
  }

  struct Key {
    uint64_t graph;
    AnalysisID analysis;
    std::string options;
    bool operator==(const Key &o) const {
      return graph == o.graph && analysis == o.analysis && options == o.options;
    }
    bool operator<(const Key &o) const {
      return std::tie(graph, analysis, options) < std::tie(o.graph, o.analysis, o.options);
    }
  };
  struct Entry {
    std::string name;
    std::shared_ptr<void> result;
    uint64_t sequence = 0;
    uint64_t epoch = 0;       ///< Graph::editEpoch() the result is right for
    std::set<Key> dependants; ///< results computed from this one
    /// Computes the result afresh and says how the kept one differs ("" when
    /// it does not); empty for an analysis that cannot compare.
    std::function<absl::StatusOr<std::string>(const Graph &, const void *kept)> check;
  };

  /// While an analysis runs, the results it asks for gain it as a dependant.
  void recordDependant(Entry &requested) {
    if (!computing_.empty())
      requested.dependants.insert(computing_.back());
  }
  /// Drops every result on `graph` computed before its last edit.
  void dropStale(const Graph &graph);
  /// Drops the entries `pred` selects and, transitively, their dependants.
  void dropWhere(const std::function<bool(const Key &)> &pred);

  std::map<Key, Entry> results_;
  std::vector<std::shared_ptr<void>> retired_; ///< dropped, kept alive until releaseRetired
  std::vector<Key> computing_; ///< the analyses being computed, innermost last
  size_t computations_ = 0;
  uint64_t sequence_ = 0;
  std::unique_ptr<ExecutionContext> context_;
  std::map<uint64_t, ValueReplacements> replacements_; ///< by Graph::uid()
  ContextProvider provider_;
};

} // namespace graphopt
