//===- OutputVerifier.cpp - Proving a rewritten graph computes the same ---===//
#include "graphopt/Runtime/OutputVerifier.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/Runtime/Executor.h"

#include <ATen/Context.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Format.h>

#include <cmath>
#include <cstring>
#include <map>

namespace graphopt {

Tolerance defaultTolerance(c10::ScalarType dtype) {
  switch (dtype) {
  case c10::kFloat: return {1.3e-6, 1e-5};
  case c10::kDouble: return {1e-7, 1e-7};
  case c10::kHalf: return {1e-3, 1e-5};
  case c10::kBFloat16: return {1.6e-2, 1e-5};
  case c10::kComplexFloat: return {1.3e-6, 1e-5};
  case c10::kComplexDouble: return {1e-7, 1e-7};
  default: return {0, 0}; // integers, bools: exact
  }
}

namespace {

std::string describeTensor(const at::Tensor &t) {
  if (!t.defined())
    return "undefined";
  return absl::StrCat(c10::toString(t.scalar_type()), "[", absl::StrJoin(t.sizes(), ", "), "]");
}

/// Fills the numbers of `c` for tensors `a` (original) and `b` (rewritten).
void compareTensors(const at::Tensor &a, const at::Tensor &b, const VerifierOptions &options,
                    OutputComparison &c) {
  c.originalValue = describeTensor(a);
  c.rewrittenValue = describeTensor(b);
  if (a.defined() != b.defined()) {
    c.problem = "one side is undefined";
    return;
  }
  if (!a.defined()) {
    c.passed = true;
    return;
  }
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
    c.problem = "dtype or shape differs";
    return;
  }
  c.tolerance = defaultTolerance(a.scalar_type());
  bool floating = at::isFloatingType(a.scalar_type()) || at::isComplexType(a.scalar_type());
  if (floating && options.rtol)
    c.tolerance.rtol = *options.rtol;
  if (floating && options.atol)
    c.tolerance.atol = *options.atol;
  if (a.numel() == 0) {
    c.passed = true;
    return;
  }
  at::Tensor x = a.detach().to(at::kCPU).to(at::kDouble);
  at::Tensor y = b.detach().to(at::kCPU).to(at::kDouble);
  at::Tensor diff = x.sub(y).abs();
  // Equal values (equal infinities too) and NaN in the same places are
  // agreement; a NaN anywhere else is an infinite error.
  at::Tensor agree = x.eq(y).logical_or(x.isnan().logical_and(y.isnan()));
  diff = diff.masked_fill(agree, 0.0).nan_to_num(INFINITY, INFINITY, INFINITY);
  at::Tensor rel = diff.div(y.abs().clamp_min(1e-30));
  c.maxAbsError = diff.max().item().toDouble();
  c.maxRelError = rel.max().item().toDouble();
  // A NaN on one side only is named: it is the likeliest sign of a rewrite
  // that reads memory it should not.
  if (floating) {
    int64_t onlyOriginal = x.isnan().logical_and(y.isnan().logical_not()).sum().item().toLong();
    int64_t onlyRewritten = y.isnan().logical_and(x.isnan().logical_not()).sum().item().toLong();
    if (onlyOriginal || onlyRewritten)
      c.problem = absl::StrCat("NaN in one graph only: ", onlyRewritten,
                               " element(s) NaN in the rewritten graph and not the original, ",
                               onlyOriginal, " the other way");
  }
  if (options.bitwise) {
    // The same bytes: compare the raw storage of contiguous copies. A NaN in
    // the same place on both sides agrees whatever its payload bits.
    c.bitwise = true;
    at::Tensor ca = a.detach().to(at::kCPU).contiguous();
    at::Tensor cb = b.detach().to(at::kCPU).contiguous();
    c.passed = std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
    if (!c.passed && floating && c.problem.empty()) {
      at::Tensor bothNaN = ca.isnan().logical_and(cb.isnan());
      auto bytesOf = [](const at::Tensor &t) {
        return t.reshape({-1}).view(at::kByte).view({t.numel(), -1});
      };
      at::Tensor sameBits = bytesOf(ca).eq(bytesOf(cb)).all(/*dim=*/1);
      c.passed = sameBits.logical_or(bothNaN.reshape({-1})).all().item().toBool();
    }
    return;
  }
  // allclose: |a - b| <= atol + rtol * |b| everywhere (NaN in the same
  // places agrees; its bound would be NaN).
  at::Tensor bound = y.abs().mul(c.tolerance.rtol).add(c.tolerance.atol);
  c.passed = diff.le(bound).logical_or(agree).all().item().toBool();
}

std::string outputLabel(const GraphOutput &out, unsigned ordinal) {
  if (out.role == OutputRole::Loss || out.role == OutputRole::UserOutput)
    return absl::StrCat(outputRoleName(out.role).str(), " #", ordinal);
  return absl::StrCat(outputRoleName(out.role).str(), " ", out.target);
}

/// Outputs keyed by role and target (gradients, buffer mutations) or by role and
/// position among that role's outputs (losses, user outputs).
std::map<std::string, unsigned> outputKeys(const Graph &g) {
  std::map<std::string, unsigned> keys;
  std::map<OutputRole, unsigned> ordinals;
  for (unsigned i = 0; i < g.outputs().size(); ++i)
    keys[outputLabel(g.outputs()[i], ordinals[g.outputs()[i].role]++)] = i;
  return keys;
}

} // namespace

absl::StatusOr<VerificationReport> verifyRewrite(const Graph &original, const Graph &rewritten,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> userInputs,
                                                 const VerifierOptions &options) {
  return verifyRewrite(original, rewritten, weights, userInputs, userInputs, options);
}

