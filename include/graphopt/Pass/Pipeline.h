//===- Pipeline.h - Textual pass pipelines ------------------------*- C++ -*-===//
//
//   pipeline ::= entry (',' entry)*
//   entry    ::= NAME ['{' item (',' item)* '}']
//   item     ::= KEY '=' VALUE          (an option; VALUE: any text without ',', '{' or '}')
//              | entry                  (a nested pass, for passes that run others)
// e.g. "liveness,cse,checkpoint{budget=60%}" or
// "repeat{max-iterations=5,cse,canonicalize,dce}". Whitespace around tokens is ignored.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"

#include <string>
#include <vector>

namespace graphopt {

struct PipelineEntry {
  std::string name;
  PassOptions options;
  /// Nested passes, in order (only passes that run others accept them: repeat).
  std::vector<PipelineEntry> nested;
};

/// Parses a pipeline; an error gives the column and what was expected.
absl::StatusOr<std::vector<PipelineEntry>> parsePipeline(llvm::StringRef text);
/// Prints entries back in the same parseable form.
std::string printPipeline(const std::vector<PipelineEntry> &entries);

} // namespace graphopt
