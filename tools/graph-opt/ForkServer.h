//===- ForkServer.h - Run many graph-opt commands from one LibTorch load -*- C++ -*-===//
#pragma once

namespace graphopt {

/// `graph-opt --fork-server NAME`: listens on the abstract Unix socket NAME
/// and, for each client (fork-client.cpp), forks a copy of this process that
/// runs `program` on the client's command line, environment, working
/// directory and standard streams, and tells the client how it ended. Called
/// before main's own set-up, so every copy starts as a fresh graph-opt would,
/// only without loading LibTorch again. Writes "ready" to stdout once it
/// listens; runs until its parent (the test runner) exits or it gets SIGTERM.
/// A client whose environment or resource limits differ from the server's is
/// told to run the real program itself: what LibTorch and OpenMP read when
/// they load must be what the command would have read. ForkProtocol.h.
int serveForks(const char *name, int (*program)(int argc, char **argv));

} // namespace graphopt
