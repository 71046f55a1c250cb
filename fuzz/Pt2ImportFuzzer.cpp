//===- Pt2ImportFuzzer.cpp - .pt2 archive import ----------------------------===//
//
// The input is the bytes of a .pt2 archive (a zip written by torch.export.save;
// the seeds are small models of the zoo). Each input is written to a file
// named model.pt2 in a private temporary directory and read with importModel(),
// as graph-opt reads it: the model JSON, the weights (raw records and their
// payload configs, or pickles) and the sample inputs. A model that imports is
// verified and printed, as graph-opt does next. Failing statuses are fine;
// crashes, sanitizer reports and escaping exceptions are bugs.
//
// Mutating a zip's bytes mostly breaks its CRCs and offsets, so the custom
// mutator below works on the records: it unpacks the archive (LibTorch's
// PyTorchStreamReader), mutates one record with libFuzzer's own mutator,
// favouring the JSON ones, sometimes drops or duplicates a record, and packs
// it again (PyTorchStreamWriter, valid CRCs). A quarter of the mutations, and
// any input that is no readable archive, get libFuzzer's plain byte mutations,
// so the zip layer itself is fuzzed too. Only the mutator catches exceptions
// (from unpacking a broken archive); the code under test runs uncaught.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"
#include "ZipCheck.h"

#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"

#include <caffe2/serialize/inline_container.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace graphopt;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

std::string &archivePath() {
  static std::string path;
  return path;
}

void removeArchive() {
  if (archivePath().empty())
    return;
  std::remove(archivePath().c_str());
  llvm::sys::fs::remove(llvm::sys::path::parent_path(archivePath()));
}

using Records = std::vector<std::pair<std::string, std::string>>;

/// The records of the archive in `data`, in the archive's order; false if it
/// is no archive LibTorch reads.
bool unpack(const uint8_t *data, size_t size, Records &records) {
  try {
    std::istringstream in(std::string(reinterpret_cast<const char *>(data), size));
    caffe2::serialize::PyTorchStreamReader reader(&in);
    for (const std::string &name : reader.getAllRecords()) {
      // The reader allocates what a record declares before reading it: a
      // mutated header declaring gigabytes was an out-of-memory report here.
      if (!checkDeclaredRecordSize(name, reader.getRecordSize(name), size).ok())
        return false;
      auto [ptr, n] = reader.getRecord(name);
      records.emplace_back(name, std::string(static_cast<const char *>(ptr.get()), n));
    }
    return true;
  } catch (const std::exception &) {
    return false;
  }
}

std::string pack(const Records &records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void *buf, size_t n) {
    out.append(static_cast<const char *>(buf), n);
    return n;
  });
  for (const auto &[name, bytes] : records)
    writer.writeRecord(name, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return out;
}

bool isJson(llvm::StringRef name) { return name.endswith(".json"); }

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("graphopt-fuzz-pt2", dir)) {
    std::fprintf(stderr, "fuzz-pt2-import: cannot create a temporary directory\n");
    std::abort();
  }
  llvm::sys::path::append(dir, "model.pt2");
  archivePath() = std::string(dir);
  std::atexit(removeArchive);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = archivePath();
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::fprintf(stderr, "fuzz-pt2-import: cannot write %s\n", path.c_str());
    std::abort();
  }
  auto model = importModel(path);
  if (!model.ok())
    return 0;
  if (verifyGraph(*model->graph).ok())
    (void)printGraphToString(*model->graph);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  std::minstd_rand rng(seed);
  Records records;
  if (rng() % 4 == 0 || !unpack(data, size, records) || records.empty())
    return LLVMFuzzerMutate(data, size, maxSize);

  unsigned choice = rng() % 16;
  if (choice == 0 && records.size() > 1) {
    records.erase(records.begin() + rng() % records.size());
  } else if (choice == 1) {
    auto copy = records[rng() % records.size()];
    copy.first += std::to_string(rng() % 4); // a near-duplicate name
    records.push_back(std::move(copy));
  } else {
    // One record, a JSON one three times in four.
    std::vector<size_t> json;
    for (size_t i = 0; i < records.size(); ++i)
      if (isJson(records[i].first))
        json.push_back(i);
    size_t i = !json.empty() && rng() % 4 != 0 ? json[rng() % json.size()]
                                               : rng() % records.size();
    std::string &bytes = records[i].second;
    size_t old = bytes.size();
    bytes.resize(old + old / 4 + 64);
    size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t *>(bytes.data()), old, bytes.size());
    bytes.resize(n);
  }
  std::string packed;
  try {
    packed = pack(records);
  } catch (const std::exception &) {
    return LLVMFuzzerMutate(data, size, maxSize);
  }
  if (packed.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, packed.data(), packed.size());
  return packed.size();
}
