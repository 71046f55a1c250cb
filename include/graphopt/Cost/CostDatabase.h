//===- CostDatabase.h - Measured operator costs, kept in SQLite -*- C++ -*-===//
//
// The operator cost database (docs/CostDB.md): each operator configuration
// (OperatorConfig.h) measured once per machine and reused. A model's step is
// then predicted and attributed node by node without running the model, and
// checkpoint{cost=db} plans from it.
//
// Tables (schema version kSchemaVersion, in SQLite's user_version):
//   machines      one row per (CPU model, threads, torch version, device)
//   configs       one row per configuration: its key (the one-node .gir),
//                 operator, family, sizes, constants, FLOPs, bytes moved, work
//   sources       which graphs or sweeps a configuration was found in, and
//                 how many of their nodes make it: what leave-one-model-out
//                 prediction leaves out
//   measurements  per configuration and machine: median, quartiles, minimum,
//                 runs, wall time of the timed loop, joules per call (NULL
//                 without a sensor) and the sensor
//   failures      configurations that could not run here, and why
//   in_step       (version 2) per configuration, machine and source model: the
//                 median of its nodes' times inside that model's profiled step
//                 (measure --in-step), where a kernel finds its inputs where
//                 the previous one left them and shares the caches
// Every change is one transaction: a measurement interrupted leaves the
// database as it was before that configuration. A version-1 file gains the
// in_step table when opened.
//
// CostModel predicts from the measurements of one machine: the configuration
// itself when measured; else from the three measured configurations of its
// family nearest in log-sizes, along the work: t = floor + work / rate, the
// floor the operator's fastest call, the rate the work per second past the
// floor; for a memory-bound operator interpolated in log work between those
// configurations, or the nearest one's beyond them; for a compute-bound one,
// whose work is its roofline work (rooflineWork), the neighbours' rates
// weighted by nearness in sizes and work; else the same from the operator's
// configurations nearest in work; else nothing, and the caller falls back to
// the FLOP model and says so. Between the last two: where the operator was
// never measured, or only at work more than 4x away, a model learned from the
// machine's measurements (LearnedCost.h) predicts it, when there are enough
// to train on. Where in-step times exist (sources not left
// out), a configuration timed in a step is predicted by that time; any other
// prediction gains the in-step extra of its operator: the median of (in-step
// minus isolated time) over the operator's five configurations timed both
// ways nearest in work, those within 8x of it (small kernels run slower
// inside a step than alone, by a per-call cost more than a factor).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/OperatorConfig.h"
#include "graphopt/Cost/OperatorTiming.h"

#include <absl/status/statusor.h>
#include <c10/core/Device.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

struct sqlite3;

namespace graphopt {

class LearnedCost;

inline constexpr int kCostDatabaseSchemaVersion = 2;

struct MachineInfo {
  std::string cpu;
  int threads = 0;
  std::string torchVersion;
  std::string device; ///< "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)"
  /// This process: the CPU model, at::get_num_threads(), torch's version, `device`.
  static MachineInfo current(c10::Device device);
  std::string describe() const;
};

/// A timing as stored: what timeGraph measured, and the sensor its joules came from.
struct MeasurementRecord : OperatorTiming {
  std::string energySource; ///< "" without a sensor
};

/// A configuration's time inside one model's step: the median over the
/// model's nodes of that configuration of their profiled medians.
struct InStepSample {
  std::string source; ///< the model
  double medianSeconds = 0;
  int64_t nodes = 0;
};

/// One measured configuration, as the model predicts from it.
struct CostEntry {
  int64_t id = 0;
  std::string op, family, key, constants;
  std::vector<int64_t> dims;
  double work = 0;
  double flops = 0, bytesMoved = 0;
  bool computeBound = false;
  MeasurementRecord measured;
  std::vector<std::string> sources;
  std::vector<InStepSample> inStep;
  /// Which operands and results are laid out with strides (layoutOf(key))
  /// and whether the measurement is implausible (CostModel::implausible);
  /// filled by CostModel.
  std::string layout;
  bool implausible = false;
};

/// A configuration's layout in one word: per operand, then for the node's
/// results, how many strided tensors its key (the one-node .gir) prints ('0'
/// where contiguous). A permuted copy and a contiguous one of the same sizes
/// are one family but may run at very different speeds: CostModel judges a
/// measurement's plausibility only against those of its own layout.
std::string layoutOf(llvm::StringRef key);

class CostDatabase {
public:
  /// Opens `path`; with `create`, makes it (and its tables) if missing. An
  /// error names the file: not a database, another schema version, missing.
  static absl::StatusOr<std::unique_ptr<CostDatabase>> open(const std::string &path, bool create);
  ~CostDatabase();
  CostDatabase(const CostDatabase &) = delete;
  CostDatabase &operator=(const CostDatabase &) = delete;

