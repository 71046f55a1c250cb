//===- PassTraits.h - What a pass declares once, for the places that ask -*- C++ -*-===//
//
// A pass class may declare
//
//   static PassTraits passTraits();
//
// beside passName() and passDescription(); the registry keeps it
// (PassRegistry.h), and the places that treat passes by kind read it there
// instead of keeping lists of their own: torch.compile's partitioner
// (python/graph_opt/joint.py: which passes run on its joint graph) and the
// pass fuzzer (lib/Testing/PassProperty.cpp: which pipelines it checks on
// every generated graph). A pass that declares none gets the defaults: not
// run inside torch.compile, not fuzzed (docs/WritingAPass.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace graphopt {

/// One pipeline the pass fuzzer runs on every generated graph, and what it
/// checks of the rewrite besides the verifier's agreement.
struct FuzzPipeline {
  std::string pipeline;
  /// The simulated peak may not rise (a pass that only removes or merges).
  bool peakMustNotRise = false;
  /// Ranks: above 1, the pipeline rewrites for a world of that many ranks and
  /// is checked on each rank of a SimulatedWorld.
  int world = 1;
  /// Verified bitwise; otherwise to torch.testing's tolerances (a mean over
  /// ranks rounds).
  bool bitwise = true;
};

struct PassTraits {
  /// Runs inside torch.compile (graph_opt.partitioner, graph_opt.backend): on
  /// the joint graph of fake tensors AOTAutograd traces, so the pass never
  /// runs the graph, and what it changes reaches torch's partitioner (a
  /// recomputation plan as checkpoint tags, values replaced, nodes removed).
  bool insideCompile = false;
  /// A pass that could run on fake tensors but whose rewrite cannot be
  /// carried back to torch's graph: why, for torch.compile's refusal to say.
  std::string notInsideCompile;
  /// The pipelines the pass fuzzer checks it in (cse, canonicalize and dce
  /// are fuzzed within repeat's); none: not fuzzed.
  std::vector<FuzzPipeline> fuzz;
};

} // namespace graphopt
