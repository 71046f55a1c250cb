//===- CanonicalizeTest.cpp - Folding no-ops and simple algebra -----------===//
//
// canonicalize on graphs built with the Graph API and parsed from text: what
// folds and what stays, the fixpoint, the rewrite cap, the statistics; that
// the arithmetic folds are exact to the bit on the executor (signed zeros,
// inf, NaN, every floating dtype); and that the zoo training graphs (GPT-2
// and BERT with dropout active) compute the same outputs, with zero
// tolerance, after it.
//
//===----------------------------------------------------------------------===//
#include "CanonicalizePass.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "../TestSupport.h"
#include "../ZooArchives.h"

#include <ATen/Context.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

using namespace graphopt;
using namespace graphopt::test;

namespace {

std::unique_ptr<Graph> parse(const std::string &text) { return parseOrFail(text); }

/// Runs canonicalize (with `options`) on `graph`; its statistics by name.
struct Outcome {
  absl::StatusOr<bool> changed = false;
  std::map<std::string, int64_t> stats;
};
Outcome canonicalize(Graph &graph, const PassOptions &options = {}) {
  CanonicalizePass pass;
  Outcome out;
  if (absl::Status st = pass.setOptions(options); !st.ok()) {
    out.changed = st;
    return out;
  }
  AnalysisManager analyses;
  out.changed = pass.transform(graph, analyses);
  for (const auto &[name, stat] : pass.statistics())
    out.stats[name] = stat.value;
  return out;
}

unsigned countOps(const Graph &g, llvm::StringRef op) {
  unsigned n = 0;
  for (const Node &node : g.nodes())
    n += node.opName() == op;
  return n;
}

ValueType f32(llvm::ArrayRef<int64_t> sizes) {
  return ValueType::ofTensor(TensorType::contiguous(at::kFloat, sizes));
}

} // namespace

// t(t(x)) built with the Graph API folds to x, the graph output moves to x's
// user and the inner t, left unused, is erased; a lone t stays.
TEST(CanonicalizeTest, TransposePairBuiltWithTheGraphApiFolds) {
  Graph g("api");
  Value *x = g.addInput("x", f32({2, 3}), InputRole::UserInput);
  ValueType transposed = ValueType::ofTensor(TensorType(at::kFloat, {3, 2}, {1, 3}));
  auto t1 = g.createNode("aten::t", {Argument::value(x)}, {transposed});
  ASSERT_TRUE(t1.ok()) << t1.status().message();
  auto t2 = g.createNode("aten::t", {Argument::value((*t1)->output())}, {f32({2, 3})});
  ASSERT_TRUE(t2.ok());
  auto lone = g.createNode("aten::t", {Argument::value(x)}, {transposed});
  ASSERT_TRUE(lone.ok());
  auto relu = g.createNode("aten::relu", {Argument::value((*t2)->output())}, {f32({2, 3})});
  ASSERT_TRUE(relu.ok());
  g.addOutput((*relu)->output(), OutputRole::UserOutput);
  g.addOutput((*lone)->output(), OutputRole::UserOutput);
  ASSERT_TRUE(verifyGraph(g).ok());

  Outcome r = canonicalize(g);
  ASSERT_TRUE(r.changed.ok()) << r.changed.status().message();
  EXPECT_TRUE(*r.changed);
  EXPECT_EQ(r.stats["folded transpose-pair"], 1);
  EXPECT_EQ(r.stats["erased dead operands"], 1);
  EXPECT_EQ(countOps(g, "aten::t"), 1u); // the lone one
  EXPECT_EQ((*relu)->arg(0).getValue(), x);
  EXPECT_TRUE(verifyGraph(g).ok());
}

TEST(CanonicalizeTest, NothingToFoldReportsNoChange) {
  auto g = parse(R"(graph @g {
  input %x : f32[2, 3] user_input
forward:
  %a = aten::t(%x) : f32[3, 2]{strides=[1, 3]}
  %b = aten::mul.Tensor(%a, 2) : f32[3, 2]
  output %b user_output
})");
  Outcome r = canonicalize(*g);
  ASSERT_TRUE(r.changed.ok());
  EXPECT_FALSE(*r.changed);
  EXPECT_TRUE(r.stats.empty());
  EXPECT_EQ(g->numNodes(), 2u);
}

