//===- ForkProtocol.h - graph-opt's fork server and its client ---*- C++ -*-===//
//
// What the fork server (ForkServer.cpp) and its client (fork-client.cpp) say
// to each other over a Unix stream socket. The test suite starts one
// `graph-opt --fork-server NAME` per lit run; each `graph-opt` a RUN line
// starts is then the client, a program without LibTorch that starts in a
// millisecond, and asks the server to fork a copy of itself (LibTorch already
// loaded) that runs the command line. Loading LibTorch (its static operator
// registrations) is most of a small test's time: paid once per lit run instead
// of once per RUN line (issue 52).
//
//   client -> server: u32 length, then the request; fds 0, 1 and 2 go along
//                     with it (SCM_RIGHTS)
//   request:          "argc\0argv[0]\0...envc\0env[0]\0...cwd\0" then the
//                     process's resource limits (kLimits, raw rlimit structs)
//   server -> client: 'F' (fall back: run the real program yourself), or 'R'
//                     (running) and then a Status when the command ends
//
// Header-only and without dependencies: the client must not link LibTorch.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cerrno>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace graphopt::fork {

/// The environment variable that names the server's socket (Linux abstract
/// namespace: no file, no path-length limit). Unset: no server; the client
/// runs the real program.
inline constexpr const char *kSocketVariable = "GRAPHOPT_FORK_SERVER";

/// The limits a forked command must share with its client: where any differs
/// from the server's, the client runs the real program (a `ulimit -v` in a
/// test must bound the command it runs).
inline constexpr int kLimits[] = {RLIMIT_AS,     RLIMIT_DATA,   RLIMIT_STACK, RLIMIT_CPU,
                                  RLIMIT_NOFILE, RLIMIT_FSIZE,  RLIMIT_CORE,  RLIMIT_NPROC,
                                  RLIMIT_MEMLOCK};

/// The abstract-namespace address NAME (sun_path[0] == 0: no file): its
/// size, or 0 where NAME is empty or too long.
inline socklen_t abstractAddress(const char *name, struct sockaddr_un &addr) {
  addr = {};
  size_t length = std::strlen(name);
  if (length == 0 || length + 1 > sizeof addr.sun_path)
    return 0;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name, length);
  return offsetof(struct sockaddr_un, sun_path) + 1 + length;
}

/// Moves exactly `size` bytes with `transfer` (read, or send), retrying where
/// a signal interrupts; false at the end of the stream or on an error.
template <typename Buffer, typename Transfer>
bool transferAll(Buffer *p, size_t size, Transfer transfer) {
  while (size > 0) {
    ssize_t n = transfer(p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    size -= n;
  }
  return true;
}

/// Reads exactly `size` bytes; false at the end of the stream or on an error.
inline bool readAll(int fd, void *to, size_t size) {
  return transferAll(static_cast<char *>(to), size,
                     [fd](char *p, size_t n) { return read(fd, p, n); });
}

/// Sends exactly `size` bytes on a socket, without SIGPIPE where the peer is
/// gone; false on an error.
inline bool writeAll(int fd, const void *from, size_t size) {
  return transferAll(static_cast<const char *>(from), size,
                     [fd](const char *p, size_t n) { return send(fd, p, n, MSG_NOSIGNAL); });
}

inline constexpr char kFallBack = 'F';
inline constexpr char kRunning = 'R';

/// How the forked command ended: exited with a code, or killed by a signal.
struct Status {
  int32_t signaled; // 0: exited
  int32_t value;    // the exit code, or the signal
};

struct Request {
  std::vector<std::string> argv, env;
  std::string cwd;
  std::vector<struct rlimit> limits;
};

inline void appendString(std::string &out, const std::string &s) {
  out.append(s);
  out.push_back('\0');
}

inline std::string encode(const Request &r) {
  std::string out;
  appendString(out, std::to_string(r.argv.size()));
  for (const std::string &a : r.argv)
    appendString(out, a);
  appendString(out, std::to_string(r.env.size()));
  for (const std::string &e : r.env)
    appendString(out, e);
  appendString(out, r.cwd);
  for (const struct rlimit &l : r.limits)
    out.append(reinterpret_cast<const char *>(&l), sizeof l);
  return out;
}

/// Parses what encode() wrote; false on anything malformed.
inline bool decode(const std::string &in, Request &r) {
  size_t at = 0;
  auto next = [&](std::string &s) {
    size_t end = in.find('\0', at);
    if (end == std::string::npos)
      return false;
    s.assign(in, at, end - at);
    at = end + 1;
    return true;
  };
  auto list = [&](std::vector<std::string> &v) {
    std::string count;
    if (!next(count) || count.empty() || count.size() > 9 ||
        count.find_first_not_of("0123456789") != std::string::npos)
      return false;
    v.resize(std::stoul(count));
    for (std::string &s : v)
      if (!next(s))
        return false;
    return true;
  };
  if (!list(r.argv) || r.argv.empty() || !list(r.env) || !next(r.cwd))
    return false;
  size_t n = sizeof kLimits / sizeof kLimits[0];
  if (in.size() - at != n * sizeof(struct rlimit))
    return false;
  r.limits.resize(n);
  std::memcpy(r.limits.data(), in.data() + at, n * sizeof(struct rlimit));
  return true;
}

/// This process's limits, in kLimits's order.
inline std::vector<struct rlimit> currentLimits() {
  std::vector<struct rlimit> out;
  for (int which : kLimits) {
    struct rlimit l {};
    getrlimit(which, &l);
    out.push_back(l);
  }
  return out;
}

} // namespace graphopt::fork
