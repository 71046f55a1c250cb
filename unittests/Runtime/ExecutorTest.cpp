//===- ExecutorTest.cpp - Executor behaviour and its errors ---------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/FreePolicy.h"
#include "graphopt/Runtime/MemoryProbe.h"
#include "graphopt/Runtime/OutputVerifier.h"

#include <ATen/Context.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

using namespace graphopt;

namespace {

std::unique_ptr<Graph> parse(const char *text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

const char *kChain = R"(graph @chain {
  input %w : f32[64, 64] parameter "w"
  input %x : f32[64, 64] user_input
  %a = aten::mm(%x, %w) : f32[64, 64]
  %b = aten::relu(%a) : f32[64, 64]
  %c = aten::mm(%b, %w) : f32[64, 64]
  %d = aten::relu(%c) : f32[64, 64]
  %e = aten::sum(%d) : f32[]
  output %e loss
})";

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

} // namespace

TEST(ExecutorTest, FreesEachValueAfterItsLastUse) {
  auto g = parse(kChain);
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  NodeProfiler profiler(c10::Device(c10::DeviceType::CPU));
  Executor ex(*g, w);
  profiler.attach(ex);
  std::vector<at::Tensor> inputs = makeExampleInputs(*g, 0).value();
  profiler.beginRun();
  auto r = ex.run(inputs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int64_t tile = 64 * 64 * 4;
  const auto &p = profiler.profiles();
  ASSERT_EQ(p.size(), 5u);
  // When %c runs, %a is gone (last used by relu) and only %b is live.
  EXPECT_EQ(p[2].bytesBefore, tile);
  EXPECT_EQ(p[2].outputBytes, tile);
  // After %d, %c is freed; the peak never holds three 64x64 tiles.
  EXPECT_LE(profiler.runPeakBytes(), 2 * tile + 4096);
  for (const auto &np : p)
    EXPECT_GE(np.seconds, 0.0);
}

TEST(ExecutorTest, KeepAllValuesKeepsIntermediates) {
  auto g = parse(kChain);
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  ExecutionOptions o;
  o.keepAllValues = true;
  Executor ex(*g, w, o);
  auto r = ex.run(makeExampleInputs(*g, 0).value());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->values.size(), g->numValues());
  for (const auto &[v, iv] : r->values)
    EXPECT_TRUE(iv.isTensor() && iv.toTensor().defined()) << v->name().str();
}

TEST(ExecutorTest, SeededRunsAreBitwiseIdenticalAndSeedsDiffer) {
  auto g = parse(R"(graph @drop {
  input %x : f32[128] user_input
  %y, %mask = aten::native_dropout(%x, 0.5, true) : f32[128], bool[128]
  output %y user_output
})");
  WeightStore w;
  at::Tensor x = at::ones({128});
  Executor a(*g, w), b(*g, w);
  ExecutionOptions other;
  other.seed = 7;
  Executor c(*g, w, other);
  auto ra = a.run({x}), rb = b.run({x}), rc = c.run({x});
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  EXPECT_TRUE(at::equal(ra->outputs[0], rb->outputs[0]));
  EXPECT_FALSE(at::equal(ra->outputs[0], rc->outputs[0]));
}

TEST(ExecutorTest, MissingWeightIsAClearError) {
  auto g = parse(kChain);
  WeightStore empty;
  Executor ex(*g, empty);
  auto r = ex.run(makeExampleInputs(*g, 0).value());
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "no weight for parameter 'w' (graph input %w)");
}

TEST(ExecutorTest, WeightOfTheWrongShapeIsAClearError) {
  auto g = parse(kChain);
  WeightStore w;
  w.set("w", at::zeros({3, 3}));
  Executor ex(*g, w);
  auto r = ex.run(makeExampleInputs(*g, 0).value());
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "weight 'w' is Float[3, 3] but graph input %w expects Float[64, 64]");
}

TEST(ExecutorTest, InputsOfTheWrongShapeOrDtypeOrCountAreClearErrors) {
  auto g = parse(kChain);
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  Executor ex(*g, w);
  auto shape = ex.run({at::zeros({2, 2})});
  ASSERT_FALSE(shape.ok());
  EXPECT_CONTAINS(shape.status().message(), "user input %x expects Float[64, 64], got Float[2, 2]");
  auto dtype = ex.run({at::zeros({64, 64}, at::kLong)});
  ASSERT_FALSE(dtype.ok());
  EXPECT_CONTAINS(dtype.status().message(), "got Long[64, 64]");
  auto none = ex.run({});
  ASSERT_FALSE(none.ok());
  EXPECT_CONTAINS(none.status().message(), "missing user input %x");
  auto extra = ex.run({at::zeros({64, 64}), at::zeros({1})});
  ASSERT_FALSE(extra.ok());
  EXPECT_CONTAINS(extra.status().message(), "the graph takes 1 user inputs, 2 given");
}

