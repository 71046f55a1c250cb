//===- Attribution.h - A step's time, operator by operator, from the cost database -*- C++ -*-===//
//
// Each node of a graph predicted from the cost database (CostDatabase.h), and,
// given the graph's profile, set against what it measured: the predicted step
// (the sum of the nodes' predictions), the measured step, and the share of
// the measured step the database explains: the measured time of the nodes it
// predicts (exact or near) over the measured time of all nodes (the node
// medians; what the step spends between nodes is no operator's). Nodes it cannot predict (an operator it
// never measured, a collective) are listed with their measured time. Coverage
// says nothing of how near a prediction is, so the figure that judges the
// database is its accuracy: the measured time of the nodes predicted within a
// tolerance (25%) of what they measured, over the measured time of all nodes.
// What `graph-opt-costdb attribute`, `profile{db=...}` and checkpoint{cost=db}
// use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/Analysis/Profile.h"

#include <llvm/Support/raw_ostream.h>

#include <optional>
#include <string>
#include <vector>

namespace graphopt {

struct NodeAttribution {
  const Node *node = nullptr;
  std::string op;
  CostModel::How how = CostModel::How::Missing;
  double predictedSeconds = 0; ///< 0 when missing
  std::optional<double> predictedJoules;
  double measuredSeconds = -1; ///< the profile's median; -1 without a profile
  std::string note;            ///< why it has no prediction, when missing
  /// Its configuration's key (OperatorConfig::key); empty when it has none
  /// (a collective, an operand the graph computes that is not a tensor).
  std::string configKey;
  /// The measurement its prediction rests on most (CostModel::Prediction::nearest).
  const CostEntry *nearest = nullptr;
  double work = 0;    ///< its configuration's work (OperatorConfig::work)
  double context = 1; ///< its in-step over its isolated prediction (Prediction::context)

  /// Predicted, measured, and the prediction within `tolerance` of the
  /// measurement (|predicted - measured| <= tolerance * measured).
  bool accurate(double tolerance) const;
};

/// How near a node's prediction must be to what it measured to count as
/// accurate: 25% (the cost database's target, docs/CostDB.md).
inline constexpr double kAccuracyTolerance = 0.25;

struct StepAttribution {
  std::vector<NodeAttribution> nodes; ///< in graph order
  double predictedSeconds = 0;        ///< sum over the nodes
  /// Sum of predicted joules; nullopt unless every predicted node has energy.
  std::optional<double> predictedJoules;
  double measuredStepSeconds = -1;     ///< the profile's step; -1 without one
  double measuredNodeSeconds = -1;     ///< sum of the profile's node medians
  double explainedSeconds = 0;         ///< measured time of the nodes predicted
  double exactSeconds = 0;             ///< measured time of the nodes measured exactly
  double tolerance = kAccuracyTolerance;
  double accurateSeconds = 0; ///< measured time of the nodes predicted within `tolerance`
  size_t predictedNodes = 0, exactNodes = 0, accurateNodes = 0;
  std::string machine; ///< what the predictions were measured on (CostModel::machine)
  size_t entries = 0;  ///< the measurements the model predicts from
  size_t implausible = 0; ///< measurements it left out (CostModel::implausible)
  double balance = 0;     ///< CostModel::balance, FLOPs per byte (0: none)
  /// What the predictions were scaled by (CostModel::speed) and, where the
  /// machine's speed was calibrated (SpeedCalibration.h), from how many probes
  /// and the quartiles of their ratios (0 probes: not calibrated).
  double speed = 1, speedQ1 = 1, speedQ3 = 1;
  size_t speedProbes = 0;

  /// explainedSeconds over measuredNodeSeconds (-1 without a profile).
  double explainedShare() const;
  double exactShare() const;
  /// accurateSeconds over measuredNodeSeconds (-1 without a profile).
  double accurateShare() const;
  /// predictedSeconds over measuredStepSeconds (-1 without a profile).
  double predictedOverMeasured() const;
};

/// The prediction of every node of `graph` (in graph order); `profile`, when
/// given, is the graph's own and adds what each node measured, and with it
/// the share predicted within `tolerance`.
StepAttribution attributeStep(const Graph &graph, const CostModel &model,
                              const ProfileResult *profile,
                              double tolerance = kAccuracyTolerance);

/// The table for people: per operator, nodes, measured and predicted time,
/// how it was predicted; the totals; the operators without a prediction.
void printAttribution(llvm::raw_ostream &os, const StepAttribution &a);
/// Per node, CSV: rank, node, operator, how, predicted_s, predicted_j, measured_s, note,
/// predicted_over_measured (empty without a prediction or a measurement), work, context
/// (in-step over isolated prediction), speed (the calibration's factor): for a node not
/// predicted by its own in-step time, predicted_s over context and speed is what the
/// database predicts it alone.
std::string attributionCsv(const StepAttribution &a);
/// The totals and the per-operator table as JSON.
std::string attributionJson(const StepAttribution &a, llvm::StringRef model);

/// Opens `path` and loads the measurements made on this machine
/// (MachineInfo::current(device)), less those found only in `excluded`; an
/// error says so when the database has none for this machine.
absl::StatusOr<CostModel> loadCostModel(const std::string &path, c10::Device device,
                                        const std::set<std::string> &excluded);

} // namespace graphopt
