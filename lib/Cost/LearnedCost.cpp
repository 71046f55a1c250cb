//===- LearnedCost.cpp - A configuration's time from its features ---------===//
#include "graphopt/Cost/LearnedCost.h"

#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/IR/TensorType.h"

#include <absl/strings/str_cat.h>
#include <c10/core/ScalarType.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>

namespace graphopt {

namespace {

constexpr float kMissing = NAN;

absl::Status xgboostError(llvm::StringRef what) {
  return absl::InternalError(absl::StrCat("the learned cost model: ", what.str(), ": ",
                                          XGBGetLastError()));
}

/// The element size of the first tensor in a family ("aten::mm(f32/2/cpu,...)").
float firstElementSize(llvm::StringRef family) {
  size_t open = family.find('(');
  if (open == llvm::StringRef::npos)
    return kMissing;
  llvm::StringRef rest = family.drop_front(open + 1);
  llvm::StringRef name = rest.take_until([](char c) { return c == '/' || c == ',' || c == ')'; });
  auto dtype = parseDtypeName(name);
  if (!dtype)
    return kMissing;
  return static_cast<float>(c10::elementSize(*dtype));
}

/// How many operands and results the key prints strides for: those not contiguous.
float stridedOperands(llvm::StringRef key) {
  size_t n = 0;
  for (char c : layoutOf(key))
    n += static_cast<size_t>(c - '0');
  return static_cast<float>(n);
}

float log1pf(double v) { return static_cast<float>(std::log1p(std::max(v, 0.0))); }

} // namespace

CostFeatureInput CostFeatureInput::of(const OperatorConfig &c) {
  CostFeatureInput in;
  in.op = c.op;
  in.family = c.family;
  in.key = c.key;
  in.dims = &c.dims;
  in.flops = c.flops;
  in.bytesMoved = static_cast<double>(c.bytesMoved);
  in.work = c.work;
  in.computeBound = c.computeBound;
  return in;
}

CostFeatureInput CostFeatureInput::of(const CostEntry &e) {
  CostFeatureInput in;
  in.op = e.op;
  in.family = e.family;
  in.key = e.key;
  in.dims = &e.dims;
  in.flops = e.flops;
  in.bytesMoved = e.bytesMoved;
  in.work = e.work;
  in.computeBound = e.computeBound;
  return in;
}

std::vector<float> LearnedCost::features(const CostFeatureInput &in) const {
  double sumLog = 0, maxLog = 0;
  size_t count = in.dims ? in.dims->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    double l = std::log2(1.0 + static_cast<double>(std::max<int64_t>((*in.dims)[i], 0)));
    sumLog += l;
    maxLog = std::max(maxLog, l);
  }
  auto rate = opRate_.find(in.op);
  return {log1pf(in.flops),
          log1pf(in.bytesMoved),
          log1pf(in.work),
          in.computeBound ? 1.0f : 0.0f,
          static_cast<float>(count),
          static_cast<float>(sumLog),
          static_cast<float>(maxLog),
          firstElementSize(in.family),
          stridedOperands(in.key),
          rate == opRate_.end() ? kMissing : static_cast<float>(rate->second)};
}

absl::StatusOr<std::unique_ptr<LearnedCost>>
LearnedCost::train(const std::vector<const CostEntry *> &entries, Target target,
                   unsigned rounds) {
  auto label = [target](const CostEntry *e) {
    return target == Target::Seconds ? e->measured.medianSeconds
                                     : e->measured.joulesPerCall.value_or(0);
  };
  std::vector<const CostEntry *> usable;
  for (const CostEntry *e : entries)
    if (label(e) > 0)
      usable.push_back(e);
  if (usable.size() < kMinTrainingRows)
    return absl::FailedPreconditionError(absl::StrCat(
        "the learned cost model needs at least ", kMinTrainingRows, " measurements",
        target == Target::Joules ? " with energy" : "", " to train on; the database has ",
        usable.size()));
  std::unique_ptr<LearnedCost> model(new LearnedCost());
  model->rows_ = usable.size();
  // The operator's own rate, a feature of its every configuration.
  llvm::StringMap<std::pair<double, size_t>> sums;
  for (const CostEntry *e : usable) {
    auto &s = sums[e->op];
    s.first += std::log(label(e) / std::max(e->work, 1.0));
    ++s.second;
  }
  for (const auto &entry : sums)
    model->opRate_[entry.getKey()] =
        entry.getValue().first / static_cast<double>(entry.getValue().second);

  std::vector<float> data, labels;
  for (const CostEntry *e : usable) {
    std::vector<float> f = model->features(CostFeatureInput::of(*e));
    data.insert(data.end(), f.begin(), f.end());
    labels.push_back(static_cast<float>(std::log(label(e))));
  }
  DMatrixHandle matrix = nullptr;
  if (XGDMatrixCreateFromMat(data.data(), usable.size(), kFeatures, kMissing, &matrix) != 0)
    return xgboostError("cannot make the training matrix");
  struct FreeMatrix {
    DMatrixHandle m;
    ~FreeMatrix() { XGDMatrixFree(m); }
  } freeMatrix{matrix};
  if (XGDMatrixSetFloatInfo(matrix, "label", labels.data(), labels.size()) != 0)
    return xgboostError("cannot set the labels");
  BoosterHandle booster = nullptr;
  if (XGBoosterCreate(&matrix, 1, &booster) != 0)
    return xgboostError("cannot make the booster");
  model->booster_ = booster;
  const std::pair<const char *, const char *> params[] = {
      {"objective", "reg:squarederror"}, {"max_depth", "6"}, {"eta", "0.1"},
      {"min_child_weight", "2"},         {"nthread", "1"},   {"seed", "0"},
      {"verbosity", "0"}};
  for (const auto &[name, value] : params)
    if (XGBoosterSetParam(booster, name, value) != 0)
      return xgboostError(absl::StrCat("cannot set ", name));
  for (unsigned i = 0; i < rounds; ++i)
    if (XGBoosterUpdateOneIter(booster, static_cast<int>(i), matrix) != 0)
      return xgboostError("training failed");
  return model;
}

LearnedCost::~LearnedCost() {
  if (booster_)
    XGBoosterFree(booster_);
}

absl::StatusOr<double> LearnedCost::predict(const CostFeatureInput &in) const {
  std::vector<float> f = features(in);
  DMatrixHandle matrix = nullptr;
  if (XGDMatrixCreateFromMat(f.data(), 1, kFeatures, kMissing, &matrix) != 0)
    return xgboostError("cannot make the query");
  bst_ulong n = 0;
  const float *out = nullptr;
  int rc = XGBoosterPredict(booster_, matrix, 0, 0, 0, &n, &out);
  double logSeconds = rc == 0 && n == 1 ? out[0] : NAN;
  XGDMatrixFree(matrix);
  if (rc != 0 || n != 1)
    return xgboostError("prediction failed");
  return std::exp(logSeconds);
}

} // namespace graphopt