  const std::string &path() const { return path_; }

  absl::Status begin();
  absl::Status commit();
  void rollback();

  /// The machine's id, added if new.
  absl::StatusOr<int64_t> machine(const MachineInfo &info);
  /// The id of the machine described so, if the database has it.
  absl::StatusOr<std::optional<int64_t>> findMachine(const MachineInfo &info);
  /// Every machine, with its id.
  absl::StatusOr<std::vector<std::pair<int64_t, MachineInfo>>> machines();
  /// The configuration's id, added if new.
  absl::StatusOr<int64_t> config(const OperatorConfig &config);
  /// Records that `source` has `count` nodes of the configuration (replacing
  /// an earlier count for the same source: measuring a graph again is idempotent).
  absl::Status setSource(int64_t config, llvm::StringRef source, int64_t count);
  /// Whether the configuration has a measurement, or a recorded failure, on the machine.
  absl::StatusOr<bool> measured(int64_t config, int64_t machine);
  absl::Status putMeasurement(int64_t config, int64_t machine, const MeasurementRecord &m);
  absl::Status putFailure(int64_t config, int64_t machine, llvm::StringRef why);
  /// Records (replacing) the configuration's in-step time in `sample.source`.
  absl::Status putInStep(int64_t config, int64_t machine, const InStepSample &sample);

  /// Every measurement of the machine with its configuration and sources.
  absl::StatusOr<std::vector<CostEntry>> entries(int64_t machine);

  struct Counts {
    int64_t machines = 0, configs = 0, measurements = 0, failures = 0, sources = 0, inStep = 0;
  };
  absl::StatusOr<Counts> counts();

private:
  CostDatabase(sqlite3 *db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status exec(const char *sql);
  absl::Status error(llvm::StringRef what) const;
  sqlite3 *db_;
  std::string path_;
};

/// Predictions from one machine's measurements.
class CostModel {
public:
  /// Sets the entry's FLOPs, bytes, work and compute-bound as this build
  /// estimates them from its key (OperatorCost.h), whatever build stored
  /// them; unchanged when the key does not parse. The constructor applies it
  /// to every entry, so that a query and its neighbours are priced alike.
  static void repriceOnPaper(CostEntry &e);

  /// InStep: the configuration's own time inside a step (InStepSample).
  /// Learned: from its features (LearnedCost.h), where nothing measured is near.
  enum class How { Exact, Family, Operator, Missing, InStep, Learned };
  static constexpr int kHows = 6;
  struct Prediction {
    How how = How::Missing;
    double seconds = 0;
    std::optional<double> joules;
    const CostEntry *nearest = nullptr; ///< the entry it rests on most
    /// How many times the isolated prediction the in-step extra made it (1:
    /// none known for the operator, or an in-step time itself).
    double context = 1;
  };

  /// `excludedSources`: measurements found only in these sources are left out
  /// (leave-one-model-out: predicting a model from the others and the sweeps).
  /// `machine` describes where they were measured (MachineInfo::describe).
  CostModel(std::vector<CostEntry> entries, const std::set<std::string> &excludedSources = {},
            std::string machine = "");
  ~CostModel();
  CostModel(const CostModel &) = delete; // its maps point into entries_
  CostModel &operator=(const CostModel &) = delete;
  CostModel(CostModel &&);

