//===- GraphOptimizer.h - Running a pipeline of passes ------------*- C++ -*-===//
//
// Runs each pass as analyze -> transform -> the pass's verify -> the
// structural verifier (always after a change; after every pass with
// verifyEach). Instrumentation: print the graph after every pass or after
// named ones, time the passes, collect statistics. A failure says which pass
// failed after which passes and, given a reproducer directory, writes the
// graph as it was before the failing pass plus a script that replays it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/Pipeline.h"

#include <llvm/Support/raw_ostream.h>

#include <set>

namespace graphopt {

struct OptimizerOptions {
  bool verifyEach = false;
  bool printAfterAll = false;
  std::set<std::string> printAfter;
  bool timePasses = false;
  /// Where to write a reproducer when a pass fails ("" = nowhere).
  std::string reproducerDir;
  /// Where passes write their reports ("" = nowhere).
  std::string reportDir;
  /// Where instrumentation output goes (graphs, timing); stderr by default.
  llvm::raw_ostream *out = nullptr;
};

struct PassTiming {
  std::string pass;
  double seconds = 0;
  bool changed = false;
};

class GraphOptimizer {
public:
  explicit GraphOptimizer(OptimizerOptions options = {}) : options_(std::move(options)) {}

  /// Builds the passes of a textual pipeline from the registry.
  absl::Status addPipeline(llvm::StringRef pipeline);
  void addPass(std::unique_ptr<OptimizationPass> pass) { passes_.push_back(std::move(pass)); }
  /// The pipeline as text, parseable again.
  std::string pipelineText() const;

  /// Runs every pass in order; returns whether any changed the graph.
  absl::StatusOr<bool> run(Graph &graph);

  const std::vector<std::unique_ptr<OptimizationPass>> &passes() const { return passes_; }
  const std::vector<PassTiming> &timings() const { return timings_; }
  AnalysisManager &analyses() { return analyses_; }
  void printTimings(llvm::raw_ostream &os) const;
  void printStatistics(llvm::raw_ostream &os) const;

private:
  absl::Status failure(const Graph &before, size_t passIndex, const absl::Status &cause);

  OptimizerOptions options_;
  std::vector<std::unique_ptr<OptimizationPass>> passes_;
  std::vector<PassTiming> timings_;
  AnalysisManager analyses_;
};

} // namespace graphopt
