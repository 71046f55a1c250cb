//===- PassBenchmarks.cpp - Liveness on large synthetic graphs ------------===//
//
//   build/bin/PassBenchmarks
//
// A synthetic training graph of N nodes: a forward chain whose activations
// the backward chain reads in reverse (the shape of a real joint graph), run
// through LivenessAnalysis. Goal: 100k nodes in at most 100 ms, growth close
// to linear (ns_per_node roughly flat across sizes).
//
// BM_PipelineOverhead: what the pass infrastructure adds. Each iteration
// parses the graph's .gir text, then runs a pipeline of three passes that do
// nothing, configured as graph-opt configures it (a reproducer directory and
// the input file named, so nothing is copied while passes run; `copy=1`: no
// input file, one copy of the graph when the pipeline starts). Counter
// `pipeline_over_parse` is the pipeline's time over the parse's, both measured
// in the same iteration. Goal: at most 0.10 at 100k nodes.
//
// BM_RedundantOps: `cse,canonicalize,dce` (and each alone) on a synthetic
// training graph of N nodes full of work for them: each forward block
// computes a value twice (cse), transposes it twice (canonicalize), leaves a
// dead node (dce) and a random op (kept); the backward reads the blocks'
// results in reverse. Goal: at most 200 ms at 100k nodes, near-linear
// (ns_per_node roughly flat from 10k to 1M).
//
// BM_DefaultPipeline: the pipeline graph_opt's partitioner runs inside
// torch.compile (`repeat{cse,canonicalize,dce},checkpoint{activations=30%,
// cost=flops,measure=false}`) on the redundant graph; counters split the time
// by pass (repeat's includes the passes it runs) and the verifier. Goal
// (issue 53): under 0.5 s at 100k nodes.
//
// BM_CheckpointGreedy: checkpoint's planning on the training chain of N nodes
// (every forward activation a candidate): the recompute model (liveness,
// candidates, each one's cost alone) and the greedy planner at half the saved
// activations, simulator in the loop included. Counters: `model_ms` and
// `greedy_ms` split the time; `dropped` counts the activations chosen. Goal:
// at most 1 s at 100k nodes.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/GreedyPlanner.h"
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/Pass/GraphOptimizer.h"

#include <chrono>
#include <map>

#include "BenchmarkSizes.h"

#include <benchmark/benchmark.h>

using namespace graphopt;

namespace {

/// `sum(v)`, appended in the forward phase: a loss has one element.
Value *scalarLoss(Graph &g, Value *v) {
  c10::OperatorHandle sum = *resolveOperator("aten::sum");
  ValueType scalar = ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {}));
  return g.createNode(sum, {Argument::value(v), Argument::constant(Constant::none())}, {scalar},
                      Phase::Forward)
      ->output();
}

std::unique_ptr<Graph> makeTrainingChain(int64_t numNodes) {
  auto g = std::make_unique<Graph>("chain");
  ValueType t = ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {32, 32}));
  c10::OperatorHandle relu = *resolveOperator("aten::relu");
  c10::OperatorHandle mul = *resolveOperator("aten::mul.Tensor");
  Value *w = g->addInput("w", t, InputRole::Parameter, "w");
  std::vector<Value *> acts;
  Value *prev = g->addInput("x", t, InputRole::UserInput);
  for (int64_t i = 0; i < numNodes / 2; ++i) {
    prev = g->createNode(relu, {Argument::value(prev)}, {t}, Phase::Forward)->output();
    acts.push_back(prev);
  }
  Value *loss = scalarLoss(*g, acts.back());
  Value *grad = prev;
  for (auto it = acts.rbegin(); it != acts.rend() && g->numNodes() < static_cast<size_t>(numNodes); ++it)
    grad = g->createNode(mul, {Argument::value(grad), Argument::value(*it)}, {t}, Phase::Backward)
               ->output();
  g->addOutput(loss, OutputRole::Loss);
  g->addOutput(grad, OutputRole::Gradient, "w");
  (void)w;
  return g;
}

void BM_Liveness(benchmark::State &state) {
  auto g = makeTrainingChain(state.range(0));
  for (auto _ : state) {
    auto r = LivenessAnalysis::compute(*g);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0)); // items = nodes
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(state.range(0)), benchmark::Counter::kIsIterationInvariantRate |
                                               benchmark::Counter::kInvert);
}
BENCHMARK(BM_Liveness)->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);

// The whole alias analysis, on the same graphs (what passes that ask about
// writes build).
void BM_AliasInfo(benchmark::State &state) {
  auto g = makeTrainingChain(state.range(0));
  for (auto _ : state) {
    AliasInfo aliases(*g);
    benchmark::DoNotOptimize(aliases);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AliasInfo)->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);