// Every rule once, each with its own statistic.
TEST(CanonicalizeTest, EachRuleCountsUnderItsOwnName) {
  auto g = parse(R"(graph @g {
  input %x : f32[2, 3] user_input
  input %i : i64[2, 3] user_input
forward:
  %h = aten::neg(%x) : f32[2, 3]
  %a = aten::t(%h) : f32[3, 2]{strides=[1, 3]}
  %b = aten::t(%a) : f32[2, 3]
  %p = aten::permute(%b, [1, 0]) : f32[3, 2]{strides=[1, 3]}
  %q = aten::permute(%p, [1, 0]) : f32[2, 3]
  %v = aten::view(%q, [2, 3]) : f32[2, 3]
  %al = aten::alias(%v) : f32[2, 3]
  %d = aten::detach(%al) : f32[2, 3]
  %c = aten::clone(%d) : f32[2, 3]
  %m = aten::mul.Tensor(%c, 1) : f32[2, 3]
  %dv = aten::div.Tensor(%m, 1) : f32[2, 3]
  %ad = aten::add.Tensor(%dv, -0.0) : f32[2, 3]
  %sb = aten::sub.Tensor(%ad, 0) : f32[2, 3]
  %to = aten::_to_copy(%sb, dtype=f32) : f32[2, 3]
  %ct = aten::cat([%to]) : f32[2, 3]
  %r = aten::relu(%ct) : f32[2, 3]
  %k = aten::add.Tensor(%i, 0) : i64[2, 3]
  %s = aten::sum(%k) : i64[]
  output %r user_output
  output %s user_output
})");
  Outcome r = canonicalize(*g);
  ASSERT_TRUE(r.changed.ok()) << r.changed.status().message();
  for (const char *rule :
       {"transpose-pair", "inverse-permute", "same-shape-view", "alias", "detach", "clone",
        "mul-one", "div-one", "sub-zero", "to-same", "cat-single"})
    EXPECT_EQ(r.stats[absl::StrCat("folded ", rule)], 1) << rule;
  EXPECT_EQ(r.stats["folded add-zero"], 2); // -0.0 on the float, 0 on the integer
  EXPECT_EQ(g->numNodes(), 3u); // neg, relu, sum
  EXPECT_TRUE(verifyGraph(*g).ok());
}

// max-rewrites=1 on a graph with two folds: an error that names the pass and
// the cap; two is enough.
TEST(CanonicalizeTest, TheRewriteCapIsAnErrorNotASilentStop) {
  const char *text = R"(graph @g {
  input %x : f32[2, 3] user_input
forward:
  %a = aten::alias(%x) : f32[2, 3]
  %b = aten::detach(%a) : f32[2, 3]
  %r = aten::relu(%b) : f32[2, 3]
  output %r user_output
})";
  auto capped = parse(text);
  Outcome r = canonicalize(*capped, {{"max-rewrites", "1"}});
  ASSERT_FALSE(r.changed.ok());
  EXPECT_EQ(r.changed.status().code(), absl::StatusCode::kResourceExhausted);
  std::string message(r.changed.status().message());
  EXPECT_NE(message.find("canonicalize"), std::string::npos) << message;
  EXPECT_NE(message.find("max-rewrites=1"), std::string::npos) << message;
  EXPECT_EQ(r.stats["folded alias"], 1); // the one it was allowed

  auto enough = parse(text);
  Outcome ok = canonicalize(*enough, {{"max-rewrites", "2"}});
  ASSERT_TRUE(ok.changed.ok()) << ok.changed.status().message();
  EXPECT_EQ(enough->numNodes(), 1u);

  // Through the optimizer, the failure names the pass too.
  auto again = parse(text);
  GraphOptimizer optimizer;
  ASSERT_TRUE(optimizer.addPipeline("canonicalize{max-rewrites=1}").ok());
  auto run = optimizer.run(*again);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(std::string(run.status().message()).find("pass 'canonicalize' failed"),
            std::string::npos);

  GraphOptimizer negative;
  absl::Status st = negative.addPipeline("canonicalize{max-rewrites=-1}");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("must be >= 0"), std::string::npos) << st.message();
}

