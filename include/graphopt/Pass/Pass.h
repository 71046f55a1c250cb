//===- Pass.h - OptimizationPass: analyze, transform, verify ------*- C++ -*-===//
//
// A pass is one small class: `analyze` reads the graph (and may request
// cached analyses), `transform` rewrites it and says whether it changed
// anything, `verify` checks the pass's own postconditions. After a change the
// pass says which analyses it preserved (`preservedAnalyses`; none by
// default). An analysis-only pass keeps the default transform, which changes
// nothing. Options are typed members (PassOption<T>, PassOption.h) that the
// infrastructure fills from the pipeline text (`checkpoint{budget=60%}`);
// statistics are counters (summed) or gauges (the last value) that
// --pass-stats prints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/Pass/PassOption.h"
#include "graphopt/Pass/PassTraits.h"
#include "graphopt/Pass/PreservedAnalyses.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/raw_ostream.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace graphopt {

class AnalysisManager;

/// key=value options of one pipeline entry, in the order written.
using PassOptions = std::vector<std::pair<std::string, std::string>>;

class OptimizationPass {
public:
  virtual ~OptimizationPass() = default;

  virtual llvm::StringRef name() const = 0;
  virtual llvm::StringRef description() const = 0;

  /// Fills the declared options from the pipeline's key=value pairs, then
  /// calls validateOptions(). An error names the pass and the option.
  absl::Status setOptions(const PassOptions &options);
  /// The options as the pipeline would write them: the non-default ones, in
  /// declaration order (for printing pipelines and reproducers).
  PassOptions options() const;
  /// Every declared option (for --list-passes).
  llvm::ArrayRef<PassOptionBase *> declaredOptions() const { return declaredOptions_; }

  virtual absl::Status analyze(const Graph &graph, AnalysisManager &analyses) {
    return absl::OkStatus();
  }
  /// Returns whether the graph changed.
  virtual absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) { return false; }
  /// Asked after a transform that changed the graph: the cached analyses that
  /// are still right. Results not preserved, and results computed from them,
  /// are dropped.
  virtual PreservedAnalyses preservedAnalyses() const { return PreservedAnalyses::none(); }
  /// The pass's own postconditions, checked after transform.
  virtual absl::Status verify(const Graph &graph) { return absl::OkStatus(); }
  /// Whether the pass changes what the step computes on purpose (add-optimizer
  /// appends the optimizer's update): the graph it leaves, not the pipeline's
  /// input, is what the passes after it are verified against.
  virtual bool changesWhatTheStepComputes() const { return false; }
  /// What the last run decided, for people (a table); the driver prints it
  /// after the pipeline. Nothing by default.
  virtual void printReport(llvm::raw_ostream &os) const {}
  /// What the last run decided, as the JSON documents its report files hold,
  /// by report name ("checkpoint" for checkpoint.json): a caller in the same
  /// process (graph_opt.run_pipeline) takes them as values, not from files.
  /// None by default.
  virtual std::vector<std::pair<std::string, std::string>> jsonReports() const { return {}; }

  struct Statistic {
    int64_t value = 0;
    bool gauge = false; ///< set, not summed: a level (peak bytes), not a count
  };
  const std::map<std::string, Statistic> &statistics() const { return statistics_; }

  /// Forgets what earlier runs left: statistics, and the pass's own state
  /// (reset()). GraphOptimizer::run calls it on every pass as it starts, so
  /// each run of a pipeline (a library caller's, a second graph's) reports
  /// what that run did; the rounds of repeat{} are one run.
  void startNewRun() {
    statistics_.clear();
    reset();
  }

  /// Where the pass may write reports (CSV, JSON); "" for none (--report-dir).
  void setReportDirectory(std::string dir) { reportDirectory_ = std::move(dir); }
  const std::string &reportDirectory() const { return reportDirectory_; }
  /// Whether the pipeline checks after every pass (--verify-each): passes
  /// then also check the promises that cost a second analysis (reinplace:
  /// the simulated peak did not rise).
  void setVerifyingEach(bool on) { verifyingEach_ = on; }
  bool verifyingEach() const { return verifyingEach_; }
  /// Where the pass says what a user may want to act on (dce's unused
  /// inputs): OptimizerOptions::out, else stderr.
  void setRemarkStream(llvm::raw_ostream *os) { remarks_ = os; }
  llvm::raw_ostream &remarks() const { return remarks_ ? *remarks_ : llvm::errs(); }

protected:
  /// Drops the state a pass keeps across the rounds of one run (cse's
  /// decisions for cse.csv, dce's remarks already made).
  virtual void reset() {}
  /// Cross-option checks after all options were read (e.g. "a needs b").
  virtual absl::Status validateOptions() { return absl::OkStatus(); }
  /// A count: summed over every run of the pass.
  void addStatistic(const std::string &name, int64_t delta = 1) {
    Statistic &s = statistics_[name];
    s.value += delta;
  }
  /// A level (peak bytes, a ratio in permille): the last value set.
  void setStatistic(const std::string &name, int64_t value) {
    Statistic &s = statistics_[name];
    s.value = value;
    s.gauge = true;
  }

private:
  friend class PassOptionBase;
  std::map<std::string, Statistic> statistics_;
  std::string reportDirectory_;
  bool verifyingEach_ = false;
  llvm::raw_ostream *remarks_ = nullptr;
  std::vector<PassOptionBase *> declaredOptions_;
};

/// Runs one pass as the pipeline does: analyze, transform, drop the analyses
/// it did not preserve, its own verify, the structural verifier, printing and
/// timing. GraphOptimizer is one; passes that run others (PassGroup) get it.
class PassRunner {
public:
  virtual ~PassRunner() = default;
  /// Whether the pass changed the graph; an error is the pass's own, unprefixed.
  virtual absl::StatusOr<bool> runPass(OptimizationPass &pass, Graph &graph) = 0;
};

/// A pass that runs nested passes (`repeat{cse,canonicalize,dce}`): instead of
/// analyze and transform, the runner calls `run`, which runs the nested passes
/// through the runner, so each is verified, invalidates analyses, prints and
/// counts its statistics as a top-level pass would.
class PassGroup : public OptimizationPass {
public:
  void addNested(std::unique_ptr<OptimizationPass> pass) { nested_.push_back(std::move(pass)); }
  const std::vector<std::unique_ptr<OptimizationPass>> &nested() const { return nested_; }

protected:
  void reset() override {
    for (auto &pass : nested_)
      pass->startNewRun();
  }

public:
  /// Runs the group; returns whether the graph changed.
  virtual absl::StatusOr<bool> run(Graph &graph, PassRunner &runner) = 0;

private:
  std::vector<std::unique_ptr<OptimizationPass>> nested_;
};

} // namespace graphopt
