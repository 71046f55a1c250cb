//===- SpeedCalibration.h - How fast the machine runs now, against its database -*- C++ -*-===//
//
// A cost database measured at one time predicts another only where the
// machine runs as fast as it did then. A shared or throttled host does not:
// on this project's 2-core machine the same configurations ran 1.4-1.7x
// slower two hours after its database was measured (docs/CostDB.md,
// "Calibration"), and a model profiled then was predicted at 0.6x its step
// from a database that predicted it within 14% when fresh.
//
// The calibration re-times some of the database's own configurations, its
// probes, as `measure` times them, and compares them with their stored
// medians: each probe's ratio is its time now (the geometric mean of its
// timings, when timed more than once: `attribute` times the probes before
// each of the profile's runs, interleaved with them, since a shared host's
// speed moves within seconds) over its stored median, and the factor is the
// weighted median of the ratios, robust to a probe that happened to be noisy either time.
// CostModel::setSpeed scales every prediction by it. The probes, for a step
// (pickForStep): the measurements its predictions rest on that carry the
// most predicted time, each weighted by that time, so the configurations
// that make the step are the ones calibrated; kinds of kernels slow down
// unequally on a shared host (matrix products and calls that are all fixed
// cost did not move alike here). Without a step (pick): measurements spread
// evenly over the database's times, each weighted alike.
//
// It corrects the machine's speed, not the database's errors: the probes are
// configurations the database has, never the model's own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/Attribution.h"
#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/Cost/OperatorTiming.h"
#include "graphopt/IR/Graph.h"

#include <absl/status/statusor.h>

#include <memory>
#include <vector>

namespace graphopt {

class SpeedCalibration {
public:
  /// Up to `count` of the model's measurements of at most `maxSeconds`, evenly
  /// spaced in the order of their times, weighted alike. An error when the
  /// model has none that short.
  static absl::StatusOr<SpeedCalibration> pick(const CostModel &model, size_t count,
                                               double maxSeconds = 0.005);
  /// Up to `count` of the measurements `step`'s predictions rest on
  /// (NodeAttribution::nearest), those carrying the most predicted time first,
  /// each weighted by that time; none longer than `maxSeconds` (calibrating
  /// stays a few seconds). An error when no prediction rests on one (every
  /// node learned or missing).
  static absl::StatusOr<SpeedCalibration> pickForStep(const StepAttribution &step, size_t count,
                                                      double maxSeconds = 0.1);

  /// Times every probe once more, now. A probe that no longer runs is
  /// dropped; an error when none runs.
  absl::Status retime(const OperatorTimingOptions &timing);

  /// The weighted median over the probes of (time now / time stored); 1
  /// before retime.
  double factor() const { return quantile(0.5); }
  /// The ratios' weighted quartiles: how evenly the machine's speed moved.
  double q1() const { return quantile(0.25); }
  double q3() const { return quantile(0.75); }
  size_t probes() const { return probes_.size(); }

private:
  struct Probe {
    const CostEntry *entry = nullptr;
    double weight = 1;
    std::unique_ptr<Graph> graph;
    std::vector<double> now; ///< its timings, one per retime
  };
  /// Adds `entry` as a probe; false when its key does not parse.
  bool add(const CostEntry *entry, double weight);
  double quantile(double q) const;
  std::vector<Probe> probes_;
};

} // namespace graphopt
