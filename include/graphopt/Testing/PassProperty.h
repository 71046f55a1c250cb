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

#include "graphopt/Pass/PassTraits.h"
#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"

#include "AddOptimizerPass.h" // passes/: the hyperparameters the reference is held to

#include <ATen/core/Tensor.h>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace graphopt::testing {

/// A pipeline the fuzzer runs, as the pass that owns it declares it
/// (PassTraits.h).
using PipelineCase = FuzzPipeline;

/// The pipelines every registered pass (not the hidden test passes) declares
/// in its traits (PassTraits::fuzz), by pass name: what the project ships,
/// and their composition.
std::vector<PipelineCase> shippedPipelines();

/// What became of one pipeline on one graph.
enum class PipelineVerdict : uint8_t { Verified, Refused, BudgetUnreachable, Unrunnable, Failed };

struct PropertyOutcome {
  /// One per shipped pipeline, in order (Unrunnable for those after a
  /// reference PyTorch itself does not run: the graph tests nothing).
  std::vector<PipelineVerdict> verdicts;
  unsigned rewrites = 0;           ///< rewrites verified
  bool refused = false;            ///< some pipeline refused the graph, clearly
  bool budgetUnreachable = false;  ///< some checkpoint budget no plan reaches (OUT_OF_RANGE)
  bool unrunnable = false;         ///< PyTorch itself does not run the generated step
  /// Each refusal: the pipeline and its message.
  std::vector<std::pair<std::string, std::string>> refusals;
  /// Each failure: "-passes='...': what went wrong".
  std::vector<std::string> failures;
};

/// `steps` steps of add-optimizer's graph (`withOptimizer`, the graph right
/// after the pass, with hyperparameters `h`; its updates kept from step to
/// step) against the kernels torch.optim's fused path calls
/// (`_foreach_add_` and `_fused_adamw_`, or `_fused_sgd_`, state from zero)
/// on the gradients `before` gives at each step's parameters: "" when every
/// parameter agrees element for element (rtol 1e-4, atol 1e-6), else which
/// does not.
std::string checkOptimizerSteps(const Graph &before, const Graph &withOptimizer,
                                const AddOptimizerPass::Hyperparameters &h,
                                const WeightStore &weights, const std::vector<at::Tensor> &inputs,
                                int steps);

/// checkOptimizerSteps for one step of add-optimizer's defaults (AdamW).
std::string checkAdamWStep(const Graph &before, const Graph &withOptimizer, WeightStore &weights,
                           const std::vector<at::Tensor> &inputs);

/// Runs every shipped pipeline on a copy of `graph` (stand-in weights and
/// inputs drawn from `seed`) and checks the property: each rewrite verifies
/// bitwise against the graph before it, and where a pipeline adds the
/// optimizer (add-optimizer changes what the step computes: what follows it
/// is verified against its output), the parameters after three of its steps
/// against torch.optim's kernels (checkOptimizerSteps) with the pass's own
/// hyperparameters; a graph add-optimizer made that does not run fails (only
/// a generated step PyTorch itself does not run is unrunnable).
PropertyOutcome checkShippedPipelines(const Graph &graph, uint64_t seed);

/// A refusal's reason without what differs graph to graph (digits, the parts
/// in parentheses, what comes before the first ": "), at most `n` characters,
/// so that refusals group by reason.
std::string refusalReason(llvm::StringRef message, size_t n = 110);

} // namespace graphopt::testing
