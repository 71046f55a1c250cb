//===- GraphOptimizer.h - Running a pipeline of passes ------------*- C++ -*-===//
//
// Runs each pass as analyze -> transform -> the pass's verify -> the
// structural verifier (always after a change; after every pass with
// verifyEach). After a change, the cached analyses the pass did not preserve
// are dropped. Instrumentation: print the graph after every pass or after
// named ones, time the passes (apart from the verifier), collect statistics.
// A failure says which pass failed after which passes and, given a reproducer
// directory, writes a script that replays the pipeline up to and including
// the failing pass on the pipeline's input: the input file when the caller
// names it (nothing is copied while passes run), otherwise one copy of the
// graph taken when the pipeline starts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/Pipeline.h"

#include <llvm/Support/raw_ostream.h>

#include <set>

namespace graphopt {

class AliasInfo;

struct OptimizerOptions {
  bool verifyEach = false;
  bool printAfterAll = false;
  std::set<std::string> printAfter;
  bool timePasses = false;
  /// Where to write a reproducer when a pass fails ("" = nowhere).
  std::string reproducerDir;
  /// The file the graph was read from, which a reproducer replays the
  /// pipeline on; "" = keep a copy of the graph as the pipeline starts.
  std::string inputPath;
  /// Where passes write their reports ("" = nowhere).
  std::string reportDir;
  /// Where the passes write their reports while the pipeline runs, when it is
  /// not reportDir: the driver stages them and moves them into reportDir with
  /// the graph at the end, so a failure leaves no report behind. Reproducer
  /// commands name reportDir.
  std::string reportStagingDir;
  /// Keep a copy of the graph after the last pass that changes what the step
  /// computes (add-optimizer), for --verify to compare against.
  bool keepVerificationBaseline = false;
  /// Where instrumentation output goes (graphs, timing); stderr by default.
  llvm::raw_ostream *out = nullptr;
};

struct PassTiming {
  std::string pass;
  unsigned depth = 0;       ///< 0: a pipeline entry; 1: a pass run by a group (repeat), ...
  double seconds = 0;       ///< analyze, transform and the pass's own verify
  double verifySeconds = 0; ///< the structural verifier after it
  bool changed = false;
};

class GraphOptimizer : private PassRunner {
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
  const OptimizerOptions &options() const { return options_; }
  const std::vector<PassTiming> &timings() const { return timings_; }
  AnalysisManager &analyses() { return analyses_; }
  /// With keepVerificationBaseline: the graph as the last pass that changes
  /// what the step computes left it, and that pass's name; null when no such
  /// pass ran (verify against the pipeline's input).
  const Graph *verificationBaseline() const { return baseline_.get(); }
  const std::string &verificationBaselinePass() const { return baselinePass_; }
  void printTimings(llvm::raw_ostream &os) const;
  void printStatistics(llvm::raw_ostream &os) const;
  /// Every pass's report for people (OptimizationPass::printReport), nested ones included.
  void printReports(llvm::raw_ostream &os) const;

private:
  absl::StatusOr<bool> runPass(OptimizationPass &pass, Graph &graph) override;
  absl::StatusOr<std::unique_ptr<OptimizationPass>> createPass(const PipelineEntry &entry);
  absl::Status failure(const Graph *start, size_t passIndex, const absl::Status &cause);
  /// `graph-opt '<input>' -passes='<the pipeline up to passIndex>' --verify-each -S`.
  std::string reproduceCommand(llvm::StringRef input, size_t passIndex) const;
  /// An error when the pass just run made two graph outputs share storage
  /// that did not before (AliasAnalysis.h, outputsSharingStorage).
  absl::Status checkOutputSharing(const Graph &graph);
  /// The graph's storage roots, from the analysis cache.
  const AliasInfo &cachedStorageRoots(const Graph &graph);
  /// For a crash's stack dump: the pass running, and how to reproduce.
  std::string crashContext(const Graph &graph, size_t passIndex) const;

  OptimizerOptions options_;
  std::vector<std::unique_ptr<OptimizationPass>> passes_;
  std::vector<PassTiming> timings_;
  AnalysisManager analyses_;
  unsigned depth_ = 0; ///< how deep in groups the pass being run is
  /// Which graph outputs share storage, for the graph and edit epoch it was
  /// computed on (a pass that changed nothing leaves it right for the next).
  struct OutputSharing {
    uint64_t graph = 0, epoch = 0; ///< Graph::uid() (0: none yet), Graph::editEpoch()
    size_t outputs = 0;
    std::set<std::pair<unsigned, unsigned>> pairs;
  };
  OutputSharing outputSharing_;
  std::unique_ptr<Graph> baseline_;
  std::string baselinePass_;
};

} // namespace graphopt
