//===- OutputVerifierTest.cpp - Rewrites that agree pass, others are named ===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/OutputVerifier.h"

#include "../ZooArchives.h"

#include <ATen/Parallel.h>

#include <gtest/gtest.h>

using namespace graphopt;

namespace {

/// x -> relu -> mul(scale) -> sum = loss; the count of positives is a user output.
std::string scaledGraph(const std::string &scale, const std::string &extraOutput = "") {
  return R"(graph @g {
  input %w : f32[4, 4] parameter "w"
  input %x : f32[4, 4] user_input
forward:
  %h = aten::mm(%x, %w) : f32[4, 4]
  %r = aten::relu(%h) : f32[4, 4]
  %m = aten::mul.Scalar(%r, )" + scale + R"() : f32[4, 4]
  %loss = aten::sum(%m) : f32[]
  %pos = aten::gt.Scalar(%r, 0) : bool[4, 4]
  %count = aten::sum(%pos, dtype=i64) : i64[]
  output %loss loss
  output %count user_output
)" + extraOutput + "}\n";
}

std::unique_ptr<Graph> parse(const std::string &text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

struct Fixture {
  WeightStore weights;
  std::vector<at::Tensor> inputs;
  explicit Fixture(const Graph &g) {
    EXPECT_TRUE(fillMissingWeights(g, weights, 0).ok());
    inputs = makeExampleInputs(g, 0).value();
  }
};

} // namespace

TEST(OutputVerifierTest, IdenticalGraphsPassOnCpuAndSaySo) {
  auto a = parse(scaledGraph("2.0"));
  auto b = a->clone();
  Fixture f(*a);
  auto report = verifyRewrite(*a, *b, f.weights, f.inputs);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->passed);
  ASSERT_EQ(report->outputs.size(), 2u);
  for (const auto &c : report->outputs) {
    EXPECT_TRUE(c.passed) << c.label;
    EXPECT_EQ(c.maxAbsError, 0.0) << c.label;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  report->print(os);
  if (!report->gpuAvailable) {
    EXPECT_EQ(report->device, c10::Device(c10::DeviceType::CPU));
    EXPECT_NE(os.str().find("no GPU present, so CPU"), std::string::npos) << os.str();
  }
  // One summary line; a line per result only when asked (or on failure).
  EXPECT_NE(os.str().find("2 results compared (1 loss, 1 user_output): 2 within tolerance"),
            std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("every one equal to the original's"), std::string::npos) << os.str();
  EXPECT_EQ(os.str().find("PASS  loss #0"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("verification PASSED"), std::string::npos) << os.str();
  std::string each;
  llvm::raw_string_ostream eachOs(each);
  report->print(eachOs, /*eachResult=*/true);
  EXPECT_NE(eachOs.str().find("PASS  loss #0"), std::string::npos) << eachOs.str();
}

TEST(OutputVerifierTest, DifferenceWithinToleranceIsAPass) {
  auto a = parse(scaledGraph("2.0"));
  auto b = parse(scaledGraph("2.0000002"));
  Fixture f(*a);
  auto report = verifyRewrite(*a, *b, f.weights, f.inputs);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->passed);
  EXPECT_GT(report->outputs[0].maxAbsError, 0.0); // measured, and allowed
}

TEST(OutputVerifierTest, WrongRewriteFailsAndNamesTheFirstDivergingNode) {
  auto a = parse(scaledGraph("2.0"));
  auto b = parse(scaledGraph("2.5"));
  Fixture f(*a);
  auto report = verifyRewrite(*a, *b, f.weights, f.inputs);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->passed);
  EXPECT_FALSE(report->outputs[0].passed); // the loss
  EXPECT_GT(report->outputs[0].maxRelError, 0.1);
  EXPECT_TRUE(report->outputs[1].passed); // the count does not depend on the scale
  // %h and %r agree; %m is where the graphs part.
  EXPECT_NE(report->firstDivergence.find("node %m = aten::mul.Scalar"), std::string::npos)
      << report->firstDivergence;
}

TEST(OutputVerifierTest, IntegersCompareExactlyWhateverTheTolerance) {
  auto a = parse(scaledGraph("2.0"));
  // Counting r > 0.5 instead of r > 0 changes the count (an i64).
  std::string text = scaledGraph("2.0");
  text.replace(text.find("aten::gt.Scalar(%r, 0)"), 22, "aten::gt.Scalar(%r, 0.5)");
  auto b = parse(text);
  Fixture f(*a);
  VerifierOptions loose;
  loose.rtol = 1.0;
  loose.atol = 100.0;
  auto report = verifyRewrite(*a, *b, f.weights, f.inputs, loose);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->passed);
  EXPECT_EQ(report->outputs[1].label, "user_output #0");
  EXPECT_FALSE(report->outputs[1].passed);
  EXPECT_EQ(report->outputs[1].tolerance.atol, 0.0);
}

