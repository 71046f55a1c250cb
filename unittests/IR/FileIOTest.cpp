//===- FileIOTest.cpp - Atomic writes of one file and of a set -----------===//
#include "graphopt/Support/FileIO.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace graphopt;

namespace {

class FileIOTest : public testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("graphopt-fileio", dir));
    dir_ = std::string(dir.str());
  }
  void TearDown() override {
    // remove_directories stops at a FIFO (one test makes one): unlink the
    // entries first, so that no run leaves its directory in /tmp.
    for (const std::string &name : entries())
      ::unlink(path(name).c_str());
    llvm::sys::fs::remove_directories(dir_);
  }
  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir_);
    llvm::sys::path::append(p, name);
    return std::string(p.str());
  }
  /// The directory's entries, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec; it.increment(ec))
      out.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string dir_;
};

TEST_F(FileIOTest, WritesAndReplacesWholeFiles) {
  ASSERT_TRUE(writeFileAtomically(path("a.txt"), "first").ok());
  ASSERT_TRUE(writeFileAtomically(path("a.txt"), "second").ok());
  auto text = readFile(path("a.txt"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second");
  EXPECT_EQ(entries(), std::vector<std::string>{"a.txt"}); // no temporary left
}

// '%' is an ordinary character in a path: the temporary's random suffix
// must not be spelled with it (LLVM's unique-file models replace every '%').
TEST_F(FileIOTest, PercentSignsInPathsAreKept) {
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("run%1")));
  std::string file = path("run%1/50%.json");
  absl::Status st = writeReportFiles(path("run%2"), {{"a%%.csv", "a"}});
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(writeFileAtomically(file, "x").ok());
  EXPECT_EQ(*readFile(file), "x");
  EXPECT_EQ(*readFile(path("run%2/a%%.csv")), "a");
  EXPECT_EQ(entries(), (std::vector<std::string>{"run%1", "run%2"}));
}

TEST_F(FileIOTest, ASetIsWrittenWhole) {
  ASSERT_TRUE(writeFilesAtomically({{path("a.csv"), "a"}, {path("b.json"), "b"}}).ok());
  EXPECT_EQ(entries(), (std::vector<std::string>{"a.csv", "b.json"}));
  EXPECT_EQ(*readFile(path("b.json")), "b");
}

TEST_F(FileIOTest, ASetThatCannotBeWrittenWholeLeavesNothing) {
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("b.json")));
  absl::Status st = writeFilesAtomically({{path("a.csv"), "a"}, {path("b.json"), "b"}, {path("c.csv"), "c"}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("b.json: cannot write: it is a directory"), std::string::npos)
      << st.message();
  EXPECT_EQ(entries(), std::vector<std::string>{"b.json"}); // neither a.csv nor a temporary
}

namespace {
/// Fails the second rename of a set, as a full disk or a vanished directory
/// would (the tests run as root, which ignores directory permissions).
int gRenames = 0;
std::error_code failSecondRename(const std::string &from, const std::string &to) {
  if (++gRenames == 2)
    return std::make_error_code(std::errc::io_error);
  return llvm::sys::fs::rename(from, to);
}
} // namespace

TEST_F(FileIOTest, AFailedRenameRestoresThePreviousFiles) {
  ASSERT_TRUE(writeFilesAtomically({{path("a.csv"), "old a"}, {path("b.json"), "old b"}}).ok());
  gRenames = 0;
  setRenameForTesting(failSecondRename);
  absl::Status st = writeFilesAtomically(
      {{path("a.csv"), "new a"}, {path("b.json"), "new b"}, {path("c.csv"), "new c"}});
  setRenameForTesting(nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("b.json: cannot rename into place"), std::string::npos)
      << st.message();
  // a.csv was renamed into place before b.json failed: it holds the old file
  // again, and nothing else is left behind (no temporary, no second name).
  EXPECT_EQ(*readFile(path("a.csv")), "old a");
  EXPECT_EQ(*readFile(path("b.json")), "old b");
  EXPECT_EQ(entries(), (std::vector<std::string>{"a.csv", "b.json"}));
  // A set whose files are new leaves none of them.
  gRenames = 0;
  setRenameForTesting(failSecondRename);
  st = writeFilesAtomically({{path("x.csv"), "x"}, {path("y.csv"), "y"}});
  setRenameForTesting(nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(entries(), (std::vector<std::string>{"a.csv", "b.json"}));
}

TEST_F(FileIOTest, AMissingDirectoryIsNamed) {
  absl::Status st = writeFileAtomically(path("missing/a.txt"), "a");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("missing/a.txt: cannot create a temporary file beside it"),
            std::string::npos)
      << st.message();
}

} // namespace

TEST_F(FileIOTest, SymlinksFifosAndDevicesAreNotReplaced) {
  ASSERT_TRUE(writeFileAtomically(path("target.txt"), "keep").ok());
  ASSERT_FALSE(llvm::sys::fs::create_link(path("target.txt"), path("link.txt")));
  absl::Status st = writeFileAtomically(path("link.txt"), "new");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("it is a symbolic link"), std::string::npos) << st.message();
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  st = writeFilesAtomically({{path("ok.txt"), "a"}, {path("fifo"), "b"}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("it is a fifo"), std::string::npos) << st.message();
  // Nothing of the set was written; the link and the fifo are still there.
  EXPECT_EQ(entries(), (std::vector<std::string>{"fifo", "link.txt", "target.txt"}));
  llvm::sys::fs::file_status status;
  ASSERT_FALSE(llvm::sys::fs::status(path("link.txt"), status, /*Follow=*/false));
  EXPECT_EQ(status.type(), llvm::sys::fs::file_type::symlink_file);
  EXPECT_EQ(readFile(path("target.txt")).value(), "keep");
  // /dev/null takes output and stays a device.
  EXPECT_TRUE(writeFileAtomically("/dev/null", "discarded").ok());
  ASSERT_FALSE(llvm::sys::fs::status("/dev/null", status, /*Follow=*/false));
  EXPECT_EQ(status.type(), llvm::sys::fs::file_type::character_file);
}

TEST_F(FileIOTest, InputsMustBeRegularFilesWithinTheLimit) {
  ASSERT_TRUE(writeFileAtomically(path("in.txt"), "0123456789").ok());
  EXPECT_EQ(readFile(path("in.txt"), 10).value(), "0123456789");
  absl::Status st = readFile(path("in.txt"), 9).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("the file has 10 bytes, more than --max-input-size=9"), std::string::npos)
      << st.message();
  st = checkInputFile("/dev/zero", kNoSizeLimit);
  EXPECT_NE(st.message().find("is a character device, not a regular file"), std::string::npos)
      << st.message();
  EXPECT_EQ(checkInputFile(dir_, kNoSizeLimit).message(), dir_ + ": is a directory, not a file");
  EXPECT_EQ(checkInputFile(path("absent"), kNoSizeLimit).code(), absl::StatusCode::kNotFound);
}
