//===- Verifier.h - Structural verification of a Graph ------------*- C++ -*-===//
//
// Rules: definitions before uses; no dangling uses (every operand and graph
// output is a live value of this graph, and use lists match the operands);
// argument count and kinds match the operator schema; outputs match the
// schema's returns; every value has a type; value names are unique; phases
// appear in order (forward, backward, optimizer); output roles name existing
// inputs of the right role.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <string>
#include <vector>

namespace graphopt {

struct VerifierDiagnostic {
  const Node *node = nullptr; ///< null for problems with graph inputs or outputs
  std::string message;        ///< already names the node or input/output at fault
};

/// Every violation found, in graph order.
std::vector<VerifierDiagnostic> collectVerifierDiagnostics(const Graph &graph);

/// OK, or FailedPrecondition listing every violation (one per line).
absl::Status verifyGraph(const Graph &graph);

} // namespace graphopt
