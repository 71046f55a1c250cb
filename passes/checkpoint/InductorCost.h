//===- InductorCost.h - Recomputation priced as Inductor runs it -*- C++ -*-===//
//
// checkpoint{cost=inductor}: node times for graphs that torch.compile's
// Inductor will run. A pointwise or reduction operator fuses with its
// neighbours into one kernel, so recomputing it costs the bytes it reads from
// tensors that exist in memory (graph inputs, outputs of the kernels that do
// not fuse, and values saved for backward, which are written out), at the
// machine's measured bandwidth; what it reads from another fusing operator
// never leaves the kernel. Matrix products,
// convolutions and attention stay kernels of their own: priced by the
// operator cost database where one is given (db=) and has them, else by a
// roofline: the larger of their floating-point work at the measured peak rate
// and the bytes they move at the measured bandwidth. A view costs nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <optional>
#include <string>
#include <vector>

namespace graphopt {

/// What the machine sustains, measured on this process's CPU threads: a
/// large pointwise add (bytes read and written per second) and a large matrix
/// product (floating-point operations per second), each the best of a few runs.
struct MachineRates {
  double bytesPerSecond = 0;
  double flopsPerSecond = 0;
};

/// Measured once per process (a fraction of a second), then remembered.
const MachineRates &measuredCpuRates();

/// Which model priced a node.
enum class PriceSource { View, FusedBytes, Roofline, Database };
llvm::StringRef priceSourceName(PriceSource source);

struct InductorPrices {
  std::vector<double> seconds;       ///< per node rank
  std::vector<PriceSource> sources;  ///< per node rank
};

/// True for the operators Inductor leaves as kernels of their own (matrix
/// products, convolutions, attention): everything else fuses.
bool isExternKernel(const Node &node);

/// The floating-point work of `node` for the roofline: estimateFlops, and for
/// attention 4 * query elements * key length (2.5 times that for a backward).
double kernelFlops(const Node &node);

/// Per node: its price as above. `database` (optional, per rank) holds the
/// cost database's prediction for the nodes it has.
InductorPrices inductorNodeSeconds(const Graph &graph, const MachineRates &rates,
                                   const std::vector<std::optional<double>> *database = nullptr);

} // namespace graphopt