// aten::_unsafe_view returns a view although its schema says nothing: a write
// through it is a write to the clone, which must then stay.
TEST(CanonicalizeTest, AWriteThroughAnUnsafeViewKeepsTheClone) {
  auto g = parse(R"(graph @g {
  input %x : f32[2, 3] user_input
forward:
  %h = aten::relu(%x) : f32[2, 3]
  %c = aten::clone(%h) : f32[2, 3]
  %u = aten::_unsafe_view(%c, [6]) : f32[6]
  %w = aten::add_.Tensor(%u, 1) : f32[6]
  %s = aten::sum(%h) : f32[]
  %t = aten::sum(%c) : f32[]
  output %s user_output
  output %t user_output
})");
  Outcome r = canonicalize(*g);
  ASSERT_TRUE(r.changed.ok());
  EXPECT_FALSE(*r.changed);
  EXPECT_EQ(countOps(*g, "aten::clone"), 1u);
}

// A clone whose input is a view of a larger intermediate stays (it would keep
// the whole base alive); one of a parameter's view folds (alive anyway).
TEST(CanonicalizeTest, ACloneOfAViewOfALargerBaseStays) {
  auto g = parse(R"(graph @g {
  input %p : f32[4, 3] parameter "p"
  input %x : f32[4, 3] user_input
forward:
  %h = aten::relu(%x) : f32[4, 3]
  %s = aten::slice.Tensor(%h, 0, 0, 2) : f32[2, 3]
  %c = aten::clone(%s) : f32[2, 3]
  %sp = aten::slice.Tensor(%p, 0, 0, 2) : f32[2, 3]
  %cp = aten::clone(%sp) : f32[2, 3]
  %r = aten::add.Tensor(%c, %cp) : f32[2, 3]
  output %r user_output
})");
  Outcome r = canonicalize(*g);
  ASSERT_TRUE(r.changed.ok());
  EXPECT_EQ(r.stats["folded clone"], 1);
  const Node &add = g->nodes().back();
  EXPECT_EQ(add.arg(0).getValue()->name(), "c");
  EXPECT_EQ(add.arg(1).getValue()->name(), "sp");
}

// The signed-zero reasoning, checked on the executor: the folds canonicalize
// makes give x back bit for bit for -0.0, +0.0, infinities, NaN and
// subnormals in every floating dtype, and the one it refuses (x + 0.0) does
// not. On CUDA too when a GPU is present.
TEST(CanonicalizeTest, ArithmeticFoldsAreExactToTheBit) {
  std::vector<c10::Device> devices{c10::Device(c10::DeviceType::CPU)};
  if (graphopt::cudaAvailable())
    devices.emplace_back(c10::DeviceType::CUDA, 0);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    std::string d(dtypeName(dtype));
    // (These outputs copy the input %x, so the copy rule (d) keeps them all
    // and the executor computes each: SignedZerosDecideWhichFloatAddsFold
    // shows the same nodes folding where nothing else stops them.)
    std::string folds = absl::StrReplaceAll(R"(graph @g {
  input %x : DT[8] user_input
forward:
  %a = aten::add.Tensor(%x, -0.0) : DT[8]
  %b = aten::add.Tensor(%x, -0.0, alpha=3) : DT[8]
  %c = aten::sub.Tensor(%x, 0) : DT[8]
  %e = aten::sub.Scalar(%x, 0.0, 0.5) : DT[8]
  %f = aten::mul.Tensor(%x, 1) : DT[8]
  %g = aten::div.Scalar(%x, 1.0) : DT[8]
  %refused = aten::add.Tensor(%x, 0.0) : DT[8]
  output %a user_output
  output %b user_output
  output %c user_output
  output %e user_output
  output %f user_output
  output %g user_output
  output %refused user_output
})",
                                            {{"DT", d}});
    auto original = parse(folds);
    for (c10::Device device : devices) {
      at::Tensor x = at::tensor({-0.0, 0.0, inf, -inf, nan, 1e-40, -3.5, 65504.0},
                                at::TensorOptions().dtype(at::kDouble))
                         .to(dtype);
      WeightStore weights;
      ExecutionOptions options;
      options.device = device;
      Executor exec(*original, weights, options);
      auto result = exec.run({x});
      ASSERT_TRUE(result.ok()) << result.status().message();
      at::Tensor bits = x.view(dtype == at::kDouble ? at::kLong
                               : dtype == at::kFloat ? at::kInt
                                                     : at::kShort);
      for (size_t o = 0; o + 1 < result->outputs.size(); ++o) {
        at::Tensor out = result->outputs[o].cpu().view(bits.scalar_type());
        EXPECT_TRUE(at::equal(out, bits)) << d << " output " << o << " on " << device;
      }
      at::Tensor refused = result->outputs.back().cpu().view(bits.scalar_type());
      EXPECT_FALSE(at::equal(refused, bits)) << d << ": -0.0 + 0.0 should be +0.0";
    }
  }
}

