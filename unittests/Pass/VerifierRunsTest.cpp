//===- VerifierRunsTest.cpp - A mismatch is never rerun away ---------------===//
//
// The verifier learns the original's own run-to-run spread and holds every
// run of the rewritten graph to it (OutputVerifier.h). Two stand-ins from the
// test passes (passes/test/TestPasses.cpp): graphopt_test::flaky, wrong on
// every other call (a rewrite that is wrong only some of the time: a missing
// wait, a race), and graphopt_test::noisy, whose last bits vary from call to
// call (a nondeterministic kernel, such as a scatter-add on a GPU).
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/OutputVerifier.h"

#include <gtest/gtest.h>

namespace graphopt {
namespace {

constexpr const char *kStep = R"(graph @step {
  input %w : f32[4, 4] parameter "w"
  input %x : f32[4, 4] user_input
forward:
  %h = aten::mm(%x, %w) : f32[4, 4]
  %r = aten::tanh(%h) : f32[4, 4]
  %loss = aten::sum(%r) : f32[]
  output %loss loss
  output %r user_output
})";

std::unique_ptr<Graph> parsed(const std::string &text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

struct Verified {
  std::unique_ptr<Graph> original, rewritten;
  WeightStore weights;
  std::vector<at::Tensor> inputs;

  Verified(const std::string &text, llvm::StringRef pipeline) {
    original = parsed(text);
    rewritten = original->clone();
    GraphOptimizer opt;
    EXPECT_TRUE(opt.addPipeline(pipeline).ok());
    EXPECT_TRUE(opt.run(*rewritten).ok());
    EXPECT_TRUE(fillMissingWeights(*original, weights, 0).ok());
    inputs = makeExampleInputs(*original, 0).value();
  }
  VerificationReport verify(bool bitwise) {
    VerifierOptions options;
    options.bitwise = bitwise;
    auto report = verifyRewrite(*original, *rewritten, weights, inputs, options);
    EXPECT_TRUE(report.ok()) << report.status().message();
    return report.ok() ? *report : VerificationReport{};
  }
};

// Wrong on every other run: FAIL on every verification, whichever run of
// the rewritten graph the corruption lands on (the old verifier reran both
// graphs after a failure and passed when the rerun agreed).
TEST(VerifierRunsTest, AnIntermittentlyWrongRewriteFailsEveryTime) {
  Verified v(kStep, "test-flaky-output");
  for (bool bitwise : {false, true})
    for (int attempt = 0; attempt < 3; ++attempt) {
      VerificationReport report = v.verify(bitwise);
      EXPECT_FALSE(report.passed) << "attempt " << attempt << (bitwise ? " (bitwise)" : "");
      EXPECT_TRUE(report.note.empty()) << report.note; // the original reproduces itself
    }
}

// A result the original itself does not reproduce passes within a multiple
// of its spread, and the report names it; the results it reproduces are
// still held to bitwise.
TEST(VerifierRunsTest, ANondeterministicKernelPassesWithItsOutputsNamed) {
  std::string text = kStep;
  text.replace(text.find("%r = aten::tanh(%h)"), 19, "%r = graphopt_test::noisy(%h)");
  Verified v(text, "cse");
  VerificationReport report = v.verify(/*bitwise=*/true);
  EXPECT_TRUE(report.passed);
  EXPECT_NE(report.note.find("the original graph does not reproduce 2 results"), std::string::npos)
      << report.note;
  EXPECT_NE(report.note.find("user_output #0"), std::string::npos) << report.note;
  for (const OutputComparison &c : report.outputs) {
    EXPECT_GT(c.spread, 0) << c.label;
    EXPECT_FALSE(c.bitwise) << c.label;
  }
}

// The same noisy graph with a wrong rewrite beside it: the spread widens only
// the noisy results' bounds; a corruption far beyond it still fails.
TEST(VerifierRunsTest, TheSpreadDoesNotExcuseAWrongValue) {
  std::string text = kStep;
  text.replace(text.find("%r = aten::tanh(%h)"), 19, "%r = graphopt_test::noisy(%h)");
  Verified v(text, "test-flaky-output");
  for (int attempt = 0; attempt < 3; ++attempt)
    EXPECT_FALSE(v.verify(/*bitwise=*/false).passed) << "attempt " << attempt;
}

} // namespace
} // namespace graphopt
