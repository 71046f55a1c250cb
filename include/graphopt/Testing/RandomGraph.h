//===- RandomGraph.h - Random well-typed training graphs for pass fuzzing -*- C++ -*-===//
//
// The pass fuzzer's generator (docs/Robustness.md, "The pass fuzzer"): a
// small training step built from a stream of choices, for the property test
// (seeded) and the libFuzzer target fuzz-passes (its input's bytes). Every graph it makes is
// well typed (each node is typed by the operator's own meta kernel,
// inferNodeTypes) and passes the structural verifier. It covers what the
// passes must get right:
//
//   forward and backward phases; views and chains of views (view, t, alias,
//   slice, expand); in-place writes to activations, to views of them and to
//   graph inputs (a buffer); random operators (rand_like, bernoulli,
//   native_dropout); multi-output operators (max.dim, native_dropout); tied
//   parameters; graph outputs that alias (one value twice, a view of
//   another output); repeated calls (for cse) and copies that change
//   nothing (clone, x * 1, x + 0: for canonicalize); values kept from the
//   forward for the backward (for checkpoint); repeated blocks (a block of
//   forward nodes copied one to three times after itself, each copy reading
//   the one before: identical layers, which the block-structured planner
//   finds from their shapes), some starting on a node without results
//   (aten::_assert_tensor_metadata, as a Llama export has) and holding nodes
//   of several results.
//
// `features` counts what each graph holds, so a run can show that every
// feature is generated.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

namespace graphopt::testing {

/// Where the generator's decisions come from: a seeded engine (the property
/// test), or a fuzzer's input bytes (the libFuzzer target: each decision takes
/// the next bytes, so that mutating the input changes decisions one by one;
/// once the bytes run out, an engine seeded from them takes over, so every
/// input makes a whole graph).
class Choices {
public:
  explicit Choices(uint64_t seed) : engine_(seed) {}
  explicit Choices(llvm::ArrayRef<uint8_t> bytes);
  /// A number in [0, n), n >= 1.
  uint32_t below(uint32_t n);
  bool chance(uint32_t percent) { return below(100) < percent; }

private:
  llvm::ArrayRef<uint8_t> bytes_;
  std::mt19937_64 engine_;
};

enum class Feature : uint8_t {
  Forward,
  Backward,
  View,
  ViewChain,
  InPlaceActivation,
  InPlaceThroughView,
  InPlaceInput,
  Random,
  MultiOutput,
  TiedInput,
  AliasingOutputs,
  RepeatedCall,
  NoOpCopy,
  SavedForBackward,
  RepeatedBlock,
  NoResultNode,
};
constexpr size_t kNumFeatures = 16;
llvm::StringRef featureName(Feature f);

struct RandomGraph {
  std::unique_ptr<Graph> graph;
  /// How many nodes (or inputs, outputs) of each feature the graph holds.
  std::array<unsigned, kNumFeatures> features{};
};

/// A random training step; an error only if the generator itself made a
/// graph the verifier refuses (a generator bug, reported as such).
absl::StatusOr<RandomGraph> makeRandomGraph(Choices &choices);

} // namespace graphopt::testing
