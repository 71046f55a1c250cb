//===- FuzzCommon.h - Set-up shared by the libFuzzer targets -------*- C++ -*-===//
//
// What every harness does once per process: one intra-op thread (runs are
// reproducible and leave the other core to libFuzzer's own work) and LibTorch
// warnings dropped (TORCH_WARN would flood the fuzzing log).
//
// The harnesses catch nothing: the project's contract is that every error
// comes back as an absl::Status, so an exception escaping an entry point is a
// bug, and libFuzzer reports it as a crash (uncaught exception: abort).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

namespace graphopt::fuzz {

class QuietWarnings : public c10::WarningHandler {
public:
  void process(const c10::Warning &) override {}
};

inline void initialize() {
  static QuietWarnings quiet;
  c10::WarningUtils::set_warning_handler(&quiet);
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
}

} // namespace graphopt::fuzz
