//===- RepeatPass.cpp - Run nested passes until nothing changes -----------===//
#include "RepeatPass.h"

#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

namespace graphopt {

absl::Status RepeatPass::validateOptions() {
  if (maxIterations_.get() == 0)
    return absl::InvalidArgumentError("option 'max-iterations' must be at least 1");
  return absl::OkStatus();
}

absl::StatusOr<bool> RepeatPass::run(Graph &graph, PassRunner &runner) {
  bool anyChange = false;
  for (unsigned round = 1; round <= maxIterations_.get(); ++round) {
    std::vector<std::string> changers;
    for (const auto &pass : nested()) {
      absl::StatusOr<bool> changed = runner.runPass(*pass, graph);
      if (!changed.ok())
        return absl::Status(changed.status().code(),
                            absl::StrCat("round ", round, ", pass '", pass->name().str(),
                                         "': ", changed.status().message()));
      if (*changed)
        changers.push_back(pass->name().str());
    }
    setStatistic("rounds", round);
    if (changers.empty())
      return anyChange;
    anyChange = true;
    if (round == maxIterations_.get())
      return absl::ResourceExhaustedError(absl::StrCat(
          "no fixpoint after ", round, " rounds (max-iterations=", maxIterations_.get(),
          "): the last round was changed by ", absl::StrJoin(changers, ", ")));
  }
  return anyChange;
}

GRAPHOPT_REGISTER_PASS(RepeatPass);

} // namespace graphopt
