//===- Driver.h - The graph-opt driver, callable in-process ------*- C++ -*-===//
#pragma once

namespace graphopt {

/// Runs the graph-opt driver on a command line (argv[0] is the program name),
/// as the graph-opt program does, and returns its exit code: 0 ok, 1 a
/// rewrite failed verification, 2 bad input or usage. Command-line options
/// are LLVM's (global): one call per process.
int driverMain(int argc, char **argv);

/// The interpreter and script that draw report.html from a profile
/// (tools/report/make_report.py, with the project's Python: matplotlib);
/// $GRAPHOPT_REPORT_PYTHON and $GRAPHOPT_REPORT_SCRIPT name others.
const char *reportPython();
const char *reportScript();

} // namespace graphopt
