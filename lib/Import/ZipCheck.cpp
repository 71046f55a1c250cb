//===- ZipCheck.cpp -------------------------------------------------------===//
#include "ZipCheck.h"

#include <absl/strings/str_cat.h>

#include <cstdint>

namespace graphopt {

namespace {

uint64_t readLE(llvm::StringRef bytes, uint64_t at, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

bool hasSignature(llvm::StringRef bytes, uint64_t at, uint32_t signature) {
  return at <= bytes.size() && bytes.size() - at >= 4 && readLE(bytes, at, 4) == signature;
}

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50,
                   kEndOfCentralDirectory = 0x06054b50, kZip64End = 0x06064b50,
                   kZip64Locator = 0x07064b50;
constexpr uint64_t kEndSize = 22, kCentralSize = 46, kLocalSize = 30;

absl::Status notZip(llvm::StringRef why) {
  return absl::InvalidArgumentError(absl::StrCat("not a zip archive: ", why.str()));
}

} // namespace

absl::Status checkDeclaredRecordSize(llvm::StringRef record, uint64_t declaredBytes,
                                     uint64_t archiveBytes) {
  if (archiveBytes <= UINT64_MAX / kMaxDeflateRatio &&
      declaredBytes <= archiveBytes * kMaxDeflateRatio)
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("record '", record.str(), "' declares ", declaredBytes,
                   " bytes, more than deflate can expand an archive of ", archiveBytes,
                   " bytes to (corrupt zip?)"));
}

absl::Status checkZipArchive(llvm::StringRef bytes) {
  uint64_t size = bytes.size();
  if (size < kEndSize + kLocalSize || !hasSignature(bytes, 0, kLocalHeader))
    return notZip("no local file header at the start");
  // The end record: 22 bytes plus a comment of at most 65535, at the very end.
  uint64_t end = UINT64_MAX;
  for (uint64_t at = size - kEndSize;; --at) {
    if (hasSignature(bytes, at, kEndOfCentralDirectory) &&
        at + kEndSize + readLE(bytes, at + 20, 2) == size) {
      end = at;
      break;
    }
    if (at == 0 || size - at > kEndSize + 0xFFFF)
      break;
  }
  if (end == UINT64_MAX)
    return notZip("no end-of-central-directory record at its end");
  uint64_t entries = readLE(bytes, end + 10, 2);
  uint64_t cdSize = readLE(bytes, end + 12, 4), cdOffset = readLE(bytes, end + 16, 4);
  uint64_t cdLimit = end; // the central directory ends where the end records begin
  if (entries == 0xFFFF || cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF) {
    if (end < 20 || !hasSignature(bytes, end - 20, kZip64Locator))
      return notZip("ZIP64 sizes without a ZIP64 locator");
    uint64_t zip64End = readLE(bytes, end - 20 + 8, 8);
    if (zip64End > end - 20 || end - 20 - zip64End < 56 || !hasSignature(bytes, zip64End, kZip64End))
      return notZip("the ZIP64 locator points outside the archive");
    entries = readLE(bytes, zip64End + 32, 8);
    cdSize = readLE(bytes, zip64End + 40, 8);
    cdOffset = readLE(bytes, zip64End + 48, 8);
    cdLimit = zip64End;
  }
  if (cdOffset > cdLimit || cdSize > cdLimit - cdOffset)
    return notZip("the central directory lies outside the archive");
  uint64_t at = cdOffset;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at > cdOffset + cdSize || cdOffset + cdSize - at < kCentralSize ||
        !hasSignature(bytes, at, kCentralHeader))
      return notZip(absl::StrCat("central directory entry ", i, " is not where it should be"));
    uint64_t compressed = readLE(bytes, at + 20, 4), uncompressed = readLE(bytes, at + 24, 4);
    uint64_t nameLength = readLE(bytes, at + 28, 2), extraLength = readLE(bytes, at + 30, 2),
             commentLength = readLE(bytes, at + 32, 2);
    uint64_t local = readLE(bytes, at + 42, 4);
    uint64_t next = at + kCentralSize + nameLength + extraLength + commentLength;
    if (next > cdOffset + cdSize)
      return notZip(absl::StrCat("central directory entry ", i, " runs past the directory"));
    // ZIP64 entries keep their real sizes in an extra field, not read here:
    // their headers are bounded above, their data is not.
    if (compressed != 0xFFFFFFFF && local != 0xFFFFFFFF) {
      if (local > cdOffset || cdOffset - local < kLocalSize || !hasSignature(bytes, local, kLocalHeader))
        return notZip(absl::StrCat("entry ", i, " has no local header inside the archive"));
      uint64_t dataStart = local + kLocalSize + readLE(bytes, local + 26, 2) + readLE(bytes, local + 28, 2);
      if (dataStart > cdOffset || compressed > cdOffset - dataStart)
        return notZip(absl::StrCat("entry ", i, "'s data runs past the archive"));
    }
    if (uncompressed != 0xFFFFFFFF)
      if (absl::Status st = checkDeclaredRecordSize(absl::StrCat("entry ", i), uncompressed,
                                                    bytes.size());
          !st.ok())
        return notZip(std::string(st.message()));
    at = next;
  }
  return absl::OkStatus();
}

} // namespace graphopt
