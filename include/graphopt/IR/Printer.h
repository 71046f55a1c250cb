//===- Printer.h - Writing the .gir text form --------------------*- C++ -*-===//
//
// The text form round-trips exactly: print(parse(print(g))) == print(g).
// Grammar and an example: docs/IR.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <llvm/Support/raw_ostream.h>

#include <string>

namespace graphopt {

void printGraph(llvm::raw_ostream &os, const Graph &graph);
std::string printGraphToString(const Graph &graph);

/// One node as it appears in a graph body, without indentation or newline.
void printNode(llvm::raw_ostream &os, const Node &node);
void printType(llvm::raw_ostream &os, const ValueType &type);
std::string printTypeToString(const ValueType &type);
void printConstant(llvm::raw_ostream &os, const Constant &constant);
std::string printConstantToString(const Constant &constant);
/// Shortest decimal that parses back to the same double, always with a '.' or
/// exponent so it reads back as a float (inf, -inf and nan spelled out).
void printFloat(llvm::raw_ostream &os, double value);

} // namespace graphopt
