//===- InductorCost.cpp - Recomputation priced as Inductor runs it --------===//
#include "checkpoint/InductorCost.h"

#include "graphopt/Cost/OperatorCost.h"
#include "graphopt/IR/OpEffects.h"

#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>

#include <llvm/ADT/SmallPtrSet.h>

#include <algorithm>
#include <chrono>

namespace graphopt {

namespace {

/// The fastest of `runs` calls of `f`, in seconds (one call first, unmeasured).
template <typename F> double fastest(int runs, F &&f) {
  f();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  return std::max(best, 1e-9);
}

bool isAttention(llvm::StringRef name) {
  return name.contains("scaled_dot_product") || name.contains("_flash_attention") ||
         name.contains("_efficient_attention");
}

int64_t tensorBytes(const Value *v) {
  if (!v->isTensor() || !v->tensorType().isKnown())
    return 0;
  const TensorType &t = v->tensorType();
  return t.numel() * static_cast<int64_t>(c10::elementSize(t.dtype));
}

bool readByBackward(const Value *v) {
  for (const Use &use : v->uses())
    if (use.user && use.user->phase() == Phase::Backward)
      return true;
  return false;
}

/// Whether `v` exists in memory when a fused kernel reads it: a graph input,
/// made by a kernel of its own, or saved for backward (backward reads it, so
/// it is written out); a view is its base, taken as its first tensor operand
/// (an approximation for pricing: AliasInfo, the one place alias walks live,
/// is not built for it).
bool inMemory(const Value *v) {
  while (const Node *def = v->definingNode()) {
    if (readByBackward(v))
      return true;
    if (!opEffects(*def).isView())
      return isExternKernel(*def);
    const Value *base = nullptr;
    for (const Value *operand : def->operandValues())
      if (operand->isTensor()) {
        base = operand;
        break;
      }
    if (!base)
      return true;
    v = base;
  }
  return true;
}

} // namespace

const MachineRates &measuredCpuRates() {
  static const MachineRates rates = [] {
    MachineRates r;
    // 16 Mi floats (64 MiB) each: past the caches.
    at::Tensor a = at::ones({1 << 24}), b = at::ones({1 << 24});
    at::Tensor out = at::empty_like(a);
    double addSeconds = fastest(3, [&] { at::add_out(out, a, b); });
    r.bytesPerSecond = 3.0 * static_cast<double>(a.numel() * 4) / addSeconds;
    at::Tensor m = at::ones({512, 512}), p = at::empty({512, 512});
    double mmSeconds = fastest(3, [&] { at::mm_out(p, m, m); });
    r.flopsPerSecond = 2.0 * 512.0 * 512.0 * 512.0 / mmSeconds;
    return r;
  }();
  return rates;
}

llvm::StringRef priceSourceName(PriceSource source) {
  switch (source) {
  case PriceSource::View:
    return "view";
  case PriceSource::FusedBytes:
    return "fused: bytes read";
  case PriceSource::Roofline:
    return "roofline";
  case PriceSource::Database:
    return "db";
  }
  return "?";
}

bool isExternKernel(const Node &node) {
  return isComputeBound(node) || isAttention(node.schema().name());
}

double kernelFlops(const Node &node) {
  llvm::StringRef name = node.schema().name();
  if (isAttention(name) && node.numArgs() > 1 && node.arg(0).isValue() && node.arg(1).isValue()) {
    const Value *q = node.arg(0).getValue(), *k = node.arg(1).getValue();
    if (q->isTensor() && k->isTensor() && q->tensorType().isKnown() &&
        k->tensorType().isKnown() && k->tensorType().rank() >= 2) {
      const TensorType &kt = k->tensorType();
      double flops = 4.0 * static_cast<double>(q->tensorType().numel()) *
                     static_cast<double>(kt.sizes[kt.rank() - 2]);
      return name.contains("backward") ? 2.5 * flops : flops;
    }
  }
  return estimateFlops(node);
}

InductorPrices inductorNodeSeconds(const Graph &graph, const MachineRates &rates,
                                   const std::vector<std::optional<double>> *database) {
  InductorPrices out;
  out.seconds.reserve(graph.numNodes());
  out.sources.reserve(graph.numNodes());
  size_t rank = 0;
  for (const Node &n : graph.nodes()) {
    const size_t r = rank++;
    if (opEffects(n).isView()) {
      out.seconds.push_back(0);
      out.sources.push_back(PriceSource::View);
      continue;
    }
    if (isExternKernel(n)) {
      if (database && r < database->size() && (*database)[r]) {
        out.seconds.push_back(*(*database)[r]);
        out.sources.push_back(PriceSource::Database);
        continue;
      }
      out.seconds.push_back(
          std::max(kernelFlops(n) / rates.flopsPerSecond,
                   static_cast<double>(estimateBytesMoved(n)) / rates.bytesPerSecond));
      out.sources.push_back(PriceSource::Roofline);
      continue;
    }
    // A fusing operator: what it reads from memory; reads of other fusing
    // operators' outputs stay in the kernel.
    int64_t bytes = 0;
    llvm::SmallPtrSet<const Value *, 8> seen;
    for (const Value *v : n.operandValues())
      if (seen.insert(v).second && inMemory(v))
        bytes += tensorBytes(v);
    out.seconds.push_back(static_cast<double>(bytes) / rates.bytesPerSecond);
    out.sources.push_back(PriceSource::FusedBytes);
  }
  return out;
}

} // namespace graphopt
