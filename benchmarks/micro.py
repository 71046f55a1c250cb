#!/usr/bin/env python3
"""Runs graph-opt's Google Benchmark micro-benchmarks, keeps their JSON per commit, and compares
the last two runs with Google Benchmark's own tool (compare.py, Debian's libbenchmark-tools).

    micro.py run [--build-dir build] [--dir build/bench/micro] [--repetitions 9]
                 [--min-time 0.05]
    micro.py compare [--dir build/bench/micro] [--compare-py /usr/share/benchmark/compare.py]
                     [--alpha 0.05]

`run`: each binary below with --benchmark_repetitions, --benchmark_min_time and
--benchmark_out=FILE --benchmark_out_format=json (the console shows the aggregates), restricted
to the benchmarks that need no extra argument and take a reasonable time:

  IRBenchmarks        all (build, print, parse, verify, clone at 1k-100k nodes)
  PassBenchmarks      the 10k- and 100k-node cases and the pipeline overhead (the 1M-node cases
                      take 1-3 s a repetition each)
  ExecutorBenchmarks  BM_ExecutorOverhead (BM_TrainingStep needs --pt2 and --torchscript)

The JSON goes to DIR/<commit>-<UTC time>-<binary>.json (commit: 12 hex digits, `-dirty` when
`git status --porcelain` lists anything), written atomically, and the run is appended to
DIR/runs.jsonl: one line per run with its id, commit, time, options and files.

`compare`: the last two runs of DIR/runs.jsonl, each binary in both through `compare.py
benchmarks OLD.json NEW.json` (its table, aggregates only: per benchmark the p-value of the
two-sided Mann-Whitney U test over the repetitions and the relative change of the median, old
-> new, in real and CPU time; --full adds the mean, standard deviation and coefficient of
variation), then a summary: the benchmarks whose real time got slower with a U-test p-value
below --alpha, i.e. beyond the noise of the repetitions (compare.py's own rule; it wants 9
repetitions or more to be meaningful).

Exit codes: `run`: 0, 2 a binary missing or failing (named). `compare`: 0 nothing slower beyond
the noise, 1 something is, 2 fewer than two runs, compare.py or its numpy/scipy missing.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO_ROOT, "tools", "report"))

PROG = "micro.py"
FORMAT = "graph-opt-micro/1"
COMPARE_PY = "/usr/share/benchmark/compare.py"
RECORD = "runs.jsonl"
# (binary, --benchmark_filter or None for all)
BINARIES = (
    ("IRBenchmarks", None),
    ("PassBenchmarks", r"/(10000|100000)$|PipelineOverhead"),
    ("ExecutorBenchmarks", r"^BM_ExecutorOverhead/"),
)
EXIT_OK, EXIT_SLOWER, EXIT_BAD = 0, 1, 2
# compare.py's rows that `compare` leaves out unless --full: the mean, stddev and cv of the
# repetitions (it keeps the U test's p-value and the median).
AGGREGATES_LEFT_OUT = re.compile(r"^\S+_(mean|stddev|cv)\s")


class MicroError(Exception):
    pass


def write_atomically(path, data):
    from make_report import write_atomically as write

    write(path, data)


def git_commit():
    from make_report import checkout_commit

    return checkout_commit(REPO_ROOT)


def cmd_run(args):
    missing = [b for b, _ in BINARIES
               if not os.access(os.path.join(args.build_dir, "bin", b), os.X_OK)]
    if missing:
        raise MicroError(f"not built: {', '.join(missing)} in {args.build_dir}/bin "
                         "(make build)")
    os.makedirs(args.dir, exist_ok=True)
    commit, dirty = git_commit()
    now = datetime.datetime.now(datetime.timezone.utc)
    run_id = f"{commit[:12]}{'-dirty' if dirty else ''}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    entry = {"format": FORMAT, "id": run_id, "commit": commit + ("-dirty" if dirty else ""),
             "timestamp": now.isoformat(timespec="seconds"), "repetitions": args.repetitions,
             "min_time": args.min_time, "files": {}, "filters": {}}
    for binary, flt in BINARIES:
        name = f"{run_id}-{binary}.json"
        tmp = os.path.join(args.dir, f".{name}.tmp")
        cmd = [os.path.join(args.build_dir, "bin", binary),
               f"--benchmark_repetitions={args.repetitions}",
               f"--benchmark_min_time={args.min_time}",
               "--benchmark_display_aggregates_only=true",
               f"--benchmark_out={tmp}", "--benchmark_out_format=json"]
        if flt:
            cmd.append(f"--benchmark_filter={flt}")
        print(f"micro: {' '.join(cmd[:1] + cmd[1:-2] + cmd[-1:])}", flush=True)
        proc = subprocess.run(cmd)
        if proc.returncode != 0 or not os.path.exists(tmp):
            if os.path.exists(tmp):
                os.remove(tmp)
            raise MicroError(f"{binary} failed (exit {proc.returncode})")
        with open(tmp, "rb") as f:
            data = f.read()
        os.remove(tmp)
        write_atomically(os.path.join(args.dir, name), data)
        entry["files"][binary] = name
        entry["filters"][binary] = flt
    record = os.path.join(args.dir, RECORD)
    old = b""
    if os.path.exists(record):
        with open(record, "rb") as f:
            old = f.read()
        if old and not old.endswith(b"\n"):
            old += b"\n"
    write_atomically(record, old + json.dumps(entry, separators=(",", ":")).encode() + b"\n")
    print(f"micro: wrote {', '.join(entry['files'].values())} in {args.dir}; appended run "
          f"{run_id} to {record}")
    return EXIT_OK


def load_runs(directory):
    record = os.path.join(directory, RECORD)
    try:
        with open(record) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        lines = []
    if len(lines) < 2:
        raise MicroError(f"{record}: {len(lines)} run{'' if len(lines) == 1 else 's'}; compare "
                         "needs two (make bench-micro)")
    runs = []
    for n in (len(lines) - 1, len(lines)):
        try:
            runs.append(json.loads(lines[n - 1]))
        except ValueError as e:
            raise MicroError(f"{record}:{n}: not JSON ({e})") from None
    return runs


def slower_beyond_noise(dump, alpha):
    """[(name, relative change of the median real time, p-value)] of compare.py's JSON dump:
    the benchmarks whose U test over the repetitions rejects 'equally fast' at alpha and whose
    median got slower."""
    medians = {e["name"][:-len("_median")]: e["measurements"][0]["time"] for e in dump
               if e.get("run_type") == "aggregate" and e.get("aggregate_name") == "median"}
    out = []
    for e in dump:
        utest = e.get("utest") or {}
        p = utest.get("time_pvalue")
        if e.get("run_type") != "iteration" or p is None or e["name"] in (n for n, *_ in out):
            continue
        change = medians.get(e["name"])
        if change is not None and change > 0 and p < alpha:
            out.append((e["name"], change, p))
    return out


def cmd_compare(args):
    old, new = load_runs(args.dir)
    if not os.path.isfile(args.compare_py):
        raise MicroError(f"{args.compare_py} not found (Debian's libbenchmark-tools: "
                         "scripts/setup.sh installs it)")
    print(f"micro: old run {old['id']} ({old['timestamp']}), new run {new['id']} "
          f"({new['timestamp']})")
    slower, compared = [], 0
    for binary, _ in BINARIES:
        a, b = old.get("files", {}).get(binary), new.get("files", {}).get(binary)
        if not (a and b):
            print(f"\nmicro: {binary}: not in both runs")
            continue
        dump = os.path.join(args.dir, f".compare-{binary}.json")
        cmd = [sys.executable, args.compare_py, "--no-color", "-a", "-d", dump, "benchmarks",
               os.path.join(args.dir, a), os.path.join(args.dir, b)]
        print(f"\nmicro: {binary}", flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout.splitlines(keepends=True):
            if args.full or not AGGREGATES_LEFT_OUT.match(line):
                sys.stdout.write(line)
        if proc.returncode != 0 or not os.path.exists(dump):
            tail = proc.stdout.strip().splitlines()[-1:] or [""]
            raise MicroError(f"compare.py failed on {binary} (exit {proc.returncode}): "
                             f"{tail[0]}")
        with open(dump) as f:
            slower += [(binary, *s) for s in slower_beyond_noise(json.load(f), args.alpha)]
        os.remove(dump)
        compared += 1
    print()
    if not compared:
        raise MicroError("the last two runs have no binary in common")
    if slower:
        print(f"micro: slower beyond the noise (U test p < {args.alpha:g}, median real time):")
        for binary, name, change, p in slower:
            print(f"  {binary} {name}: {100 * change:+.1f}% (p={p:.4f})")
        return EXIT_SLOWER
    print(f"micro: nothing slower beyond the noise (U test p < {args.alpha:g})")
    return EXIT_OK


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD)


def positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value <= 0:
            raise argparse.ArgumentTypeError(f"'{text}' is not a positive number")
        return value
    return parse


def main(argv=None):
    default_dir = os.path.join(REPO_ROOT, "build", "bench", "micro")
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    r = sub.add_parser("run", help="run the micro-benchmarks, keep their JSON")
    r.add_argument("--build-dir", default=os.path.join(REPO_ROOT, "build"))
    r.add_argument("--dir", default=default_dir, help="where the runs go (build/bench/micro)")
    r.add_argument("--repetitions", type=positive(int), default=9,
                   help="--benchmark_repetitions (9: what compare.py's U test wants)")
    r.add_argument("--min-time", type=positive(float), default=0.05,
                   help="--benchmark_min_time in seconds (0.05)")
    c = sub.add_parser("compare", help="compare.py on the last two runs")
    c.add_argument("--dir", default=default_dir, help="where the runs are (build/bench/micro)")
    c.add_argument("--compare-py", default=COMPARE_PY, help=f"({COMPARE_PY})")
    c.add_argument("--alpha", type=positive(float), default=0.05,
                   help="U-test significance level (0.05, compare.py's default)")
    c.add_argument("--full", action="store_true",
                   help="print every row of compare.py's table (mean, stddev, cv too)")
    args = p.parse_args(argv)
    try:
        return cmd_run(args) if args.command == "run" else cmd_compare(args)
    except MicroError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_BAD
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
