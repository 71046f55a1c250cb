//===- TypeCorrection.cpp - Unread results typed by the kernel that makes them ---===//
#include "graphopt/Import/TypeCorrection.h"

#include "graphopt/IR/Printer.h"
#include "graphopt/IR/TypeInference.h"

#include <absl/strings/str_cat.h>
#include <llvm/Support/raw_ostream.h>

namespace graphopt {

namespace {

bool isUnreadCpuTensor(const Value *v) {
  return v->isTensor() && v->tensorType().isKnown() && v->tensorType().device.is_cpu() &&
         v->uses().empty();
}

/// The declared and the made layout differ where the executor would see it:
/// dtype, sizes, strides of dimensions of more than one element, offset.
bool differs(const TensorType &declared, const TensorType &made) {
  if (declared.dtype != made.dtype || declared.sizes != made.sizes ||
      declared.storageOffset != made.storageOffset)
    return true;
  for (size_t d = 0; d < declared.sizes.size(); ++d)
    if (declared.sizes[d] > 1 && declared.strides[d] != made.strides[d])
      return true;
  return false;
}

std::string typeText(const ValueType &t) {
  std::string out;
  llvm::raw_string_ostream os(out);
  printType(os, t);
  return os.str();
}

} // namespace

std::vector<std::string> correctUnreadResultTypes(Graph &graph) {
  std::vector<std::string> remarks;
  for (Node &node : graph.nodes()) {
    bool anyUnread = false;
    for (unsigned i = 0; i < node.numOutputs(); ++i)
      anyUnread |= isUnreadCpuTensor(node.output(i));
    if (!anyUnread)
      continue;
    auto made = kernelResultTypes(node, c10::Device(c10::DeviceType::CPU));
    if (!made.ok())
      continue; // the executor's own check still guards it
    for (unsigned i = 0; i < node.numOutputs(); ++i) {
      Value *v = node.output(i);
      const ValueType &kernel = (*made)[i];
      if (!isUnreadCpuTensor(v) || !kernel.isTensor() || !differs(v->tensorType(), kernel.tensor))
        continue;
      remarks.push_back(absl::StrCat(
          "node ", node.describe(), ": result %", v->name().str(),
          " is declared ", typeText(v->type()), " but the CPU kernel makes ", typeText(kernel),
          "; nothing reads it, so graph-opt takes the kernel's type"));
      v->setType(kernel);
    }
  }
  return remarks;
}

} // namespace graphopt
