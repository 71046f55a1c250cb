//===- BitwiseRewrite.h - Expect a rewrite to compute the same bits -*- C++ -*-===//
#pragma once

#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/OutputVerifier.h"

#include <gtest/gtest.h>
#include <llvm/Support/raw_ostream.h>

#include <string>

namespace graphopt::test {

/// Runs `original` and `rewritten` on the CPU with the same weights and the
/// same seeded example inputs, and expects every output and gradient bitwise
/// equal; on failure the verifier's report is the message.
inline void expectBitwiseSame(const Graph &original, const Graph &rewritten, WeightStore &weights) {
  VerifierOptions options;
  options.bitwise = true;
  options.device = c10::Device(c10::DeviceType::CPU);
  auto report = verifyRewrite(original, rewritten, weights, makeExampleInputs(original, /*seed=*/0).value(),
                              options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  std::string text;
  llvm::raw_string_ostream os(text);
  report->print(os);
  EXPECT_TRUE(report->passed) << os.str();
}

} // namespace graphopt::test
