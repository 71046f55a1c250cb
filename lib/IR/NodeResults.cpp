//===- NodeResults.cpp - How an operator's results become node outputs ----===//
#include "graphopt/IR/NodeResults.h"

#include "graphopt/IR/SchemaUtils.h"

namespace graphopt {

unsigned returnIndexOfOutput(const c10::FunctionSchema &schema, unsigned out) {
  return returnsTensorList(schema) ? 0 : out;
}

void spreadResults(const c10::FunctionSchema &schema, torch::jit::Stack &stack,
                   llvm::SmallVectorImpl<c10::IValue> &outputs) {
  if (returnsTensorList(schema) && stack.size() == 1 && stack[0].isTensorList()) {
    for (const at::Tensor &t : stack[0].toTensorList())
      outputs.emplace_back(t);
    return;
  }
  for (c10::IValue &r : stack)
    outputs.push_back(std::move(r));
}

} // namespace graphopt