// The same identities on values that are no graph outputs fold; the statistic
// counts each.
TEST(CanonicalizeTest, SignedZerosDecideWhichFloatAddsFold) {
  auto g = parse(R"(graph @g {
  input %x : f32[4] user_input
forward:
  %h = aten::neg(%x) : f32[4]
  %a = aten::add.Tensor(%h, -0.0) : f32[4]
  %b = aten::add.Tensor(%h, 0.0) : f32[4]
  %c = aten::add.Tensor(%h, 0) : f32[4]
  %d = aten::sub.Tensor(%h, 0.0) : f32[4]
  %e = aten::sub.Tensor(%h, -0.0) : f32[4]
  %s = aten::stack([%a, %b, %c, %d, %e]) : f32[5, 4]
  output %s user_output
})");
  Outcome r = canonicalize(*g);
  ASSERT_TRUE(r.changed.ok());
  EXPECT_EQ(r.stats["folded add-zero"], 1);
  EXPECT_EQ(r.stats["folded sub-zero"], 1);
  EXPECT_EQ(countOps(*g, "aten::add.Tensor"), 2u); // + 0.0 and + 0 stay
  EXPECT_EQ(countOps(*g, "aten::sub.Tensor"), 1u); // - (-0.0) stays
}

// Zoo training graphs: canonicalize folds something (every one has aliases),
// the graph verifies, and the output verifier with zero tolerance finds every
// output (loss, gradients, buffer updates) the same, dropout included (random
// nodes are never touched, so both runs draw the same masks).
class CanonicalizeZooTest : public testing::TestWithParam<std::string> {};

TEST_P(CanonicalizeZooTest, AgreesWithTheOriginalWithZeroTolerance) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/" + GetParam() + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::unique_ptr<Graph> original = model->graph->clone();
  Outcome r = canonicalize(*model->graph);
  ASSERT_TRUE(r.changed.ok()) << r.changed.status().message();
  EXPECT_TRUE(*r.changed);
  EXPECT_GT(r.stats["folded alias"], 0);
  EXPECT_LT(model->graph->numNodes(), original->numNodes());
  ASSERT_TRUE(verifyGraph(*model->graph).ok());

  VerifierOptions exact;
  exact.rtol = 0;
  exact.atol = 0;
  auto report =
      verifyRewrite(*original, *model->graph, model->weights, model->exampleInputs, exact);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->outputs.empty());
  std::string text;
  llvm::raw_string_ostream os(text);
  report->print(os);
  EXPECT_TRUE(report->passed) << os.str();
  for (const OutputComparison &o : report->outputs)
    EXPECT_EQ(o.maxAbsError, 0.0) << o.label;

  // A second run finds nothing left: the first reached a fixpoint.
  Outcome again = canonicalize(*model->graph);
  ASSERT_TRUE(again.changed.ok());
  EXPECT_FALSE(*again.changed);
}

INSTANTIATE_TEST_SUITE_P(CanonicalizeZoo, CanonicalizeZooTest,
                         testing::Values("gpt2-train", "bert-train", "resnet18-train", "t5-train",
                                         "llama-train"),
                         ArchiveName());
