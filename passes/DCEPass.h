//===- DCEPass.h - Dead code elimination --------------------------*- C++ -*-===//
//
// Removes nodes whose results are unused and which do nothing else: no side
// effects, no writes in place (the written value may be read later, or be a
// graph input), and no draws from the random number generator (removing one
// would shift every later random op's draws: dropout masks would change).
// Graph outputs are uses, so what they return stays. One walk from the end
// removes whole dead chains.
//
// An unused graph input is reported (statistic, and a remark naming it), not
// removed: it is part of the graph's signature. `dce{inputs=true}` removes
// unused inputs too (an input another one is tied to holds its storage, so it
// counts as used).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Pass/Pass.h"

#include <set>
#include <string>

namespace graphopt {

class DCEPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "dce"; }
  static llvm::StringRef passDescription() {
    return "dead code elimination: unused nodes without effects; unused inputs with inputs=true";
  }
  /// Runs inside torch.compile; fuzzed within repeat{cse,canonicalize,dce}.
  static PassTraits passTraits() { return {/*insideCompile=*/true}; }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;
  /// The storage roots: a value that stays reads only values that stay, so
  /// its roots do. Not the alias facts (an erased reader may have been a
  /// storage's last).
  PreservedAnalyses preservedAnalyses() const override {
    return PreservedAnalyses::none().preserve<StorageRootsAnalysis>();
  }

protected:
  void reset() override {
    countedInputs_.clear();
    remarked_.clear();
  }

private:
  PassOption<bool> inputs_{this, "inputs", "also remove graph inputs nothing reads", false};
  // repeat{...} runs the pass again: count each unused input once, and give
  // each remark (a list of inputs) once.
  std::set<std::string> countedInputs_;
  std::set<std::string> remarked_;
};

} // namespace graphopt
