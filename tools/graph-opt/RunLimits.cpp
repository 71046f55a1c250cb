//===- RunLimits.cpp ------------------------------------------------------===//
#include "RunLimits.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Pass/PassOption.h"
#include "graphopt/Support/Bytes.h"

#include <absl/strings/str_cat.h>

#include <unistd.h>

namespace graphopt {

int64_t physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<int64_t>(pages) * pageSize : 0;
}

absl::StatusOr<int64_t> resolveLimit(llvm::StringRef name, llvm::StringRef value) {
  auto amount = MemoryAmount::parse(value);
  if (!amount.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("--", name.str(), "=", value.str(), ": ", amount.status().message()));
  int64_t physical = physicalMemoryBytes();
  if (amount->isPercent() && physical == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name.str(), ": physical memory is unknown here; give an amount of bytes"));
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

} // namespace graphopt
