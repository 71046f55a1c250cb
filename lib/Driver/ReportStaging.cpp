//===- ReportStaging.cpp --------------------------------------------------===//
#include "ReportStaging.h"

#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <algorithm>

namespace graphopt {

absl::Status ReportStaging::create() {
  llvm::SmallString<256> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("graph-opt-reports", dir))
    return absl::UnavailableError(
        absl::StrCat("--report-dir: cannot create a staging folder: ", ec.message()));
  dir_ = dir.str().str();
  return absl::OkStatus();
}

absl::Status ReportStaging::read(std::vector<std::string> &names,
                                 std::vector<std::string> &contents) const {
  std::error_code ec;
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec; it.increment(ec))
    paths.push_back(it->path());
  if (ec)
    return absl::UnavailableError(absl::StrCat(dir_, ": cannot list: ", ec.message()));
  std::sort(paths.begin(), paths.end());
  for (const std::string &path : paths) {
    auto text = readFile(path);
    if (!text.ok())
      return text.status();
    names.push_back(llvm::sys::path::filename(path).str());
    contents.push_back(std::move(*text));
  }
  return absl::OkStatus();
}

ReportStaging::~ReportStaging() {
  if (!dir_.empty())
    llvm::sys::fs::remove_directories(dir_, /*IgnoreErrors=*/true);
}

} // namespace graphopt
