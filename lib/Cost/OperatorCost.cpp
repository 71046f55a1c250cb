//===- OperatorCost.cpp - An operator's work, from its schema and types ---===//
#include "graphopt/Cost/OperatorCost.h"

#include "graphopt/IR/OpEffects.h"

#include <llvm/ADT/SmallPtrSet.h>
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

enum class Kind { Product, Conv, Attention, Other };

Kind kindOf(const Node &node) {
  // Scaled dot-product attention, whichever kernel (math, flash, efficient,
  // cuDNN) and direction: its schemas take query, key and value first (after
  // the output's gradient in a backward).
  if (llvm::StringRef(node.schema().name()).contains("scaled_dot_product"))
    return Kind::Attention;
  return llvm::StringSwitch<Kind>(node.schema().name())
      .Cases("aten::mm", "aten::bmm", "aten::matmul", Kind::Product)
      .Cases("aten::addmm", "aten::baddbmm", "aten::linear", Kind::Product)
      .Cases("aten::convolution", "aten::_convolution", "aten::conv2d", Kind::Conv)
      .Cases("aten::conv1d", "aten::conv3d", "aten::convolution_backward", Kind::Conv)
      .Default(Kind::Other);
}

int64_t elementBytes(const TensorType &t) {
  return t.numel() * static_cast<int64_t>(c10::elementSize(t.dtype));
}

} // namespace

double estimateFlops(const Node &node) {
  if (opEffects(node).isView())
    return 0;
  const std::string name = node.schema().name();
  int64_t out = outputElements(node);
  Kind kind = kindOf(node);
  if (kind == Kind::Product) {
    // The contracted size: the last dimension of the left operand.
    unsigned left = name == "aten::addmm" || name == "aten::baddbmm" ? 1 : 0;
    if (const TensorType *a = tensorArg(node, left); a && a->rank() > 0)
      return 2.0 * static_cast<double>(out) * static_cast<double>(a->sizes.back());
  }
  if (kind == Kind::Conv) {
    if (name == "aten::convolution_backward") {
      // The input and the weight gradient each cost what the forward
      // convolution does: 2 * grad_output elements * per-output work.
      const TensorType *gradOut = tensorArg(node, 0);
      const TensorType *w = tensorArg(node, 2);
      if (gradOut && w && w->rank() > 1)
        return 2.0 * 2.0 * static_cast<double>(gradOut->numel()) *
               static_cast<double>(w->numel() / w->sizes[0]);
    } else if (const TensorType *w = tensorArg(node, 1); w && w->rank() > 1) {
      // Each output element: a dot product over the weight's per-channel slice.
      return 2.0 * static_cast<double>(out) * static_cast<double>(w->numel() / w->sizes[0]);
    }
  }
  if (kind == Kind::Attention) {
    // As torch.utils.flop_counter counts it: q [.., L, E], k [.., S, E],
    // v [.., S, Ev]; forward Q K^T and P V, 2 * BH * L * S * (E + Ev); the
    // backward recomputes Q K^T and makes dP, dV, dQ and dK, 2 * BH * L * S *
    // (3E + 2Ev).
    bool backward = llvm::StringRef(name).endswith("_backward");
    unsigned first = backward ? 1 : 0;
    const TensorType *q = tensorArg(node, first), *k = tensorArg(node, first + 1),
                     *v = tensorArg(node, first + 2);
    if (q && k && v && q->rank() >= 2 && k->rank() >= 2 && v->rank() >= 2) {
      double l = static_cast<double>(q->sizes[q->rank() - 2]);
      double e = static_cast<double>(q->sizes.back());
      double s = static_cast<double>(k->sizes[k->rank() - 2]);
      double ev = static_cast<double>(v->sizes.back());
      double bh = l * e > 0 ? static_cast<double>(q->numel()) / (l * e) : 0;
      return 2.0 * bh * l * s * (backward ? 3 * e + 2 * ev : e + ev);
    }
  }
  return static_cast<double>(out);
}

int64_t estimateBytesMoved(const Node &node) {
  if (opEffects(node).isView())
    return 0;
  int64_t bytes = 0;
  llvm::SmallPtrSet<const Value *, 8> seen;
  for (const Value *v : node.operandValues())
    if (v->isTensor() && v->tensorType().isKnown() && seen.insert(v).second)
      bytes += elementBytes(v->tensorType());
  for (const Value *v : node.outputs())
    if (v->isTensor() && v->tensorType().isKnown())
      bytes += elementBytes(v->tensorType());
  return bytes;
}

bool isComputeBound(const Node &node) { return kindOf(node) != Kind::Other; }

double workOf(const Node &node) {
  return isComputeBound(node) ? estimateFlops(node)
                              : static_cast<double>(estimateBytesMoved(node));
}

} // namespace graphopt
