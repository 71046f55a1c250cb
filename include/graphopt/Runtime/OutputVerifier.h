//===- OutputVerifier.h - Proving a rewritten graph computes the same -*- C++ -*-===//
//
// Runs the original and the rewritten graph with the same weights, inputs and
// RNG seed, each from the same state (the executor restores what a run writes
// in place, so neither sees the other's updates), on CUDA when a GPU is
// present, otherwise on CPU, and says which;
// compares every output by role and name with dtype-aware tolerances (exact
// for integers and bools), and every graph input either graph writes in place
// (parameters, buffers, optimizer state, user inputs) as the step left it:
// the whole step, not only what it returns. On a failure it names the first
// node, in execution order, whose value diverges among the values both
// graphs share.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/WeightStore.h"

#include <ATen/core/Tensor.h>
#include <llvm/Support/raw_ostream.h>

#include <optional>
#include <string>
#include <map>
#include <vector>

namespace graphopt {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

/// torch.testing's defaults: f32 rtol 1.3e-6 / atol 1e-5, f64 1e-7 / 1e-7,
/// f16 1e-3 / 1e-5, bf16 1.6e-2 / 1e-5; exact for integers and bools.
Tolerance defaultTolerance(c10::ScalarType dtype);

struct VerifierOptions {
  /// Run on this device; unset: CUDA when a GPU is present, else CPU.
  std::optional<c10::Device> device;
  uint64_t seed = 0;
  /// Override the floating-point tolerances for every dtype.
  std::optional<double> rtol, atol;
  /// Bitwise: every output must have exactly the same bytes (so -0.0 differs
  /// from 0.0, and NaN agrees with NaN only with the same payload). For
  /// rewrites that must not change a single bit (CSE, folding of no-ops).
  bool bitwise = false;
  /// Both runs use PyTorch's deterministic algorithms (warn-only), with or
  /// without bitwise: some kernels (CPU index_put with accumulate, many CUDA
  /// reductions) otherwise add in a thread-dependent order, and an unmodified
  /// graph could fail verification when the machine is busy. A false alarm
  /// that depends on load is one users learn to ignore.
  bool deterministic = true;
};

/// How many times the verifier runs each graph (interleaved: original,
/// rewritten, original, rewritten). The original's runs say which results it
/// reproduces bit for bit; every run of the rewritten graph must match.
inline constexpr int kVerifierRuns = 2;
/// A result the original does not reproduce (a kernel whose last bits vary
/// from run to run) is compared within this multiple of the largest
/// difference between the original's own runs, beyond its tolerance.
inline constexpr double kSpreadMultiple = 4.0;

struct OutputComparison {
  /// "loss", "gradient fc1.weight", "user_output #0", ..., and for inputs
  /// written in place "parameter fc1.weight after the step".
  std::string label;
  std::string originalValue, rewrittenValue;
  double maxAbsError = 0;
  double maxRelError = 0;
  Tolerance tolerance;
  bool bitwise = false; ///< compared byte for byte (tolerance unused)
  /// The largest difference between the original's own runs: 0 when it
  /// reproduces this result bit for bit (then the comparison is as asked:
  /// bitwise or within the tolerance); otherwise the tolerance's atol is
  /// widened by kSpreadMultiple times it, and the report names the result.
  double spread = 0;
  bool passed = false;
  std::string problem; ///< why it failed beyond the numbers (missing, shape, dtype)
};

struct VerificationReport {
  c10::Device device{c10::DeviceType::CPU};
  bool gpuAvailable = false;
  std::vector<OutputComparison> outputs;
  bool passed = false;
  /// On failure: the first node whose output differs, "" when none was found.
  std::string firstDivergence;
  /// Said beside the result: the results the original graph does not
  /// reproduce from run to run, with their spread (compared more loosely).
  std::string note;

  /// A summary line (how many results of each kind, compared bitwise or
  /// within which tolerance, the one furthest off), after a line per result
  /// when `eachResult` or when verification failed.
  void print(llvm::raw_ostream &os, bool eachResult = false) const;
};

/// Each output by the label the verifier matches two graphs' outputs on: role
/// and target (a shard's gradient answers for its parameter's), or role and
/// position among that role's outputs (losses, user outputs); its index.
std::map<std::string, unsigned> outputKeys(const Graph &g);

/// Compares `rewritten` against `original`: each runs kVerifierRuns times,
/// interleaved. A result the original reproduces bit for bit must match in
/// every run of the rewritten graph (within the tolerance, or bitwise); a
/// result it does not reproduce is compared within kSpreadMultiple times its
/// spread beyond the tolerance and named in the report's note. A mismatch is
/// never rerun away. An error status means the verification could not run (a
/// graph failed to execute), not that it failed.
absl::StatusOr<VerificationReport> verifyRewrite(const Graph &original, const Graph &rewritten,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> userInputs,
                                                 const VerifierOptions &options = {});
/// The same where a pass changed the user inputs: each graph takes its own
/// (the same tensors, matched by name: ExecutionContext::inputsFor).
absl::StatusOr<VerificationReport> verifyRewrite(const Graph &original, const Graph &rewritten,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> originalInputs,
                                                 llvm::ArrayRef<at::Tensor> rewrittenInputs,
                                                 const VerifierOptions &options = {});

} // namespace graphopt
