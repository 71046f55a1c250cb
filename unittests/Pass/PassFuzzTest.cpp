//===- PassFuzzTest.cpp - Every shipped pipeline on random training graphs -===//
//
// The seeded property test of the pass fuzzer (docs/Robustness.md): random
// well-typed training graphs (Testing/RandomGraph.h), and for each pipeline
// the project ships, the graph is either refused with a clear error or
// rewritten, and then verified bitwise over the whole step (outputs and
// every input written in place), with the simulated peak not above the
// input's where the pipeline promises that. A pass error that is a bug
// (INTERNAL: a pass that broke its own rules, outputs made to share storage,
// an edit reported as none) fails the test, as does a graph the rewrite
// cannot run. The graph and pipeline of a failure are printed, ready to be
// a lit regression test.
//
// GRAPHOPT_PASS_FUZZ_GRAPHS sets how many graphs (default 400; make test runs 2000), and
// GRAPHOPT_PASS_FUZZ_SEED the first seed.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "graphopt/Testing/RandomGraph.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>

using namespace graphopt;
using namespace graphopt::testing;

namespace {

struct PipelineCase {
  const char *pipeline;
  bool peakMustNotRise;
};

// What the project ships, and their composition. checkpoint plans on FLOPs
// here: the measured default would profile every graph.
const PipelineCase kPipelines[] = {
    {"repeat{cse,canonicalize,dce}", true},
    {"checkpoint{activations=30%,cost=flops}", false},
    {"reinplace", true},
    {"add-optimizer", false},
    {"repeat{cse,canonicalize,dce},checkpoint{activations=30%,cost=flops},reinplace", false},
    {"add-optimizer{kind=adamw},repeat{cse,canonicalize,dce},reinplace", false},
};

uint64_t envNumber(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

/// A refusal's reason without what differs graph to graph (numbers, and
/// the parts in parentheses), so that refusals group by reason.
std::string reasonOf(llvm::StringRef message, size_t n = 110) {
  std::string s;
  int depth = 0;
  for (char c : message.str()) {
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

} // namespace

TEST(PassFuzzTest, EveryPipelineRefusesClearlyOrVerifiesBitwise) {
  const uint64_t graphs = envNumber("GRAPHOPT_PASS_FUZZ_GRAPHS", 400);
  const uint64_t firstSeed = envNumber("GRAPHOPT_PASS_FUZZ_SEED", 1);
  std::array<uint64_t, kNumFeatures> featureGraphs{};
  std::map<std::string, unsigned> refusals;
  unsigned refusedGraphs = 0, budgetRefusedGraphs = 0, failures = 0, rewrites = 0, unrunnable = 0;
  auto start = std::chrono::steady_clock::now();

  for (uint64_t seed = firstSeed; seed < firstSeed + graphs && failures < 5; ++seed) {
    Choices choices(seed);
    auto made = makeRandomGraph(choices);
    ASSERT_TRUE(made.ok()) << "seed " << seed << ": " << made.status().message();
    const Graph &g = *made->graph;
    for (size_t f = 0; f < kNumFeatures; ++f)
      featureGraphs[f] += made->features[f] > 0;
    WeightStore weights;
    ASSERT_TRUE(fillMissingWeights(g, weights, seed).ok());
    auto inputs = makeExampleInputs(g, seed);
    ASSERT_TRUE(inputs.ok());
    int64_t peakBefore = LivenessAnalysis::compute(g)->peakBytes;

    bool refused = false, budgetRefused = false;
    for (const PipelineCase &pc : kPipelines) {
      std::unique_ptr<Graph> rewritten = g.clone();
      OptimizerOptions options;
      options.verifyEach = true;
      options.keepVerificationBaseline = true;
      GraphOptimizer optimizer(options);
      ASSERT_TRUE(optimizer.addPipeline(pc.pipeline).ok()) << pc.pipeline;
      ExecutionContext context;
      context.weights = &weights;
      context.inputs = *inputs;
      optimizer.analyses().setExecutionContext(context);
      auto changed = optimizer.run(*rewritten);
      auto report = [&](llvm::StringRef what) {
        ++failures;
        ADD_FAILURE() << "seed " << seed << ", -passes='" << pc.pipeline << "': " << what.str()
                      << "\n" << printGraphToString(g);
      };
      if (!changed.ok()) {
        if (changed.status().code() == absl::StatusCode::kInternal) {
          report(std::string(changed.status().message()));
          continue;
        }
        // A memory budget no plan reaches (OUT_OF_RANGE) says nothing about
        // the pass's soundness; it is counted apart.
        if (changed.status().code() == absl::StatusCode::kOutOfRange)
          budgetRefused = true;
        else
          refused = true;
        // GRAPHOPT_PASS_FUZZ_SHOW_REFUSED=1 prints each refused graph (to tune the generator).
        if (envNumber("GRAPHOPT_PASS_FUZZ_SHOW_REFUSED", 0))
          std::cout << "refused, seed " << seed << ", -passes='" << pc.pipeline
                    << "': " << changed.status().message() << "\n"
                    << printGraphToString(g);
        ++refusals[absl::StrCat(pc.pipeline, ": ", reasonOf(std::string(changed.status().message())))];
        continue;
      }
      ++rewrites;
      const Graph &reference =
          optimizer.verificationBaseline() ? *optimizer.verificationBaseline() : g;
      VerifierOptions vopts;
      vopts.bitwise = true;
      auto verified = verifyRewrite(reference, *rewritten, weights, *inputs, vopts);
      if (!verified.ok()) {
        // A generated step PyTorch itself refuses to run (an in-place write
        // from an operand overlapping it) tests no pass: counted, skipped.
        if (llvm::StringRef(std::string(verified.status().message())).startswith("original graph:")) {
          ++unrunnable;
          break;
        }
        report(absl::StrCat("the rewritten graph could not run: ", verified.status().message()));
        continue;
      }
      if (!verified->passed) {
        std::string text;
        llvm::raw_string_ostream os(text);
        verified->print(os);
        report(absl::StrCat("verification failed\n", os.str()));
        continue;
      }
      if (pc.peakMustNotRise) {
        int64_t after = LivenessAnalysis::compute(*rewritten)->peakBytes;
        if (after > peakBefore)
          report(absl::StrCat("the simulated peak rose from ", peakBefore, " to ", after));
      }
    }
    refusedGraphs += refused;
    budgetRefusedGraphs += budgetRefused;
  }

  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "pass fuzzer: " << graphs << " graphs x " << std::size(kPipelines)
            << " pipelines in " << seconds << " s (" << graphs / seconds << " graphs/s), "
            << rewrites << " rewrites verified, " << refusedGraphs
            << " graphs refused by some pipeline, " << budgetRefusedGraphs
            << " with a checkpoint budget no plan reaches, " << unrunnable
            << " generated steps PyTorch does not run\n";
  std::cout << "features (graphs holding each):\n";
  for (size_t f = 0; f < kNumFeatures; ++f)
    std::cout << "  " << featureName(static_cast<Feature>(f)).str() << ": " << featureGraphs[f]
              << "\n";
  std::cout << "refusals by reason:\n";
  for (const auto &[reason, n] : refusals)
    std::cout << "  " << n << "  " << reason << "\n";
  for (size_t f = 0; f < kNumFeatures; ++f)
    EXPECT_GT(featureGraphs[f], 0u) << "never generated: " << featureName(static_cast<Feature>(f)).str();
  EXPECT_LE(refusedGraphs * 5, graphs) << "more than 20% of the graphs were refused";
}