// The roots alone (AliasFacts::RootsOnly), what liveness builds: BM_AliasRoots
// / BM_Liveness is the share of liveness's time its alias question costs.
void BM_AliasRoots(benchmark::State &state) {
  auto g = makeTrainingChain(state.range(0));
  for (auto _ : state) {
    AliasInfo aliases(*g, AliasFacts::RootsOnly);
    benchmark::DoNotOptimize(aliases);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AliasRoots)->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);

class NoOpPass : public OptimizationPass {
public:
  llvm::StringRef name() const override { return "no-op"; }
  llvm::StringRef description() const override { return "does nothing"; }
};

void BM_PipelineOverhead(benchmark::State &state) {
  std::string text = printGraphToString(*makeTrainingChain(state.range(0)));
  bool copy = state.range(1) != 0;
  using Clock = std::chrono::steady_clock;
  double parseSeconds = 0, pipelineSeconds = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    auto g = parseGraph(text);
    auto parsed = Clock::now();
    OptimizerOptions options;
    options.reproducerDir = "/nonexistent/graph-opt-benchmark"; // only written on a failure
    if (!copy)
      options.inputPath = "chain.gir";
    GraphOptimizer optimizer(options);
    for (int i = 0; i < 3; ++i)
      optimizer.addPass(std::make_unique<NoOpPass>());
    auto changed = optimizer.run(**g);
    auto done = Clock::now();
    if (!g.ok() || !changed.ok())
      state.SkipWithError("parse or pipeline failed");
    parseSeconds += std::chrono::duration<double>(parsed - start).count();
    pipelineSeconds += std::chrono::duration<double>(done - parsed).count();
  }
  state.counters["parse_ms"] = 1e3 * parseSeconds / state.iterations();
  state.counters["pipeline_ms"] = 1e3 * pipelineSeconds / state.iterations();
  state.counters["pipeline_over_parse"] = pipelineSeconds / parseSeconds;
}
void pipelineSizes(benchmark::internal::Benchmark *b) {
  b->ArgNames({"nodes", "copy"});
  if (bench::smokeMode()) {
    b->Args({1000, 0})->Args({1000, 1})->Iterations(1);
    return;
  }
  b->Args({100000, 0})->Args({100000, 1});
}
BENCHMARK(BM_PipelineOverhead)->Apply(pipelineSizes)->Unit(benchmark::kMillisecond);

/// Blocks of six forward nodes, one backward node each:
///   a = exp(p); b = exp(p); c = mul(a, b); t1 = t(c); t2 = t(t1); dead = sin(t2);
///   p' = relu(t2) ... backward: g = mul(g, p').
std::unique_ptr<Graph> makeRedundantGraph(int64_t numNodes) {
  auto g = std::make_unique<Graph>("redundant");
  ValueType t = ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {16, 16}));
  ValueType tt = ValueType::ofTensor(TensorType(c10::kFloat, {16, 16}, {1, 16}));
  auto op = [](const char *name) { return *resolveOperator(name); };
  c10::OperatorHandle exp = op("aten::exp"), mul = op("aten::mul.Tensor"), tr = op("aten::t"),
                      sin = op("aten::sin"), relu = op("aten::relu"),
                      bern = op("aten::bernoulli.p");
  auto node = [&](const c10::OperatorHandle &o, std::vector<Argument> args, ValueType type,
                  Phase phase = Phase::Forward) {
    return g->createNode(o, args, {type}, phase)->output();
  };
  Value *p = g->addInput("x", t, InputRole::UserInput);
  std::vector<Value *> saved;
  for (int64_t block = 0; block < numNodes / 9; ++block) {
    Value *a = node(exp, {Argument::value(p)}, t);
    Value *b = node(exp, {Argument::value(p)}, t);
    Value *c = node(mul, {Argument::value(a), Argument::value(b)}, t);
    Value *t1 = node(tr, {Argument::value(c)}, tt);
    Value *t2 = node(tr, {Argument::value(t1)}, t);
    node(sin, {Argument::value(t2)}, t);
    node(bern, {Argument::value(t2), Argument::constant(Constant::ofFloat(0.5)),
                Argument::constant(Constant::none())},
         t);
    p = node(relu, {Argument::value(t2)}, t);
    saved.push_back(p);
  }
  Value *loss = scalarLoss(*g, p);
  Value *grad = p;
  for (auto it = saved.rbegin(); it != saved.rend(); ++it)
    grad = node(mul, {Argument::value(grad), Argument::value(*it)}, t, Phase::Backward);
  g->addOutput(loss, OutputRole::Loss);
  g->addOutput(grad, OutputRole::InputGradient, "x");
  return g;
}

