#!/usr/bin/env bash
# Runs graph-opt's libFuzzer targets (fuzz/, built with GRAPHOPT_FUZZ=ON; `make fuzz` builds
# them and calls this) for a bounded time each, from seed corpora made here:
#   fuzz-gir-roundtrip, fuzz-gir-run  the .gir texts of the lit tests (split-file parts of
#                                     test/**/*.test, test/**/*.gir), examples/ and fuzz/seeds/
#   fuzz-pt2-import                   the smallest .pt2 archives of the zoo ($FUZZ_ZOO; when it
#                                     has none, two tiny models are exported into the build dir)
#   fuzz-passes                       none: any bytes make a graph (the generator's decisions);
#                                     it runs for FUZZ_PASS_RUNS graphs, not FUZZ_SECONDS
# Each target keeps its growing corpus in $BUILD/corpus/<target>/ and writes what crashes
# (or times out, or runs out of memory) to $BUILD/artifacts/<target>/. At the end a table gives
# each target's executions, time and coverage; the exit status is 1 if any target failed.
#
# Usage: scripts/fuzz.sh [target...]     (default: all four)
# Environment:
#   FUZZ_BUILD_DIR  the fuzzing build tree (default build-fuzz)
#   FUZZ_SECONDS    seconds per target (default 180), fuzz-passes aside
#   FUZZ_PASS_RUNS  graphs fuzz-passes checks (default 50000: about an hour under ASan with
#                   FUZZ_PASS_JOBS=2, docs/Robustness.md)
#   FUZZ_PASS_JOBS  >1: fuzz-passes in libFuzzer's fork mode with that many processes (make
#                   fuzz-long: 2); its corpus persists, and logs/fuzz-passes.history counts
#                   the graphs of every run with its commit and source hash, so runs of one
#                   source add up
# fuzz-passes' processes append their verdicts per pipeline to logs/fuzz-passes.tally; the
# run's sum is printed and held to PassFuzzTest's floors (each pipeline verifies >= 95% of the
# graphs, <= 0.1% unrunnable, none failed), and a run out of them fails.
#   FUZZ_RSS_MB     libFuzzer -rss_limit_mb, also the one-allocation limit (default 2048)
#   FUZZ_TIMEOUT    libFuzzer -timeout: seconds one input may take (default 10)
#   FUZZ_ZOO        where the .pt2 seeds come from (default build/zoo, made by `make test`)
#   FUZZ_PT2_SEEDS  how many of the zoo's smallest .pt2 archives to take (default 4)
#   FUZZ_ARGS       more libFuzzer flags for every target (e.g. -seed=1)
#   FUZZ_KEEP_GOING =1: do not stop at the first crash (libFuzzer's fork mode with
#                   -ignore_crashes, -ignore_timeouts, -ignore_ooms), to collect several
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-180}
pass_runs=${FUZZ_PASS_RUNS:-50000}
pass_jobs=${FUZZ_PASS_JOBS:-1}
rss_mb=${FUZZ_RSS_MB:-2048}
timeout=${FUZZ_TIMEOUT:-10}
zoo=${FUZZ_ZOO:-build/zoo}
pt2_seeds=${FUZZ_PT2_SEEDS:-4}
read -r -a extra <<<"${FUZZ_ARGS:-}"
if [[ "${FUZZ_KEEP_GOING:-0}" == 1 ]]; then
  extra+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi

# What the fuzzers are built from, at the start (fuzz-passes' history adds runs up by it): the
# commit, and one hash of the trees the build compiles ("dirty" when they have changes).
source_paths=(lib passes include fuzz cmake CMakeLists.txt requirements.txt)
start_commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
start_source=$(git rev-parse "${source_paths[@]/#/HEAD:}" 2>/dev/null | sha1sum | cut -c1-12)
git diff --quiet HEAD -- "${source_paths[@]}" 2>/dev/null || start_source+=-dirty

