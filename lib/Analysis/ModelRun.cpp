//===- ModelRun.cpp - What running an imported model takes ---------------===//
#include "graphopt/Analysis/ModelRun.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/PassOption.h"
#include "graphopt/Support/Bytes.h"

#include <absl/strings/str_cat.h>

#include <unistd.h>

namespace graphopt {

int64_t physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<int64_t>(pages) * pageSize : 0;
}

absl::StatusOr<int64_t> resolveLimit(llvm::StringRef option, llvm::StringRef value) {
  auto amount = MemoryAmount::parse(value);
  if (!amount.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(option.str(), "=", value.str(), ": ", amount.status().message()));
  int64_t physical = physicalMemoryBytes();
  if (amount->isPercent() && physical == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        option.str(), ": physical memory is unknown here; give an amount of bytes"));
  int64_t bytes = amount->resolve(physical);
  return bytes > 0 ? bytes : 1;
}

absl::Status checkRunFits(const Graph &graph, int64_t limit, llvm::StringRef what) {
  auto liveness = LivenessAnalysis::compute(graph);
  if (!liveness.ok())
    return liveness.status();
  if (liveness->peakBytes <= limit)
    return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what.str(), " @", graph.name().str(), " needs ", formatBytes(liveness->peakBytes),
      " at its simulated peak (weights and inputs ", formatBytes(liveness->inputBytes),
      "), more than --max-memory=", formatBytes(limit),
      "; raise the limit if the graph is meant to be this large"));
}

absl::StatusOr<ExecutionContext> makeModelExecutionContext(const Graph &graph,
                                                           const Graph &signature,
                                                           WeightStore &weights,
                                                           llvm::ArrayRef<at::Tensor> exampleInputs,
                                                           const ModelRunOptions &options,
                                                           size_t *weightsMade) {
  if (absl::Status st = checkRunFits(graph, options.memoryLimit, "running"); !st.ok())
    return st;
  auto made = fillMissingWeights(signature, weights, options.seed, options.memoryLimit);
  if (!made.ok())
    return made.status();
  if (weightsMade)
    *weightsMade = *made;
  ExecutionContext context;
  context.weights = &weights;
  if (exampleInputs.empty()) {
    auto inputs = makeExampleInputs(signature, options.seed, options.memoryLimit);
    if (!inputs.ok())
      return inputs.status();
    context.inputs = std::move(*inputs);
  } else {
    context.inputs.assign(exampleInputs.begin(), exampleInputs.end());
  }
  for (const GraphInput &in : signature.inputs())
    if (in.role == InputRole::UserInput && in.value->isTensor())
      context.inputNames.push_back(in.value->name().str());
  context.device = options.device;
  context.seed = options.seed;
  return context;
}

} // namespace graphopt
