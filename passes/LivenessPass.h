//===- LivenessPass.h - The liveness analysis as a pass -----------*- C++ -*-===//
//
// Computes the liveness analysis (include/graphopt/Analysis/Liveness.h) and,
// with a report directory, writes liveness_values.csv, liveness_timeline.csv
// and liveness.json there. Option `scratch=none|measured` (default none):
// measure operator scratch memory by running the graph, and add it to the
// timeline. It changes nothing, so every analysis stays cached.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Pass/Pass.h"

namespace graphopt {

class LivenessPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "liveness"; }
  static llvm::StringRef passDescription() {
    return "activation lifetimes, simulated memory timeline and peak, breakdown at the peak";
  }
  /// Runs inside torch.compile (scratch=none there: nothing runs); changes nothing to fuzz.
  static PassTraits passTraits() { return {/*insideCompile=*/true}; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::Status analyze(const Graph &graph, AnalysisManager &analyses) override;

private:
  using Scratch = LivenessAnalysis::Scratch;
  PassOption<Scratch> scratch_{this, "scratch",
                               "operator scratch memory: none (the graph alone, runs nothing) or "
                               "measured (runs the graph)",
                               Scratch::None,
                               {{"none", Scratch::None}, {"measured", Scratch::Measured}}};
};

} // namespace graphopt
