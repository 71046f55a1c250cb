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

#include <cstdint>
#include <cstdlib>

using namespace graphopt;

namespace {

constexpr int64_t kMaxTensorBytes = int64_t(64) << 20; // 64 MiB

/// Adds the bytes a tensor of `t` spans to `total`; false once past the
/// limit or on overflow. Computed here, with checked arithmetic, so the gate
/// itself cannot overflow; negative sizes count by their magnitude, so such
/// graphs still reach the code under test.
bool addTensorBytes(const TensorType &t, int64_t &total) {
  if (!t.isKnown())
    return true;
  int64_t extent = 1; // elements from the first to the last one addressed, inclusive
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    int64_t size = t.sizes[d];
    if (size < 0)
      size = size == INT64_MIN ? INT64_MAX : -size;
    if (size == 0)
      return true;
    int64_t stride = d < t.strides.size() ? t.strides[d] : 1;
    if (stride < 0)
      stride = stride == INT64_MIN ? INT64_MAX : -stride;
    int64_t step;
    if (__builtin_mul_overflow(size - 1, stride, &step) ||
        __builtin_add_overflow(extent, step, &extent))
      return false;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(extent, int64_t(16), &bytes) || // no dtype takes more than 16 bytes
      __builtin_add_overflow(total, bytes, &total))
    return false;
  return total < kMaxTensorBytes;
}

bool smallEnough(const Graph &graph) {
  int64_t total = 0;
  for (const GraphInput &in : graph.inputs())
    if (in.value->isTensor() && !addTensorBytes(in.value->tensorType(), total))
      return false;
  for (const Node &node : graph.nodes())
    for (unsigned i = 0; i < node.numOutputs(); ++i)
      if (node.output(i)->isTensor() && !addTensorBytes(node.output(i)->tensorType(), total))
        return false;
  return true;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto graph = parseGraph(text, "<fuzz>");
  if (!graph.ok() || !verifyGraph(**graph).ok() || !smallEnough(**graph))
    return 0;
  WeightStore weights;
  fillMissingWeights(**graph, weights, /*seed=*/0);
  std::vector<at::Tensor> inputs = makeExampleInputs(**graph, /*seed=*/0);
  ExecutionOptions options; // CPU, seed 0, values freed after their last use
  Executor executor(**graph, weights, options);
  (void)executor.run(inputs);
  return 0;
}
