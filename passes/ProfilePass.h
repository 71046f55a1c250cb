//===- ProfilePass.h - Measured per-node time and memory as a pass -*- C++ -*-===//
//
// Computes the profile analysis (include/graphopt/Analysis/Profile.h): warm-up
// runs, then measured runs from identical state, per-node medians and the
// μ-TWO activation metrics. With a report directory it writes, as one set
// (all files or none), node_stats.csv, activation_stats.csv, profile.json and
// trace.json (ProfileReport.h). Options: warmup (default 1), runs (default 5),
// memory-limit (a line on the plots; bytes, e.g. 2GiB), db (an operator cost
// database, docs/CostDB.md: each node is also predicted from it and the step
// attributed, printed with the pass reports and written as attribution.csv and
// attribution.json). It changes nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/Attribution.h"
#include "graphopt/Analysis/Profile.h"
#include "graphopt/Pass/Pass.h"

namespace graphopt {

class ProfilePass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "profile"; }
  static llvm::StringRef passDescription() {
    return "measured per-node time and memory (medians), μ-TWO activation metrics, reports";
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::Status analyze(const Graph &graph, AnalysisManager &analyses) override;
  void printReport(llvm::raw_ostream &os) const override;

protected:
  absl::Status validateOptions() override;
  void reset() override { attribution_.reset(); }

private:
  PassOption<unsigned> warmup_{this, "warmup", "runs before measuring, not counted", 1};
  PassOption<unsigned> runs_{this, "runs", "measured runs; each node's median is reported", 5};
  PassOption<MemoryAmount> memoryLimit_{
      this, "memory-limit", "a memory limit to draw on the plots (bytes; 0: none)",
      MemoryAmount::bytes(0)};
  PassOption<Bandwidth> swapBandwidth_{
      this, "swap-bandwidth",
      "copy bandwidth between device and host, each way, for activation_stats.csv's swap_time_s "
      "(default: a nominal PCIe 3.0 x16)",
      Bandwidth{12e9}};
  PassOption<std::string> db_{this, "db",
                              "an operator cost database: predict each node from it and attribute "
                              "the measured step (graph-opt-costdb measure makes one)",
                              ""};
  std::optional<StepAttribution> attribution_;
  std::string graphName_;
};

} // namespace graphopt
