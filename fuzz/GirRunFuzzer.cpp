//===- GirRunFuzzer.cpp - .gir import and one CPU run -----------------------===//
//
// The input is .gir text, read as graph-opt reads a .gir file: parsed and
// verified; a graph the verifier accepts whose tensors (graph inputs and node
// results, each counted whole) take less than kMaxTensorBytes gets seeded
// stand-ins for its weights and user inputs (fillMissingWeights,
// makeExampleInputs) and runs once on the CPU with the Executor, as
// `graph-opt --run 1` does. Failing statuses are fine; crashes, sanitizer
// reports and escaping exceptions are bugs. What a run may take beyond the
// size gate (an operator's scratch, a long loop) is bounded by libFuzzer's
// -rss_limit_mb and -timeout (scripts/fuzz.sh sets both).
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <cstdint>

using namespace graphopt;

namespace {

constexpr int64_t kMaxTensorBytes = int64_t(64) << 20; // 64 MiB

/// The verifier has checked every tensor type (validateTensorType) and that
/// all of them together take at most 2^62 bytes, so this sum cannot overflow.
bool smallEnough(const Graph &graph) {
  int64_t total = 0;
  for (const Value *v : graph.allValues())
    if (v->isTensor() && v->type().isKnown())
      total += v->tensorType().storageBytes();
  return total < kMaxTensorBytes;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  // As graph-opt's --max-memory: a node that allocates more than its declared
  // type says (aten::full with a huge size argument) is refused at that node.
  TrackingCpuAllocator::instance().setLimit(4 * kMaxTensorBytes);
  static CpuAllocatorScope allocatorHooks; // for the whole process, as in graph-opt
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto graph = parseGraph(text, "<fuzz>");
  if (!graph.ok() || !verifyGraph(**graph).ok() || !smallEnough(**graph))
    return 0;
  WeightStore weights;
  if (!fillMissingWeights(**graph, weights, /*seed=*/0, kMaxTensorBytes).ok())
    return 0;
  auto inputs = makeExampleInputs(**graph, /*seed=*/0, kMaxTensorBytes);
  if (!inputs.ok())
    return 0;
  ExecutionOptions options; // CPU, seed 0, values freed after their last use
  Executor executor(**graph, weights, options);
  (void)executor.run(*inputs);
  return 0;
}