  Prediction predict(const OperatorConfig &config) const;
  /// The in-step extra of `op` at `work` in seconds (see the file comment;
  /// the upper median of an even count; negative where the operator ran
  /// faster in the step); 0 when none of its configurations timed both ways
  /// is within kContextReach of `work`.
  double contextExtra(llvm::StringRef op, double work) const;
  static constexpr size_t kContextPoints = 5;
  static constexpr double kContextReach = 8;
  /// The measurements it predicts from (after exclusion).
  size_t size() const { return entries_.size(); }
  /// Measurements judged implausible: more than kImplausible times slower
  /// than another of their family and layout with at least their work (the
  /// machine was caught in a slow mode; `measure --remeasure` times them
  /// again). They predict their own configuration only: no other is
  /// interpolated or learned from them, nor takes its in-step context from them.
  const std::vector<const CostEntry *> &implausible() const { return implausible_; }
  static constexpr double kImplausible = 10;
  const std::vector<CostEntry> &entries() const { return entries_; }
  /// How an isolated prediction is brought into the step: Nearest, by the
  /// operator's nearest configurations timed both ways (contextExtra; the
  /// default); None, not at all (the isolated times as they are; in-step
  /// times of the configuration itself are still used).
  enum class Context { Nearest, None };
  void setContext(Context c) { contextMode_ = c; }
  /// `isolated` seconds of `config` brought into the step, as set: plus its
  /// operator's in-step extra, never under half of `isolated`.
  double inStepOf(const OperatorConfig &config, double isolated) const;
  /// Scales every predicted time by `factor`: how much slower the machine
  /// runs now than when the database was measured (SpeedCalibration.h; 1 by
  /// default). Joules are not scaled: a host slowed by its neighbours says
  /// nothing of what a kernel draws.
  void setSpeed(double factor) { speed_ = factor; }
  double speed() const { return speed_; }
  /// Whether predictions may come from the learned model (on by default); it
  /// is trained on first need.
  void setLearned(bool on) { learnedOn_ = on; }
  /// Why the learned model is not there, once asked for ("" when it is).
  const std::string &learnedUnavailable() const { return learnedWhyNot_; }
  const std::string &machine() const { return machine_; }
  static llvm::StringRef howName(How how);
  /// The machine's balance for compute-bound operators, in FLOPs per byte:
  /// their high FLOP rate over their high byte rate (each the 90th percentile
  /// of the plausible measurements of at least kRooflineMinSeconds); 0 with
  /// fewer than kRooflineMinEntries of them. A compute-bound call whose bytes
  /// times this exceed its FLOPs is bound by memory (a matrix product with few
  /// rows reads its whole weight for them).
  double balance() const { return balance_; }
  /// What a configuration's time is interpolated along: for a compute-bound
  /// operator its roofline work, max(FLOPs, bytes x balance()); else its work.
  double rooflineWork(bool computeBound, double flops, double bytes, double work) const;
  static constexpr double kRooflineMinSeconds = 20e-6;
  static constexpr size_t kRooflineMinEntries = 20;

private:
  Prediction inContext(const OperatorConfig &config) const; ///< predict, before the speed
  void markImplausible(); ///< sets CostEntry::implausible, fills implausible_
  void findBalance();     ///< sets balance_
  Prediction isolated(const OperatorConfig &config) const;
  Prediction scaled(const OperatorConfig &config, std::vector<std::pair<double, const CostEntry *>>
                                                      candidates,
                    How how) const;
  struct ContextPoint {
    double logWork, extra; ///< in-step minus isolated seconds
  };
  std::vector<CostEntry> entries_;
  std::vector<const CostEntry *> implausible_;
  std::string machine_;
  double speed_ = 1;
  double balance_ = 0;
  Context contextMode_ = Context::Nearest;
  llvm::StringMap<const CostEntry *> byKey_;
  llvm::StringMap<std::vector<const CostEntry *>> byFamily_, byOp_;
  llvm::StringMap<double> floor_; ///< per operator: its fastest measured call
  /// Per configuration key: its in-step time over the sources not left out.
  llvm::StringMap<double> inStep_;
  llvm::StringMap<std::vector<ContextPoint>> context_; ///< per operator
  /// The learned model of where nothing measured is near, trained on first use.
  const LearnedCost *learned() const;
  bool learnedOn_ = true;
  mutable bool learnedTried_ = false;
  mutable std::unique_ptr<LearnedCost> learned_, learnedJoules_;
  mutable std::string learnedWhyNot_;
};

} // namespace graphopt
