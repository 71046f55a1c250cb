//===- MeasureConfig.h - One configuration into the database ----*- C++ -*-===//
//
// What `measure` and `fill` do per configuration, in one transaction: record
// it and the source it was found in (with how many nodes make it), then time
// it on this machine unless it was measured here already, storing the timing
// or the reason it did not run. An interrupted run leaves the database as it
// was before the configuration it was on.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/Cost/OperatorConfig.h"
#include "graphopt/Cost/OperatorTiming.h"
#include "graphopt/Runtime/EnergyMeter.h"

#include <absl/status/statusor.h>

namespace graphopt {

struct ConfigMeasurer {
  CostDatabase &db;
  int64_t machine = 0;
  OperatorTimingOptions timing;
  EnergyMeter *meter = nullptr;
  bool remeasure = false;
  bool verbose = false; ///< a line per configuration timed

  enum class Outcome { Measured, Already, Failed };
  /// An error is the database's (fatal); a configuration that does not run is
  /// Failed, warned about on stderr naming `input`, and recorded as a failure.
  absl::StatusOr<Outcome> measure(const OperatorConfig &config, const std::string &source,
                                  int64_t nodes, llvm::StringRef input);
  /// Records the configuration's time inside a model's step (one transaction).
  absl::Status putInStep(const OperatorConfig &config, const InStepSample &sample);
};

} // namespace graphopt
