//===- LearnedCost.h - A configuration's time from its features -*- C++ -*-===//
//
// Where the cost database has no measured configuration near a query (an
// operator it never measured, or one measured only at far other sizes), the
// lookup has nothing to interpolate. As Braun et al. predict a GPU kernel's
// time from its features with a learned model, LearnedCost predicts
// log(seconds) from a configuration's features with gradient-boosted trees
// (XGBoost's C API, Debian's libxgboost-dev) trained on one machine's
// measurements:
//
//   log FLOPs, log bytes moved, log work, compute-bound or not, the number of
//   sizes, the sum and the largest of their log2, the element size of the
//   first tensor's dtype, how many operands are not contiguous (their key
//   prints strides), and the operator's mean log(time / work) over its own
//   training measurements (missing for an operator never measured: the trees
//   learn where to send a missing value).
//
// The intra-op thread count is not a feature: each machine (threads included)
// has its own measurements and its own model. Training is deterministic (fixed
// seed, one thread) and refused with fewer than kMinTrainingRows measurements.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/Cost/OperatorConfig.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/StringMap.h>

#include <memory>
#include <vector>

namespace graphopt {

struct CostEntry;

/// What the features are read from: a configuration to predict, or a measured entry.
struct CostFeatureInput {
  llvm::StringRef op, family, key;
  const std::vector<int64_t> *dims = nullptr;
  double flops = 0, bytesMoved = 0, work = 0;
  bool computeBound = false;

  static CostFeatureInput of(const OperatorConfig &c);
  static CostFeatureInput of(const CostEntry &e);
};

class LearnedCost {
public:
  static constexpr size_t kMinTrainingRows = 20;
  static constexpr int kFeatures = 10;
  /// What is learned: the isolated median time, or the joules per call
  /// (from the entries that have them: a machine with an energy sensor).
  enum class Target { Seconds, Joules };

  /// Trains on `entries`. An error says why not: too few measurements of the
  /// target, or XGBoost's own message.
  static absl::StatusOr<std::unique_ptr<LearnedCost>>
  train(const std::vector<const CostEntry *> &entries, Target target = Target::Seconds,
        unsigned rounds = 200);
  ~LearnedCost();
  LearnedCost(const LearnedCost &) = delete;
  LearnedCost &operator=(const LearnedCost &) = delete;

  /// The predicted seconds (or joules, for a Joules model).
  absl::StatusOr<double> predict(const CostFeatureInput &in) const;
  /// The features of `in` (kFeatures of them; NaN where missing).
  std::vector<float> features(const CostFeatureInput &in) const;
  size_t trainingRows() const { return rows_; }

private:
  LearnedCost() = default;
  void *booster_ = nullptr; ///< XGBoost's BoosterHandle
  size_t rows_ = 0;
  /// Per operator: the mean of log(target / work) over its training rows.
  llvm::StringMap<double> opRate_;
};

} // namespace graphopt
