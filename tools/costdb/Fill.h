//===- Fill.h - The cost database filled until a model is predicted -*- C++ -*-===//
//
// `graph-opt-costdb fill`: the design's accuracy loop, automated. The model is
// profiled once; then, round by round, its step is attributed from the
// database (Cost/Attribution.h) and the configurations carrying the most
// measured time not predicted within the tolerance (unpredicted, or predicted
// far from what they measured) are measured, each with its neighbours at
// nearby sizes (Cost/ConfigNeighbours.h), so the next model of the family
// finds them too. It stops when the accurate share reaches the target, when
// the time budget is spent, or when nothing is left that measuring can fix:
// configurations measured exactly that still miss (they run at another speed
// inside the step than alone) and nodes that cannot be measured (collectives,
// data-dependent operands) are reported as such. docs/CostDB.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "MeasureConfig.h"

#include "graphopt/Cost/ConfigNeighbours.h"
#include "graphopt/Analysis/Profile.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/AnalysisManager.h"

#include <llvm/Support/raw_ostream.h>

#include <functional>
#include <set>
#include <string>

namespace graphopt {

/// The model's profile for attribution (warm-up, then `runs` measured runs),
/// kept by `analyses`; an error names `path`. `beforeRun`, if set, is called
/// before each measured run (ProfileAnalysis::Options::beforeRun).
absl::StatusOr<const ProfileResult *>
profileForAttribution(ImportedModel &model, llvm::StringRef path, c10::Device device, unsigned runs,
                      AnalysisManager &analyses,
                      std::function<absl::Status(unsigned)> beforeRun = nullptr);

struct FillOptions {
  double target = 0.9;          ///< the accurate share to reach
  double tolerance = 0.25;      ///< a node is accurate within this share of what it measured
  double budgetSeconds = 600;   ///< measuring stops once this much time has passed
  unsigned perRound = 8;        ///< configurations measured per round (before neighbours)
  unsigned maxRounds = 20;
  bool neighbours = true;
  NeighbourOptions neighbourOptions;
  unsigned profileRuns = 5;
  /// Source names recorded: the model's own configurations under `source`
  /// (its file's stem by default, as `measure` records it, so `--leave-out`
  /// leaves them out), their neighbours under `source + ":neighbours"`.
  std::string source;
};

struct FillResult {
  double accurateShare = -1; ///< after the last round
  bool targetMet = false;
  size_t measured = 0, neighboursMeasured = 0, failed = 0;
};

/// Fills `dbPath` for the model at `modelPath`; prints each round to `os`.
/// An error is bad input or the database's.
absl::StatusOr<FillResult> fillDatabase(const std::string &dbPath, const std::string &modelPath,
                                        c10::Device device, ConfigMeasurer &measurer,
                                        const FillOptions &options, llvm::raw_ostream &os);

} // namespace graphopt
