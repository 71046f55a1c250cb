//===- FileIO.h - Reading inputs and writing outputs atomically --*- C++ -*-===//
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <llvm/ADT/StringRef.h>

#include <string>

namespace graphopt {

/// The whole file, or NotFound/PermissionDenied naming the path.
absl::StatusOr<std::string> readFile(llvm::StringRef path);

/// Writes `contents` to a temporary file beside `path`, then renames it over
/// `path`, so a reader never sees a partial file and a failure leaves nothing.
absl::Status writeFileAtomically(llvm::StringRef path, llvm::StringRef contents);

} // namespace graphopt
