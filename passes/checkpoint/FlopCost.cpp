//===- FlopCost.cpp - A static time estimate for graphs that cannot run ---===//
#include "checkpoint/FlopCost.h"

#include "graphopt/IR/OpEffects.h"

#include <llvm/ADT/StringSwitch.h>

namespace graphopt {

namespace {

const TensorType *tensorArg(const Node &node, unsigned i) {
  if (i >= node.numArgs() || !node.arg(i).isValue() || !node.arg(i).getValue()->isTensor())
    return nullptr;
  const TensorType &t = node.arg(i).getValue()->tensorType();
  return t.isKnown() ? &t : nullptr;
}

int64_t outputElements(const Node &node) {
  int64_t n = 0;
  for (const Value *v : node.outputs())
    if (v->isTensor() && v->tensorType().isKnown())
      n += v->tensorType().numel();
  return n;
}

} // namespace

double estimateFlops(const Node &node) {
  if (opEffects(node).isView())
    return 0;
  const std::string name = node.schema().name();
  int64_t out = outputElements(node);
  enum Kind { Product, Conv, Other };
  Kind kind = llvm::StringSwitch<Kind>(name)
                  .Cases("aten::mm", "aten::bmm", "aten::matmul", Product)
                  .Cases("aten::addmm", "aten::baddbmm", "aten::linear", Product)
                  .Cases("aten::convolution", "aten::_convolution", "aten::conv2d", Conv)
                  .Cases("aten::conv1d", "aten::conv3d", Conv)
                  .Default(Other);
  if (kind == Product) {
    // The contracted size: the last dimension of the left operand.
    unsigned left = name == "aten::addmm" || name == "aten::baddbmm" ? 1 : 0;
    if (const TensorType *a = tensorArg(node, left); a && a->rank() > 0)
      return 2.0 * static_cast<double>(out) * static_cast<double>(a->sizes.back());
  }
  if (kind == Conv) {
    // Each output element: a dot product over the weight's per-channel slice.
    if (const TensorType *w = tensorArg(node, 1); w && w->rank() > 1)
      return 2.0 * static_cast<double>(out) * static_cast<double>(w->numel() / w->sizes[0]);
  }
  return static_cast<double>(out);
}

std::vector<double> estimatedNodeSeconds(const Graph &graph) {
  std::vector<double> seconds;
  seconds.reserve(graph.numNodes());
  for (const Node &n : graph.nodes())
    seconds.push_back(estimateFlops(n) / kNominalFlopsPerSecond);
  return seconds;
}

} // namespace graphopt