all_targets=(fuzz-gir-roundtrip fuzz-pt2-import fuzz-gir-run fuzz-passes)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ -x "$build/bin/$t" ]] || { echo "fuzz: $build/bin/$t is not built (make fuzz builds it)" >&2; exit 2; }
  # A binary older than its sources would be credited in the history to source it was not
  # built from (this script does not build; make fuzz and make fuzz-long do).
  newer=$(find "${source_paths[@]}" -type f -newer "$build/bin/$t" -print -quit 2>/dev/null)
  [[ -z "$newer" ]] || { echo "fuzz: $build/bin/$t is older than $newer: rebuild it (make fuzz or make fuzz-long) before fuzzing" >&2; exit 2; }
done

split_file=$(command -v split-file || echo /usr/lib/llvm-14/bin/split-file)
symbolizer=$(command -v llvm-symbolizer || echo /usr/lib/llvm-14/bin/llvm-symbolizer)
[[ -x "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
# Any UBSan report is a crash (the build does not recover either); LeakSanitizer is off: LibTorch
# keeps process-lifetime caches (operator tables, thread pools) that it would report.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# allocator_may_return_null: an allocation too large for ASan returns null, as malloc would,
# so LibTorch reports it as the error graph-opt turns into a status (without it ASan aborts).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}

# --- seed corpora ---------------------------------------------------------------------------
seeds=$build/seeds
make_gir_seeds() {
  local out=$seeds/gir tmp
  rm -rf "$out" && mkdir -p "$out"
  tmp=$(mktemp -d)
  local n=0 f part
  while IFS= read -r f; do
    n=$((n + 1))
    mkdir -p "$tmp/$n"
    "$split_file" --no-leading-lines "$f" "$tmp/$n" 2>/dev/null || continue
  done < <(grep -rlE '^(#|//|;)?--- .*\.gir' test)
  # One file per distinct text, named by its hash (the lit tests share many parts).
  while IFS= read -r -d '' part; do
    cp "$part" "$out/$(sha1sum "$part" | cut -c1-16).gir"
  done < <(find "$tmp" test examples fuzz/seeds -name '*.gir' -type f -print0)
  rm -rf "$tmp"
  echo "fuzz: $(ls "$out" | wc -l) .gir seeds in $out"
}
make_pt2_seeds() {
  local out=$seeds/pt2
  rm -rf "$out" && mkdir -p "$out"
  local found=()
  if [[ -d "$zoo" ]]; then
    mapfile -t found < <(find "$zoo" -maxdepth 1 -name '*.pt2' -size -256k -printf '%s %p\n' 2>/dev/null |
                         sort -n | head -n "$pt2_seeds" | cut -d' ' -f2-)
  fi
  if ((${#found[@]} == 0)); then
    # No zoo (a fresh tree before `make test`): export two tiny models, once.
    local own=$build/zoo python
    python="$("$root/scripts/venv-dir.sh")/bin/python"
    mkdir -p "$own"
    for m in mlp cnn; do
      [[ -f "$own/$m-eval.pt2" ]] && continue
      echo "fuzz: no .pt2 in $zoo; exporting $own/$m-eval.pt2 (tiny) as a seed"
      "$python" tools/export/export_model.py --model "$m" --mode eval --tiny -q -o "$own/$m-eval.pt2" ||
        echo "fuzz: warning: exporting $m failed; fuzz-pt2-import starts with fewer seeds" >&2
    done
    mapfile -t found < <(find "$own" -maxdepth 1 -name '*.pt2')
  fi
  ((${#found[@]})) && cp "${found[@]}" "$out/"
  echo "fuzz: ${#found[@]} .pt2 seeds in $out (from ${zoo})"
}
need_gir=0 need_pt2=0
for t in "${targets[@]}"; do
  case $t in fuzz-pt2-import) need_pt2=1 ;; fuzz-passes) ;; *) need_gir=1 ;; esac
done
((need_gir)) && make_gir_seeds
((need_pt2)) && make_pt2_seeds

# --- runs ---------------------------------------------------------------------------------
# Temporary files (fuzz-pt2-import's archive directory, which a crashed process leaves behind)
# go into the build tree, emptied before each target.
tmp_root=$build/tmp
summary=() failed=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t artifacts=$build/artifacts/$t log=$build/logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  args=(-rss_limit_mb="$rss_mb" -timeout="$timeout"
        -artifact_prefix="$artifacts/" -print_final_stats=1 -print_funcs=0)
  case $t in
    fuzz-pt2-import) args+=(-max_total_time="$seconds" -max_len=262144); seed_dir=$seeds/pt2 ;;
    # A graph takes a few hundred bytes of decisions; the rest is drawn from them.
    fuzz-passes) args+=(-runs="$pass_runs" -max_len=1024 -len_control=0); seed_dir=
      ((pass_jobs > 1)) && args+=(-fork="$pass_jobs") ;;
    *) args+=(-max_total_time="$seconds" -max_len=16384 -dict=fuzz/gir.dict); seed_dir=$seeds/gir ;;
  esac
  if [[ $t == fuzz-passes ]]; then
    echo "fuzz: $t for $pass_runs graphs (log: $log, artifacts: $artifacts/)"
  else
    echo "fuzz: $t for ${seconds}s (log: $log, artifacts: $artifacts/)"
  fi
  before=$(ls "$artifacts" | wc -l)
  rm -rf "$tmp_root" && mkdir -p "$tmp_root"
  start=$(date +%s)
  # fuzz-passes: every process appends its verdicts per pipeline here at exit (fork mode
  # keeps no job's output); summed below.
  tally=$build/logs/fuzz-passes.tally
  [[ $t == fuzz-passes ]] && : >"$tally"
  GRAPHOPT_FUZZ_PASS_TALLY=$([[ $t == fuzz-passes ]] && echo "$(cd "$(dirname "$tally")" && pwd)/$(basename "$tally")") \
    TMPDIR=$(cd "$tmp_root" && pwd) "$build/bin/$t" "${args[@]}" "${extra[@]}" "$corpus" ${seed_dir:+"$seed_dir"} >"$log" 2>&1
  rc=$?
  rm -rf "$tmp_root"
  took=$(($(date +%s) - start))
  new_artifacts=$(($(ls "$artifacts" | wc -l) - before))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  # Fork mode prints no final stats: take the last status line's.
  last=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1)
  [[ -z "$execs" ]] && execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
  [[ -z "$rate" ]] && rate=$(sed -nE 's/.*exec\/s:? ([0-9]+).*/\1/p' <<<"$last")
  [[ -z "$rss" ]] && rss=$(grep -oE 'rss: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  result=ok
  if ((rc != 0 || new_artifacts > 0)); then
    failed=1
    artifact=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | cut -d' ' -f5)
    result="FAILED (exit $rc, $new_artifacts new artifacts)${artifact:+: $artifact}"
    echo "fuzz: $t failed; the end of its log:"
    grep -E '^==[0-9]+== ?ERROR: |^SUMMARY: |runtime error: |^terminate called|^  what\(\)|^fuzz-gir-roundtrip: |^fuzz-passes: |^INFO: (exiting|log of failing)' "$log" |
      cut -c1-240 | head -12
    [[ -n "$artifact" ]] && echo "fuzz: reproduce with: $build/bin/$t $artifact"
  fi
  # fuzz-passes: the verdicts per pipeline, summed over its processes, held to PassFuzzTest's
  # floors: each pipeline rewrites and verifies at least 95% of the graphs, and at most 0.1%
  # are graphs PyTorch itself does not run.
  if [[ $t == fuzz-passes && -s "$tally" ]]; then
    echo "fuzz: fuzz-passes verdicts per pipeline (graphs: verified, refused, budget unreachable, unrunnable, failed)"
    # Each unrunnable input, in hex (GRAPHOPT_PASS_FUZZ_INPUT replays one saved as a file).
    awk '$1 == "fuzz-passes-unrunnable" {print "  unrunnable input (hex): " $2}' "$tally" | cut -c1-240
    # The refusals by reason (numbers and parenthesized parts left out), the most frequent first.
    awk '$1 == "fuzz-passes-refused" { $1 = ""; n[substr($0, 2)]++ }
         END { for (r in n) printf "  %8d refused: %s\n", n[r], r }' "$tally" | sort -rn | head -15 | cut -c1-240
    if ! awk '$1 == "fuzz-passes-tally" {
                name = $8; for (i = 9; i <= NF; ++i) name = name " " $i
                if (!(name in seen)) { seen[name] = 1; order[++n] = name }
                for (v = 3; v <= 7; ++v) sum[name, v] += $v
              }
              END {
                bad = 0
                for (k = 1; k <= n; ++k) {
                  name = order[k]; graphs = 0
                  for (v = 3; v <= 7; ++v) graphs += sum[name, v]
                  verdict = ""
                  if (sum[name, 3] < 0.95 * graphs) verdict = verdict "  BELOW THE FLOOR: verified < 95%"
                  if (sum[name, 6] > 0.001 * graphs) verdict = verdict "  ABOVE THE CEILING: unrunnable > 0.1%"
                  if (sum[name, 7] > 0) verdict = verdict "  FAILED"
                  if (verdict != "") bad = 1
                  printf "  %-90s %8d: %d, %d, %d, %d, %d (%.2f%% verified)%s\n", name, graphs,
                         sum[name, 3], sum[name, 4], sum[name, 5], sum[name, 6], sum[name, 7],
                         graphs ? 100 * sum[name, 3] / graphs : 0, verdict
                }
                exit bad
              }' "$tally"; then
      failed=1
      [[ $result == ok ]] && result="FAILED (a pipeline out of its floors)" || result+="; a pipeline out of its floors"
    fi
  fi
  # fuzz-passes: each run's graphs are recorded, so that runs add up (make fuzz-long's 1M): the
  # graphs its processes checked to the end, from the tally (in fork mode the log's final
  # stats, when there are any, are a crashed job's alone).
  if [[ $t == fuzz-passes && -s "$tally" ]]; then
    # (the first tally line, not the file's first line: that can be an unrunnable input's)
    execs=$(awk '$1 == "fuzz-passes-tally" { if (name == "") name = $8; if ($8 == name) n += $2 } END {print n + 0}' "$tally")
  fi
  if [[ $t == fuzz-passes && -n "$execs" ]]; then
    # Each line: time, commit, source (hashed at the start), graphs, result. Runs add up over one
    # source: a change to the passes or the generator makes other graphs and other rewrites,
    # and a commit that changes only docs or tests does not. (Lines before 2026-12-04 have
    # neither.)
    history=$build/logs/fuzz-passes.history
    echo "$(date -u +%FT%TZ) $start_commit $start_source $execs $result" >>"$history"
    echo "fuzz: fuzz-passes has checked $(awk -v s="$start_source" '$3 == s && s !~ /dirty/ {n += $4} END {print n + 0}' "$history") graphs of source $start_source, $(awk -v s="$start_source" '$3 == s && s !~ /dirty/ && $5 == "ok" {n += $4} END {print n + 0}' "$history") of them in runs with no failure ($history)"
  fi
  summary+=("$(printf '%-20s %6ss %10s execs %8s/s  %-24s rss %5s MB  %s' \
               "$t" "$took" "${execs:-?}" "${rate:-?}" "${cov:-cov: ?}" "${rss:-?}" "$result")")
done

echo
echo "fuzz: summary (target, time, executions, executions per second, coverage, peak RSS, result)"
printf '  %s\n' "${summary[@]}"
exit $failed
