//===- Pass.h - OptimizationPass: analyze, transform, verify ------*- C++ -*-===//
//
// A pass is one small class: `analyze` reads the graph (and may request
// cached analyses), `transform` rewrites it and says whether it changed
// anything, `verify` checks the pass's own postconditions. An analysis-only
// pass keeps the default transform, which changes nothing. Options come from
// the pipeline text (`checkpoint{budget=60%}`); statistics are counters the
// pass bumps and --stats prints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/StringRef.h>

#include <map>
#include <memory>
#include <string>

namespace graphopt {

class AnalysisManager;

/// key=value options of one pipeline entry, in the order written.
using PassOptions = std::vector<std::pair<std::string, std::string>>;

class OptimizationPass {
public:
  virtual ~OptimizationPass() = default;

  virtual llvm::StringRef name() const = 0;
  virtual llvm::StringRef description() const = 0;

  /// Takes the pipeline's options; the default accepts none. An error names the option.
  virtual absl::Status setOptions(const PassOptions &options);
  /// The options as the pipeline would write them (for printing pipelines).
  virtual PassOptions options() const { return {}; }

  virtual absl::Status analyze(const Graph &graph, AnalysisManager &analyses) {
    return absl::OkStatus();
  }
  /// Returns whether the graph changed.
  virtual absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) { return false; }
  /// The pass's own postconditions, checked after transform.
  virtual absl::Status verify(const Graph &graph) { return absl::OkStatus(); }

  const std::map<std::string, int64_t> &statistics() const { return statistics_; }

  /// Where the pass may write reports (CSV, JSON); "" for none (--report-dir).
  void setReportDirectory(std::string dir) { reportDirectory_ = std::move(dir); }
  const std::string &reportDirectory() const { return reportDirectory_; }

protected:
  void addStatistic(const std::string &name, int64_t delta = 1) { statistics_[name] += delta; }

private:
  std::map<std::string, int64_t> statistics_;
  std::string reportDirectory_;
};

} // namespace graphopt