/// Runs `pipeline` on a fresh copy of the redundant graph of state.range(0)
/// nodes per iteration (copying and freeing the graph untimed). Counters: the
/// structural verifier's share (it runs after each pass that changed the
/// graph), each pass's own time (`<pass>_ms`; a group's includes the passes it
/// runs) and ns per node. `mustChange`: a pipeline that changes nothing is an
/// error (the graph is built to give each pass work).
void runPipelineBenchmark(benchmark::State &state, const char *pipeline, bool mustChange) {
  auto original = makeRedundantGraph(state.range(0));
  double verifySeconds = 0;
  std::map<std::string, double> passSeconds;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Graph> g = original->clone();
    GraphOptimizer optimizer;
    absl::Status added = optimizer.addPipeline(pipeline);
    state.ResumeTiming();
    if (!added.ok()) {
      state.SkipWithError(std::string(added.message()).c_str());
      break;
    }
    auto changed = optimizer.run(*g);
    if (!changed.ok() || (mustChange && !*changed)) {
      state.SkipWithError(changed.ok() ? "the pipeline changed nothing"
                                       : std::string(changed.status().message()).c_str());
      break;
    }
    for (const PassTiming &t : optimizer.timings()) {
      verifySeconds += t.verifySeconds;
      passSeconds[t.pass] += t.seconds;
    }
    state.PauseTiming();
    g.reset(); // freeing the graph is not the passes' time
    state.ResumeTiming();
  }
  double n = static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.counters["verify_ms"] = 1e3 * verifySeconds / n;
  for (const auto &[pass, seconds] : passSeconds)
    state.counters[pass + "_ms"] = 1e3 * seconds / n;
  state.counters["nodes"] = static_cast<double>(original->numNodes());
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(original->numNodes()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_RedundantOps(benchmark::State &state, const char *pipeline) {
  runPipelineBenchmark(state, pipeline, /*mustChange=*/true);
}
BENCHMARK_CAPTURE(BM_RedundantOps, cse_canonicalize_dce, "cse,canonicalize,dce")
    ->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RedundantOps, cse, "cse")
    ->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RedundantOps, canonicalize, "canonicalize")
    ->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RedundantOps, dce, "dce")
    ->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);

/// The pipeline graph_opt's partitioner runs inside torch.compile
/// (python/graph_opt/joint.py's DEFAULT_PIPELINE with the options it adds
/// there), on the redundant graph: what planning costs a compile, per node.
void BM_DefaultPipeline(benchmark::State &state) {
  runPipelineBenchmark(
      state, "repeat{cse,canonicalize,dce},checkpoint{activations=30%,cost=flops,measure=false}",
      /*mustChange=*/false);
}
BENCHMARK(BM_DefaultPipeline)->Apply(bench::sizes<10000, 100000, 1000000>)->Unit(benchmark::kMillisecond);

void BM_CheckpointGreedy(benchmark::State &state) {
  auto g = makeTrainingChain(state.range(0));
  double modelSeconds = 0, greedySeconds = 0;
  size_t dropped = 0, simulations = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto model = RecomputeModel::build(*g, std::vector<double>(g->numNodes(), 1e-5), {},
                                       BoundedMemory::SavedActivations);
    if (!model.ok()) {
      state.SkipWithError(std::string(model.status().message()).c_str());
      return;
    }
    auto t1 = std::chrono::steady_clock::now();
    auto plan = planGreedy(*model, model->boundedPeak() / 2);
    if (!plan.ok() || !plan->meetsBudget) {
      state.SkipWithError(plan.ok() ? "the greedy did not meet half the activations"
                                    : std::string(plan.status().message()).c_str());
      return;
    }
    auto t2 = std::chrono::steady_clock::now();
    modelSeconds += std::chrono::duration<double>(t1 - t0).count();
    greedySeconds += std::chrono::duration<double>(t2 - t1).count();
    dropped = plan->dropped.size();
    simulations = plan->simulations;
  }
  double n = static_cast<double>(state.iterations());
  state.counters["model_ms"] = modelSeconds / n * 1e3;
  state.counters["greedy_ms"] = greedySeconds / n * 1e3;
  state.counters["dropped"] = static_cast<double>(dropped);
  state.counters["simulations"] = static_cast<double>(simulations);
}
BENCHMARK(BM_CheckpointGreedy)->Apply(bench::sizes<10000, 100000>)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
