//===- ExecutorBenchmarks.cpp - Executor overhead and a training step vs eager ===//
//
//   build/bin/ExecutorBenchmarks [--pt2 FILE.pt2 --torchscript FILE.pt]
//
// BM_ExecutorOverhead/N: a chain of N cheap operators (aten::add.Tensor on
// one-element tensors) run by the executor and, in the same iteration, the same
// operators called directly; it reports the executor's cost per node beyond
// the operator itself (goal: at most 2 us).
//
// BM_TrainingStep (with --pt2 and --torchscript): one training step of the same
// model run by the executor (the joint graph from torch.export) and by eager
// PyTorch (the traced training module's forward, then autograd's backward),
// alternating in one run. It reports the time ratio (goal: at most 1.05) and
// both peak CPU memories above the step's start, measured by the same tracking
// allocator (goal: executor not above eager).
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <ATen/ops/add.h>
#include <ATen/ops/ones.h>
#include "BenchmarkSizes.h"

#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>

#include <chrono>
#include <cstring>

using namespace graphopt;

namespace {

std::string gPt2, gTorchScript;

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void BM_ExecutorOverhead(benchmark::State &state) {
  const int64_t n = state.range(0);
  std::string text = "graph @chain {\n  input %x : f32[1] user_input\n  input %y : f32[1] user_input\n";
  std::string prev = "x";
  for (int64_t i = 0; i < n; ++i) {
    text += "  %v" + std::to_string(i) + " = aten::add.Tensor(%" + prev + ", %y) : f32[1]\n";
    prev = "v" + std::to_string(i);
  }
  text += "  output %" + prev + " user_output\n}\n";
  auto g = parseGraph(text);
  if (!g.ok()) {
    state.SkipWithError(std::string(g.status().message()).c_str());
    return;
  }
  WeightStore weights;
  Executor executor(**g, weights);
  // The verifier's executor also compares each result's layout with its
  // declared type (ExecutionOptions::checkLayouts); others skip it at one branch.
  ExecutionOptions checking;
  checking.checkLayouts = true;
  Executor checked(**g, weights, checking);
  at::Tensor x = at::ones({1}), y = at::ones({1});
  double execTime = 0, directTime = 0, checkedTime = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    auto r = executor.run({x, y});
    execTime += seconds(start);
    benchmark::DoNotOptimize(r);
    start = std::chrono::steady_clock::now();
    auto rc = checked.run({x, y});
    checkedTime += seconds(start);
    benchmark::DoNotOptimize(rc);
    start = std::chrono::steady_clock::now();
    at::Tensor v = x;
    for (int64_t i = 0; i < n; ++i)
      v = at::add(v, y);
    directTime += seconds(start);
    benchmark::DoNotOptimize(v);
  }
  double perNode = 1e6 / (static_cast<double>(state.iterations()) * n);
  state.counters["exec_us_per_node"] = execTime * perNode;
  state.counters["op_us_per_node"] = directTime * perNode;
  state.counters["overhead_us_per_node"] = (execTime - directTime) * perNode;
  state.counters["layout_check_us_per_node"] = (checkedTime - execTime) * perNode;
  state.counters["goal_us"] = 2.0;
}
BENCHMARK(BM_ExecutorOverhead)->Apply(bench::sizes<100, 1000, 10000>)->Unit(benchmark::kMillisecond);

void BM_TrainingStep(benchmark::State &state) {
  if (gPt2.empty() || gTorchScript.empty()) {
    state.SkipWithError("pass --pt2 FILE.pt2 --torchscript FILE.pt (tools/export, --mode train)");
    return;
  }
  auto model = importPt2(gPt2);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  std::vector<at::Tensor> inputs = model->exampleInputs;
  TrackingCpuAllocator &tracker = TrackingCpuAllocator::instance();
  CpuAllocatorScope hooks; // the eager steps too go through the tracker
  Executor executor(*model->graph, model->weights);

  // Eager: the traced training module run op by op (no graph optimization),
  // then autograd. Its weights are the module's own, of the same shapes.
  torch::jit::getProfilingMode() = false;
  torch::jit::getExecutorMode() = false;
  torch::jit::Module module = torch::jit::load(gTorchScript);
  module.train();
  std::vector<c10::IValue> eagerInputs(inputs.begin(), inputs.end());
  std::vector<at::Tensor> params;
  for (const auto &p : module.parameters())
    params.push_back(p);

  auto eagerStep = [&] {
    for (at::Tensor &p : params)
      p.mutable_grad().reset(); // like optimizer.zero_grad(set_to_none=True)
    at::Tensor loss = module.forward(eagerInputs).toTensor();
    torch::autograd::backward({loss});
    return loss;
  };
  // Warm up both (first calls allocate caches, resolve kernels).
  (void)executor.run(inputs);
  (void)eagerStep();

  double execTime = 0, eagerTime = 0;
  int64_t execPeak = 0, eagerPeak = 0;
  for (auto _ : state) {
    int64_t base = tracker.currentBytes();
    tracker.resetPeak();
    auto start = std::chrono::steady_clock::now();
    {
      auto r = executor.run(inputs);
      execTime += seconds(start);
      execPeak = std::max(execPeak, tracker.peakBytes() - base);
      benchmark::DoNotOptimize(r);
    }
    for (at::Tensor &p : params)
      p.mutable_grad().reset();
    base = tracker.currentBytes();
    tracker.resetPeak();
    start = std::chrono::steady_clock::now();
    {
      at::Tensor loss = module.forward(eagerInputs).toTensor();
      torch::autograd::backward({loss});
      eagerTime += seconds(start);
      eagerPeak = std::max(eagerPeak, tracker.peakBytes() - base);
    }
  }
  double n = static_cast<double>(state.iterations());
  state.counters["executor_ms"] = execTime / n * 1e3;
  state.counters["eager_ms"] = eagerTime / n * 1e3;
  state.counters["time_ratio"] = execTime / eagerTime;
  state.counters["executor_peak_MiB"] = static_cast<double>(execPeak) / (1 << 20);
  state.counters["eager_peak_MiB"] = static_cast<double>(eagerPeak) / (1 << 20);
  state.counters["memory_ratio"] = static_cast<double>(execPeak) / static_cast<double>(eagerPeak);
}

} // namespace

int main(int argc, char **argv) {
  // Our flags first; the rest go to Google Benchmark.
  std::vector<char *> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--pt2") && i + 1 < argc)
      gPt2 = argv[++i];
    else if (!std::strcmp(argv[i], "--torchscript") && i + 1 < argc)
      gTorchScript = argv[++i];
    else
      rest.push_back(argv[i]);
  }
  // The training step needs a model: registered only when one is given.
  if (!gPt2.empty() || !gTorchScript.empty())
    benchmark::RegisterBenchmark("BM_TrainingStep", BM_TrainingStep)
        ->Unit(benchmark::kMillisecond)
        ->Apply(bench::minSeconds<3>);
  int restc = static_cast<int>(rest.size());
  benchmark::Initialize(&restc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