TEST(ExecutorTest, AnOperatorThatThrowsNamesTheNodeAndItsInputShapes) {
  // The declared types say [4, 8] x [8, 2]; the weights given make mm fail.
  auto g = parse(R"(graph @bad {
  input %x : f32[4, 8] user_input
  input %w : f32[8, 2] parameter "w"
  %t = aten::t(%w) : f32[2, 8]{strides=[1, 2]}
  %y = aten::mm(%x, %t) : f32[4, 8]
  output %y user_output
})");
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  Executor ex(*g, w);
  auto r = ex.run(makeExampleInputs(*g, 0).value());
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "node %y = aten::mm (aten::mm) failed with inputs "
                                        "self=Float[4, 8], mat2=Float[2, 8]");
  EXPECT_CONTAINS(r.status().message(), "cannot be multiplied");
}

TEST(ExecutorTest, BufferMutationsAreWrittenBackWhenUpdatesAreKept) {
  auto g = parse(R"(graph @bn {
  input %count : i64[] buffer "bn.num_batches_tracked"
  input %x : f32[2] user_input
  %next = aten::add.Tensor(%count, 1) : i64[]
  %y = aten::relu(%x) : f32[2]
  output %next buffer_mutation "bn.num_batches_tracked"
  output %y user_output
})");
  WeightStore w;
  w.set("bn.num_batches_tracked", at::zeros({}, at::kLong));
  ExecutionOptions o;
  o.keepUpdates = true;
  Executor ex(*g, w, o);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(ex.run({at::ones({2})}).ok());
  EXPECT_EQ(w.lookup("bn.num_batches_tracked")->item().toLong(), 3);
}

TEST(TrackingAllocatorTest, CountsExactlyAndHandlesZeroBytes) {
  TrackingCpuAllocator &t = TrackingCpuAllocator::instance();
  int64_t before = t.currentBytes();
  {
    c10::DataPtr p = t.allocate(1000);
    EXPECT_EQ(p.get(), p.get_context()); // oneDNN's raw_allocate relies on it
    EXPECT_EQ(t.currentBytes(), before + 1000);
    t.resetPeak();
    c10::DataPtr q = t.allocate(500);
    EXPECT_EQ(t.peakBytes(), before + 1500);
    c10::DataPtr z = t.allocate(0);
    EXPECT_EQ(z.get(), nullptr);
  }
  EXPECT_EQ(t.currentBytes(), before);
  // Tensors made through ATen go through it too, while graph-opt's
  // allocators are in place (CpuAllocatorScopeTest: only then).
  { CpuAllocatorScope hooks; at::Tensor big = at::zeros({1024}, at::kFloat); EXPECT_GE(t.currentBytes(), before + 4096); }
  EXPECT_EQ(t.currentBytes(), before);
}

TEST(ExecutorTest, InPlaceMutationOfABufferReachesTheStoreWhenUpdatesAreKept) {
  // aten::add_.Tensor writes its `self` (Tensor(a!)): the buffer itself changes.
  auto g = parse(R"(graph @inplace {
  input %count : f32[2] buffer "counter"
  input %x : f32[2] user_input
  %same = aten::add_.Tensor(%count, %x) : f32[2]
  %y = aten::relu(%same) : f32[2]
  output %y user_output
})");
  WeightStore w;
  w.set("counter", at::zeros({2}));
  ExecutionOptions o;
  o.keepUpdates = true;
  Executor ex(*g, w, o);
  ASSERT_TRUE(ex.run({at::ones({2})}).ok());
  ASSERT_TRUE(ex.run({at::ones({2})}).ok());
  EXPECT_EQ(w.lookup("counter")->sum().item().toFloat(), 4.0f);
}

