//===- CheckpointCosts.h - What each node costs the checkpoint planners -*- C++ -*-===//
//
// checkpoint{cost=...,scratch=...}: per node of the graph, the seconds a
// recomputation of it takes and the scratch bytes it allocates while it runs,
// from the profile (a measured run), the FLOP model, the operator cost
// database, or Inductor's fusion model (docs/Checkpointing.md, "Costs").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/Pass/AnalysisManager.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/StringRef.h>

#include <string>
#include <vector>

namespace graphopt {

enum class CostSource { Profile, Flops, Db, Inductor };
enum class ScratchSource { Auto, Measured, None };

struct CostOptions {
  CostSource cost = CostSource::Profile;
  std::string db; ///< db=: the cost database ("" none given)
  ScratchSource scratch = ScratchSource::Auto;
};

/// Per node (by rank), its seconds and measured scratch bytes (none where
/// not measured), and what priced it.
struct NodeCosts {
  std::vector<double> seconds;
  std::vector<int64_t> scratch;
  std::vector<llvm::StringRef> pricedBy; ///< static strings
  /// The cost model, as the report says it ("profile: median of 5 runs on cpu").
  std::string source;
  /// The unoptimised step's time: measured (profile), else the nodes' sum.
  double stepSeconds = 0;
};

/// The database db= names (cost=db: or $GRAPHOPT_COSTDB), "" if none.
std::string costDatabasePath(const CostOptions &options);

/// The nodes' costs as `options` asks: measured node times and scratch
/// (cost=profile, from the ProfileAnalysis), or a static estimate (flops, db,
/// inductor; scratch measured only with scratch=measured).
absl::StatusOr<NodeCosts> checkpointNodeCosts(const Graph &graph, AnalysisManager &analyses,
                                              const CostOptions &options);

} // namespace graphopt
