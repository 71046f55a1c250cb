//===- graph-opt.cpp - The graph-opt program ------------------------------===//
//
// The driver itself is Driver.cpp (driverMain), shared with `python -m
// graph_opt`; this is the program around it: LLVM's signal handlers and a
// crash message that says where to report it. `graph-opt --fork-server NAME`
// (ForkServer.h) is the test suite's: one LibTorch load for many commands.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Driver/Driver.h"
#include "ForkServer.h"

#include <cstring>

#include <llvm/Support/InitLLVM.h>
#include <llvm/Support/PrettyStackTrace.h> // setBugReportMsg

static int graphOptMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // A crash is graph-opt's bug, not LLVM's: say where to report it and what
  // reproduces it (the input is never modified; the stack dump below names
  // the pass and its reproducer command).
  llvm::setBugReportMsg(
      "graph-opt crashed. This is a bug in graph-opt: please report it to the graph-opt project "
      "(docs/Robustness.md, \"Reporting a crash\"), with the command line and the input file "
      "below (graph-opt never modifies its input) or the reproducer command the stack dump names.\n");
  return graphopt::driverMain(argc, argv);
}

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--fork-server") == 0)
    return graphopt::serveForks(argv[2], graphOptMain);
  return graphOptMain(argc, argv);
}