TEST(ExecutorTest, RunsOnCudaWhenAGpuIsPresent) {
  if (!graphopt::cudaAvailable())
    GTEST_SKIP() << "no GPU on this machine";
  auto g = parse(kChain);
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  std::vector<at::Tensor> inputs = makeExampleInputs(*g, 0).value();
  ExecutionOptions cuda;
  cuda.device = c10::Device(c10::DeviceType::CUDA, 0);
  Executor onCpu(*g, w), onGpu(*g, w, cuda);
  NodeProfiler profiler(cuda.device);
  profiler.attach(onGpu);
  profiler.beginRun();
  auto a = onCpu.run(inputs), b = onGpu.run(inputs);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(b->outputs[0].is_cuda());
  EXPECT_NEAR(a->outputs[0].item().toDouble(), b->outputs[0].cpu().item().toDouble(), 1e-2);
  EXPECT_GT(profiler.runPeakBytes(), 0);
}

namespace {
/// A buffer updated in place (aten::add_ writes its self), read afterwards, and
/// the updated buffer itself a graph output.
const char *kInPlaceBuffer = R"(graph @inplace {
  input %count : f32[2] buffer "counter"
  input %x : f32[2] user_input
  %same = aten::add_.Tensor(%count, %x) : f32[2]
  %y = aten::mul.Tensor(%same, %x) : f32[2]
  output %y user_output
  output %same user_output
})";
} // namespace

TEST(ExecutorTest, EveryRunStartsFromTheSameState) {
  auto g = parse(kInPlaceBuffer);
  WeightStore w;
  w.set("counter", at::ones({2}));
  at::Tensor before = w.lookup("counter")->clone();
  at::Tensor stored = *w.lookup("counter");
  Executor ex(*g, w);
  at::Tensor x = at::ones({2});
  auto first = ex.run({x});
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = ex.run({x});
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_EQ(ex.mutatedInputs().size(), 1u);
  EXPECT_EQ(ex.mutatedInputs()[0], 0u);
  // Both runs see counter = 1: y = (1 + 1) * 1 = 2, and the updated buffer is returned as 2.
  for (const auto *r : {&*first, &*second}) {
    EXPECT_TRUE(at::equal(r->outputs[0], at::full({2}, 2.0f)));
    EXPECT_TRUE(at::equal(r->outputs[1], at::full({2}, 2.0f)));
  }
  // The store is unchanged (same tensor, same contents); so is the caller's input.
  EXPECT_TRUE(w.lookup("counter")->is_same(stored));
  EXPECT_TRUE(at::equal(*w.lookup("counter"), before));
  EXPECT_TRUE(at::equal(x, at::ones({2})));
}

TEST(ExecutorTest, BufferMutationOutputsAreNotWrittenBackByDefault) {
  auto g = parse(R"(graph @bn {
  input %count : i64[] buffer "bn.num_batches_tracked"
  %next = aten::add.Tensor(%count, 1) : i64[]
  output %next buffer_mutation "bn.num_batches_tracked"
})");
  WeightStore w;
  w.set("bn.num_batches_tracked", at::zeros({}, at::kLong));
  Executor ex(*g, w);
  for (int i = 0; i < 3; ++i) {
    auto r = ex.run({});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outputs[0].item().toLong(), 1);
  }
  EXPECT_EQ(w.lookup("bn.num_batches_tracked")->item().toLong(), 0);
}

TEST(ExecutorTest, AUserInputWrittenInPlaceIsNotTheCallersTensor) {
  auto g = parse(R"(graph @copy {
  input %x : f32[2] user_input
  %twice = aten::mul.Scalar(%x, 2.0) : f32[2]
  %same = aten::copy_(%x, %twice) : f32[2]
  output %same user_output
})");
  WeightStore w;
  at::Tensor x = at::ones({2});
  Executor ex(*g, w);
  auto r = ex.run({x});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(at::equal(r->outputs[0], at::full({2}, 2.0f)));
  EXPECT_TRUE(at::equal(x, at::ones({2})));
  // Kept updates write the caller's tensor.
  ExecutionOptions keep;
  keep.keepUpdates = true;
  Executor training(*g, w, keep);
  ASSERT_TRUE(training.run({x}).ok());
  EXPECT_TRUE(at::equal(x, at::full({2}, 2.0f)));
}

