//===- PassProperty.cpp - The pass fuzzer's property, for one graph --------===//
#include "graphopt/Testing/PassProperty.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "graphopt/Testing/SimulatedWorld.h"

#include <ATen/ops/zeros_like.h>
#include <ATen/core/Tensor.h>

#include <cmath>
#include <functional>
#include <iterator>
#include <map>

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
    // A bucket of 256 bytes makes several buckets on most graphs.
    {"data-parallel{world=2,bucket=256}", false, 2, /*bitwise=*/false},
    {"shard-parameters{world=2}", false, 2, /*bitwise=*/false},
};

/// What verifying one pipeline's rewrite found (`why` says how it fails).
enum class Verdict { Holds, Unrunnable, Fails };

/// torch.optim.AdamW's defaults, which add-optimizer's defaults are.
constexpr double kLr = 1e-3, kWeightDecay = 1e-2, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
/// The fused kernel evaluates the update in another order than the for-loop
/// (AddOptimizerTest's eager tolerances): a wrong update (a missed step, a
/// misread gradient) moves a weight by ~lr, far above these.
constexpr double kUpdateRtol = 1e-4, kUpdateAtol = 1e-6;

/// Each parameter after torch.optim.AdamW's first step on `original`'s
/// gradients (tied parameters: their gradients summed, one update), by target.
absl::StatusOr<std::map<std::string, at::Tensor>> adamwFirstStep(
    const Graph &original, WeightStore &weights, const std::vector<at::Tensor> &inputs) {
  ExecutionOptions exec;
  exec.captureWrittenInputs = true;
  Executor executor(original, weights, exec);
  auto run = executor.run(inputs);
  if (!run.ok())
    return run.status();
  // torch.optim steps a parameter as the step left it (a step may write a
  // parameter in place, through a view of it).
  std::map<std::string, at::Tensor> leftBy;
  for (const auto &[index, value] : run->writtenInputs)
    leftBy[original.inputs()[index].target] = value;
  std::map<std::string, at::Tensor> grads;
  for (size_t i = 0; i < original.outputs().size(); ++i) {
    const GraphOutput &out = original.outputs()[i];
    if (out.role != OutputRole::Gradient)
      continue;
    // A tied parameter's update is its owner's.
    std::string target = out.target;
    for (const GraphInput &in : original.inputs())
      if (in.target == out.target && in.tiedTo)
        target = original.inputs()[in.tiedTo->index()].target;
    // In the parameter's dtype, as torch.optim computes: a gradient whose
    // square overflows float32 makes exp_avg_sq inf there (no update), which
    // a double-precision reference would not reproduce.
    at::Tensor g = run->outputs[i];
    grads[target] = grads.count(target) ? grads[target].add(g) : g;
  }
  std::map<std::string, at::Tensor> after;
  for (const auto &[target, g] : grads) {
    const at::Tensor *p = weights.lookup(target);
    if (!p)
      return absl::InternalError(absl::StrCat("no weight for parameter '", target, "'"));
    auto written = leftBy.find(target);
    at::Tensor start = written != leftBy.end() ? written->second : *p;
    at::Tensor param = start.mul(1 - kLr * kWeightDecay);
    // torch.optim's own calls from zero state (lerp_, addcmul_), so a square
    // overflows where it overflows there.
    at::Tensor expAvg = at::zeros_like(g).lerp_(g, 1 - kBeta1);
    at::Tensor expAvgSq = at::zeros_like(g).addcmul_(g, g, 1 - kBeta2);
    const double biasCorrection1 = 1 - kBeta1, biasCorrection2 = 1 - kBeta2;
    at::Tensor denom = expAvgSq.sqrt().div(std::sqrt(biasCorrection2)).add(kEps);
    after[target] = param.sub(expAvg.div(denom).mul(kLr / biasCorrection1));
  }
  return after;
}

} // namespace

llvm::ArrayRef<PipelineCase> shippedPipelines() { return kPipelines; }

