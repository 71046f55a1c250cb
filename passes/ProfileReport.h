//===- ProfileReport.h - The profile's files: CSV, JSON, Chrome trace -*- C++ -*-===//
//
// Writes a ProfileResult into a directory as one set (all or none, through
// writeFilesAtomically): node_stats.csv and activation_stats.csv (the columns
// docs/Profiling.md describes, exactly), profile.json (the same rows plus each
// node's operator, module path, source line and live memory by kind, and the
// step's summary) and trace.json (Chrome trace event format: one slice per
// node and memory counter tracks; opens in Perfetto UI and chrome://tracing).
// tools/report/make_report.py draws report.html from profile.json.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Analysis/Profile.h"
#include "graphopt/Support/FileIO.h"

#include <absl/status/status.h>

namespace graphopt {

struct ProfileReportOptions {
  int64_t memoryLimitBytes = 0; ///< drawn on the plots; 0: none
  /// Copy bandwidth between device and host, each way, for swap_time_s.
  double swapBytesPerSecond = 12e9;
};

/// The profile's report files, and `extra` ones written with them (the
/// attribution of profile{db=}), as one set: all of them or none.
absl::Status writeProfileReports(const Graph &graph, const ProfileResult &profile,
                                 llvm::StringRef dir, const ProfileReportOptions &options,
                                 llvm::ArrayRef<FileToWrite> extra = {});

} // namespace graphopt
