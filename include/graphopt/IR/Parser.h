//===- Parser.h - Reading the .gir text form ----------------------*- C++ -*-===//
//
// A parse error is an InvalidArgument status of the form
//   FILE:LINE:COL: expected ..., found ...
// followed by the offending source line and a caret.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/Support/FileIO.h"

#include <llvm/ADT/StringRef.h>

#include <memory>

namespace graphopt {

absl::StatusOr<std::unique_ptr<Graph>> parseGraph(llvm::StringRef text,
                                                  llvm::StringRef bufferName = "<string>");
absl::StatusOr<std::unique_ptr<Graph>> parseGraphFile(llvm::StringRef path,
                                                      int64_t maxBytes = kNoSizeLimit);

/// A comma-separated list of types in the text form ("f32[8, 16], i64[8]").
absl::StatusOr<std::vector<ValueType>> parseTypeList(llvm::StringRef text,
                                                     llvm::StringRef bufferName = "<types>");

} // namespace graphopt