TEST(OutputVerifierTest, MissingAndExtraOutputsFail) {
  auto a = parse(scaledGraph("2.0", "  output %m user_output\n"));
  auto b = parse(scaledGraph("2.0"));
  Fixture f(*a);
  auto report = verifyRewrite(*a, *b, f.weights, f.inputs);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->passed);
  bool sawMissing = false;
  for (const auto &c : report->outputs)
    sawMissing |= c.problem == "missing from the rewritten graph";
  EXPECT_TRUE(sawMissing);

  auto reverse = verifyRewrite(*b, *a, f.weights, f.inputs);
  ASSERT_TRUE(reverse.ok());
  EXPECT_FALSE(reverse->passed);
}

TEST(OutputVerifierTest, AGraphThatCannotRunIsAnErrorNotAFailure) {
  auto a = parse(scaledGraph("2.0"));
  auto b = a->clone();
  WeightStore empty; // no weight for "w"
  auto report = verifyRewrite(*a, *b, empty, makeExampleInputs(*a, 0).value());
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("no weight for parameter 'w'"), absl::string_view::npos)
      << report.status().message();
}

namespace {
/// log(x - c): NaN wherever x < c.
std::string logGraph(const std::string &c) {
  return R"(graph @log {
  input %x : f32[64] user_input
forward:
  %s = aten::sub.Tensor(%x, )" + c + R"() : f32[64]
  %y = aten::log(%s) : f32[64]
  output %y user_output
}
)";
}
} // namespace

TEST(OutputVerifierTest, NaNInTheSamePlacesAgreesWithAToleranceAndBitwise) {
  auto a = parse(logGraph("0.5"));
  auto b = a->clone();
  Fixture f(*a);
  ASSERT_TRUE(f.inputs[0].lt(0.5).any().item<bool>()); // the outputs hold NaN
  for (bool bitwise : {false, true}) {
    VerifierOptions options;
    options.bitwise = bitwise;
    auto report = verifyRewrite(*a, *b, f.weights, f.inputs, options);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_TRUE(report->passed) << (bitwise ? "bitwise" : "tolerance");
    EXPECT_TRUE(report->outputs[0].problem.empty()) << report->outputs[0].problem;
  }
}

TEST(OutputVerifierTest, NaNInOneGraphOnlyFailsAndIsNamed) {
  auto a = parse(logGraph("0.5"));
  auto b = parse(logGraph("0.75"));
  Fixture f(*a);
  for (bool bitwise : {false, true}) {
    VerifierOptions options;
    options.bitwise = bitwise;
    auto report = verifyRewrite(*a, *b, f.weights, f.inputs, options);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_FALSE(report->passed);
    EXPECT_NE(report->outputs[0].problem.find("NaN in one graph only: "), std::string::npos)
        << report->outputs[0].problem;
    EXPECT_NE(report->outputs[0].problem.find("in the rewritten graph and not the original, 0 the other way"),
              std::string::npos)
        << report->outputs[0].problem;
  }
}

// An unmodified graph never fails verification. The embedding backward
// (index_put with accumulate) adds in a thread-dependent order unless
// PyTorch's deterministic algorithms are on, which the verifier turns on for
// every comparison, bitwise or not. Ten verifications per embedding model,
// four intra-op threads.
TEST(OutputVerifierTest, AnUnmodifiedEmbeddingModelNeverFailsWithFourThreads) {
  const std::string dir = test::zooDir();
  ASSERT_FALSE(dir.empty()) << "GRAPHOPT_ZOO_DIR is not set";
  struct Threads {
    int was = at::get_num_threads();
    Threads() { at::set_num_threads(4); }
    ~Threads() { at::set_num_threads(was); }
  } threads;
  for (const char *name : {"bert-train", "bert-mlm-train", "gpt2-train", "llama-train", "t5-train"}) {
    auto model = importPt2(dir + "/" + name + ".pt2");
    ASSERT_TRUE(model.ok()) << model.status().message();
    for (int i = 0; i < 10; ++i) {
      auto report =
          verifyRewrite(*model->graph, *model->graph, model->weights, model->exampleInputs);
      ASSERT_TRUE(report.ok()) << report.status().message();
      EXPECT_TRUE(report->passed) << name << ", verification " << i;
    }
  }
}
