//===- OperatorSupport.h - Operators a graph can hold ------------*- C++ -*-===//
//
// resolveOperator (Graph.h) and the TorchScript importer refuse an operator
// whose schema takes or returns a script object (c10d's ProcessGroup, Work,
// ReduceOp): no graph value can hold one. torch.distributed's in-place
// collectives (c10d::allreduce_ and the others) are such operators; the
// functional ones (_c10d_functional::*) name their group by a string and are
// what graph-opt runs (Runtime/Collectives.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ATen/core/function_schema.h>
#include <absl/status/status.h>

namespace graphopt {

/// OK unless the schema's arguments or returns hold a script object; the
/// error names the operator and, for c10d's in-place collectives, the
/// functional ones to use instead.
absl::Status checkOperatorSchema(const c10::FunctionSchema &schema);

} // namespace graphopt
