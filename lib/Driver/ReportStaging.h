//===- ReportStaging.h - Reports written with the graph, or not at all -*- C++ -*-===//
//
// The passes write their reports into a private folder while graph-opt works;
// the driver writes them into --report-dir at the very end, in one set with
// the graph and the benchmark JSON (writeFilesAtomically). A failure at any
// step leaves --report-dir as it was. The folder goes with the object.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>

#include <string>
#include <vector>

namespace graphopt {

class ReportStaging {
public:
  ReportStaging() = default;
  ReportStaging(const ReportStaging &) = delete;
  ReportStaging &operator=(const ReportStaging &) = delete;
  ~ReportStaging();

  /// Makes the folder, in the system's temporary directory.
  absl::Status create();
  const std::string &dir() const { return dir_; }
  /// The names and contents of the files staged, in name order.
  absl::Status read(std::vector<std::string> &names, std::vector<std::string> &contents) const;

private:
  std::string dir_;
};

} // namespace graphopt
