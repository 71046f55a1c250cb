//===- PassFuzzer.cpp - Every shipped pipeline on graphs made from the input ---===//
//
// The input's bytes are the random graph generator's decisions
// (Testing/RandomGraph.h: Choices over bytes, then an engine seeded from
// them), so each input is a well-typed training step and libFuzzer's
// mutations change the graph decision by decision. Each graph is checked as
// the seeded property test checks it (Testing/PassProperty.h): every
// pipeline the project ships refuses it clearly, or rewrites it into a step
// that verifies bitwise, whole, against the input's. A failure prints the
// graph and the pipeline and aborts, so that libFuzzer keeps the input; a
// refusal is fine. scripts/fuzz.sh runs it for FUZZ_PASS_RUNS inputs.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "graphopt/IR/Printer.h"
#include "graphopt/Testing/PassProperty.h"
#include "graphopt/Testing/RandomGraph.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace graphopt;
using namespace graphopt::testing;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Choices choices(llvm::ArrayRef<uint8_t>(data, size));
  auto made = makeRandomGraph(choices);
  if (!made.ok()) { // the generator made a graph the verifier refuses: its bug
    std::fprintf(stderr, "fuzz-passes: generator: %s\n", std::string(made.status().message()).c_str());
    std::abort();
  }
  PropertyOutcome outcome = checkShippedPipelines(*made->graph, /*seed=*/size);
  if (outcome.failures.empty())
    return 0;
  for (const std::string &failure : outcome.failures)
    std::fprintf(stderr, "fuzz-passes: %s\n", failure.c_str());
  std::fprintf(stderr, "the graph:\n%s", printGraphToString(*made->graph).c_str());
  std::abort();
}
