//===- PassProperty.cpp - The pass fuzzer's property, for one graph --------===//
#include "graphopt/Testing/PassProperty.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/OutputVerifier.h"

#include <absl/strings/str_cat.h>

namespace graphopt::testing {

namespace {

const PipelineCase kPipelines[] = {
    {"repeat{cse,canonicalize,dce}", true},
    {"checkpoint{activations=30%,cost=flops,unmet=closest}", false},
    // The block-structured planner (blocks from repeated shapes) and a peak
    // budget (the budget ladder); planner=milp and planner=torch run a helper
    // process per plan and are fuzzed by test/Checkpoint's lit tests instead.
    {"checkpoint{activations=30%,cost=flops,unmet=closest,planner=structured}", false},
    {"checkpoint{budget=60%,cost=flops,unmet=closest}", false},
    {"reinplace", true},
    {"add-optimizer", false},
    {"repeat{cse,canonicalize,dce},checkpoint{activations=30%,cost=flops,unmet=closest},reinplace", false},
    {"add-optimizer{kind=adamw},repeat{cse,canonicalize,dce},reinplace", false},
};

/// What verifying one pipeline's rewrite found (`why` says how it fails).
enum class Verdict { Holds, Unrunnable, Fails };

Verdict verifyCase(const PipelineCase &pc, const Graph &reference, const Graph &rewritten, WeightStore &weights,
                   const std::vector<at::Tensor> &inputs, int64_t peakBefore, std::string &why) {
  VerifierOptions vopts;
  vopts.bitwise = true;
  auto verified = verifyRewrite(reference, rewritten, weights, inputs, vopts);
  if (!verified.ok()) {
    // A generated step PyTorch itself refuses to run (an in-place write from
    // an operand overlapping it) tests no pass.
    if (llvm::StringRef(std::string(verified.status().message())).startswith("original graph:"))
      return Verdict::Unrunnable;
    why = absl::StrCat("the rewritten graph could not run: ", verified.status().message());
    return Verdict::Fails;
  }
  if (!verified->passed) {
    llvm::raw_string_ostream os(why);
    os << "verification failed\n";
    verified->print(os);
    return Verdict::Fails;
  }
  if (pc.peakMustNotRise) {
    int64_t after = LivenessAnalysis::compute(rewritten)->peakBytes;
    if (after > peakBefore) {
      why = absl::StrCat("the simulated peak rose from ", peakBefore, " to ", after);
      return Verdict::Fails;
    }
  }
  return Verdict::Holds;
}

} // namespace

llvm::ArrayRef<PipelineCase> shippedPipelines() { return kPipelines; }

PropertyOutcome checkShippedPipelines(const Graph &graph, uint64_t seed) {
  PropertyOutcome out;
  auto fail = [&](const PipelineCase &pc, absl::string_view what) {
    out.failures.push_back(absl::StrCat("-passes='", pc.pipeline, "': ", what));
  };
  WeightStore weights;
  if (absl::Status st = fillMissingWeights(graph, weights, seed).status(); !st.ok()) {
    out.failures.push_back(absl::StrCat("stand-in weights: ", st.message()));
    return out;
  }
  auto inputs = makeExampleInputs(graph, seed);
  if (!inputs.ok()) {
    out.failures.push_back(absl::StrCat("stand-in inputs: ", inputs.status().message()));
    return out;
  }
  int64_t peakBefore = LivenessAnalysis::compute(graph)->peakBytes;

  for (const PipelineCase &pc : kPipelines) {
    std::unique_ptr<Graph> rewritten = graph.clone();
    OptimizerOptions options;
    options.verifyEach = true;
    options.keepVerificationBaseline = true;
    options.out = &llvm::nulls(); // remarks (dce's unused inputs) say nothing here
    GraphOptimizer optimizer(options);
    if (absl::Status st = optimizer.addPipeline(pc.pipeline); !st.ok()) {
      fail(pc, st.message());
      continue;
    }
    ExecutionContext context;
    context.weights = &weights;
    context.inputs = *inputs;
    optimizer.analyses().setExecutionContext(context);
    auto changed = optimizer.run(*rewritten);
    if (!changed.ok()) {
      if (changed.status().code() == absl::StatusCode::kInternal) {
        fail(pc, changed.status().message());
        continue;
      }
      // A memory budget no plan reaches (OUT_OF_RANGE) says nothing about
      // the pass's soundness; it is counted apart.
      if (changed.status().code() == absl::StatusCode::kOutOfRange)
        out.budgetUnreachable = true;
      else
        out.refused = true;
      out.refusals.emplace_back(pc.pipeline, std::string(changed.status().message()));
      continue;
    }
    ++out.rewrites;
    const Graph &reference =
        optimizer.verificationBaseline() ? *optimizer.verificationBaseline() : graph;
    std::string why;
    Verdict v = verifyCase(pc, reference, *rewritten, weights, *inputs, peakBefore, why);
    if (v == Verdict::Unrunnable) {
      out.unrunnable = true;
      break;
    }
    if (v == Verdict::Fails)
      fail(pc, why);
  }
  return out;
}

} // namespace graphopt::testing
