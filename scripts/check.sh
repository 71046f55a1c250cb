#!/usr/bin/env bash
# make check (issue 52): everything, in CI. make test, then each check make test leaves out,
# every one run even when one before it failed; a table of their times and results at the
# end, exit 1 if any failed. Run by `make check` after the build (it sets the variables):
#   BUILD_DIR  the build tree (default build)
#   MAKE       the make that runs the targets below
#   CHECK_PASS_FUZZ_GRAPHS  PassFuzz's graphs beyond make test's 500 (default 3000)
#   CHECK_FUZZ_SECONDS      seconds per libFuzzer-style harness (default 45), and
#   CHECK_FUZZ_PASS_RUNS    graphs for fuzz-passes (default 1000), in make fuzz-smoke
#   CHECK_ONLY              a space-separated subset of the step names below
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
make=${MAKE:-make}
lit=$(sed -n 's/^GRAPHOPT_LIT:[A-Z]*=//p' "$build/CMakeCache.txt")
python3=$(sed -n "s/^_\?Python3_EXECUTABLE:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1)
python3=${python3:-python3}

# name | what it checks | command
steps=(
  "test|make test: lit (fork server), unit tests, Python tests|cd $build && ctest --output-on-failure -j ${JOBS:-2}"
  "lit-plain|every lit test again, each graph-opt command its own process (no fork server), and the full tier's (REQUIRES: full-tier)|cd $build && $python3 $lit -s --no-progress-bar --param fork-server=0 --param tier=full test"
  "pass-fuzz|the pass fuzzer's property test on ${CHECK_PASS_FUZZ_GRAPHS:-3000} more graphs (seeds after make test's 500)|cd $build && GRAPHOPT_PASS_FUZZ_GRAPHS=${CHECK_PASS_FUZZ_GRAPHS:-3000} GRAPHOPT_PASS_FUZZ_SEED=501 bin/PassTests --gtest_color=no --gtest_brief=1 --gtest_filter='PassFuzzTest.*'"
  "compile|the full torch.compile set (make test-compile)|$make --no-print-directory test-compile"
  "distributed|every two-rank test (make test-distributed)|$make --no-print-directory test-distributed"
  "roundtrip|the zoo through .pt2 and back (make check-roundtrip)|$make --no-print-directory check-roundtrip"
  "install|pip install into a fresh venv, used from outside the checkout (make check-install)|$make --no-print-directory check-install"
  "docs|every shell block of README.md and docs/ run as written, or skipped with a reason (make check-docs)|$make --no-print-directory check-docs"
  "wheel|the wheel with the libraries it links (make wheel), installed into a fresh venv and checked from outside the checkout: ldd, the console commands, graph_opt.profile (make check-wheel)|$make --no-print-directory check-wheel"
  "fuzz|each fuzz harness, briefly, standalone driver (make fuzz-smoke)|$make --no-print-directory fuzz-smoke FUZZ_SECONDS=${CHECK_FUZZ_SECONDS:-45} FUZZ_PASS_RUNS=${CHECK_FUZZ_PASS_RUNS:-1000}"
)

results=() failed=0 total_start=$(date +%s)
for step in "${steps[@]}"; do
  IFS='|' read -r name what cmd <<<"$step"
  if [[ -n "${CHECK_ONLY:-}" && " $CHECK_ONLY " != *" $name "* ]]; then
    continue
  fi
  echo
  echo "=== check: $name: $what"
  start=$(date +%s)
  (eval "$cmd")
  rc=$?
  took=$(($(date +%s) - start))
  if ((rc == 0)); then result=ok; else result="FAILED (exit $rc)"; failed=1; fi
  results+=("$(printf '%-12s %6d s  %s' "$name" "$took" "$result")")
  echo "=== check: $name: $result in ${took} s"
done

echo
echo "check: summary ($(($(date +%s) - total_start)) s after the build)"
printf '  %s\n' "${results[@]}"
exit $failed
