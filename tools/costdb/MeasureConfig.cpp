//===- MeasureConfig.cpp - One configuration into the database ------------===//
#include "MeasureConfig.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/raw_ostream.h>

namespace graphopt {

absl::StatusOr<ConfigMeasurer::Outcome>
ConfigMeasurer::measure(const OperatorConfig &config, const std::string &source, int64_t nodes,
                        llvm::StringRef input) {
  if (absl::Status st = db.begin(); !st.ok())
    return st;
  auto fail = [&](absl::Status st) {
    db.rollback();
    return st;
  };
  auto configId = db.config(config);
  if (!configId.ok())
    return fail(configId.status());
  if (absl::Status st = db.setSource(*configId, source, nodes); !st.ok())
    return fail(st);
  auto done = db.measured(*configId, machine);
  if (!done.ok())
    return fail(done.status());
  Outcome outcome = Outcome::Already;
  absl::Status st;
  if (!*done || remeasure) {
    auto t = timeGraph(*config.graph, timing, meter);
    if (t.ok()) {
      MeasurementRecord m;
      static_cast<OperatorTiming &>(m) = *t;
      if (meter && t->joulesPerCall)
        m.energySource = meter->source();
      st = db.putMeasurement(*configId, machine, m);
      outcome = Outcome::Measured;
      if (verbose)
        llvm::outs() << llvm::formatv("  {0,-36} {1,10:f2} us  ({2} runs)  {3}\n", config.op,
                                      t->medianSeconds * 1e6, std::to_string(t->runs),
                                      config.family);
    } else {
      outcome = Outcome::Failed;
      llvm::errs() << "graph-opt-costdb: warning: " << input << ": " << config.op
                   << " did not run: " << std::string(t.status().message()) << "\n";
      st = db.putFailure(*configId, machine, std::string(t.status().message()));
    }
  }
  if (st.ok())
    st = db.commit();
  if (!st.ok())
    return fail(st);
  return outcome;
}

absl::Status ConfigMeasurer::putInStep(const OperatorConfig &config, const InStepSample &sample) {
  if (absl::Status st = db.begin(); !st.ok())
    return st;
  auto configId = db.config(config);
  absl::Status st = configId.status();
  if (st.ok())
    st = db.putInStep(*configId, machine, sample);
  if (st.ok())
    st = db.commit();
  if (!st.ok())
    db.rollback();
  return st;
}

} // namespace graphopt
