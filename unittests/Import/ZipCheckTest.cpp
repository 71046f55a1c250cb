//===- ZipCheckTest.cpp - Records handed to pickle_load are whole zips -----===//
#include "ZipCheck.h"

#include <ATen/ops/arange.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <gtest/gtest.h>

using namespace graphopt;

namespace {

std::string pickled() {
  std::vector<char> bytes = torch::jit::pickle_save(at::arange(16));
  return std::string(bytes.begin(), bytes.end());
}

/// Overwrites the little-endian 32-bit field at `at` with 0x7fffffff.
void putHugeOffset(std::string &bytes, size_t at) {
  bytes[at] = '\xff';
  bytes[at + 1] = '\xff';
  bytes[at + 2] = '\xff';
  bytes[at + 3] = '\x7f';
}

std::string problem(llvm::StringRef bytes) {
  absl::Status st = checkZipArchive(bytes);
  return st.ok() ? "" : std::string(st.message());
}

} // namespace

TEST(ZipCheckTest, WhatTorchSaveWritesPasses) {
  std::string good = pickled();
  EXPECT_EQ(problem(good), "");
  // And LibTorch reads it back.
  EXPECT_TRUE(torch::jit::pickle_load(std::vector<char>(good.begin(), good.end())).isTensor());
}

TEST(ZipCheckTest, RawBytesEmptyAndShortRecordsAreRefused) {
  EXPECT_EQ(problem(""), "not a zip archive: no local file header at the start");
  EXPECT_EQ(problem("PK"), "not a zip archive: no local file header at the start");
  std::string raw(64, '\0'); // a raw f32 record marked use_pickle
  EXPECT_EQ(problem(raw), "not a zip archive: no local file header at the start");
}

TEST(ZipCheckTest, TruncatedAndCorruptedArchivesAreRefused) {
  std::string good = pickled();
  EXPECT_EQ(problem(good.substr(0, good.size() / 2)),
            "not a zip archive: no end-of-central-directory record at its end");
  EXPECT_EQ(problem(good.substr(0, good.size() - 1)),
            "not a zip archive: no end-of-central-directory record at its end");
  // The end record pointing the central directory past the archive.
  std::string bad = good;
  size_t end = bad.rfind(std::string("PK\x05\x06", 4));
  ASSERT_NE(end, std::string::npos);
  putHugeOffset(bad, end + 16);
  EXPECT_EQ(problem(bad), "not a zip archive: the central directory lies outside the archive");
  // An entry whose local header offset points past the directory.
  bad = good;
  size_t central = bad.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(central, std::string::npos);
  putHugeOffset(bad, central + 42);
  EXPECT_EQ(problem(bad), "not a zip archive: entry 0 has no local header inside the archive");
}

TEST(ZipCheckTest, ARecordDeclaringMoreThanDeflateCanHoldIsRefused) {
  // The bound itself: 1032 bytes per archive byte, overflow-safe.
  EXPECT_TRUE(checkDeclaredRecordSize("r", 1032 * 100, 100).ok());
  absl::Status st = checkDeclaredRecordSize("r", 1032 * 100 + 1, 100);
  EXPECT_EQ(st.message(), "record 'r' declares 103201 bytes, more than deflate can expand an "
                          "archive of 100 bytes to (corrupt zip?)");
  EXPECT_FALSE(checkDeclaredRecordSize("r", UINT64_MAX, UINT64_MAX / 2).ok());
  // In a pickle's own archive: the first entry's uncompressed size set to 2 GB.
  std::string bad = pickled();
  size_t central = bad.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(central, std::string::npos);
  putHugeOffset(bad, central + 24);
  EXPECT_EQ(problem(bad).rfind("not a zip archive: record 'entry 0' declares 2147483647 bytes", 0),
            0u)
      << problem(bad);
}
