//===- PassBenchmarks.cpp - Liveness on large synthetic graphs ------------===//
//
//   build/bin/PassBenchmarks
//
// A synthetic training graph of N nodes: a forward chain whose activations
// the backward chain reads in reverse (the shape of a real joint graph), run
// through LivenessAnalysis. Goal: 100k nodes in at most 100 ms, growth close
// to linear (ns_per_node roughly flat across sizes).
//
//===----------------------------------------------------------------------===//
#include "Liveness.h"

#include <benchmark/benchmark.h>

using namespace graphopt;

namespace {

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
  Value *grad = prev;
  for (auto it = acts.rbegin(); it != acts.rend() && g->numNodes() < static_cast<size_t>(numNodes); ++it)
    grad = g->createNode(mul, {Argument::value(grad), Argument::value(*it)}, {t}, Phase::Backward)
               ->output();
  g->addOutput(acts.back(), OutputRole::Loss);
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
BENCHMARK(BM_Liveness)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
