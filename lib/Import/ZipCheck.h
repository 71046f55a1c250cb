//===- ZipCheck.h - Is a buffer a whole zip archive? (private) ---*- C++ -*-===//
//
// torch::jit::pickle_load reads a torch.save archive (a zip) from memory
// through LibTorch's zip reader, which trusts the bytes it is given: a record
// that is not a zip (a raw weight marked use_pickle) makes it read past the
// buffer, and a record declaring gigabytes makes it allocate them. Records
// are checked with this before they are handed to it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <absl/status/status.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>

namespace graphopt {

/// Deflate's largest expansion: no record of an archive of N bytes can hold
/// more than about 1032 * N bytes. LibTorch's zip reader allocates the size a
/// record declares before it inflates anything, so a declared size past this
/// bound is a lie that would cost that much memory (or, under libFuzzer, an
/// out-of-memory report) before the read fails.
constexpr uint64_t kMaxDeflateRatio = 1032;

/// OK when a record declaring `declaredBytes` uncompressed can be in an
/// archive of `archiveBytes`; otherwise an error naming `record`.
absl::Status checkDeclaredRecordSize(llvm::StringRef record, uint64_t declaredBytes,
                                     uint64_t archiveBytes);

/// OK when `bytes` is a structurally sound zip archive: it starts with a local
/// file header, its end-of-central-directory record (ZIP64 too) lies at the
/// end, the central directory and every entry it lists (header, name and
/// data) lie inside the buffer, and no entry declares more bytes than deflate
/// can expand the buffer to. The message says what is wrong.
absl::Status checkZipArchive(llvm::StringRef bytes);

} // namespace graphopt
