//===- CrashContext.h - What graph-opt was doing, for a crash's dump -*- C++ -*-===//
//
// While one lives, a crash's stack dump (LLVM's pretty stack trace, which
// InitLLVM installs) prints its text: the pass that was running and the
// command that reproduces the crash, or the graph being run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/Support/PrettyStackTrace.h>
#include <llvm/Support/raw_ostream.h>

#include <string>

namespace graphopt {

class CrashContext : public llvm::PrettyStackTraceEntry {
public:
  explicit CrashContext(std::string text) : text_(std::move(text)) {}
  void print(llvm::raw_ostream &os) const override { os << text_ << '\n'; }

private:
  std::string text_;
};

} // namespace graphopt
