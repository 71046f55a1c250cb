#!/usr/bin/env python3
"""Benchmarks graph-opt's pipelines on models of the zoo, plots the memory/time trade-off, and
tells a regression from noise.

    harness.py run -o OUTDIR [--models resnet18:tiny,gpt2:tiny,...]
                   [--pipelines 'repeat{cse,canonicalize,dce};cse'] [--runs 5] [--warmup 1]
                   [--bitwise] [--graph-opt PATH] [--zoo DIR] [--exports DIR]
                   [--record FILE.jsonl]
    harness.py compare OLD.json NEW.json
    harness.py compare --record FILE.jsonl

`run`: for every model and every pipeline, `graph-opt MODEL.pt2 -passes=PIPELINE
--benchmark=RUNS --benchmark-warmup WARMUP --benchmark-json ...`, which verifies the optimized
graph against the input (a wrong graph is not benchmarked) and then runs both graphs
alternately. One row per (model, pipeline): nodes, peak bytes above the inputs, median step
time and its interquartile range (IQR), each for the original and the optimized graph, the
ratios optimized/original, and the verification verdict.

A model is NAME:SIZE. `NAME:tiny` is the tiny zoo's ZOO/NAME-train.pt2 (ctest's export_zoo
fixture exports it into build/zoo; --zoo picks another directory). `NAME:default` is the
model at the exporter's default size: `tools/export/export_model.py --model NAME --mode train
-o EXPORTS/NAME-train.pt2`, exported once and reused while it is newer than the exporter
(--exports, default build/bench/exports).

Outputs in OUTDIR, each written atomically (a temporary file, then a rename):
results.csv (one row per model and pipeline), results.json (the rows, the machine, the
checkout's commit, `-dirty` when `git status --porcelain` lists anything, and the time) and
pareto_<model>.png (per model: one point per pipeline at (step-time ratio, peak-memory ratio),
the original at (1, 1), and the Pareto front: the points no other point beats on both).
With --record FILE.jsonl, results.json's content is also appended to FILE as one line (read,
append, write a temporary file, rename): the regression record.

`compare OLD.json NEW.json` (results.json files or single record lines), or `compare --record
FILE.jsonl` (its last two entries): for every (model, pipeline) in both, the step-time ratio
regressed when NEW's exceeds OLD's by more than max(5%, the relative IQR of either run) (a
run's relative IQR is the larger of IQR/median of its original and optimized graph); nodes
and peak bytes of the optimized graph are exact: any increase is a regression, and so is a
verification that passed before and fails now.

Exit codes: `run`: 0 all rows verified, 1 some optimized graph failed verification (its row
says so; the outputs are written), 2 bad arguments or a model or pipeline that graph-opt or
the exporter could not run (the message names it and quotes the tool), 130 interrupted.
`compare`: 0 no regression, 1 some regression, 2 bad input.

NOT DONE YET: the peer configurations that issue 12 asks to compare against (eager PyTorch,
eager with torch.utils.checkpoint on every block, torch.compile with and without
activation_memory_budget) are not implemented. Every number here is graph-opt's optimized
graph against its own input graph, both run by graph-opt's executor.
"""
import argparse
import csv
import datetime
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS_DIR = os.path.join(REPO_ROOT, "tools")
EXPORTER = os.path.join(TOOLS_DIR, "export", "export_model.py")
DEFAULT_GRAPH_OPT = os.path.join(REPO_ROOT, "build", "bin", "graph-opt")
DEFAULT_ZOO = os.path.join(REPO_ROOT, "build", "zoo")
DEFAULT_EXPORTS = os.path.join(REPO_ROOT, "build", "bench", "exports")
sys.path.insert(0, os.path.join(TOOLS_DIR, "report"))

import make_report  # noqa: E402  (human units, matplotlib setup, atomic writes)
from make_report import fmt_bytes, fmt_time, write_atomically  # noqa: E402

PROG = "harness.py"
FORMAT = "graph-opt-bench/1"
DEFAULT_MODELS = "resnet18:tiny,mlp:tiny"
DEFAULT_PIPELINES = "repeat{cse,canonicalize,dce};cse"
SIZES = ("tiny", "default")
MIN_TIME_THRESHOLD = 0.05
EXIT_OK, EXIT_REGRESSION, EXIT_BAD, EXIT_INTERRUPTED = 0, 1, 2, 130
CSV_COLUMNS = (
    "model", "pipeline", "verification",
    "original_nodes", "optimized_nodes", "nodes_ratio",
    "original_peak_bytes", "optimized_peak_bytes", "peak_ratio",
    "original_time_median_s", "original_time_iqr_s",
    "optimized_time_median_s", "optimized_time_iqr_s", "time_ratio",
)


