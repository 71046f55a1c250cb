//===- PassRun.h - Run a pipeline in a test, read its statistics -*- C++ -*-===//
#pragma once

#include "graphopt/Pass/GraphOptimizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

namespace graphopt::test {

/// Runs `pipeline` on `graph`, failing the test on an error; returns the
/// optimizer for its statistics.
inline std::unique_ptr<GraphOptimizer> runPipeline(Graph &graph, llvm::StringRef pipeline) {
  auto opt = std::make_unique<GraphOptimizer>();
  absl::Status added = opt->addPipeline(pipeline);
  EXPECT_TRUE(added.ok()) << added.message();
  auto changed = opt->run(graph);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  return opt;
}

/// The sum of statistic `name` over every run of pass `pass` (nested ones too).
inline int64_t statistic(const GraphOptimizer &opt, llvm::StringRef pass, const std::string &name) {
  int64_t sum = 0;
  std::function<void(const OptimizationPass &)> visit = [&](const OptimizationPass &p) {
    if (p.name() == pass) {
      auto it = p.statistics().find(name);
      if (it != p.statistics().end())
        sum += it->second.value;
    }
    if (const auto *group = dynamic_cast<const PassGroup *>(&p))
      for (const auto &n : group->nested())
        visit(*n);
  };
  for (const auto &p : opt.passes())
    visit(*p);
  return sum;
}

} // namespace graphopt::test
