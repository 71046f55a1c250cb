//===- Pipeline.h - Textual pass pipelines ------------------------*- C++ -*-===//
//
//   pipeline ::= entry (',' entry)*
//   entry    ::= NAME ['{' option (',' option)* '}']
//   option   ::= KEY '=' VALUE          (VALUE: any text without ',', '{' or '}')
// e.g. "liveness,cse,checkpoint{budget=60%}". Whitespace around tokens is ignored.
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
};

/// Parses a pipeline; an error gives the column and what was expected.
absl::StatusOr<std::vector<PipelineEntry>> parsePipeline(llvm::StringRef text);
/// Prints entries back in the same parseable form.
std::string printPipeline(const std::vector<PipelineEntry> &entries);

} // namespace graphopt