/// add-optimizer's step (`withOptimizer`, the graph right after the pass)
/// against adamwFirstStep on the graph before it; "" when every parameter
/// agrees, else which does not.
std::string checkAdamWStep(const Graph &before, const Graph &withOptimizer,
                               WeightStore &weights, const std::vector<at::Tensor> &inputs) {
  auto want = adamwFirstStep(before, weights, inputs);
  if (!want.ok())
    return absl::StrCat("torch.optim's reference could not run: ", want.status().message());
  ExecutionOptions exec;
  exec.captureWrittenInputs = true;
  Executor executor(withOptimizer, weights, exec);
  auto run = executor.run(inputs);
  if (!run.ok())
    return absl::StrCat("the step with the optimizer could not run: ", run.status().message());
  size_t compared = 0;
  for (const auto &[index, value] : run->writtenInputs) {
    const GraphInput &in = withOptimizer.inputs()[index];
    auto it = want->find(in.target);
    if (in.role != InputRole::Parameter || it == want->end())
      continue;
    ++compared;
    // Equal values (infinities included) and NaN on both sides agree: a
    // gradient that overflows makes both updates NaN.
    const at::Tensor want = it->second.to(at::kDouble);
    at::Tensor got = value.to(at::kDouble);
    at::Tensor agree = got.eq(want).logical_or(got.isnan().logical_and(want.isnan()));
    at::Tensor diff = got.sub(want).abs().masked_fill(agree, 0.0).nan_to_num(INFINITY, INFINITY);
    at::Tensor bound =
        want.nan_to_num(0.0, 0.0, 0.0).abs().max().mul(kUpdateRtol).add(kUpdateAtol);
    if (!diff.le(bound).all().item().toBool())
      return absl::StrCat("parameter '", in.target, "' after add-optimizer's step differs from "
                          "torch.optim.AdamW's by up to ", diff.max().item().toDouble());
  }
  if (compared != want->size())
    return absl::StrCat("add-optimizer's step updated ", compared, " of the ", want->size(),
                        " parameters torch.optim.AdamW updates");
  return "";
}

