//===- PassProperty.cpp - The pass fuzzer's property, for one graph --------===//
#include "graphopt/Testing/PassProperty.h"

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "graphopt/Testing/SimulatedWorld.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/core/Tensor.h>

#include <cmath>
#include <functional>
#include <iterator>
#include <map>

#include <absl/strings/str_cat.h>

namespace graphopt::testing {

namespace {


/// What verifying one pipeline's rewrite found (`why` says how it fails).
enum class Verdict { Holds, Unrunnable, Fails };

/// Per element: |got - want| <= kUpdateAtol + kUpdateRtol * |want|. The
/// reference runs the kernels the pass emits, on gradients of the graph
/// before it, so an update agrees to rounding (the rewritten graph's
/// gradients may round otherwise: cse, reinplace); a wrong update (a missed
/// step, a misread gradient or state, another hyperparameter) moves a weight
/// by ~lr, far above these.
constexpr double kUpdateRtol = 1e-4, kUpdateAtol = 1e-6;
/// Steps the optimizer reference runs: the first AdamW step is lr * sign(g)
/// whatever the moments' decay, the second and third are not; SGD's momentum
/// buffer is read from the second on.
constexpr int kOptimizerSteps = 3;

/// A step's batch: copies of `inputs`, so that what one step writes into its
/// user inputs (kept with keepUpdates) reaches neither the next step nor the
/// other side of the comparison; every step gets the same batch.
std::vector<at::Tensor> batchOf(const std::vector<at::Tensor> &inputs) {
  std::vector<at::Tensor> batch;
  batch.reserve(inputs.size());
  for (const at::Tensor &t : inputs)
    batch.push_back(t.defined() ? t.clone() : t);
  return batch;
}

/// torch.optim's state for one parameter, as its fused path keeps it.
struct OptimizerState {
  at::Tensor expAvg, expAvgSq, step, momentum;
};

/// One step of torch.optim's fused path on `param` (in place): AdamW counts
/// the step first (`torch._foreach_add_(state_steps, 1)`), then
/// `torch._fused_adamw_`; SGD calls `torch._fused_sgd_`, its momentum buffer
/// made on the first step (torch/optim/adamw.py, sgd.py).
void torchOptimStep(const AddOptimizerPass::Hyperparameters &h, at::Tensor param,
                    const at::Tensor &grad, OptimizerState &state, bool first) {
  if (h.kind == AddOptimizerPass::Kind::AdamW) {
    if (first) {
      state.expAvg = at::zeros_like(param);
      state.expAvgSq = at::zeros_like(param);
      state.step = at::zeros({}, param.options().dtype(at::kFloat));
    }
    at::_foreach_add_(at::TensorList{state.step}, 1);
    at::_fused_adamw_(at::TensorList{param}, at::TensorList{grad},
                      at::TensorList{state.expAvg}, at::TensorList{state.expAvgSq}, {},
                      at::TensorList{state.step}, h.lr, h.beta1, h.beta2, h.weightDecay, h.eps,
                      /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
  std::vector<at::Tensor> buffers;
  if (h.momentum != 0) {
    if (first)
      state.momentum = at::empty_like(param);
    buffers.push_back(state.momentum);
  }
  at::_fused_sgd_(at::TensorList{param}, at::TensorList{grad}, buffers, h.weightDecay,
                  h.momentum, h.lr, /*dampening=*/0, /*nesterov=*/false, /*maximize=*/false,
                  /*is_first_step=*/first);
}

/// Each parameter after `steps` steps of torch.optim (`h`) from zero state,
/// each on the gradients `original` gives at the parameters the last step
/// left (tied parameters: their gradients summed, one update), by target.
absl::StatusOr<std::map<std::string, at::Tensor>> torchOptimSteps(
    const Graph &original, const WeightStore &weights, const std::vector<at::Tensor> &inputs,
    const AddOptimizerPass::Hyperparameters &h, int steps) {
  WeightStore current;
  for (const std::string &name : weights.names())
    current.set(name, weights.lookup(name)->clone());
  std::map<std::string, OptimizerState> states;
  std::map<std::string, at::Tensor> after;
  for (int k = 0; k < steps; ++k) {
    // What the step writes in place is kept, as in training (a buffer's
    // running statistics; a parameter written through a view of it, which
    // torch.optim then steps as the step left it).
    ExecutionOptions exec;
    exec.keepUpdates = true;
    Executor executor(original, current, exec);
    auto run = executor.run(batchOf(inputs));
    if (!run.ok())
      return run.status();
    std::map<std::string, at::Tensor> grads;
    for (size_t i = 0; i < original.outputs().size(); ++i) {
      const GraphOutput &out = original.outputs()[i];
      if (out.role != OutputRole::Gradient)
        continue;
      std::string target = out.target;
      for (const GraphInput &in : original.inputs())
        if (in.target == out.target && in.tiedTo)
          target = original.inputs()[in.tiedTo->index()].target;
      // In the parameter's dtype, as torch.optim computes: a gradient whose
      // square overflows float32 makes exp_avg_sq inf there (no update).
      at::Tensor g = run->outputs[i];
      grads[target] = grads.count(target) ? grads[target].add(g) : g;
    }
    for (const auto &[target, g] : grads) {
      at::Tensor *p = current.lookup(target);
      if (!p)
        return absl::InternalError(absl::StrCat("no weight for parameter '", target, "'"));
      torchOptimStep(h, *p, g.contiguous(), states[target], k == 0);
      after[target] = *p;
    }
  }
  return after;
}

} // namespace

std::vector<PipelineCase> shippedPipelines() {
  std::vector<PipelineCase> out;
  for (const PassRegistry::Entry *e : PassRegistry::instance().entries())
    out.insert(out.end(), e->traits.fuzz.begin(), e->traits.fuzz.end());
  return out;
}

/// `steps` steps of add-optimizer's graph (`withOptimizer`, the graph right
/// after the pass, its updates kept from step to step) against
/// torchOptimSteps on the graph before it, with the pass's hyperparameters
/// `h`; "" when every parameter agrees element for element, else which does
/// not.
std::string checkOptimizerSteps(const Graph &before, const Graph &withOptimizer,
                                const AddOptimizerPass::Hyperparameters &h,
                                const WeightStore &weights, const std::vector<at::Tensor> &inputs,
                                int steps) {
  auto want = torchOptimSteps(before, weights, inputs, h, steps);
  if (!want.ok())
    return absl::StrCat("torch.optim's reference could not run: ", want.status().message());
  WeightStore mine;
  for (const std::string &name : weights.names())
    mine.set(name, weights.lookup(name)->clone());
  ExecutionOptions exec;
  exec.keepUpdates = true;
  Executor executor(withOptimizer, mine, exec);
  for (int k = 0; k < steps; ++k)
    if (auto run = executor.run(batchOf(inputs)); !run.ok())
      return absl::StrCat("the step with the optimizer could not run (step ", k + 1,
                          "): ", run.status().message());
  size_t compared = 0;
  for (const GraphInput &in : withOptimizer.inputs()) {
    auto it = want->find(in.target);
    if (in.role != InputRole::Parameter || it == want->end())
      continue;
    const at::Tensor *value = mine.lookup(in.target);
    if (!value)
      return absl::StrCat("parameter '", in.target, "' has no weight after the steps");
    ++compared;
    // Equal values (infinities included) and NaN on both sides agree: a
    // gradient that overflows makes both updates NaN.
    const at::Tensor wanted = it->second.to(at::kDouble);
    at::Tensor got = value->to(at::kDouble);
    at::Tensor agree = got.eq(wanted).logical_or(got.isnan().logical_and(wanted.isnan()));
    at::Tensor diff =
        got.sub(wanted).abs().masked_fill(agree, 0.0).nan_to_num(INFINITY, INFINITY);
    at::Tensor bound = wanted.abs().nan_to_num(0.0, 0.0, 0.0).mul(kUpdateRtol).add(kUpdateAtol);
    if (!diff.le(bound).all().item().toBool())
      return absl::StrCat("parameter '", in.target, "' after ", steps,
                          " steps of add-optimizer differs from torch.optim's by up to ",
                          diff.max().item().toDouble(), " (", diff.gt(bound).sum().item<int64_t>(),
                          " of ", diff.numel(), " elements out of tolerance)");
  }
  if (compared != want->size())
    return absl::StrCat("add-optimizer's step updated ", compared, " of the ", want->size(),
                        " parameters torch.optim updates");
  return "";
}

std::string checkAdamWStep(const Graph &before, const Graph &withOptimizer, WeightStore &weights,
                           const std::vector<at::Tensor> &inputs) {
  return checkOptimizerSteps(before, withOptimizer, AddOptimizerPass::Hyperparameters{},
                             weights, inputs, /*steps=*/1);
}

Verdict verifyCase(const PipelineCase &pc, const Graph &reference, const Graph &rewritten, WeightStore &weights,
                   const std::vector<at::Tensor> &inputs, int64_t peakBefore, std::string &why) {
  VerifierOptions vopts;
  vopts.bitwise = pc.bitwise;
  auto verified = verifyRewrite(reference, rewritten, weights, inputs, vopts);
  if (!verified.ok()) {
    // A generated step PyTorch itself refuses to run (an in-place write from
    // an operand overlapping it) tests no pass.
    if (llvm::StringRef(std::string(verified.status().message())).startswith("original graph:")) {
      why = std::string(verified.status().message());
      return Verdict::Unrunnable;
    }
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
  // Unrunnable is the generated step's verdict; a graph a pass made that does
  // not run (add-optimizer's, the baseline of what follows it) fails.
  if (v == Verdict::Unrunnable && baseline)
    return fail(absl::StrCat("the graph ", optimizer.verificationBaselinePass(),
                             " made does not run: ", why));
  if (v == Verdict::Unrunnable)
    return PipelineVerdict::Unrunnable;
  // A pass that changes what the step computes (add-optimizer) is held to
  // torch.optim's kernels on the graph before it, over several steps, with
  // its own hyperparameters: otherwise it would be compared with its own
  // output only.
  if (v == Verdict::Holds && baseline && optimizer.verificationBaselinePass() == "add-optimizer")
    for (const auto &pass : optimizer.passes())
      if (const auto *add = dynamic_cast<const AddOptimizerPass *>(pass.get()))
        if (std::string bad = checkOptimizerSteps(graph, *baseline, add->hyperparameters(),
                                                  weights, inputs, kOptimizerSteps);
            !bad.empty())
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
  // The original does not run on a rank's inputs: nothing to compare there,
  // unrunnable (not verified).
  if (!reference.unrunnable.empty())
    return PipelineVerdict::Unrunnable;
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
  const std::vector<PipelineCase> pipelines = shippedPipelines();
  for (const PipelineCase &pc : pipelines) {
    PipelineVerdict v =
        pc.world > 1 ? runOnEveryRank(pc, graph, seed, peakBefore, referenceFor(pc.world), out)
                     : runCase(pc, graph, weights, *inputs, peakBefore, out);
    out.verdicts.push_back(v);
    if (v == PipelineVerdict::Unrunnable) {
      // A step PyTorch itself does not run tests nothing, in any pipeline.
      out.unrunnable = true;
      out.verdicts.resize(pipelines.size(), PipelineVerdict::Unrunnable);
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
