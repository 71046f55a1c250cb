//===- Pt2Format.h - What graph-opt keeps of its own in a .pt2 ----*- C++ -*-===//
//
// Shared by the reader (Import/Pt2Graph.cpp) and the writer
// (Export/Pt2Writer.cpp): the writer is a layer above the reader.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/StringRef.h>

namespace graphopt {

/// The key under which graph-opt's own data sits in a node's or the graph
/// module's meta["custom"] (the phase; the optimizer-state buffers; the name).
inline constexpr llvm::StringLiteral kPt2CustomKey = "graph_opt";

} // namespace graphopt
