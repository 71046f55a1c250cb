//===- FileIO.cpp - Reading inputs and writing outputs atomically ---------===//
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/raw_ostream.h>

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace graphopt {

namespace {

const char *fileKindName(llvm::sys::fs::file_type type) {
  using llvm::sys::fs::file_type;
  switch (type) {
  case file_type::directory_file:
    return "a directory";
  case file_type::symlink_file:
    return "a symbolic link";
  case file_type::block_file:
    return "a block device";
  case file_type::character_file:
    return "a character device";
  case file_type::fifo_file:
    return "a fifo";
  case file_type::socket_file:
    return "a socket";
  default:
    return "not a regular file";
  }
}

/// Standard input, read until its end or one byte past `maxBytes`.
absl::StatusOr<std::string> readStdin(int64_t maxBytes) {
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(0, chunk, sizeof chunk);
    if (n == 0)
      return text;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return absl::UnavailableError(
          absl::StrCat("<stdin>: cannot read: ", std::strerror(errno)));
    }
    text.append(chunk, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > maxBytes)
      return absl::ResourceExhaustedError(
          absl::StrCat("<stdin>: the input is larger than --max-input-size=", maxBytes,
                       " bytes; raise the limit if it is meant to be this large"));
  }
}

} // namespace

absl::Status checkInputFile(llvm::StringRef path, int64_t maxBytes) {
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st)) {
    std::string msg = absl::StrCat(path.str(), ": cannot read file: ", ec.message());
    if (ec == std::errc::no_such_file_or_directory)
      return absl::NotFoundError(msg);
    if (ec == std::errc::permission_denied)
      return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }
  if (st.type() == llvm::sys::fs::file_type::directory_file)
    return absl::InvalidArgumentError(absl::StrCat(path.str(), ": is a directory, not a file"));
  // A fifo or a device could be read forever (/dev/zero): inputs are files.
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return absl::InvalidArgumentError(
        absl::StrCat(path.str(), ": is ", fileKindName(st.type()),
                     ", not a regular file (use - to read a .gir from standard input)"));
  if (st.getSize() > static_cast<uint64_t>(maxBytes))
    return absl::ResourceExhaustedError(
        absl::StrCat(path.str(), ": the file has ", st.getSize(),
                     " bytes, more than --max-input-size=", maxBytes,
                     "; raise the limit if it is meant to be this large"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> readFile(llvm::StringRef path, int64_t maxBytes) {
  if (path == "-")
    return readStdin(maxBytes);
  if (absl::Status st = checkInputFile(path, maxBytes); !st.ok())
    return st;
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

absl::Status checkOutputPath(llvm::StringRef path) {
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(path, st, /*Follow=*/false))
    return absl::OkStatus(); // nothing there yet
  if (st.type() == llvm::sys::fs::file_type::regular_file)
    return absl::OkStatus();
  if (st.type() == llvm::sys::fs::file_type::directory_file)
    return absl::UnavailableError(absl::StrCat(path.str(), ": cannot write: it is a directory"));
  if (isDevNull(path))
    return absl::OkStatus();
  // Renaming over a symlink, fifo or device would replace it with a regular
  // file; writing through it could reach anything.
  return absl::InvalidArgumentError(
      absl::StrCat(path.str(), ": cannot write: it is ", fileKindName(st.type()),
                   "; graph-opt replaces regular files only (write to - and redirect instead)"));
}

bool isDevNull(llvm::StringRef path) {
  llvm::sys::fs::file_status st;
  return !llvm::sys::fs::status(path, st, /*Follow=*/false) &&
         st.type() == llvm::sys::fs::file_type::character_file &&
         llvm::sys::fs::equivalent(path, "/dev/null");
}

namespace {

std::error_code realRename(const std::string &from, const std::string &to) {
  return llvm::sys::fs::rename(from, to);
}
RenameFunction gRename = realRename;

/// A second name for the regular file at `path` (a hard link, else a copy),
/// which the undo of a failed set renames back; "" when there is no file.
std::string keepPrevious(const std::string &path) {
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(path, st, /*Follow=*/false) ||
      st.type() != llvm::sys::fs::file_type::regular_file)
    return "";
  // Named like the temporaries (writeTemporaryBeside): not with an LLVM
  // unique-file model, which would replace a '%' of the path too.
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string backup =
        absl::StrCat(path, ".previous-",
                     absl::Hex(llvm::sys::Process::GetRandomNumber(), absl::kZeroPad8));
    if (llvm::sys::fs::exists(backup))
      continue;
    if (!llvm::sys::fs::create_hard_link(path, backup) || !llvm::sys::fs::copy_file(path, backup))
      return backup;
  }
  return "";
}

} // namespace

RenameFunction setRenameForTesting(RenameFunction rename) {
  RenameFunction previous = gRename == realRename ? nullptr : gRename;
  gRename = rename ? rename : realRename;
  return previous;
}

absl::Status writeFilesAtomically(llvm::ArrayRef<FileToWrite> files) {
  std::vector<std::string> temporaries;
  auto removeTemporaries = [&] {
    for (const std::string &tmp : temporaries)
      llvm::sys::fs::remove(tmp);
  };
  // Every path is checked before anything is written: a directory, symlink or
  // device in the way would fail (or be replaced) after others were done.
  for (const auto &[path, contents] : files)
    if (absl::Status st = checkOutputPath(path); !st.ok())
      return st;
  std::vector<FileToWrite> real;
  for (const FileToWrite &f : files)
    if (!isDevNull(f.path)) // what goes to /dev/null is discarded
      real.push_back(f);
  files = real;
  for (const auto &[path, contents] : files) {
    auto tmp = writeTemporaryBeside(path, contents);
    if (!tmp.ok()) {
      removeTemporaries();
      return tmp.status();
    }
    temporaries.push_back(*tmp);
  }
  // What each path held before, kept under a second name until the whole set
  // is in place: undoing a half-done set must not lose the user's files.
  std::vector<std::string> previous;
  for (const FileToWrite &f : files)
    previous.push_back(keepPrevious(f.path));
  auto removePrevious = [&] {
    for (const std::string &p : previous)
      if (!p.empty())
        llvm::sys::fs::remove(p);
  };
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::error_code ec = gRename(temporaries[i], files[i].path)) {
      // Undo what was renamed: each path holds what it held before.
      for (size_t j = 0; j < i; ++j) {
        if (previous[j].empty())
          llvm::sys::fs::remove(files[j].path);
        else if (!llvm::sys::fs::rename(previous[j], files[j].path))
          previous[j].clear();
      }
      temporaries.erase(temporaries.begin(), temporaries.begin() + i);
      removeTemporaries();
      removePrevious();
      return absl::UnavailableError(absl::StrCat(files[i].path, ": cannot rename into place: ",
                                                 ec.message()));
    }
  }
  removePrevious();
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
