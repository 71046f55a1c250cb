//===- ZipCheck.h - Is a buffer a whole zip archive? (private) ---*- C++ -*-===//
//
// torch::jit::pickle_load reads a torch.save archive (a zip) from memory
// through LibTorch's zip reader, which trusts the bytes it is given: a record
// that is not a zip (a raw weight marked use_pickle) makes it read past the
// buffer. Records are checked with this before they are handed to it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>
#include <llvm/ADT/StringRef.h>

namespace graphopt {

/// OK when `bytes` is a structurally sound zip archive: it starts with a local
/// file header, its end-of-central-directory record (ZIP64 too) lies at the
/// end, and the central directory and every entry it lists (header, name and
/// data) lie inside the buffer. The message says what is wrong.
absl::Status checkZipArchive(llvm::StringRef bytes);

} // namespace graphopt