TEST(ExecutorTest, AnInPlaceBufferUpdateVerifiesBitwiseAgainstItself) {
  auto g = parse(kInPlaceBuffer);
  auto copy = g->clone();
  WeightStore w;
  w.set("counter", at::ones({2}));
  at::Tensor before = w.lookup("counter")->clone();
  VerifierOptions options;
  options.device = c10::Device(c10::DeviceType::CPU);
  auto report = verifyRewrite(*g, *copy, w, {at::ones({2})}, options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->passed);
  for (const auto &c : report->outputs)
    EXPECT_EQ(c.maxAbsError, 0.0) << c.label;
  EXPECT_TRUE(at::equal(*w.lookup("counter"), before));
}

TEST(ExecutorTest, HookSetsNestAndAllRun) {
  auto g = parse(kChain);
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  Executor ex(*g, w);
  std::vector<std::string> events;
  auto named = [&events](std::string name) {
    ExecutionHooks h;
    h.before = [&events, name](const Node &) { events.push_back(name + " before"); };
    h.after = [&events, name](const Node &, llvm::ArrayRef<c10::IValue> outs) {
      EXPECT_EQ(outs.size(), 1u);
      events.push_back(name + " after");
    };
    return h;
  };
  ex.addHooks(named("outer"));
  NodeProfiler profiler(c10::Device(c10::DeviceType::CPU));
  profiler.attach(ex);
  ex.addHooks(named("inner"));
  EXPECT_EQ(ex.numHookSets(), 3u);
  profiler.beginRun();
  ASSERT_TRUE(ex.run(makeExampleInputs(*g, 0).value()).ok());
  ASSERT_EQ(events.size(), 4u * g->numNodes());
  EXPECT_EQ(events[0], "outer before");
  EXPECT_EQ(events[1], "inner before");
  EXPECT_EQ(events[2], "inner after");
  EXPECT_EQ(events[3], "outer after");
  EXPECT_EQ(profiler.profiles().size(), g->numNodes());
  EXPECT_GT(profiler.runPeakBytes(), 0);
}

TEST(FreePolicyTest, EachValueIsFreedAfterItsLastUse) {
  auto g = parse(R"(graph @chain {
  input %w : f32[4, 4] parameter "w"
  input %x : f32[4, 4] user_input
  input %unused : f32[4] user_input
  %a = aten::mm(%x, %w) : f32[4, 4]
  %dead = aten::relu(%a) : f32[4, 4]
  %b = aten::relu(%a) : f32[4, 4]
  %c = aten::mm(%b, %w) : f32[4, 4]
  %e = aten::add.Tensor(%c, %c) : f32[4, 4]
  output %e user_output
  output %c user_output
})");
  FreePolicy policy = computeFreePolicy(*g);
  auto names = [&](const char *node) {
    std::vector<std::string> out;
    for (const Node &n : g->nodes())
      if (n.output()->name() == node)
        for (const Value *v : policy.freedAfter(n))
          out.push_back(v->name().str());
    return out;
  };
  EXPECT_EQ(names("a"), std::vector<std::string>{"x"});
  EXPECT_EQ(names("dead"), std::vector<std::string>{"dead"}); // never read
  EXPECT_EQ(names("b"), std::vector<std::string>{"a"});
  EXPECT_EQ(names("c"), (std::vector<std::string>{"b", "w"}));
  EXPECT_TRUE(names("e").empty()); // %c and %e are graph outputs: kept
  const Value *unused = g->inputs()[2].value;
  EXPECT_EQ(policy.lastUser(*unused), nullptr);
  EXPECT_EQ(policy.lastUser(*g->inputs()[0].value)->output()->name(), "c");
}

TEST(ProfileRunsTest, RunsNTimesAndStopsAtTheFirstError) {
  auto g = parse(kChain);
  WeightStore w;
  ASSERT_TRUE(fillMissingWeights(*g, w, 0).ok());
  std::vector<at::Tensor> inputs = makeExampleInputs(*g, 0).value();
  std::vector<double> losses;
  absl::Status st = profileRuns(*g, w, inputs, {}, 3, [&](const ProfiledRun &run) {
    EXPECT_EQ(run.index, losses.size());
    EXPECT_EQ(run.profiler->profiles().size(), g->numNodes());
    EXPECT_GT(run.seconds, 0.0);
    losses.push_back(run.result->outputs[0].item().toDouble());
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0], losses[2]);
  unsigned calls = 0;
  st = profileRuns(*g, w, inputs, {}, 3, [&](const ProfiledRun &) {
    ++calls;
    return absl::CancelledError("enough");
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1u);
  WeightStore empty;
  st = profileRuns(*g, empty, inputs, {}, 1, [](const ProfiledRun &) { return absl::OkStatus(); });
  EXPECT_FALSE(st.ok());
}

TEST(ExecutorTest, ALoneTensorListResultSpreadsOverTheOutputs) {
  auto g = parse(R"(graph @unbind {
  input %x : f32[3, 2] user_input
  %a, %b, %c = aten::unbind.int(%x) : f32[2], f32[2], f32[2]
  output %c user_output
})");
  WeightStore w;
  Executor ex(*g, w);
  at::Tensor x = at::arange(6, at::kFloat).reshape({3, 2});
  auto r = ex.run({x});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(at::equal(r->outputs[0], x[2]));
}