class BenchError(Exception):
    """Bad input or a tool that failed; the message names the model, pipeline or file."""


# ---------------------------------------------------------------------------------------------
# Arguments


def parse_models(text):
    models = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, size = item.partition(":")
        if not sep:
            size = "tiny"
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
            raise argparse.ArgumentTypeError(f"'{item}': not a model name")
        if size not in SIZES:
            raise argparse.ArgumentTypeError(
                f"'{item}': unknown size '{size}' (known: {', '.join(SIZES)})")
        models.append(f"{name}:{size}")
    if not models:
        raise argparse.ArgumentTypeError(f"'{text}' names no model")
    return models


def parse_pipelines(text):
    pipelines = [p.strip() for p in text.split(";") if p.strip()]
    if not pipelines:
        raise argparse.ArgumentTypeError(f"'{text}' names no pipeline")
    return pipelines


def positive_int(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer >= {minimum}")
        return value
    return parse


# ---------------------------------------------------------------------------------------------
# run


def _tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


def model_path(model, args):
    """The .pt2 for NAME:SIZE; a default-size model is exported once into the cache."""
    name, size = model.split(":")
    if size == "tiny":
        path = os.path.join(args.zoo, f"{name}-train.pt2")
        if not os.path.isfile(path):
            raise BenchError(f"model '{model}': {path} not found (the tiny zoo is exported by "
                             "ctest's export_zoo fixture: run `make test`, or give --zoo DIR)")
        return path
    path = os.path.join(args.exports, f"{name}-train.pt2")
    if os.path.isfile(path) and os.path.getmtime(path) > os.path.getmtime(EXPORTER):
        return path
    os.makedirs(args.exports, exist_ok=True)
    print(f"{model}: exporting the training step at default size into {path}", flush=True)
    cmd = [sys.executable, EXPORTER, "--model", name, "--mode", "train", "-q", "-o", path]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        for leftover in (path, path[:-len(".pt2")] + ".facts.json"):
            if os.path.exists(leftover):
                os.remove(leftover)
        raise BenchError(f"model '{model}': the exporter failed (exit {proc.returncode}):\n"
                         + _tail(proc.stdout))
    return path


def _iqr(stats):
    return stats["step_seconds_q3"] - stats["step_seconds_q1"]


def _ratio(new, old):
    return new / old if old else None


def benchmark(model, path, pipeline, args):
    """One (model, pipeline) row, and the machine graph-opt reported (None if it failed
    verification)."""
    with tempfile.TemporaryDirectory(prefix="graph-opt-bench.") as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [args.graph_opt, path, f"-passes={pipeline}", f"--benchmark={args.runs}",
               "--benchmark-warmup", str(args.warmup), "--benchmark-json", out]
        if args.bitwise:
            cmd.append("--bitwise")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode == 1 and not os.path.exists(out) and "not benchmarking" in proc.stdout:
            row = {c: None for c in CSV_COLUMNS}
            row.update(model=model, pipeline=pipeline, verification="FAILED")
            return row, None
        if proc.returncode != 0 or not os.path.exists(out):
            raise BenchError(f"model '{model}', pipeline '{pipeline}': graph-opt failed "
                             f"(exit {proc.returncode}):\n{_tail(proc.stdout)}")
        try:
            with open(out) as f:
                data = json.load(f)
            orig, opt = data["original"], data["optimized"]
            row = {
                "model": model, "pipeline": pipeline, "verification": data["verification"],
                "original_nodes": orig["nodes"], "optimized_nodes": opt["nodes"],
                "nodes_ratio": _ratio(opt["nodes"], orig["nodes"]),
                "original_peak_bytes": orig["peak_bytes_above_inputs"],
                "optimized_peak_bytes": opt["peak_bytes_above_inputs"],
                "peak_ratio": _ratio(opt["peak_bytes_above_inputs"],
                                     orig["peak_bytes_above_inputs"]),
                "original_time_median_s": orig["step_seconds_median"],
                "original_time_iqr_s": _iqr(orig),
                "optimized_time_median_s": opt["step_seconds_median"],
                "optimized_time_iqr_s": _iqr(opt),
                "time_ratio": _ratio(opt["step_seconds_median"], orig["step_seconds_median"]),
            }
            return row, data.get("machine")
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError(f"model '{model}', pipeline '{pipeline}': graph-opt's "
                             f"--benchmark-json is not what this harness reads ({e!r})") from None


def git_commit():
    def git(*argv):
        return subprocess.run(["git", "-C", REPO_ROOT, *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, check=True).stdout
    try:
        commit = git("rev-parse", "HEAD").strip()
        if git("status", "--porcelain").strip():
            commit += "-dirty"
        return commit
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _fmt_ratio(r):
    return "-" if r is None else f"{r:.3f}"


def table(rows):
    header = ("model", "pipeline", "verification", "nodes", "peak", "step time (median)",
              "time")
    lines = [header]
    for r in rows:
        if r["original_nodes"] is None:
            lines.append((r["model"], r["pipeline"], r["verification"], "-", "-", "-", "-"))
            continue
        lines.append((
            r["model"], r["pipeline"], r["verification"],
            f"{r['original_nodes']} -> {r['optimized_nodes']} ({_fmt_ratio(r['nodes_ratio'])})",
            f"{fmt_bytes(r['original_peak_bytes'])} -> {fmt_bytes(r['optimized_peak_bytes'])} "
            f"({_fmt_ratio(r['peak_ratio'])})",
            f"{fmt_time(r['original_time_median_s'])} -> "
            f"{fmt_time(r['optimized_time_median_s'])}",
            _fmt_ratio(r["time_ratio"]),
        ))
    return _format_table(lines)


def _format_table(lines):
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in lines)


def csv_bytes(rows):
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        writer.writerow(["" if r[c] is None else
                         (repr(r[c]) if isinstance(r[c], float) else r[c]) for c in CSV_COLUMNS])
    return buf.getvalue().encode()


def pareto_front(points):
    """The points (x, y, label) that no other point beats on both (lower is better), by x."""
    front = []
    for p in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or p[1] < front[-1][1]:
            front.append(p)
    return front


def plot_pareto(plt, model, rows, path):
    points = [(1.0, 1.0, "original")]
    points += [(r["time_ratio"], r["peak_ratio"], r["pipeline"]) for r in rows
               if r["time_ratio"] is not None and r["peak_ratio"] is not None]
    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.scatter([1.0], [1.0], color="#555555", marker="s", s=50, zorder=3, label="original")
    others = points[1:]
    if others:
        ax.scatter([p[0] for p in others], [p[1] for p in others], color="#4C72B0", s=40,
                   zorder=3, label="pipelines")
    # Points often nearly coincide: stagger the labels up and down so that they stay legible.
    offsets = ((6, -14), (6, 6), (6, 18), (6, -26), (6, 30), (6, -38))
    for i, (x, y, label) in enumerate(points):
        ax.annotate(label, (x, y), textcoords="offset points", xytext=offsets[i % len(offsets)],
                    fontsize=8)
    ax.plot([p[0] for p in front], [p[1] for p in front], color="#C44E52", drawstyle="steps-post",
            marker="o", markersize=11, markerfacecolor="none", zorder=2, label="Pareto front")
    ax.axvline(1.0, color="#999999", lw=0.8, ls=":")
    ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
    ax.set_xlabel("step time, optimized / original (median)")
    ax.set_ylabel("peak memory, optimized / original")
    ax.set_title(f"{model}: time against memory (lower left is better)")
    ax.legend(loc="best", fontsize=8)
    # Ratios near 1 differ in the fourth digit: no offset notation, and at least +-5% shown.
    ax.ticklabel_format(useOffset=False, style="plain")
    for axis, values in ((ax.set_xlim, [p[0] for p in points]),
                         (ax.set_ylim, [p[1] for p in points])):
        lo, hi = min(values), max(values)
        pad = max(0.05, 0.15 * (hi - lo))
        axis(lo - pad, hi + pad)
    write_atomically(path, make_report.figure_png(plt, fig))


def append_record(path, line):
    old = b""
    if os.path.exists(path):
        with open(path, "rb") as f:
            old = f.read()
        if old and not old.endswith(b"\n"):
            old += b"\n"
    write_atomically(path, old + line.encode() + b"\n")


def cmd_run(args):
    graph_opt = args.graph_opt
    if os.sep not in graph_opt:
        graph_opt = shutil.which(graph_opt) or graph_opt
    if not (os.path.isfile(graph_opt) and os.access(graph_opt, os.X_OK)):
        raise BenchError(f"graph-opt not found at {graph_opt} (build it with `make build`, or "
                         "give --graph-opt PATH)")
    args.graph_opt = graph_opt
    plt = make_report.import_pyplot()
    os.makedirs(args.output, exist_ok=True)

    rows, machine = [], None
    started = time.time()
    for model in args.models:
        path = model_path(model, args)
        for pipeline in args.pipelines:
            row, m = benchmark(model, path, pipeline, args)
            machine = machine or m
            rows.append(row)
            if row["original_nodes"] is None:
                print(f"{model} {pipeline}: verification FAILED (not benchmarked)", flush=True)
            else:
                print(f"{model} {pipeline}: nodes {_fmt_ratio(row['nodes_ratio'])}, "
                      f"peak {_fmt_ratio(row['peak_ratio'])}, "
                      f"time {_fmt_ratio(row['time_ratio'])} ({row['verification']})",
                      flush=True)

    result = {
        "format": FORMAT,
        "commit": git_commit(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "graph_opt": graph_opt,
        "runs": args.runs,
        "warmup": args.warmup,
        "bitwise": args.bitwise,
        "rows": rows,
    }
    write_atomically(os.path.join(args.output, "results.csv"), csv_bytes(rows))
    write_atomically(os.path.join(args.output, "results.json"),
                     (json.dumps(result, indent=2) + "\n").encode())
    plots = []
    for model in args.models:
        name = "pareto_" + re.sub(r"[^A-Za-z0-9_.-]", "_", model) + ".png"
        plot_pareto(plt, model, [r for r in rows if r["model"] == model],
                    os.path.join(args.output, name))
        plots.append(name)
    if args.record:
        append_record(args.record, json.dumps(result, separators=(",", ":")))

    print()
    print(table(rows))
    print(f"\n{len(rows)} rows in {time.time() - started:.0f} s; "
          f"wrote {os.path.join(args.output, 'results.csv')}, results.json, "
          + ", ".join(plots))
    if args.record:
        print(f"appended to {args.record}")
    failed = [r for r in rows if r["verification"] == "FAILED"]
    if failed:
        print(f"{PROG}: {len(failed)} optimized graph(s) failed verification", file=sys.stderr)
        return EXIT_REGRESSION
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# compare


def _check_result(data, where):
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise BenchError(f"{where}: not a harness result (no \"rows\" list)")
    for i, r in enumerate(data["rows"]):
        missing = [c for c in CSV_COLUMNS if not isinstance(r, dict) or c not in r]
        if missing:
            raise BenchError(f"{where}: row {i} lacks {', '.join(missing)}")
    return data


def load_result(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise BenchError(f"{path}: cannot read: {e.strerror}") from None
    try:
        return _check_result(json.loads(text), path)
    except ValueError as e:
        raise BenchError(f"{path}: not JSON ({e})") from None


def load_record(path):
    try:
        with open(path) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    except OSError as e:
        raise BenchError(f"{path}: cannot read: {e.strerror}") from None
    if len(lines) < 2:
        raise BenchError(f"{path}: has {len(lines)} entr{'y' if len(lines) == 1 else 'ies'}; "
                         "compare needs two")
    out = []
    for n in (len(lines) - 1, len(lines)):
        where = f"{path}:{n}"
        try:
            out.append(_check_result(json.loads(lines[n - 1]), where))
        except ValueError as e:
            raise BenchError(f"{where}: not JSON ({e})") from None
    return out


def relative_iqr(row):
    rel = 0.0
    for side in ("original", "optimized"):
        median, iqr = row[f"{side}_time_median_s"], row[f"{side}_time_iqr_s"]
        if median and iqr is not None:
            rel = max(rel, iqr / median)
    return rel


def compare_rows(old, new):
    """(regressions, cells) for one (model, pipeline) in both runs."""
    regressions, cells = [], []
    if new["verification"] == "FAILED" or old["verification"] == "FAILED":
        if new["verification"] == "FAILED" and old["verification"] != "FAILED":
            regressions.append("verification")
        return regressions, [f"verification {old['verification']} -> {new['verification']}",
                             "-", "-"]
    threshold = max(MIN_TIME_THRESHOLD, relative_iqr(old), relative_iqr(new))
    if new["time_ratio"] > old["time_ratio"] * (1 + threshold):
        regressions.append("time")
    cells.append(f"{old['time_ratio']:.3f} -> {new['time_ratio']:.3f} "
                 f"(+{100 * threshold:.0f}% allowed)")
    if new["optimized_nodes"] > old["optimized_nodes"]:
        regressions.append("nodes")
    cells.append(f"{old['optimized_nodes']} -> {new['optimized_nodes']}")
    if new["optimized_peak_bytes"] > old["optimized_peak_bytes"]:
        regressions.append("peak")
    cells.append(f"{old['optimized_peak_bytes']} -> {new['optimized_peak_bytes']}")
    return regressions, cells


def cmd_compare(args):
    if args.record:
        if args.old or args.new:
            raise BenchError("give either OLD.json NEW.json or --record FILE.jsonl, not both")
        old, new = load_record(args.record)
        names = (f"{args.record} (entry before last)", f"{args.record} (last entry)")
    else:
        if not (args.old and args.new):
            raise BenchError("compare needs OLD.json NEW.json, or --record FILE.jsonl")
        old, new = load_result(args.old), load_result(args.new)
        names = (args.old, args.new)
    print(f"old: {names[0]} (commit {old.get('commit', '?')}, {old.get('timestamp', '?')})")
    print(f"new: {names[1]} (commit {new.get('commit', '?')}, {new.get('timestamp', '?')})")
    old_rows = {(r["model"], r["pipeline"]): r for r in old["rows"]}
    new_rows = {(r["model"], r["pipeline"]): r for r in new["rows"]}
    lines = [("model", "pipeline", "time ratio", "optimized nodes", "optimized peak bytes",
              "verdict")]
    regressed = []
    for key, nrow in new_rows.items():
        if key not in old_rows:
            lines.append((*key, "-", "-", "-", "only in new"))
            continue
        regressions, cells = compare_rows(old_rows[key], nrow)
        verdict = "REGRESSION: " + ", ".join(regressions) if regressions else "ok"
        if regressions:
            regressed.append(key)
        lines.append((*key, *cells, verdict))
    for key in old_rows:
        if key not in new_rows:
            lines.append((*key, "-", "-", "-", "only in old"))
    print()
    print(_format_table(lines))
    print()
    if regressed:
        print(f"{len(regressed)} regression(s): "
              + "; ".join(f"{m} {p}" for m, p in regressed))
        return EXIT_REGRESSION
    print("no regression")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD)


def main(argv=None):
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    r = sub.add_parser("run", help="benchmark models x pipelines; write CSV, JSON, plots")
    r.add_argument("--models", type=parse_models, default=parse_models(DEFAULT_MODELS),
                   help=f"comma-separated NAME:SIZE, SIZE tiny or default ({DEFAULT_MODELS})")
    r.add_argument("--pipelines", type=parse_pipelines,
                   default=parse_pipelines(DEFAULT_PIPELINES),
                   help=f"';'-separated pass pipelines ('{DEFAULT_PIPELINES}')")
    r.add_argument("--runs", type=positive_int(1), default=5, help="measured runs (5)")
    r.add_argument("--warmup", type=positive_int(0), default=1, help="warm-up runs (1)")
    r.add_argument("--bitwise", action="store_true", help="verify bitwise, not to tolerance")
    r.add_argument("--graph-opt", default=DEFAULT_GRAPH_OPT,
                   help="graph-opt binary, a path or a name on PATH (build/bin/graph-opt)")
    r.add_argument("--zoo", default=DEFAULT_ZOO, help="the tiny zoo's directory (build/zoo)")
    r.add_argument("--exports", default=DEFAULT_EXPORTS,
                   help="cache of default-size exports (build/bench/exports)")
    r.add_argument("--record", help="also append the results as one line to this .jsonl")
    r.add_argument("-o", "--output", required=True, help="output directory")
    c = sub.add_parser("compare", help="regressions between two results (exit 1 if any)")
    c.add_argument("old", nargs="?", help="the older results.json")
    c.add_argument("new", nargs="?", help="the newer results.json")
    c.add_argument("--record", help="compare the last two entries of this .jsonl")
    args = p.parse_args(argv)
    try:
        return cmd_run(args) if args.command == "run" else cmd_compare(args)
    except (BenchError, make_report.ProfileError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_BAD
    except OSError as e:
        print(f"{PROG}: error: {e.filename}: {e.strerror}", file=sys.stderr)
        return EXIT_BAD
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