absl::StatusOr<VerificationReport> verifyRewrite(const Graph &original, const Graph &rewritten,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> originalInputs,
                                                 llvm::ArrayRef<at::Tensor> rewrittenInputs,
                                                 const VerifierOptions &options) {
  // A bitwise comparison means something only if each kernel gives the same
  // bits for the same inputs; some do not by default (index_put with
  // accumulate on CPU adds in a thread-dependent order; many CUDA
  // reductions use atomics). PyTorch's deterministic mode (warn-only: an op
  // without a deterministic kernel warns instead of failing) is on for both
  // runs and restored after.
  struct DeterministicScope {
    bool was, wasWarnOnly, on;
    explicit DeterministicScope(bool on)
        : was(at::globalContext().deterministicAlgorithms()),
          wasWarnOnly(at::globalContext().deterministicAlgorithmsWarnOnly()), on(on) {
      if (on)
        at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    }
    ~DeterministicScope() {
      if (on)
        at::globalContext().setDeterministicAlgorithms(was, wasWarnOnly);
    }
  } deterministic(options.bitwise);
  VerificationReport report;
  report.gpuAvailable = at::hasCUDA();
  report.device = options.device ? *options.device
                                 : (report.gpuAvailable ? c10::Device(c10::DeviceType::CUDA, 0)
                                                        : c10::Device(c10::DeviceType::CPU));
  ExecutionOptions exec;
  exec.device = report.device;
  exec.seed = options.seed;
  auto runBoth = [&](bool keepAll) -> absl::StatusOr<std::pair<ExecutionResult, ExecutionResult>> {
    exec.keepAllValues = keepAll;
    Executor a(original, weights, exec), b(rewritten, weights, exec);
    auto ra = a.run(originalInputs);
    if (!ra.ok())
      return absl::Status(ra.status().code(), absl::StrCat("original graph: ", ra.status().message()));
    auto rb = b.run(rewrittenInputs);
    if (!rb.ok())
      return absl::Status(rb.status().code(), absl::StrCat("rewritten graph: ", rb.status().message()));
    return std::make_pair(std::move(*ra), std::move(*rb));
  };
  auto results = runBoth(/*keepAll=*/false);
  if (!results.ok())
    return results.status();

  auto originalKeys = outputKeys(original);
  auto rewrittenKeys = outputKeys(rewritten);
  report.passed = true;
  for (const auto &[label, i] : originalKeys) {
    OutputComparison c;
    c.label = label;
    auto it = rewrittenKeys.find(label);
    if (it == rewrittenKeys.end()) {
      c.problem = "missing from the rewritten graph";
      c.originalValue = describeTensor(results->first.outputs[i]);
    } else {
      compareTensors(results->first.outputs[i], results->second.outputs[it->second], options, c);
    }
    report.passed &= c.passed;
    report.outputs.push_back(std::move(c));
  }
  for (const auto &[label, i] : rewrittenKeys) {
    if (originalKeys.count(label))
      continue;
    OutputComparison c;
    c.label = label;
    c.problem = "not an output of the original graph";
    report.passed = false;
    report.outputs.push_back(std::move(c));
  }
  if (report.passed)
    return report;

  // Find where they part: rerun keeping every value, walk the original's nodes
  // in order and compare the values the rewritten graph has under the same name.
  auto all = runBoth(/*keepAll=*/true);
  if (!all.ok())
    return all.status();
  llvm::StringMap<const c10::IValue *> rewrittenValues;
  for (const auto &[v, iv] : all->second.values)
    rewrittenValues[v->name()] = &iv;
  ValueMap<const c10::IValue *> originalValues(original, nullptr);
  for (const auto &[v, iv] : all->first.values)
    originalValues[v] = &iv;
  for (const Node &n : original.nodes()) {
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      const Value *v = n.output(i);
      auto other = rewrittenValues.find(v->name());
      const c10::IValue *mine = originalValues.lookup(v);
      if (other == rewrittenValues.end() || !mine || !mine->isTensor() || !other->second->isTensor())
        continue;
      OutputComparison c;
      compareTensors(mine->toTensor(), other->second->toTensor(), options, c);
      if (!c.passed) {
        report.firstDivergence = absl::StrCat(
            "node ", n.describe(), ": value %", v->name().str(), " differs (max abs error ",
            c.maxAbsError, c.problem.empty() ? "" : ", ", c.problem, ")");
        return report;
      }
    }
  }
  return report;
}

void VerificationReport::print(llvm::raw_ostream &os) const {
  os << "verification on " << device.str();
  if (device.is_cpu())
    os << (gpuAvailable ? " (chosen)" : " (no GPU present, so CPU)");
  os << ":\n";
  size_t width = 0;
  for (const auto &c : outputs)
    width = std::max(width, c.label.size());
  for (const auto &c : outputs) {
    os << "  " << (c.passed ? "PASS" : "FAIL") << "  " << llvm::left_justify(c.label, width);
    if (!c.problem.empty()) {
      os << "  " << c.problem << " (" << c.originalValue << " vs " << c.rewrittenValue << ")\n";
      continue;
    }
    if (c.bitwise)
      os << llvm::format("  max abs %.3g  max rel %.3g  (bitwise)\n", c.maxAbsError, c.maxRelError);
    else
      os << llvm::format("  max abs %.3g  max rel %.3g  (rtol %.2g, atol %.2g)\n", c.maxAbsError,
                         c.maxRelError, c.tolerance.rtol, c.tolerance.atol);
  }
  os << (passed ? "verification PASSED" : "verification FAILED");
  if (!passed && !firstDivergence.empty())
    os << ": first divergence at " << firstDivergence;
  os << '\n';
}

} // namespace graphopt
