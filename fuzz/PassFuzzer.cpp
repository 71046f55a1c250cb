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
// At exit each process prints its graphs' verdicts per pipeline, and appends
// them (each unrunnable input and refusal as it comes) to the file
// GRAPHOPT_FUZZ_PASS_TALLY names, if set: libFuzzer's fork
// mode keeps no job's output, and scripts/fuzz.sh sums the file's lines to
// hold the whole run to the floors PassFuzzTest holds a seeded run to.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "graphopt/IR/Printer.h"
#include "graphopt/Testing/PassProperty.h"
#include "graphopt/Testing/RandomGraph.h"

#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

using namespace graphopt;
using namespace graphopt::testing;

namespace {

constexpr const char *kVerdictNames[] = {"verified", "refused", "budget unreachable",
                                         "unrunnable", "failed"};
/// [pipeline][verdict]: graphs, this process's; printed at exit (each fork
/// mode job prints its own).
std::vector<std::array<uint64_t, std::size(kVerdictNames)>> verdictCounts;
uint64_t graphs = 0;

/// Appends `text` to the tally file GRAPHOPT_FUZZ_PASS_TALLY names, if set,
/// in one write (lines of concurrent jobs do not interleave).
void appendToTally(const std::string &text) {
  const char *path = std::getenv("GRAPHOPT_FUZZ_PASS_TALLY");
  if (!path || !*path)
    return;
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    std::fprintf(stderr, "fuzz-passes: could not append to %s\n", path);
  if (fd >= 0)
    ::close(fd);
}

/// One line per pipeline: "fuzz-passes-tally <graphs> <verified> <refused>
/// <budget unreachable> <unrunnable> <failed> <pipeline>".
std::string tallyLines() {
  std::string lines;
  for (size_t p = 0; p < verdictCounts.size(); ++p) {
    lines += "fuzz-passes-tally " + std::to_string(graphs);
    for (uint64_t n : verdictCounts[p])
      lines += " " + std::to_string(n);
    lines += std::string(" ") + shippedPipelines()[p].pipeline + "\n";
  }
  return lines;
}

void printVerdicts() {
  std::fprintf(stderr, "fuzz-passes: %llu graphs, per pipeline:\n",
               static_cast<unsigned long long>(graphs));
  for (size_t p = 0; p < verdictCounts.size(); ++p) {
    std::fprintf(stderr, "fuzz-passes:   %s:", shippedPipelines()[p].pipeline.c_str());
    for (size_t v = 0; v < std::size(kVerdictNames); ++v)
      std::fprintf(stderr, " %s %llu", kVerdictNames[v],
                   static_cast<unsigned long long>(verdictCounts[p][v]));
    std::fprintf(stderr, "\n");
  }
  if (graphs > 0)
    appendToTally(tallyLines());
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  verdictCounts.resize(shippedPipelines().size());
  std::atexit(printVerdicts);
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
  ++graphs;
  if (outcome.unrunnable) {
    std::fprintf(stderr, "fuzz-passes: unrunnable: PyTorch does not run this input's graph\n");
    // Named in the tally, in hex, so that each is printed at the end of a
    // fork-mode run.
    appendToTally("fuzz-passes-unrunnable " +
                  llvm::toHex(llvm::ArrayRef<uint8_t>(data, size), /*LowerCase=*/true) + "\n");
  }
  for (size_t p = 0; p < outcome.verdicts.size() && p < verdictCounts.size(); ++p)
    ++verdictCounts[p][static_cast<size_t>(outcome.verdicts[p])];
  // Each refusal's reason, so that a run's table says why a pipeline fell
  // short of its floor.
  std::string refusals;
  for (const auto &[pipeline, message] : outcome.refusals) {
    std::string reason = refusalReason(message);
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    refusals += "fuzz-passes-refused " + pipeline + ": " + reason + "\n";
  }
  if (!refusals.empty())
    appendToTally(refusals);
  if (outcome.failures.empty())
    // -1 keeps an unrunnable input out of the corpus: mutating it would mostly
    // make more graphs that test nothing.
    return outcome.unrunnable ? -1 : 0;
  for (const std::string &failure : outcome.failures)
    std::fprintf(stderr, "fuzz-passes: %s\n", failure.c_str());
  std::fprintf(stderr, "the graph:\n%s", printGraphToString(*made->graph).c_str());
  std::abort();
}
