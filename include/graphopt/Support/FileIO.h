//===- FileIO.h - Reading inputs and writing outputs atomically --*- C++ -*-===//
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <string>

namespace graphopt {

/// The whole file, or NotFound/PermissionDenied naming the path.
absl::StatusOr<std::string> readFile(llvm::StringRef path);

/// Writes `contents` to a temporary file beside `path`, then renames it over
/// `path`, so a reader never sees a partial file and a failure leaves nothing.
absl::Status writeFileAtomically(llvm::StringRef path, llvm::StringRef contents);

/// Writes a set of (path, contents) files that belong together (a pass's
/// reports): all are written to temporaries first and renamed into place only
/// when every one was written, so a failure leaves none of them behind.
struct FileToWrite {
  std::string path;
  llvm::StringRef contents; ///< must outlive the call
};
absl::Status writeFilesAtomically(llvm::ArrayRef<FileToWrite> files);

/// A pass's reports: creates `dir` (and its parents) if needed, then writes
/// the files, named relative to it, as one set (writeFilesAtomically).
absl::Status writeReportFiles(llvm::StringRef dir, llvm::ArrayRef<FileToWrite> files);

} // namespace graphopt
