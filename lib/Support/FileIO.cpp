//===- FileIO.cpp - Reading inputs and writing outputs atomically ---------===//
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/raw_ostream.h>

namespace graphopt {

absl::StatusOr<std::string> readFile(llvm::StringRef path) {
  if (path == "-") {
    auto buf = llvm::MemoryBuffer::getSTDIN();
    if (!buf)
      return absl::UnavailableError(absl::StrCat("<stdin>: cannot read: ", buf.getError().message()));
    return (*buf)->getBuffer().str();
  }
  if (llvm::sys::fs::is_directory(path))
    return absl::InvalidArgumentError(absl::StrCat(path.str(), ": is a directory, not a file"));
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) {
    std::error_code ec = buf.getError();
    std::string msg = absl::StrCat(path.str(), ": cannot read file: ", ec.message());
    if (ec == std::errc::no_such_file_or_directory)
      return absl::NotFoundError(msg);
    if (ec == std::errc::permission_denied)
      return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }
  return (*buf)->getBuffer().str();
}

namespace {

/// Writes `contents` to a new temporary file beside `path`; returns its name.
/// The name is `path` plus ".tmp-" and random hex digits, made here rather
/// than by llvm::sys::fs::createUniqueFile, which would replace every '%' of
/// the path (a directory named "run%1" included), not only the suffix's.
absl::StatusOr<std::string> writeTemporaryBeside(llvm::StringRef path, llvm::StringRef contents) {
  int fd = -1;
  std::string tmp;
  std::error_code ec;
  for (int attempt = 0; attempt < 128; ++attempt) {
    tmp = absl::StrCat(path.str(), ".tmp-",
                       absl::Hex(llvm::sys::Process::GetRandomNumber(), absl::kZeroPad8),
                       absl::Hex(llvm::sys::Process::GetRandomNumber(), absl::kZeroPad8));
    ec = llvm::sys::fs::openFileForWrite(tmp, fd, llvm::sys::fs::CD_CreateNew);
    if (ec != std::errc::file_exists)
      break;
  }
  if (ec)
    return absl::UnavailableError(
        absl::StrCat(path.str(), ": cannot create a temporary file beside it: ", ec.message()));
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << contents;
  os.close();
  if (os.has_error()) {
    std::string msg = os.error().message();
    os.clear_error();
    llvm::sys::fs::remove(tmp);
    return absl::UnavailableError(absl::StrCat(path.str(), ": write failed: ", msg));
  }
  return tmp;
}

} // namespace

absl::Status writeFileAtomically(llvm::StringRef path, llvm::StringRef contents) {
  return writeFilesAtomically({{path.str(), contents}});
}

absl::Status writeFilesAtomically(llvm::ArrayRef<FileToWrite> files) {
  std::vector<std::string> temporaries;
  auto removeTemporaries = [&] {
    for (const std::string &tmp : temporaries)
      llvm::sys::fs::remove(tmp);
  };
  for (const auto &[path, contents] : files) {
    // A directory in the way would fail the rename after others were done.
    if (llvm::sys::fs::is_directory(path)) {
      removeTemporaries();
      return absl::UnavailableError(absl::StrCat(path, ": cannot write: it is a directory"));
    }
    auto tmp = writeTemporaryBeside(path, contents);
    if (!tmp.ok()) {
      removeTemporaries();
      return tmp.status();
    }
    temporaries.push_back(*tmp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::error_code ec = llvm::sys::fs::rename(temporaries[i], files[i].path)) {
      // Undo what was renamed: no file of the set is left half-updated.
      for (size_t j = 0; j < i; ++j)
        llvm::sys::fs::remove(files[j].path);
      temporaries.erase(temporaries.begin(), temporaries.begin() + i);
      removeTemporaries();
      return absl::UnavailableError(absl::StrCat(files[i].path, ": cannot rename into place: ",
                                                 ec.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status writeReportFiles(llvm::StringRef dir, llvm::ArrayRef<FileToWrite> files) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return absl::UnavailableError(absl::StrCat(dir.str(), ": cannot create: ", ec.message()));
  std::vector<FileToWrite> inDir;
  for (const FileToWrite &f : files) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, f.path);
    inDir.push_back({std::string(path.str()), f.contents});
  }
  return writeFilesAtomically(inDir);
}

} // namespace graphopt
