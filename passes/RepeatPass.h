//===- RepeatPass.h - Run nested passes until nothing changes -----*- C++ -*-===//
//
//   repeat{cse,canonicalize,dce}                  at most 10 rounds
//   repeat{max-iterations=4,cse,canonicalize,dce}
//
// Runs its nested passes in order, round after round, until a whole round
// changes nothing (a fixpoint). A round that still changes the graph when the
// cap is reached is an error naming the passes that changed it: a pipeline
// that does not settle is a bug in one of them (two rewrites undoing each
// other), not something to stop silently.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Pass/Pass.h"

namespace graphopt {

class RepeatPass : public PassGroup {
public:
  static llvm::StringRef passName() { return "repeat"; }
  static llvm::StringRef passDescription() {
    return "run the nested passes until a round changes nothing: repeat{cse,canonicalize,dce}";
  }
  /// Runs inside torch.compile (with what it repeats); the fuzzer's pipeline
  /// for cse, canonicalize and dce, which only remove or merge.
  static PassTraits passTraits() {
    return {/*insideCompile=*/true, "", {{"repeat{cse,canonicalize,dce}", /*peakMustNotRise=*/true}}};
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> run(Graph &graph, PassRunner &runner) override;

protected:
  absl::Status validateOptions() override;

private:
  PassOption<unsigned> maxIterations_{
      this, "max-iterations", "rounds before giving up (an error) while the graph still changes", 10};
};

} // namespace graphopt
