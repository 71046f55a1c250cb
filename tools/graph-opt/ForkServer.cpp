//===- ForkServer.cpp - Run many graph-opt commands from one LibTorch load ===//
//
// The server forks a handler per connection (so a slow command never holds up
// the next client); the handler reads the request, forks the command's
// process, and waits for either the command to end (it sends the status) or
// the client to go away (it kills the command: a test runner's timeout must
// not leave it running).
//
//===----------------------------------------------------------------------===//
#include "ForkServer.h"

#include "ForkProtocol.h"

#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <iterator>
#include <iostream>
#include <poll.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

extern char **environ;

using namespace graphopt::fork;

namespace {

/// Variables a test runner or shell sets for each command, which nothing
/// reads while LibTorch loads (only later, by then from the command's own
/// environment): lit's per-test temporary directory, the shell's, Python's
/// locale coercion (PEP 538) in the scripts that run graph-opt, lit's
/// PYTHONPATH for its own diff (read by the Python graph-opt starts, if any).
bool setPerCommand(const std::string &e) {
  static const char *const kNames[] = {"PWD=", "OLDPWD=", "_=", "SHLVL=", "TMPDIR=",
                                       "TMP=", "TEMP=", "TEMPDIR=", "LC_CTYPE=", "PYTHONPATH="};
  for (const char *name : kNames)
    if (e.rfind(name, 0) == 0)
      return true;
  return false;
}

/// The environment as a set, without what is set for each command.
std::vector<std::string> comparableEnvironment(const std::vector<std::string> &env) {
  std::vector<std::string> out;
  for (const std::string &e : env)
    if (!setPerCommand(e))
      out.push_back(e);
  std::sort(out.begin(), out.end());
  return out;
}

bool sameLimits(const std::vector<struct rlimit> &a, const std::vector<struct rlimit> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].rlim_cur != b[i].rlim_cur || a[i].rlim_max != b[i].rlim_max)
      return false;
  return true;
}

