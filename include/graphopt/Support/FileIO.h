//===- FileIO.h - Reading inputs and writing outputs atomically --*- C++ -*-===//
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

namespace graphopt {

/// No limit on an input's size.
constexpr int64_t kNoSizeLimit = std::numeric_limits<int64_t>::max();

/// The whole file ("-": standard input), or NotFound/PermissionDenied naming
/// the path. A file must be a regular file of at most `maxBytes`; standard
/// input is read until its end or until it passes `maxBytes`
/// (ResourceExhausted), so an input that never ends cannot exhaust memory.
absl::StatusOr<std::string> readFile(llvm::StringRef path, int64_t maxBytes = kNoSizeLimit);

/// What readFile checks before reading, for readers that open files
/// themselves (the .pt2 and TorchScript importers): `path` exists, is a
/// regular file (not a directory, fifo or device), and has at most `maxBytes`.
absl::Status checkInputFile(llvm::StringRef path, int64_t maxBytes);

/// An output path may be written when nothing is there yet, a regular file is
/// (it is replaced), or it is /dev/null (the output is discarded). A symlink,
/// fifo, device or socket is refused: replacing it would destroy it.
absl::Status checkOutputPath(llvm::StringRef path);
bool isDevNull(llvm::StringRef path);

/// Writes `contents` to a temporary file beside `path`, then renames it over
/// `path`, so a reader never sees a partial file and a failure leaves nothing.
/// `path` must pass checkOutputPath (output to /dev/null is discarded).
absl::Status writeFileAtomically(llvm::StringRef path, llvm::StringRef contents);

/// Writes a set of (path, contents) files that belong together (a pass's
/// reports): all are written to temporaries first and renamed into place only
/// when every one was written, so a failure leaves none of them behind. If a
/// rename fails half-way, the files already renamed are undone: a path that
/// held a file before holds that file again (kept as a hard link, or a copy,
/// until the set is in place), a path that held none is removed.
struct FileToWrite {
  std::string path;
  llvm::StringRef contents; ///< must outlive the call
};
absl::Status writeFilesAtomically(llvm::ArrayRef<FileToWrite> files);
/// For tests: replaces the rename writeFilesAtomically uses (null: the real
/// one), to inject a failure; returns the previous one.
using RenameFunction = std::error_code (*)(const std::string &from, const std::string &to);
RenameFunction setRenameForTesting(RenameFunction rename);

/// A pass's reports: creates `dir` (and its parents) if needed, then writes
/// the files, named relative to it, as one set (writeFilesAtomically).
absl::Status writeReportFiles(llvm::StringRef dir, llvm::ArrayRef<FileToWrite> files);

} // namespace graphopt
