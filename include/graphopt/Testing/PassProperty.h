//===- PassProperty.h - The pass fuzzer's property, for one graph -*- C++ -*-===//
//
// What the pass fuzzer checks of each generated graph (docs/Robustness.md,
// "The pass fuzzer"), shared by the seeded property test
// (unittests/Pass/PassFuzzTest.cpp) and the libFuzzer target fuzz-passes:
// for every pipeline the project ships, the graph is either refused with a
// clear error or rewritten and then verified bitwise over the whole step
// (outputs and every input written in place; passes after add-optimizer
// against add-optimizer's output), with the simulated peak not above the
// input's where the pipeline promises that. A pass error that is a bug
// (INTERNAL: a pass that broke its own rules, outputs made to share storage,
// an edit reported as none) is a failure, as is a rewrite that cannot run.
//
// The executables that call it link the passes (graphopt_passes, an object
// library whose registrations must not be dropped).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace graphopt::testing {

struct PipelineCase {
  const char *pipeline;
  bool peakMustNotRise;
};

/// What the project ships, and their composition. checkpoint plans on FLOPs
/// here (the measured default would profile every graph), and applies the
/// closest plan where none meets activations=30% (unmet=closest): a third of
/// the generated graphs save activations written in place, which no plan may
/// drop, and refusing them would leave their rewrites unchecked (the error
/// itself is tested in lit).
llvm::ArrayRef<PipelineCase> shippedPipelines();

struct PropertyOutcome {
  unsigned rewrites = 0;           ///< rewrites verified
  bool refused = false;            ///< some pipeline refused the graph, clearly
  bool budgetUnreachable = false;  ///< some checkpoint budget no plan reaches (OUT_OF_RANGE)
  bool unrunnable = false;         ///< PyTorch itself does not run the generated step
  /// Each refusal: the pipeline and its message.
  std::vector<std::pair<std::string, std::string>> refusals;
  /// Each failure: "-passes='...': what went wrong".
  std::vector<std::string> failures;
};

/// Runs every shipped pipeline on a copy of `graph` (stand-in weights and
/// inputs drawn from `seed`) and checks the property.
PropertyOutcome checkShippedPipelines(const Graph &graph, uint64_t seed);

} // namespace graphopt::testing