/// Reads one request and the three descriptors sent with it.
bool receive(int fd, Request &request, int fds[3]) {
  uint32_t length = 0;
  struct iovec part = {&length, sizeof length};
  alignas(struct cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  struct msghdr msg {};
  msg.msg_iov = &part;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (n != sizeof length || !c || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(3 * sizeof(int)) || length > (64u << 20))
    return false;
  std::memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
  std::string payload(length, '\0');
  return readAll(fd, payload.data(), length) && decode(payload, request);
}

/// In the command's process: become the client's command, then run it.
[[noreturn]] void runCommand(const Request &request, const int fds[3],
                             int (*program)(int, char **)) {
  for (int i = 0; i < 3; ++i)
    if (dup2(fds[i], i) < 0)
      _exit(125);
  for (int i = 0; i < 3; ++i)
    if (fds[i] > 2)
      close(fds[i]);
  if (chdir(request.cwd.c_str()) != 0) {
    std::fprintf(stderr, "graph-opt: cannot enter %s: %s\n", request.cwd.c_str(),
                 std::strerror(errno));
    _exit(125);
  }
  // Never freed: environ points into them until the process ends.
  auto *env = new std::vector<std::string>(request.env);
  auto *args = new std::vector<std::string>(request.argv);
  auto *envp = new std::vector<char *>, *argv = new std::vector<char *>;
  for (std::string &e : *env)
    envp->push_back(e.data());
  envp->push_back(nullptr);
  for (std::string &a : *args)
    argv->push_back(a.data());
  argv->push_back(nullptr);
  environ = envp->data();
  int code = program(static_cast<int>(args->size()), argv->data());
  // End without the exit-time destructors: what they do is tear down LibTorch's
  // operator registries, which in a forked copy touches (and so copies) most of
  // their pages, 0.1-0.2 s a command. Nothing graph-opt writes waits for them;
  // its streams are flushed here. (lit --param fork-server=0 runs with them.)
  llvm::outs().flush();
  llvm::errs().flush();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

/// Waits for the command, or for its client to go away (then kills it).
Status await(pid_t pid, int client) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  for (;;) {
    struct pollfd watch[2] = {{client, POLLIN | POLLRDHUP, 0}, {pidfd, POLLIN, 0}};
    // Without pidfds (Linux < 5.3) look at the command every 10 ms.
    int ready = poll(watch, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 10);
    if (ready < 0 && errno != EINTR)
      break;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFSIGNALED(status) ? Status{1, WTERMSIG(status)} : Status{0, WEXITSTATUS(status)};
    if (ready > 0 && watch[0].revents) // the client sends nothing more: it is gone
      break;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return Status{1, SIGKILL};
}

/// Empty where the request can run in a fork of this process, else why not
/// (the first variable that differs, or the limits).
std::string whyNotForked(const Request &request, const std::vector<std::string> &myEnvironment,
                         const std::vector<struct rlimit> &myLimits) {
  if (!sameLimits(request.limits, myLimits))
    return "resource limits differ";
  std::vector<std::string> theirs = comparableEnvironment(request.env), difference;
  std::set_symmetric_difference(theirs.begin(), theirs.end(), myEnvironment.begin(),
                                myEnvironment.end(), std::back_inserter(difference));
  if (difference.empty())
    return "";
  return "environment differs: " + difference.front().substr(0, difference.front().find('='));
}

/// With GRAPHOPT_FORK_SERVER_LOG=FILE in the server's environment, one line a
/// command: "forked" or "not forked (why)", then the command line (what the
/// suite's process counts come from).
void logCommand(const Request &request, const std::string &refusal) {
  const char *path = std::getenv("GRAPHOPT_FORK_SERVER_LOG");
  if (!path || !*path)
    return;
  std::string line = refusal.empty() ? "forked" : "not forked (" + refusal + ")";
  for (const std::string &a : request.argv)
    line += " " + a;
  line += "\n";
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    (void)!write(fd, line.data(), line.size()); // one write: lines never interleave
    close(fd);
  }
}

/// One client, in a process of its own.
[[noreturn]] void handle(int client, const std::vector<std::string> &myEnvironment,
                         const std::vector<struct rlimit> &myLimits,
                         int (*program)(int, char **)) {
  std::signal(SIGCHLD, SIG_DFL); // the server ignores it; this process waits
  Request request;
  int fds[3] = {-1, -1, -1};
  if (!receive(client, request, fds))
    _exit(0);
  std::string refusal = whyNotForked(request, myEnvironment, myLimits);
  logCommand(request, refusal);
  if (!refusal.empty()) {
    writeAll(client, &kFallBack, 1);
    _exit(0);
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    close(client);
    runCommand(request, fds, program);
  }
  for (int fd : fds)
    close(fd); // the reader of a pipe the command writes must see its end
  if (pid < 0) {
    writeAll(client, &kFallBack, 1);
    _exit(0);
  }
  writeAll(client, &kRunning, 1);
  Status status = await(pid, client);
  writeAll(client, &status, sizeof status);
  _exit(0);
}

} // namespace

int graphopt::serveForks(const char *name, int (*program)(int, char **)) {
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) // the parent left before the line above
    return 0;
  struct sockaddr_un addr;
  socklen_t size = abstractAddress(name, addr);
  if (size == 0) {
    std::fprintf(stderr, "graph-opt: --fork-server: the name must have 1 to %zu characters\n",
                 sizeof addr.sun_path - 1);
    return 2;
  }
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0 || bind(listener, reinterpret_cast<struct sockaddr *>(&addr), size) != 0 ||
      listen(listener, 64) != 0) {
    std::fprintf(stderr, "graph-opt: --fork-server %s: %s\n", name, std::strerror(errno));
    return 2;
  }
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    env.emplace_back(*e);
  const std::vector<std::string> myEnvironment = comparableEnvironment(env);
  const std::vector<struct rlimit> myLimits = currentLimits();
  std::signal(SIGCHLD, SIG_IGN); // handlers are reaped by the kernel
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      std::fprintf(stderr, "graph-opt: --fork-server %s: %s\n", name, std::strerror(errno));
      return 2;
    }
    pid_t handler = ::fork();
    if (handler == 0) {
      close(listener);
      handle(client, myEnvironment, myLimits, program);
    }
    close(client);
  }
}
