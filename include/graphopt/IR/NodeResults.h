//===- NodeResults.h - How an operator's results become node outputs -*- C++ -*-===//
//
// One rule, shared by type inference, the executor and the analyses that map
// a node output back to its schema return (operator effects, liveness): a node
// has one output per schema return, except that an operator whose only return
// is a `Tensor[]` (aten::split, aten::unbind, the _foreach_ ops) has one output
// per element of that list. A `Tensor[]` among several returns is not spread.
// The parser and the verifier count outputs by the same rule: the test is
// returnsTensorList (SchemaUtils.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <llvm/ADT/SmallVector.h>

namespace graphopt {

/// The schema return that node output `out` comes from: 0 for every output of
/// a spread `Tensor[]`, `out` otherwise.
unsigned returnIndexOfOutput(const c10::FunctionSchema &schema, unsigned out);

/// Turns the results a boxed call left on `stack` (one per schema return, in
/// order) into one IValue per node output, appended to `outputs`: the elements
/// of a spread `Tensor[]` one by one, anything else as it is. `stack` is left
/// moved from. The caller checks the count against the node's outputs.
void spreadResults(const c10::FunctionSchema &schema, torch::jit::Stack &stack,
                   llvm::SmallVectorImpl<c10::IValue> &outputs);

} // namespace graphopt
