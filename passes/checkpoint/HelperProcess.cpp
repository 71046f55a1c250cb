//===- HelperProcess.cpp - Planners that run in a program of their own ----===//
#include "checkpoint/HelperProcess.h"

#include <absl/strings/str_cat.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

extern "C" char **environ;

namespace graphopt {

absl::StatusOr<TempFile> TempFile::make(llvm::StringRef prefix, llvm::StringRef suffix) {
  const char *dir = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(dir && *dir ? dir : "/tmp", "/", prefix.str(), "-XXXXXX", suffix.str());
  int fd = ::mkstemps(pattern.data(), static_cast<int>(suffix.size()));
  if (fd < 0)
    return absl::InternalError(absl::StrCat("cannot create ", pattern, ": ", std::strerror(errno)));
  ::close(fd);
  return TempFile(std::move(pattern));
}

TempFile::~TempFile() {
  if (!path_.empty())
    ::unlink(path_.c_str());
}

std::string lastLineOf(const std::string &path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty())
      last = line;
  return last;
}

namespace {

/// The process's environment with `extra` ("NAME=value") set over it.
std::vector<std::string> environmentWith(llvm::ArrayRef<std::string> extra) {
  std::vector<std::string> env;
  for (char **e = environ; e && *e; ++e) {
    llvm::StringRef entry(*e);
    llvm::StringRef name = entry.split('=').first;
    bool replaced = false;
    for (const std::string &x : extra)
      replaced |= llvm::StringRef(x).split('=').first == name;
    if (!replaced)
      env.push_back(entry.str());
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char *> pointersTo(std::vector<std::string> &strings) {
  std::vector<char *> out;
  for (std::string &s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

} // namespace

absl::Status runHelper(const HelperProgram &program, llvm::ArrayRef<std::string> argv,
                       llvm::ArrayRef<std::string> extraEnv, const std::string &errors,
                       double deadline, llvm::StringRef doing, llvm::StringRef fallback) {
  const std::string &path = argv.front();
  std::string who = absl::StrCat(program.planner, ": the ", program.role, " ", path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, errors.c_str(), O_WRONLY | O_TRUNC, 0);
  std::vector<std::string> args(argv.begin(), argv.end());
  std::vector<std::string> env = environmentWith(extraEnv);
  std::vector<char *> argp = pointersTo(args), envp = pointersTo(env);
  pid_t pid = -1;
  int spawned = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    return absl::FailedPreconditionError(absl::StrCat(program.planner, ": cannot start the ",
                                                      program.role, " program ", path, ": ",
                                                      std::strerror(spawned), program.hint));

  // Polled: a helper takes milliseconds to seconds, and a thread blocked in
  // waitpid could not be given up at the deadline.
  auto begin = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (done < 0 && errno != EINTR)
      return absl::InternalError(absl::StrCat(program.planner, ": lost the ", program.role, " ",
                                              path, ": ", std::strerror(errno)));
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (waited > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return absl::DeadlineExceededError(absl::StrCat(who, " was still running ",
                                                      static_cast<int>(waited),
                                                      " s after it started and was stopped"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
  if (WIFSIGNALED(status))
    return absl::InternalError(absl::StrCat(who, " crashed (signal ", WTERMSIG(status), ", ",
                                            strsignal(WTERMSIG(status)), ")", doing.str(), "; ",
                                            fallback.str()));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string said = lastLineOf(errors);
    return absl::InternalError(absl::StrCat(who, " failed (exit status ", WEXITSTATUS(status),
                                            ")", doing.str(), said.empty() ? "" : ": ", said));
  }
  return absl::OkStatus();
}

} // namespace graphopt
