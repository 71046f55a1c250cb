//===- BenchmarkSizes.h - Sizes per benchmark, and the smoke mode -*- C++ -*-===//
//
// Every benchmark registers its sizes through these helpers. With
// GRAPHOPT_BENCH_SMOKE=1 in the environment a benchmark runs once, at its
// smallest size, one iteration: `make test` runs every binary that way
// (benchmarks/CMakeLists.txt), so a benchmark that errors fails the suite
// instead of rotting unseen. Debian's Google Benchmark 1.7.1 has no
// `--benchmark_min_time=1x`, and some benchmarks fix their own minimum time,
// so the mode lives in the registration.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>

namespace graphopt::bench {

inline bool smokeMode() {
  static const bool on = [] {
    const char *v = std::getenv("GRAPHOPT_BENCH_SMOKE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

/// `->Apply(sizes<10000, 100000, 1000000>)`: those arguments; in smoke mode
/// the first alone, one iteration.
template <int64_t First, int64_t... Rest> void sizes(benchmark::internal::Benchmark *b) {
  if (smokeMode()) {
    b->Arg(First)->Iterations(1);
    return;
  }
  b->Arg(First);
  (b->Arg(Rest), ...);
}

/// At least `Seconds` of iterations, or one in smoke mode.
template <int Seconds> void minSeconds(benchmark::internal::Benchmark *b) {
  if (smokeMode())
    b->Iterations(1);
  else
    b->MinTime(Seconds);
}

} // namespace graphopt::bench
