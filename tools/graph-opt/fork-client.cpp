//===- fork-client.cpp - graph-opt, run by the test suite's fork server ---===//
//
// A program named graph-opt that the test suite puts first on PATH: where
// GRAPHOPT_FORK_SERVER names a running `graph-opt --fork-server`, it hands
// its command line, environment, working directory and standard streams to
// the server, which forks a copy of graph-opt (LibTorch already loaded) to
// run them, and ends as that copy ended: the same exit code, or the same
// signal. Anywhere else (no server, the server refused, a different
// environment or limits) it runs the real graph-opt in its place (execv), so
// a command means the same with or without a server. ForkProtocol.h has the
// protocol; this program links neither LibTorch nor LLVM.
//
// Built twice: as graph-opt, and as the suite's `python` (GRAPHOPT_FORK_VARIABLE
// names GRAPHOPT_PYTHON_FORK_SERVER, served by python_fork_server.py, which
// imports torch once). Where the client runs the real program itself it passes
// that program's path as argv[0]: Python finds its virtual environment from it.
//
//===----------------------------------------------------------------------===//
#include "ForkProtocol.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

extern char **environ;

using namespace graphopt::fork;

#ifndef GRAPHOPT_FORK_VARIABLE
#define GRAPHOPT_FORK_VARIABLE kSocketVariable
#endif
#ifndef GRAPHOPT_PROGRAM_NAME
#define GRAPHOPT_PROGRAM_NAME "graph-opt"
#endif

namespace {

int connectTo(const char *name) {
  struct sockaddr_un addr;
  socklen_t size = abstractAddress(name, addr);
  if (size == 0)
    return -1;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, reinterpret_cast<struct sockaddr *>(&addr), size) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool sendRequest(int fd, const std::string &payload) {
  uint32_t length = payload.size();
  struct iovec parts[2] = {{&length, sizeof length},
                           {const_cast<char *>(payload.data()), payload.size()}};
  int fds[3] = {0, 1, 2};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  struct msghdr msg {};
  msg.msg_iov = parts;
  msg.msg_iovlen = 2;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
  if (sent < 0)
    return false;
  // The rest, if the kernel took only part (the fds went with the first byte).
  if (static_cast<size_t>(sent) < sizeof length)
    return writeAll(fd, reinterpret_cast<char *>(&length) + sent, sizeof length - sent) &&
           writeAll(fd, payload.data(), payload.size());
  size_t at = sent - sizeof length;
  return writeAll(fd, payload.data() + at, payload.size() - at);
}

/// Runs the command through the server: its exit code, or -1 where the
/// caller should run the real program (nothing has run yet).
int runForked(const char *name, int argc, char **argv) {
  int fd = connectTo(name);
  if (fd < 0)
    return -1;
  Request request;
  request.argv.assign(argv, argv + argc);
  for (char **e = environ; *e; ++e)
    request.env.emplace_back(*e);
  char cwd[8192];
  if (!getcwd(cwd, sizeof cwd)) {
    close(fd);
    return -1;
  }
  request.cwd = cwd;
  request.limits = currentLimits();
  char answer = 0;
  if (!sendRequest(fd, encode(request)) || !readAll(fd, &answer, 1) || answer != kRunning) {
    close(fd);
    return -1;
  }
  Status status{};
  if (!readAll(fd, &status, sizeof status)) {
    // The command may have run in part: running it again could repeat its
    // writes, so say what happened instead.
    std::fprintf(stderr, "%s: the fork server (%s=%s) ended before the command did\n",
                 GRAPHOPT_PROGRAM_NAME, GRAPHOPT_FORK_VARIABLE, name);
    return 125;
  }
  close(fd);
  if (!status.signaled)
    return status.value;
  // End as the command ended: killed by the same signal.
  std::signal(status.value, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, status.value);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(status.value);
  return 128 + status.value;
}

} // namespace

int main(int argc, char **argv) {
  if (const char *name = std::getenv(GRAPHOPT_FORK_VARIABLE); name && *name) {
    int rc = runForked(name, argc, argv);
    if (rc >= 0)
      return rc;
  }
  argv[0] = const_cast<char *>(GRAPHOPT_REAL_PROGRAM);
  execv(GRAPHOPT_REAL_PROGRAM, argv);
  std::fprintf(stderr, "%s: cannot run %s: %s\n", GRAPHOPT_PROGRAM_NAME, GRAPHOPT_REAL_PROGRAM,
               std::strerror(errno));
  return 127;
}
