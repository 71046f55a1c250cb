//===- IRBenchmarks.cpp - Speed of building, printing, parsing, verifying -===//
//
// Synthetic graphs of N nodes (a residual chain of relu and add); each
// benchmark reports nodes per second, so near-linear growth shows as a flat
// rate across sizes.
//
//   build/bin/IRBenchmarks
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"

#include "BenchmarkSizes.h"

#include <benchmark/benchmark.h>

using namespace graphopt;

namespace {

std::unique_ptr<Graph> makeChain(int64_t numNodes) {
  auto g = std::make_unique<Graph>("chain");
  ValueType t = ValueType::ofTensor(TensorType::contiguous(c10::kFloat, {64, 64}));
  c10::OperatorHandle relu = *resolveOperator("aten::relu");
  c10::OperatorHandle add = *resolveOperator("aten::add.Tensor");
  Value *prev = g->addInput("x", t, InputRole::UserInput);
  Value *skip = prev;
  for (int64_t i = 0; i < numNodes; ++i) {
    Node *n = i % 2 == 0
                  ? g->createNode(relu, {Argument::value(prev)}, {t})
                  : g->createNode(add, {Argument::value(prev), Argument::value(skip),
                                        Argument::constant(Constant::ofInt(1))},
                                  {t});
    if (i % 2)
      skip = n->output();
    prev = n->output();
  }
  g->addOutput(prev, OutputRole::UserOutput);
  return g;
}

void perNode(benchmark::State &state) {
  state.SetItemsProcessed(state.iterations() * state.range(0)); // items = nodes
}

void BM_Build(benchmark::State &state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(makeChain(state.range(0)));
  perNode(state);
}

void BM_Print(benchmark::State &state) {
  auto g = makeChain(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(printGraphToString(*g));
  perNode(state);
}

void BM_Parse(benchmark::State &state) {
  std::string text = printGraphToString(*makeChain(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(parseGraph(text));
  perNode(state);
}

void BM_Verify(benchmark::State &state) {
  auto g = makeChain(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(verifyGraph(*g));
  perNode(state);
}

void BM_Clone(benchmark::State &state) {
  auto g = makeChain(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(g->clone());
  perNode(state);
}

} // namespace

BENCHMARK(BM_Build)->Apply(bench::sizes<1000, 10000, 100000>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Print)->Apply(bench::sizes<1000, 10000, 100000>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Parse)->Apply(bench::sizes<1000, 10000, 100000>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Verify)->Apply(bench::sizes<1000, 10000, 100000>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Clone)->Apply(bench::sizes<1000, 10000, 100000>)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
