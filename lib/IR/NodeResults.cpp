//===- NodeResults.cpp - How an operator's results become node outputs ----===//
#include "graphopt/IR/NodeResults.h"

#include "graphopt/IR/SchemaUtils.h"

namespace graphopt {

bool spreadsTensorList(const c10::FunctionSchema &schema) { return returnsTensorList(schema); }

unsigned returnIndexOfOutput(const c10::FunctionSchema &schema, unsigned out) {
  return spreadsTensorList(schema) ? 0 : out;
}

void spreadResults(const c10::FunctionSchema &schema, torch::jit::Stack &stack,
                   llvm::SmallVectorImpl<c10::IValue> &outputs) {
  if (spreadsTensorList(schema) && stack.size() == 1 && stack[0].isTensorList()) {
    for (const at::Tensor &t : stack[0].toTensorList())
      outputs.emplace_back(t);
    return;
  }
  for (c10::IValue &r : stack)
    outputs.push_back(std::move(r));
}

} // namespace graphopt
