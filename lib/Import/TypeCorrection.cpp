//===- TypeCorrection.cpp - Declared result types checked against the kernels ---===//
#include "graphopt/Import/TypeCorrection.h"

#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/TypeInference.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringMap.h>

namespace graphopt {

namespace {

bool isKnownCpuTensor(const Value *v) {
  return v->isTensor() && v->tensorType().isKnown() && v->tensorType().device.is_cpu();
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

/// Who reads `v`, for the message: the first reading node or "a graph output".
std::string firstReader(const Value *v) {
  for (const Use &u : v->uses())
    if (u.user)
      return absl::StrCat("node ", u.user->describe());
  return "a graph output";
}

/// What a kernel makes of its stand-ins depends only on the operator, the
/// stand-ins' types (dtype, sizes, strides, offset, device: each argument
/// gets a stand-in of its own, zero-filled on CPU) and the constants, so
/// nodes alike in all of them (and in their number of outputs, which
/// kernelResultTypes checks the results against) are run once: a model's
/// repeated layers (docs/Importing.md gives what it saves on GPT-2).
/// Failures are not kept: their messages name the node.
class KernelTypesMemo {
public:
  absl::StatusOr<std::vector<ValueType>> resultTypes(const Node &node, c10::Device on) {
    std::string key = keyOf(node, on);
    if (auto it = known_.find(key); it != known_.end())
      return it->second;
    auto made = kernelResultTypes(node, on);
    if (made.ok())
      known_[key] = *made;
    return made;
  }

private:
  static void addType(std::string &key, const Value *v) {
    if (!v) {
      key += "None;";
      return;
    }
    const ValueType &type = v->type();
    if (!type.isTensor() || !type.tensor.isKnown()) {
      // A scalar (or unknown) operand: its value, which the stand-in lacks,
      // fails the run; the name keeps such nodes apart all the same.
      absl::StrAppend(&key, "%", v->name().str(), ";");
      return;
    }
    const TensorType &t = type.tensor;
    absl::StrAppend(&key, static_cast<int>(t.dtype), "[", absl::StrJoin(t.sizes, ","), "]{",
                    absl::StrJoin(t.strides, ","), "}+", t.storageOffset, "@", t.device.str(),
                    ";");
  }

  static std::string keyOf(const Node &node, c10::Device on) {
    std::string key = absl::StrCat(on.str(), "|", node.numOutputs(), "|", node.opName(), "(");
    for (const Argument &a : node.args()) {
      if (a.isValue())
        addType(key, a.getValue());
      else if (a.isConstant())
        absl::StrAppend(&key, "=", printConstantToString(a.getConstant()), ";");
      else {
        key += "[";
        for (const Value *v : a.getList())
          addType(key, v);
        key += "];";
      }
    }
    return key;
  }

  llvm::StringMap<std::vector<ValueType>> known_;
};

/// Bytes of the tensors among `values` (their storage spans, offsets included).
int64_t tensorBytes(llvm::ArrayRef<const Value *> values) {
  int64_t total = 0;
  for (const Value *v : values)
    if (v && v->isTensor() && v->tensorType().isKnown())
      total += v->tensorType().storageByteRange().second;
  return total;
}

/// Whether running `node` on stand-ins stays within `kMaxCpuCheckedNodeBytes`:
/// its declared operands and results, and the results its meta kernel (which
/// allocates nothing) says it makes, where it has one: a result declared
/// small can still be made large (aten::full with a huge size argument).
bool affordable(const Node &node, KernelTypesMemo &memo) {
  llvm::SmallVector<const Value *, 8> values;
  for (Value *v : node.operandValues())
    values.push_back(v);
  for (unsigned i = 0; i < node.numOutputs(); ++i)
    values.push_back(node.output(i));
  int64_t bytes = tensorBytes(values);
  if (bytes > kMaxCpuCheckedNodeBytes)
    return false;
  auto onMeta = memo.resultTypes(node, c10::Device(at::kMeta));
  if (!onMeta.ok())
    return true;
  for (const ValueType &t : *onMeta)
    if (t.isTensor() && t.tensor.isKnown())
      bytes += t.tensor.storageByteRange().second;
  return bytes <= kMaxCpuCheckedNodeBytes;
}

} // namespace

namespace {

/// Only the layout differs (strides of dimensions of more than one element,
/// storage offset): dtype and sizes, which readers' own types were derived
/// from, agree.
bool onlyLayoutDiffers(const TensorType &declared, const TensorType &made) {
  return declared.dtype == made.dtype && declared.sizes == made.sizes &&
         declared.device == made.device;
}

/// Whether any operand of `node` is in `corrected`.
bool readsCorrected(const Node &node, const llvm::DenseSet<const Value *> &corrected) {
  for (const Value *v : node.operandValues())
    if (corrected.contains(v))
      return true;
  return false;
}

/// checkDeclaredTypes' step for one node: each known CPU tensor result set
/// against what its kernel (`kernelName`) makes, `made`. A result whose
/// readers would read it otherwise is a conflict; else the kernel's type
/// replaces the declared one (remarked, or counted in `derived` where the
/// node reads a corrected value, `downstream`) and the result joins `corrected`.
void correctResults(Node &node, const std::vector<ValueType> &made, const char *kernelName,
                    bool downstream, DeclaredTypeCheck &check,
                    llvm::DenseSet<const Value *> &corrected, size_t &derived) {
  for (unsigned i = 0; i < node.numOutputs(); ++i) {
    Value *v = node.output(i);
    ValueType kernel = made[i];
    if (!isKnownCpuTensor(v) || !kernel.isTensor() || !kernel.tensor.isKnown())
      continue;
    kernel.tensor.device = v->tensorType().device; // the meta kernel's says meta
    if (!differs(v->tensorType(), kernel.tensor))
      continue;
    std::string what = absl::StrCat("node ", node.describe(), ": result %", v->name().str(),
                                    " is declared ", printTypeToString(v->type()),
                                    " but the ", kernelName, " kernel makes ",
                                    printTypeToString(kernel));
    if (!v->uses().empty() && !onlyLayoutDiffers(v->tensorType(), kernel.tensor)) {
      // Its readers were typed from the declared dtype and sizes.
      check.conflicts.push_back(absl::StrCat(what, ", and ", firstReader(v),
                                             " reads it as declared"));
      continue;
    }
    if (downstream)
      ++derived;
    else if (v->uses().empty())
      check.remarks.push_back(
          absl::StrCat(what, "; nothing reads it, so graph-opt takes the kernel's type"));
    else
      check.remarks.push_back(absl::StrCat(
          what, "; only the layout differs, so graph-opt takes the kernel's and its readers' "
                "types follow it"));
    v->setType(kernel);
    corrected.insert(v);
  }
}

} // namespace

DeclaredTypeCheck checkDeclaredTypes(Graph &graph, TypeCheckKernels kernels) {
  const bool onMeta = kernels == TypeCheckKernels::Meta;
  const char *kernelName = onMeta ? "meta" : "CPU";
  DeclaredTypeCheck check;
  // Results whose declared type was replaced by the kernel's: what their
  // readers' kernels make is checked against those, so a corrected layout
  // flows on (a view of a strided result is strided too).
  llvm::DenseSet<const Value *> corrected;
  size_t derived = 0;
  KernelTypesMemo memo;
  for (Node &node : graph.nodes()) {
    bool anyCpu = false;
    for (unsigned i = 0; i < node.numOutputs(); ++i)
      anyCpu |= isKnownCpuTensor(node.output(i));
    if (!anyCpu)
      continue;
    const bool downstream = readsCorrected(node, corrected);
    // An operator with an effect outside the graph is not run here; where it
    // reads a corrected value, its meta kernel (which runs nothing) says what
    // it makes of it. A node too large to run at import is checked against its
    // meta kernel instead of its CPU kernel: at a realistic size (a RoBERTa
    // eval step at batch 64 x 512) a dropout returning its strided input,
    // declared contiguous, would otherwise stay uncorrected and fail --verify.
    const bool effects = opEffects(node).sideEffects;
    if (effects && !downstream)
      continue;
    const bool onCpu = !effects && !onMeta && affordable(node, memo);
    if (!effects && !onMeta && !onCpu)
      ++check.nodesOnMetaOnly;
    auto made = memo.resultTypes(node, onCpu ? c10::Device(c10::DeviceType::CPU)
                                             : c10::Device(at::kMeta));
    if (!effects && made.ok())
      ++check.nodesChecked;
    else if (!effects && !onCpu)
      ++check.nodesUnchecked; // no meta kernel in C++ (aten::relu's is Python's)
    if (!made.ok()) {
      if (downstream)
        check.conflicts.push_back(absl::StrCat(
            "node ", node.describe(), " reads a result whose declared type was corrected, and "
            "its own result types cannot be derived again: ", made.status().message()));
      continue; // otherwise the executor's own checks still guard it
    }
    correctResults(node, *made, kernelName, downstream, check, corrected, derived);
  }
  if (derived)
    check.remarks.push_back(absl::StrCat(
        derived, derived == 1 ? " result" : " results",
        " read from corrected ones took their kernels' layouts too"));
  for (const std::string &conflict : check.conflicts)
    graph.addTypeConflict(conflict);
  return check;
}

} // namespace graphopt