TEST(ExecutorTest, MissingOptimizerStateStartsAtZeroAndNodesWithoutResultsRun) {
  // The step counter is an optimizer_state input the store lacks: prepare()
  // makes it zeros of its type and puts it in the store; the node that
  // counts it returns nothing (`()`) and writes it in place.
  auto g = parse(R"(graph @count {
  input %w : f32[2] parameter "w"
  input %step : f32[] optimizer_state "w.step"
  input %m : f64[2, 3]{strides=[1, 2]} optimizer_state "w.other"
optimizer:
  aten::_foreach_add_.Scalar([%step], 1)
  aten::_foreach_add_.Scalar([%m], 0.5)
  output %w user_output
})");
  WeightStore w;
  w.set("w", at::ones({2}));
  Executor ex(*g, w);
  ASSERT_TRUE(ex.prepare().ok());
  ASSERT_TRUE(w.lookup("w.step"));
  EXPECT_TRUE(at::equal(*w.lookup("w.step"), at::zeros({})));
  const at::Tensor &m = *w.lookup("w.other");
  EXPECT_EQ(m.scalar_type(), at::kDouble);
  EXPECT_EQ(m.strides(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ex.mutatedInputs().size(), 2u);
  // Runs that keep nothing leave the fresh state at zero.
  ASSERT_TRUE(ex.run({}).ok());
  EXPECT_EQ(w.lookup("w.step")->item().toFloat(), 0.0f);

  ExecutionOptions keep;
  keep.keepUpdates = true;
  Executor training(*g, w, keep);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(training.run({}).ok());
  EXPECT_EQ(w.lookup("w.step")->item().toFloat(), 3.0f);
  EXPECT_EQ(w.lookup("w.other")->sum().item().toDouble(), 9.0);

  // Only optimizer state is made up: a missing parameter is still an error.
  WeightStore none;
  Executor missing(*g, none);
  absl::Status st = missing.prepare();
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.message(), "no weight for parameter 'w'");
}

TEST(ExecutorTest, AnOperatorThatThrowsAStdExceptionFailsAtItsNode) {
  // aten::full of 1e300 into f32 throws std::runtime_error, not c10::Error.
  auto g = parse(R"(graph @full {
forward:
  %y = aten::full([2], 1e300, dtype=f32) : f32[2]
  output %y user_output
})");
  WeightStore w;
  Executor ex(*g, w);
  auto r = ex.run({});
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "node %y = aten::full (aten::full) failed");
  EXPECT_CONTAINS(r.status().message(), "value cannot be converted to type float without overflow");
  // The executor is usable again after the failure.
  EXPECT_FALSE(ex.run({}).ok());
}

TEST(ExecutorTest, AResultThatIsNotItsDeclaredTypeIsAnErrorNamingTheNode) {
  auto g = parse(R"(graph @lie {
  input %x : f32[4] user_input
forward:
  %y = aten::relu(%x) : f32[5]
  %z = aten::neg(%y) : f32[5]
  output %z user_output
})");
  WeightStore w;
  Executor ex(*g, w);
  auto r = ex.run({at::ones({4})});
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(),
                  "node %y = aten::relu (aten::relu) declares %y as Float[5] but computed Float[4]");
  // A declared dtype that differs is caught the same way.
  auto h = parse(R"(graph @dtype {
  input %x : f32[4] user_input
forward:
  %y = aten::relu(%x) : f64[4]
  output %y user_output
})");
  Executor ex2(*h, w);
  auto r2 = ex2.run({at::ones({4})});
  ASSERT_FALSE(r2.ok());
  EXPECT_CONTAINS(r2.status().message(), "declares %y as Double[4] but computed Float[4]");
}
