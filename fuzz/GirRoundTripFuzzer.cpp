//===- GirRoundTripFuzzer.cpp - .gir parse/verify/print round trip -----------===//
//
// The input is .gir text. It is parsed; a graph that parses is verified and
// printed, the print parsed again and printed again. Failing statuses are
// fine (most inputs do not parse). Bugs are crashes, sanitizer reports and
// escaping exceptions, and, for a graph the verifier accepted: a print that
// does not parse, does not verify, or prints differently the second time
// (the printer must write every verified graph in a form the parser reads
// back to the same graph), or a copy (Graph::clone) that prints differently;
// those end in __builtin_trap() after a note on stderr.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"

#include <cstdint>
#include <cstdio>
#include <string>

using namespace graphopt;

namespace {

[[noreturn]] void roundTripFailure(const char *what, const std::string &first,
                                   const std::string &detail) {
  std::fprintf(stderr, "fuzz-gir-roundtrip: %s\n--- first print ---\n%s\n--- detail ---\n%s\n",
               what, first.c_str(), detail.c_str());
  __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto graph = parseGraph(text, "<fuzz>");
  if (!graph.ok())
    return 0;
  bool verified = verifyGraph(**graph).ok();
  std::string first = printGraphToString(**graph);

  auto reparsed = parseGraph(first, "<first print>");
  if (!reparsed.ok()) {
    if (verified)
      roundTripFailure("the print of a verified graph does not parse", first,
                       std::string(reparsed.status().message()));
    return 0;
  }
  if (verified)
    if (absl::Status st = verifyGraph(**reparsed); !st.ok())
      roundTripFailure("the print of a verified graph does not verify", first,
                       std::string(st.message()));
  std::string second = printGraphToString(**reparsed);
  if (verified && first != second)
    roundTripFailure("print -> parse -> print changed the text", first, second);
  // Passes copy graphs (Graph::clone, "a deep copy with the same names"): a
  // verified graph's copy prints the same.
  if (verified) {
    std::string cloned = printGraphToString(*(*graph)->clone());
    if (cloned != first)
      roundTripFailure("Graph::clone() prints differently from the original", first, cloned);
  }
  return 0;
}
