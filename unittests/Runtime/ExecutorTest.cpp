//===- ExecutorTest.cpp - Executor behaviour and its errors ---------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"

#include <ATen/Context.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
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
  fillMissingWeights(*g, w, 0);
  NodeProfiler profiler(c10::Device(c10::DeviceType::CPU));
  Executor ex(*g, w);
  profiler.attach(ex);
  std::vector<at::Tensor> inputs = makeExampleInputs(*g, 0);
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
  fillMissingWeights(*g, w, 0);
  ExecutionOptions o;
  o.keepAllValues = true;
  Executor ex(*g, w, o);
  auto r = ex.run(makeExampleInputs(*g, 0));
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
  auto r = ex.run(makeExampleInputs(*g, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "no weight for parameter 'w' (graph input %w)");
}

TEST(ExecutorTest, WeightOfTheWrongShapeIsAClearError) {
  auto g = parse(kChain);
  WeightStore w;
  w.set("w", at::zeros({3, 3}));
  Executor ex(*g, w);
  auto r = ex.run(makeExampleInputs(*g, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "weight 'w' is Float[3, 3] but graph input %w expects Float[64, 64]");
}

TEST(ExecutorTest, InputsOfTheWrongShapeOrDtypeOrCountAreClearErrors) {
  auto g = parse(kChain);
  WeightStore w;
  fillMissingWeights(*g, w, 0);
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
  fillMissingWeights(*g, w, 0);
  Executor ex(*g, w);
  auto r = ex.run(makeExampleInputs(*g, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(), "node %y = aten::mm (aten::mm) failed with inputs "
                                        "self=Float[4, 8], mat2=Float[2, 8]");
  EXPECT_CONTAINS(r.status().message(), "cannot be multiplied");
}

TEST(ExecutorTest, BufferMutationsAreWrittenBack) {
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
  o.writeBackBuffers = true;
  Executor ex(*g, w, o);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(ex.run({at::ones({2})}).ok());
  EXPECT_EQ(w.lookup("bn.num_batches_tracked")->item().toLong(), 3);
}

TEST(TrackingAllocatorTest, CountsExactlyAndHandlesZeroBytes) {
  TrackingCpuAllocator &t = TrackingCpuAllocator::install();
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
  // Tensors made through ATen go through it too.
  { at::Tensor big = at::zeros({1024}, at::kFloat); EXPECT_GE(t.currentBytes(), before + 4096); }
  EXPECT_EQ(t.currentBytes(), before);
}

TEST(ExecutorTest, InPlaceMutationOfABufferReachesTheStore) {
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
  o.writeBackBuffers = true;
  Executor ex(*g, w, o);
  ASSERT_TRUE(ex.run({at::ones({2})}).ok());
  ASSERT_TRUE(ex.run({at::ones({2})}).ok());
  EXPECT_EQ(w.lookup("counter")->sum().item().toFloat(), 4.0f);
}

TEST(ExecutorTest, RunsOnCudaWhenAGpuIsPresent) {
  if (!at::hasCUDA())
    GTEST_SKIP() << "no GPU on this machine";
  auto g = parse(kChain);
  WeightStore w;
  fillMissingWeights(*g, w, 0);
  std::vector<at::Tensor> inputs = makeExampleInputs(*g, 0);
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