Verdict verifyCase(const PipelineCase &pc, const Graph &reference, const Graph &rewritten, WeightStore &weights,
                   const std::vector<at::Tensor> &inputs, int64_t peakBefore, std::string &why) {
  VerifierOptions vopts;
  vopts.bitwise = pc.bitwise;
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
    verified->print(os, /*eachResult=*/true);
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


namespace {

/// What else a verified rewrite must satisfy: "" when it does.
using ExtraCheck = std::function<std::string(const Graph &rewritten)>;

/// One pipeline on a copy of `graph`: its verdict; a refusal or a failure is
/// added to `out` with what it said.
PipelineVerdict runCase(const PipelineCase &pc, const Graph &graph, WeightStore &weights,
                        const std::vector<at::Tensor> &inputs, int64_t peakBefore,
                        PropertyOutcome &out, const ExtraCheck &extra = {}) {
  auto fail = [&](absl::string_view what) {
    out.failures.push_back(absl::StrCat("-passes='", pc.pipeline, "': ", what));
    return PipelineVerdict::Failed;
  };
  std::unique_ptr<Graph> rewritten = graph.clone();
  OptimizerOptions options;
  options.verifyEach = true;
  options.keepVerificationBaseline = true;
  options.out = &llvm::nulls(); // remarks (dce's unused inputs) say nothing here
  GraphOptimizer optimizer(options);
  if (absl::Status st = optimizer.addPipeline(pc.pipeline); !st.ok())
    return fail(st.message());
  ExecutionContext context;
  context.weights = &weights;
  context.inputs = inputs;
  optimizer.analyses().setExecutionContext(context);
  auto changed = optimizer.run(*rewritten);
  if (!changed.ok()) {
    if (changed.status().code() == absl::StatusCode::kInternal)
      return fail(changed.status().message());
    out.refusals.emplace_back(pc.pipeline, std::string(changed.status().message()));
    // A memory budget no plan reaches (OUT_OF_RANGE) says nothing about the
    // pass's soundness; it is counted apart.
    if (changed.status().code() == absl::StatusCode::kOutOfRange) {
      out.budgetUnreachable = true;
      return PipelineVerdict::BudgetUnreachable;
    }
    out.refused = true;
    return PipelineVerdict::Refused;
  }
  ++out.rewrites;
  const Graph *baseline = optimizer.verificationBaseline();
  std::string why;
  Verdict v = verifyCase(pc, baseline ? *baseline : graph, *rewritten, weights, inputs,
                         peakBefore, why);
  if (v == Verdict::Unrunnable)
    return PipelineVerdict::Unrunnable;
  // A pass that changes what the step computes (add-optimizer) is held to
  // torch.optim on the graph before it: otherwise it would be compared with
  // its own output only.
  if (v == Verdict::Holds && baseline && optimizer.verificationBaselinePass() == "add-optimizer")
    if (std::string bad = checkAdamWStep(graph, *baseline, weights, inputs); !bad.empty())
      return fail(bad);
  if (v == Verdict::Holds && extra)
    if (std::string bad = extra(*rewritten); !bad.empty())
      return fail(bad);
  return v == Verdict::Fails ? fail(why) : PipelineVerdict::Verified;
}

/// A pipeline for a world of ranks (pc.world), on every rank of a simulated
/// world: each rank's verdict must be the same; a failure names its rank.
PipelineVerdict runOnEveryRank(const PipelineCase &pc, const Graph &graph, uint64_t seed,
                               int64_t peakBefore, const AcrossRanksReference &reference,
                               PropertyOutcome &out) {
  // One world per size, for the process: its threads and their OpenMP teams
  // are made once.
  static std::map<int, std::unique_ptr<SimulatedWorld>> worlds;
  std::unique_ptr<SimulatedWorld> &slot = worlds[pc.world];
  if (!slot)
    slot = std::make_unique<SimulatedWorld>(pc.world);
  SimulatedWorld &world = *slot;
  std::vector<PropertyOutcome> outcomes(pc.world);
  std::vector<PipelineVerdict> verdicts(pc.world, PipelineVerdict::Failed);
  std::vector<absl::Status> statuses = world.run([&](int rank) -> absl::Status {
    WeightStore weights;
    if (auto filled = fillMissingWeights(graph, weights, seed); !filled.ok())
      return filled.status();
    auto inputs = makeExampleInputs(graph, seed);
    if (!inputs.ok())
      return inputs.status();
    verdicts[rank] = runCase(pc, graph, weights, *inputs, peakBefore, outcomes[rank],
                             [&](const Graph &rewritten) {
                               return checkAcrossRanks(graph, rewritten, seed, rank, pc.world,
                                                       reference);
                             });
    return absl::OkStatus();
  });
  PipelineVerdict verdict = verdicts[0];
  for (int rank = 0; rank < pc.world; ++rank) {
    if (!statuses[rank].ok()) {
      out.failures.push_back(absl::StrCat("-passes='", pc.pipeline, "' on rank ", rank, ": ",
                                          statuses[rank].message()));
      verdict = PipelineVerdict::Failed;
    }
    for (const std::string &f : outcomes[rank].failures)
      out.failures.push_back(absl::StrCat("rank ", rank, ": ", f));
    if (verdicts[rank] != verdicts[0] && verdict != PipelineVerdict::Failed) {
      out.failures.push_back(absl::StrCat("-passes='", pc.pipeline, "': rank ", rank,
                                          " came to another verdict than rank 0"));
      verdict = PipelineVerdict::Failed;
    }
    if (verdicts[rank] == PipelineVerdict::Failed)
      verdict = PipelineVerdict::Failed;
  }
  // The ranks rewrite alike: rank 0's refusals and counts stand for all.
  const PropertyOutcome &first = outcomes[0];
  out.refusals.insert(out.refusals.end(), first.refusals.begin(), first.refusals.end());
  out.rewrites += first.rewrites;
  out.refused |= first.refused;
  out.budgetUnreachable |= first.budgetUnreachable;
  return verdict;
}

} // namespace

PropertyOutcome checkShippedPipelines(const Graph &graph, uint64_t seed) {
  PropertyOutcome out;
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
  const int64_t peakBefore = LivenessAnalysis::compute(graph)->peakBytes;
  // The original on each rank's inputs, by world size: made once, for every
  // pipeline and rank.
  std::map<int, AcrossRanksReference> references;
  auto referenceFor = [&](int world) -> const AcrossRanksReference & {
    auto it = references.find(world);
    if (it == references.end())
      it = references.emplace(world, referenceAcrossRanks(graph, seed, world)).first;
    return it->second;
  };
  for (const PipelineCase &pc : kPipelines) {
    PipelineVerdict v =
        pc.world > 1 ? runOnEveryRank(pc, graph, seed, peakBefore, referenceFor(pc.world), out)
                     : runCase(pc, graph, weights, *inputs, peakBefore, out);
    out.verdicts.push_back(v);
    if (v == PipelineVerdict::Unrunnable) {
      // A step PyTorch itself does not run tests nothing, in any pipeline.
      out.unrunnable = true;
      out.verdicts.resize(std::size(kPipelines), PipelineVerdict::Unrunnable);
      break;
    }
  }
  return out;
}

std::string refusalReason(llvm::StringRef message, size_t n) {
  std::string s;
  int depth = 0;
  for (char c : message) {
    depth += c == '(';
    if (depth == 0 && !(c >= '0' && c <= '9'))
      s += c;
    depth -= c == ')' && depth > 0;
  }
  size_t colon = s.find(": ");
  if (colon != std::string::npos && colon + 2 < s.size())
    s = s.substr(colon + 2);
  return s.substr(0, n);
}

} // namespace graphopt::testing
