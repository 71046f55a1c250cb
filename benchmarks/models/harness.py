#!/usr/bin/env python3
"""Benchmarks graph-opt's pipelines on models of the zoo against their peers (eager PyTorch,
activation checkpointing, torch.compile), plots the memory/time trade-off, and tells a
regression from noise.

    harness.py run -o OUTDIR [--models resnet18:tiny,gpt2:tiny,...]
                   [--pipelines 'repeat{cse,canonicalize,dce};cse']
                   [--peers eager,checkpoint,compile,compile-budget=0.5 | none]
                   [--runs 5] [--warmup 1] [--peer-min-time 1] [--threads N] [--bitwise]
                   [--time-failed]
                   [--graph-opt PATH] [--zoo DIR] [--exports DIR] [--record FILE.jsonl]
    harness.py compare OLD.json NEW.json
    harness.py compare --record FILE.jsonl

`run`, for every model:
- every pipeline: `graph-opt MODEL.pt2 -passes=PIPELINE --benchmark=RUNS --benchmark-warmup
  WARMUP --benchmark-json ...`, which verifies the optimized graph against the input (a wrong
  graph is not benchmarked) and then runs both graphs alternately. The row's baseline is
  graph-opt's input graph ("original graph");
- every peer (--peers, default eager,checkpoint), each in a process of its own
  (benchmarks/models/peers.py: the model built by tools/export/export_model.py as its .pt2 was
  exported, first step verified against eager's, warm-up, RUNS timed steps and more while they
  total under --peer-min-time seconds, one profiled step for the memory): `eager` (forward, loss,
  backward in eager PyTorch), `checkpoint` (eager with
  torch.utils.checkpoint, non-reentrant, around every block: every child of an
  nn.ModuleList / nn.Sequential with two or more children of one class that have submodules;
  a model with none is an ERROR row), `compile` (torch.compile, inductor, of the training
  step, backward included) and `compile-budget=F` (the same with
  torch._functorch.config.activation_memory_budget = F). A peer's baseline is eager, which
  runs whenever another peer does, except compile-budget=F's: torch.compile without a budget
  (each system against its own unoptimised baseline, as its users would compare), which runs
  whenever a budget is named;
- one row "(original graph)" against eager: graph-opt's executor running the input graph
  (its step times pooled over the pipelines' runs, its peak and backward start) against eager
  PyTorch.
All of them run with the same --threads (default: torch.get_num_threads(), the cores): the
peers through torch.set_num_threads, graph-opt through OMP_NUM_THREADS and MKL_NUM_THREADS.

Every configuration is compared with its own baseline on three figures, each measured the same
way for both:
- memory saved for backward, `backward_start_bytes`: the bytes live above the inputs when
  backward starts (what forward left for it: the saved activations and the loss). graph-opt:
  its JSON's `backward_start_bytes`, from the profiled run, when the first node that is not
  forward starts (null for a graph without backward). A peer: in its profiled step, the running
  total of the allocator's events that start before the profiler region around
  loss.backward() does (peers.py's docstring, point 3);
- peak memory above the inputs, `peak_bytes`: graph-opt's tracking allocator in that profiled
  run; a peer's profiled step under torch.profiler (the peak of the same running total);
- step time: the median of the timed steps (the profiled one is not among them).

One row per (model, system, config): system `graph-opt` or `peer`; nodes (graph-opt only),
backward-start bytes, peak bytes above the inputs, median step time and its interquartile range
(IQR), each for the baseline and the configuration, the ratios configuration/baseline (a
figure either side lacks has none), the verification verdict,
the compile time (compile peers: the first step's wall time, not in the step times), the
number of checkpointed blocks, and a note (why a row FAILED or is an ERROR).

A model is NAME:SIZE. `NAME:tiny` is the tiny zoo's ZOO/NAME-train.pt2 (ctest's export_zoo
fixture exports it into build/zoo; --zoo picks another directory). `NAME:default` is the
model at the exporter's default size: `tools/export/export_model.py --model NAME --mode train
-o EXPORTS/NAME-train.pt2`, exported once and reused while it is newer than the exporter and
the model zoo, tools/zoo (--exports, default build/bench/exports). The peers build the same
model at the same size and check it against the export's FILE.facts.json.

Outputs in OUTDIR, each written atomically (a temporary file, then a rename):
results.csv (one row per model, system and config), results.json (the rows, the machine, the
threads, the checkout's commit, `-dirty` when `git status --porcelain` lists anything, and the
time), peers/<model>-<config>.json (what peers.py wrote: every step time, the verification's
per-tensor errors, the checkpointed blocks) and pareto_<model>.png (per model, three panels:
graph-opt's pipelines and the peers, each at (step-time ratio, memory ratio) against its own
baseline, the memory being the peak, the backward start and the saved activations, the
baselines at (1, 1), and each panel's Pareto front: the points no other point beats on both).
With --record FILE.jsonl, results.json's
content is also appended to FILE as one line (read, append, write a temporary file, rename):
the regression record.

`compare OLD.json NEW.json` (results.json files or single record lines, this format or the
first, graph-opt-only one), or `compare --record FILE.jsonl` (its last two entries): for every
(model, system, config) in both, the step-time ratio regressed when NEW's exceeds OLD's by more
than max(5%, the relative IQR of either run) (a run's relative IQR is the larger of IQR/median
of its baseline and its configuration); nodes, backward-start bytes and peak bytes of the
configuration are exact: any increase is a regression (a figure either run lacks, as records
written before backward-start bytes were, is not compared), and so is a verification that
passed before and now fails (or errs).

Exit codes: `run`: 0 all rows verified, 1 some configuration failed verification (its row says
so; the outputs are written), 2 bad arguments, a model or pipeline that graph-opt or the
exporter could not run (the message names it and quotes the tool; nothing is written), or a
peer that could not run (its row says ERROR and why; the outputs are written), 130
interrupted. `compare`: 0 no regression, 1 some regression, 2 bad input.
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
sys.path.insert(0, TOOLS_DIR)

import make_report  # noqa: E402  (human units, matplotlib setup, atomic writes)
import zoo  # noqa: E402  (the exporter's models: tools/zoo)
from make_report import fmt_bytes, fmt_time, write_atomically  # noqa: E402

PROG = "harness.py"
FORMAT = "graph-opt-bench/2"
FORMATS_READ = ("graph-opt-bench/1", FORMAT)
PEERS_SCRIPT = os.path.join(HERE, "peers.py")
DEFAULT_MODELS = "resnet18:tiny,gpt2:tiny"
DEFAULT_PIPELINES = "repeat{cse,canonicalize,dce};cse"
DEFAULT_PEERS = "eager,checkpoint"
DEFAULT_PEER_MIN_TIME = 1.0
SIZES = ("tiny", "default")
MIN_TIME_THRESHOLD = 0.05
EXIT_OK, EXIT_REGRESSION, EXIT_BAD, EXIT_INTERRUPTED = 0, 1, 2, 130
GRAPH_OPT, PEER = "graph-opt", "peer"
ORIGINAL_GRAPH = "original graph"     # the baseline of graph-opt's pipelines
EXECUTOR = "(original graph)"         # graph-opt's config in the row against eager
EAGER = "eager"
COMPILE = "compile"
CSV_COLUMNS = (
    "model", "system", "config", "baseline", "verification",
    "baseline_nodes", "nodes", "nodes_ratio",
    "baseline_peak_bytes", "peak_bytes", "peak_ratio",
    "baseline_backward_start_bytes", "backward_start_bytes", "backward_start_ratio",
    "baseline_time_median_s", "baseline_time_iqr_s", "time_median_s", "time_iqr_s",
    "time_ratio", "compile_s", "blocks", "note",
    "baseline_saved_bytes", "saved_bytes", "saved_ratio", "planning_s",
)
# The first format's row (graph-opt only): its columns, and what each became.
V1_COLUMNS = {
    "pipeline": "config", "original_nodes": "baseline_nodes", "optimized_nodes": "nodes",
    "nodes_ratio": "nodes_ratio", "original_peak_bytes": "baseline_peak_bytes",
    "optimized_peak_bytes": "peak_bytes", "peak_ratio": "peak_ratio",
    "original_time_median_s": "baseline_time_median_s",
    "original_time_iqr_s": "baseline_time_iqr_s", "optimized_time_median_s": "time_median_s",
    "optimized_time_iqr_s": "time_iqr_s", "time_ratio": "time_ratio",
}
# Columns added after graph-opt-bench/2's first records: compare reads a row without them as
# having none (None).
OPTIONAL_COLUMNS = ("baseline_backward_start_bytes", "backward_start_bytes",
                    "backward_start_ratio", "baseline_saved_bytes", "saved_bytes", "saved_ratio",
                    "planning_s")
BAD_VERDICTS = ("FAILED", "ERROR")


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
    """';'-separated pipelines, or 'none' (peers only)."""
    if text.strip() == "none":
        return []
    pipelines = [p.strip() for p in text.split(";") if p.strip()]
    if not pipelines:
        raise argparse.ArgumentTypeError(f"'{text}' names no pipeline")
    return pipelines


def parse_peers(text):
    """Comma-separated peer configurations, or 'none'. Eager, the peers' baseline, comes first
    and is added when another peer is named without it; `compile`, the baseline of
    `compile-budget=F`, is added (second) when a budget is named without it."""
    import peers

    if text.strip() == "none":
        return []
    names = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            peers.parse_config(item)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if item not in names:
            names.append(item)
    if not names:
        raise argparse.ArgumentTypeError(f"'{text}' names no peer (give 'none' for none)")
    budgets = [n for n in names if peer_baseline(n) == COMPILE]
    rest = [n for n in names if n not in (EAGER, COMPILE) and n not in budgets]
    compile_ = [COMPILE] if budgets or COMPILE in names else []
    return [EAGER] + compile_ + rest + budgets


def peer_baseline(config):
    """The configuration a peer is measured against: a plan under torch.compile
    (compile-budget=F, graph-opt-inductor@F, checkpoint-compile) against torch.compile without
    one (the unoptimised baseline under the same kernels, as a torch.compile user would
    compare), every other peer against eager."""
    return COMPILE if config.startswith((COMPILE + "-budget", "graph-opt-inductor",
                                         "checkpoint-compile")) else EAGER


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value >= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number >= 0")
    return value


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
    exporter_mtime = max(os.path.getmtime(f) for f in [EXPORTER, *zoo.SOURCES])
    if os.path.isfile(path) and os.path.getmtime(path) > exporter_mtime:
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


def _ratio_or_none(new, old):
    """_ratio, or None when either figure is missing (None)."""
    return None if new is None or old is None else _ratio(new, old)


def quantile(values, q):
    """Linear interpolation between the sorted values, as graph-opt's benchmark has it."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def empty_row(model, system, config, baseline, verification, note=None):
    row = {c: None for c in CSV_COLUMNS}
    row.update(model=model, system=system, config=config, baseline=baseline,
               verification=verification, note=note)
    return row


def thread_env(threads):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


def benchmark(model, path, pipeline, args):
    """One (model, pipeline) row, graph-opt's JSON (None if it failed verification)."""
    with tempfile.TemporaryDirectory(prefix="graph-opt-bench.") as tmp:
        out = os.path.join(tmp, "bench.json")
        reports = os.path.join(tmp, "reports")
        cmd = [args.graph_opt, path, f"-passes={pipeline}", f"--benchmark={args.runs}",
               "--benchmark-warmup", str(args.warmup), "--benchmark-json", out,
               "--report-dir", reports]
        if args.bitwise:
            cmd.append("--bitwise")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=thread_env(args.threads))
        if proc.returncode == 1 and not os.path.exists(out) and "not benchmarking" in proc.stdout:
            return empty_row(model, GRAPH_OPT, pipeline, ORIGINAL_GRAPH, "FAILED",
                             "the optimized graph's outputs differ from the original's"), None
        if proc.returncode != 0 or not os.path.exists(out):
            raise BenchError(f"model '{model}', pipeline '{pipeline}': graph-opt failed "
                             f"(exit {proc.returncode}):\n{_tail(proc.stdout)}")
        try:
            with open(out) as f:
                data = json.load(f)
            orig, opt = data["original"], data["optimized"]
            # null for a graph without backward; absent from an older graph-opt's JSON
            orig_bwd, opt_bwd = orig.get("backward_start_bytes"), opt.get("backward_start_bytes")
            row = empty_row(model, GRAPH_OPT, pipeline, ORIGINAL_GRAPH, data["verification"])
            row.update({
                "baseline_nodes": orig["nodes"], "nodes": opt["nodes"],
                "nodes_ratio": _ratio(opt["nodes"], orig["nodes"]),
                "baseline_peak_bytes": orig["peak_bytes_above_inputs"],
                "peak_bytes": opt["peak_bytes_above_inputs"],
                "peak_ratio": _ratio(opt["peak_bytes_above_inputs"],
                                     orig["peak_bytes_above_inputs"]),
                "baseline_backward_start_bytes": orig_bwd, "backward_start_bytes": opt_bwd,
                "backward_start_ratio": _ratio_or_none(opt_bwd, orig_bwd),
                "baseline_time_median_s": orig["step_seconds_median"],
                "baseline_time_iqr_s": _iqr(orig),
                "time_median_s": opt["step_seconds_median"],
                "time_iqr_s": _iqr(opt),
                "time_ratio": _ratio(opt["step_seconds_median"], orig["step_seconds_median"]),
            })
            data["checkpoint"] = _checkpoint_report(reports)
            row["planning_s"] = (data["checkpoint"] or {}).get("solve_seconds")
            return row, data
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError(f"model '{model}', pipeline '{pipeline}': graph-opt's "
                             f"--benchmark-json is not what this harness reads ({e!r})") from None


def _checkpoint_report(reports):
    """checkpoint's checkpoint.json (its plan and planning time), or None without checkpoint."""
    path = os.path.join(reports, "checkpoint.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def run_peer(model, path, config, args):
    """peers.py for one configuration, in a process of its own (and an inductor cache of its
    own, removed afterwards): its JSON, or {"status": "error", "message": ...}."""
    facts = path[:-len(".pt2")] + ".facts.json"
    with tempfile.TemporaryDirectory(prefix="graph-opt-peer.") as tmp:
        out = os.path.join(tmp, "peer.json")
        cmd = [sys.executable, PEERS_SCRIPT, "--model", model, "--config", config,
               "--runs", str(args.runs), "--warmup", str(args.warmup),
               "--min-time", str(args.peer_min_time),
               "--threads", str(args.threads), "-o", out]
        if args.time_failed:
            cmd.append("--time-failed")
        if os.path.isfile(facts):
            cmd += ["--facts", facts]
        env = thread_env(args.threads)
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env)
        try:
            with open(out, "rb") as f:
                raw = f.read()
            data = json.loads(raw)
        except (OSError, ValueError):
            lines = [line for line in proc.stdout.strip().splitlines() if line.strip()]
            return {"status": "error",
                    "message": f"peers.py exited {proc.returncode}"
                               + (f": {lines[-1].strip()}" if lines else "")}
    # Kept as it is: every step time, the verification's per-tensor errors, the blocks.
    name = re.sub(r"[^A-Za-z0-9_.=-]", "_", f"{model}-{config}") + ".json"
    os.makedirs(os.path.join(args.output, "peers"), exist_ok=True)
    write_atomically(os.path.join(args.output, "peers", name), raw)
    return data


def peer_stats(data):
    """(median, IQR, peak, backward start) of a peer's JSON (backward start None when it has
    none: an older peers.py's JSON)."""
    return (data["step_seconds_median"], data["step_seconds_q3"] - data["step_seconds_q1"],
            data["peak_bytes"], data.get("backward_start_bytes"))


def peer_row(model, config, data, baselines):
    """The row of one peer against its baseline (peer_baseline; `baselines` maps a peer
    configuration already run to its JSON)."""
    base_name = peer_baseline(config)
    base = baselines.get(base_name)
    status = data.get("status")
    if status == "error":
        return empty_row(model, PEER, config, base_name, "ERROR", data.get("message"))
    if status == "failed":
        verdict = data.get("verification") or "FAILED"
        row = empty_row(model, PEER, config, base_name, "FAILED",
                        verdict[len("FAILED: "):] if verdict.startswith("FAILED: ") else verdict)
        row.update(compile_s=data.get("compile_seconds"), blocks=data.get("blocks"))
        if "step_seconds_median" not in data:  # not measured (no --time-failed)
            return row
    else:
        row = empty_row(model, PEER, config, base_name, data["verification"])
    median, iqr, peak, bwd = peer_stats(data)
    row.update(peak_bytes=peak, backward_start_bytes=bwd, time_median_s=median, time_iqr_s=iqr,
               compile_s=data.get("compile_seconds"), blocks=data.get("blocks"),
               saved_bytes=data.get("saved_bytes"),
               planning_s=(data.get("graph_opt") or {}).get("planning_seconds"))
    if base is not None and "step_seconds_median" in base:  # measured (ok, or --time-failed)
        e_median, e_iqr, e_peak, e_bwd = peer_stats(base)
        row.update(baseline_saved_bytes=base.get("saved_bytes"),
                   saved_ratio=_ratio_or_none(data.get("saved_bytes"), base.get("saved_bytes")))
        row.update(baseline_peak_bytes=e_peak, peak_ratio=_ratio(peak, e_peak),
                   baseline_backward_start_bytes=e_bwd,
                   backward_start_ratio=_ratio_or_none(bwd, e_bwd),
                   baseline_time_median_s=e_median, baseline_time_iqr_s=e_iqr,
                   time_ratio=_ratio(median, e_median))
    else:
        row["note"] = f"no ratios: {base_name} did not run"
    return row


def executor_row(model, graph_opt_runs, eager):
    """graph-opt's executor on the input graph against eager PyTorch: the original graph's
    step times pooled over the pipelines' runs, its peak and backward start; None without
    both."""
    runs = [d for d in graph_opt_runs if d is not None]
    if not runs or eager is None or eager.get("status") != "ok":
        return None
    times = [t for d in runs for t in d["original"]["step_seconds"]]
    median = quantile(times, 0.5)
    iqr = quantile(times, 0.75) - quantile(times, 0.25)
    peak = runs[0]["original"]["peak_bytes_above_inputs"]
    bwd = runs[0]["original"].get("backward_start_bytes")
    e_median, e_iqr, e_peak, e_bwd = peer_stats(eager)
    row = empty_row(model, GRAPH_OPT, EXECUTOR, EAGER, "-")
    row.update(nodes=runs[0]["original"]["nodes"],
               baseline_peak_bytes=e_peak, peak_bytes=peak, peak_ratio=_ratio(peak, e_peak),
               baseline_backward_start_bytes=e_bwd, backward_start_bytes=bwd,
               backward_start_ratio=_ratio_or_none(bwd, e_bwd),
               baseline_time_median_s=e_median, baseline_time_iqr_s=e_iqr,
               time_median_s=median, time_iqr_s=iqr, time_ratio=_ratio(median, e_median),
               note=f"graph-opt's executor on the input graph ({len(times)} steps pooled)")
    return row


def git_commit():
    commit, dirty = make_report.checkout_commit(REPO_ROOT)
    return commit + "-dirty" if dirty else commit


def _fmt_ratio(r):
    return "-" if r is None else f"{r:.3f}"


def _fmt_note(r, width=60):
    parts = []
    if r.get("blocks") is not None:
        parts.append(f"{r['blocks']} blocks")
    if r.get("compile_s") is not None:
        parts.append(f"compile {r['compile_s']:.1f} s"
                     + (f" (graph-opt {r['planning_s']:.1f} s)"
                        if r.get("planning_s") is not None else ""))
    elif r.get("planning_s") is not None:
        parts.append(f"planned in {r['planning_s']:.2f} s")
    if r.get("note") and (r["verification"] in BAD_VERDICTS or r["system"] == PEER):
        note = r["note"]
        parts.append(note if len(note) <= width else note[:width - 3] + "...")
    return ", ".join(parts)


def _pair(fmt, a, b, ratio):
    if a is None and b is None:
        return "-"
    left = "-" if a is None else fmt(a)
    right = "-" if b is None else fmt(b)
    return f"{left} -> {right}" + ("" if ratio is None else f" ({_fmt_ratio(ratio)})")


def table(rows):
    header = ("model", "system", "config", "vs", "verification", "nodes", "backward start",
              "saved (hooks)", "peak", "step time (median)", "time", "notes")
    lines = [header]
    for r in rows:
        if r["time_median_s"] is None:
            lines.append((r["model"], r["system"], r["config"], r["baseline"],
                          r["verification"], "-", "-", "-", "-", "-", "-", _fmt_note(r)))
            continue
        if r["baseline_nodes"] is not None:
            nodes = _pair(str, r["baseline_nodes"], r["nodes"], r["nodes_ratio"])
        else:
            nodes = "-" if r["nodes"] is None else str(r["nodes"])
        lines.append((
            r["model"], r["system"], r["config"], r["baseline"], r["verification"], nodes,
            _pair(fmt_bytes, r.get("baseline_backward_start_bytes"),
                  r.get("backward_start_bytes"), r.get("backward_start_ratio")),
            _pair(fmt_bytes, r.get("baseline_saved_bytes"), r.get("saved_bytes"),
                  r.get("saved_ratio")),
            _pair(fmt_bytes, r["baseline_peak_bytes"], r["peak_bytes"], r["peak_ratio"]),
            _pair(fmt_time, r["baseline_time_median_s"], r["time_median_s"], None),
            _fmt_ratio(r["time_ratio"]), _fmt_note(r),
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
    """The points (x, y, ...) that no other point beats on both (lower is better), by x."""
    front = []
    for p in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or p[1] < front[-1][1]:
            front.append(p)
    return front


# The Pareto plot's panels: (the ratio on the y axis, its label, the panel's title).
PARETO_PANELS = (
    ("peak_ratio", "peak memory / baseline's", "time against peak memory"),
    ("backward_start_ratio", "live at backward start / baseline's",
     "time against memory saved for backward"),
    ("saved_ratio", "activations saved (saved_tensors_hooks) / baseline's",
     "time against saved activations"),
)


def plot_pareto(plt, model, rows, path):
    """One panel per PARETO_PANELS entry, each with graph-opt's pipelines (against the original
    graph) and the peers (against eager; the plans under compile against compile) at
    (step-time ratio, memory ratio), the baselines at (1, 1), and the front over all of them:
    the peak memory, what is live when backward starts, the saved activations."""
    fig, axes = plt.subplots(1, len(PARETO_PANELS), figsize=(6.5 * len(PARETO_PANELS), 5))
    for ax, (key, ylabel, title) in zip(axes, PARETO_PANELS):
        _pareto_panel(ax, rows, key, ylabel, title)
    fig.suptitle(f"{model}: lower left is better")
    fig.tight_layout()
    write_atomically(path, make_report.figure_png(plt, fig))


def _pareto_panel(ax, rows, key, ylabel, title):
    def points_of(system, exclude=()):
        return [(r["time_ratio"], r.get(key),
                 r["config"] + (" (FAILED check)" if r["verification"] == "FAILED" else ""))
                for r in rows
                if r["system"] == system and r["config"] not in exclude
                and r["time_ratio"] is not None and r.get(key) is not None]

    pipelines = points_of(GRAPH_OPT, exclude=(EXECUTOR,))
    peers = points_of(PEER, exclude=(EAGER,))
    baseline = (1.0, 1.0, "baselines")
    points = [baseline] + pipelines + peers
    front = pareto_front(points)
    ax.scatter([1.0], [1.0], color="#555555", marker="s", s=50, zorder=3,
               label="baselines (original graph; eager; compile)")
    if pipelines:
        ax.scatter([p[0] for p in pipelines], [p[1] for p in pipelines], color="#4C72B0",
                   marker="o", s=40, zorder=3, label="graph-opt pipelines (vs original graph)")
    if peers:
        ax.scatter([p[0] for p in peers], [p[1] for p in peers], color="#DD8452", marker="^",
                   s=55, zorder=3, label="peers (vs eager; compile budgets vs compile)")
    # Points often nearly coincide: a label goes right of its point, one line lower for each
    # earlier point within 4% of the axes' spans, so that they stay legible.
    span_x = max(p[0] for p in points) - min(p[0] for p in points) or 1.0
    span_y = max(p[1] for p in points) - min(p[1] for p in points) or 1.0
    for i, (x, y, label) in enumerate(points):
        near = sum(1 for px, py, _ in points[:i]
                   if abs(px - x) <= 0.04 * span_x and abs(py - y) <= 0.04 * span_y)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(7, 3 - 11 * near),
                    fontsize=8)
    ax.plot([p[0] for p in front], [p[1] for p in front], color="#C44E52", drawstyle="steps-post",
            marker="o", markersize=11, markerfacecolor="none", zorder=2, label="Pareto front")
    ax.axvline(1.0, color="#999999", lw=0.8, ls=":")
    ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
    ax.set_xlabel("step time / baseline's (median)")
    ax.set_ylabel(ylabel)
    ax.set_title(title if len(points) > 1 else f"{title}\n(no configuration has this figure)")
    ax.legend(loc="best", fontsize=8)
    # Ratios near 1 differ in the fourth digit: no offset notation, and at least +-5% shown.
    ax.ticklabel_format(useOffset=False, style="plain")
    for axis, values in ((ax.set_xlim, [p[0] for p in points]),
                         (ax.set_ylim, [p[1] for p in points])):
        lo, hi = min(values), max(values)
        pad = max(0.05, 0.15 * (hi - lo))
        axis(lo - pad, hi + pad)


def _budget_of(config, prefix):
    return float(config[len(prefix):]) if config.startswith(prefix) else None


def compile_goals(rows):
    """graph-opt's partitioner against torch's knapsack under the same Inductor, per model and
    budget B (rows graph-opt-inductor@B and compile-budget=B that both measured): saved bytes
    and step time of graph-opt's over torch's (goal: both <= 1), and for each system whether
    its measured peak falls (never rises) as the budget falls. {model: {...}}."""
    goals = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine, torchs = {}, {}
        for r in rows:
            if r["model"] != model or r["time_median_s"] is None:
                continue
            for prefix, into in (("graph-opt-inductor@", mine), ("compile-budget=", torchs)):
                b = _budget_of(r["config"], prefix)
                if b is not None:
                    into[b] = r
        if not mine and not torchs:
            continue
        budgets = []
        for b in sorted(set(mine) & set(torchs), reverse=True):
            g, t = mine[b], torchs[b]
            budgets.append({
                "budget": b,
                "saved_ratio": _ratio_or_none(g["saved_bytes"], t["saved_bytes"]),
                "time_ratio": _ratio(g["time_median_s"], t["time_median_s"]),
                "peak_ratio": _ratio(g["peak_bytes"], t["peak_bytes"]),
                "graph_opt_planning_share": (None if not g.get("planning_s") or not g["compile_s"]
                                             else g["planning_s"] / g["compile_s"]),
            })

        def falls(by_budget):
            peaks = [by_budget[b]["peak_bytes"] for b in sorted(by_budget, reverse=True)]
            return all(b <= a for a, b in zip(peaks, peaks[1:])) if len(peaks) > 1 else None
        goals[model] = {"budgets": budgets, "graph_opt_peak_falls": falls(mine),
                        "torch_peak_falls": falls(torchs)}
    return goals


def goals_text(goals):
    lines = []
    for model, g in goals.items():
        lines.append(f"{model}: graph-opt-inductor@B over compile-budget=B (saved, time, peak); "
                     f"peak falls with the budget: graph-opt {g['graph_opt_peak_falls']}, "
                     f"torch {g['torch_peak_falls']}")
        for b in g["budgets"]:
            share = b["graph_opt_planning_share"]
            lines.append(f"  B={b['budget']:g}: saved {_fmt_ratio(b['saved_ratio'])}, "
                         f"time {_fmt_ratio(b['time_ratio'])}, peak {_fmt_ratio(b['peak_ratio'])}"
                         + ("" if share is None else f", graph-opt {share:.1%} of compile"))
    return "\n".join(lines)


def append_record(path, line):
    old = b""
    if os.path.exists(path):
        with open(path, "rb") as f:
            old = f.read()
        if old and not old.endswith(b"\n"):
            old += b"\n"
    write_atomically(path, old + line.encode() + b"\n")


def default_threads():
    import torch

    return torch.get_num_threads()


def _progress(model, row):
    head = f"{model} {row['system']} {row['config']}"
    if row["verification"] in BAD_VERDICTS:
        return f"{head}: {row['verification']}" + (f": {row['note']}" if row["note"] else "")
    parts = []
    if row["nodes_ratio"] is not None:
        parts.append(f"nodes {_fmt_ratio(row['nodes_ratio'])}")
    if row["backward_start_ratio"] is not None:
        parts.append(f"backward start {_fmt_ratio(row['backward_start_ratio'])}")
    parts.append(f"peak {_fmt_ratio(row['peak_ratio'])}")
    parts.append(f"time {_fmt_ratio(row['time_ratio'])}")
    if row["verification"] != "-":
        parts[-1] += f" ({row['verification']})"
    extra = _fmt_note(row) if row["system"] == PEER else ""
    return f"{head}: {', '.join(parts)}" + (f", {extra}" if extra else "")


def cmd_run(args):
    graph_opt = args.graph_opt
    if os.sep not in graph_opt:
        graph_opt = shutil.which(graph_opt) or graph_opt
    if not (os.path.isfile(graph_opt) and os.access(graph_opt, os.X_OK)):
        raise BenchError(f"graph-opt not found at {graph_opt} (build it with `make build`, or "
                         "give --graph-opt PATH)")
    args.graph_opt = graph_opt
    if args.threads is None:
        args.threads = default_threads()
    plt = make_report.import_pyplot()
    os.makedirs(args.output, exist_ok=True)

    rows, machine = [], None
    started = time.time()
    for model in args.models:
        path = model_path(model, args)
        runs = []
        for pipeline in args.pipelines:
            row, data = benchmark(model, path, pipeline, args)
            runs.append(data)
            machine = machine or (data or {}).get("machine")
            if data and data.get("machine", {}).get("threads") not in (None, args.threads):
                print(f"{PROG}: warning: graph-opt ran with {data['machine']['threads']} "
                      f"threads, not {args.threads}", file=sys.stderr)
            rows.append(row)
            print(_progress(model, row), flush=True)
        baselines = {}
        peer_rows = []
        for config in args.peers:
            data = run_peer(model, path, config, args)
            baselines[config] = data
            row = peer_row(model, config, data, baselines)
            peer_rows.append(row)
            print(_progress(model, row), flush=True)
        row = executor_row(model, runs, baselines.get(EAGER))
        if row is not None:
            rows.append(row)
            print(_progress(model, row), flush=True)
        rows += peer_rows

    result = {
        "format": FORMAT,
        "commit": git_commit(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "threads": args.threads,
        "graph_opt": graph_opt,
        "runs": args.runs,
        "warmup": args.warmup,
        "peer_min_time": args.peer_min_time,
        "bitwise": args.bitwise,
        "pipelines": args.pipelines,
        "peers": args.peers,
        "graphs": GRAPHS,
        "rows": rows,
        "compile_goals": compile_goals(rows),
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
    peers = f" (peers: {args.peer_min_time:g} s of steps at least)" if args.peers else ""
    print(f"{args.threads} thread{'s' if args.threads != 1 else ''}, {args.runs} runs after "
          f"{args.warmup} warm-up{peers}; ratios against the row's baseline (vs): below 1 is "
          "better")
    print(table(rows))
    if result["compile_goals"]:
        print("\n" + goals_text(result["compile_goals"]))
    print(f"\n{len(rows)} rows in {time.time() - started:.0f} s; "
          f"wrote {os.path.join(args.output, 'results.csv')}, results.json, "
          + ", ".join(plots) + (", peers/*.json" if args.peers else ""))
    if args.record:
        print(f"appended to {args.record}")
    errors = [r for r in rows if r["verification"] == "ERROR"]
    failed = [r for r in rows if r["verification"] == "FAILED"]
    if failed:
        print(f"{PROG}: {len(failed)} configuration(s) failed verification: "
              + "; ".join(f"{r['model']} {r['config']}" for r in failed), file=sys.stderr)
    if errors:
        print(f"{PROG}: {len(errors)} peer(s) could not run: "
              + "; ".join(f"{r['model']} {r['config']}" for r in errors), file=sys.stderr)
        return EXIT_BAD
    return EXIT_REGRESSION if failed else EXIT_OK


# ---------------------------------------------------------------------------------------------
# compare


def _upgrade_row(r):
    """A row of the first format (graph-opt only) in this format's columns."""
    if not isinstance(r, dict) or "system" in r or "pipeline" not in r:
        return r
    row = {c: None for c in CSV_COLUMNS}
    row.update(model=r.get("model"), system=GRAPH_OPT, baseline=ORIGINAL_GRAPH,
               verification=r.get("verification"))
    for old, new in V1_COLUMNS.items():
        row[new] = r.get(old)
    missing = [c for c in ("model", "verification", *V1_COLUMNS) if c not in r]
    if missing:
        row["_missing"] = missing
    return row


# What the zoo's graphs are: a change here resets the regression record (load_record).
GRAPHS = "joint export with module paths, fused backward (issue 28)"
GRAPHS_BEFORE = "_export_forward_backward, core ATen backward"


def _check_result(data, where):
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise BenchError(f"{where}: not a harness result (no \"rows\" list)")
    if data.get("format", FORMAT) not in FORMATS_READ:
        raise BenchError(f"{where}: format {data.get('format')!r} is not one this harness "
                         f"reads ({', '.join(FORMATS_READ)})")
    data["rows"] = [_upgrade_row(r) for r in data["rows"]]
    for i, r in enumerate(data["rows"]):
        missing = (r.pop("_missing", None) if isinstance(r, dict) else None) or \
            [c for c in CSV_COLUMNS if c not in OPTIONAL_COLUMNS
             and (not isinstance(r, dict) or c not in r)]
        if missing:
            raise BenchError(f"{where}: row {i} lacks {', '.join(missing)}")
        for c in OPTIONAL_COLUMNS:
            r.setdefault(c, None)
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
    # The record restarts where the exported graphs changed: entries of other graphs
    # (before "graphs" was written: the first joint export) are not compared with these.
    def graphs(line):
        try:
            return json.loads(line).get("graphs", GRAPHS_BEFORE)
        except (ValueError, AttributeError):
            return None
    if lines and graphs(lines[-1]) is not None:
        last = graphs(lines[-1])
        kept = [line for line in lines if graphs(line) == last]
        if len(kept) < 2 <= len(lines):
            raise BenchError(f"{path}: the record was reset by a change of the exported graphs "
                             f"(now: {last}); {len(kept)} entr{'y' if len(kept) == 1 else 'ies'} "
                             "since, compare needs two: run make bench again")
        lines = kept
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
    for side in ("baseline_time", "time"):
        median, iqr = row[f"{side}_median_s"], row[f"{side}_iqr_s"]
        if median and iqr is not None:
            rel = max(rel, iqr / median)
    return rel


def compare_rows(old, new):
    """(regressions, cells) for one (model, system, config) in both runs: the time ratio
    within the noise, the configuration's nodes, backward-start bytes and peak bytes exact
    (a figure one run lacks is not compared)."""
    regressions, cells = [], []
    if new["verification"] in BAD_VERDICTS or old["verification"] in BAD_VERDICTS:
        if new["verification"] in BAD_VERDICTS and old["verification"] not in BAD_VERDICTS:
            regressions.append("verification" if new["verification"] == "FAILED" else "error")
        return regressions, [f"verification {old['verification']} -> {new['verification']}",
                             "-", "-", "-"]
    if old["time_ratio"] is not None and new["time_ratio"] is not None:
        threshold = max(MIN_TIME_THRESHOLD, relative_iqr(old), relative_iqr(new))
        if new["time_ratio"] > old["time_ratio"] * (1 + threshold):
            regressions.append("time")
        cells.append(f"{old['time_ratio']:.3f} -> {new['time_ratio']:.3f} "
                     f"(+{100 * threshold:.0f}% allowed)")
    else:
        cells.append("-")
    for key, name in (("nodes", "nodes"), ("backward_start_bytes", "backward start"),
                      ("peak_bytes", "peak")):
        if old[key] is None or new[key] is None:
            cells.append("-")
            continue
        if new[key] > old[key]:
            regressions.append(name)
        cells.append(f"{old[key]} -> {new[key]}")
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
    if old.get("threads") and new.get("threads") and old["threads"] != new["threads"]:
        print(f"note: the runs used {old['threads']} and {new['threads']} threads")

    def key(r):
        return (r["model"], r["system"], r["config"])

    old_rows = {key(r): r for r in old["rows"]}
    new_rows = {key(r): r for r in new["rows"]}
    lines = [("model", "system", "config", "time ratio", "nodes", "backward start bytes",
              "peak bytes", "verdict")]
    regressed = []
    for k, nrow in new_rows.items():
        if k not in old_rows:
            lines.append((*k, "-", "-", "-", "-", "only in new"))
            continue
        regressions, cells = compare_rows(old_rows[k], nrow)
        verdict = "REGRESSION: " + ", ".join(regressions) if regressions else "ok"
        if regressions:
            regressed.append(k)
        lines.append((*k, *cells, verdict))
    for k in old_rows:
        if k not in new_rows:
            lines.append((*k, "-", "-", "-", "-", "only in old"))
    print()
    print(_format_table(lines))
    print()
    if regressed:
        print(f"{len(regressed)} regression(s): "
              + "; ".join(f"{m} {s} {c}" for m, s, c in regressed))
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
    r = sub.add_parser("run", help="benchmark models x (pipelines, peers); write CSV, JSON, plots")
    r.add_argument("--models", type=parse_models, default=parse_models(DEFAULT_MODELS),
                   help=f"comma-separated NAME:SIZE, SIZE tiny or default ({DEFAULT_MODELS})")
    r.add_argument("--pipelines", type=parse_pipelines,
                   default=parse_pipelines(DEFAULT_PIPELINES),
                   help=f"';'-separated pass pipelines, or none ('{DEFAULT_PIPELINES}')")
    r.add_argument("--peers", type=parse_peers, default=parse_peers(DEFAULT_PEERS),
                   help="comma-separated peer configurations: eager, checkpoint, compile, "
                   "compile-budget=F (F in [0, 1]), graph-opt-inductor@F, "
                   "graph-opt-inductor-share@F, checkpoint-compile, "
                   f"or none ({DEFAULT_PEERS})")
    r.add_argument("--runs", type=positive_int(1), default=5, help="measured runs (5)")
    r.add_argument("--warmup", type=positive_int(0), default=1, help="warm-up runs (1)")
    r.add_argument("--peer-min-time", type=non_negative_float, default=DEFAULT_PEER_MIN_TIME,
                   help="a peer measures more steps than --runs while they total less than "
                   f"this many seconds ({DEFAULT_PEER_MIN_TIME:g})")
    r.add_argument("--threads", type=positive_int(1), default=None,
                   help="intra-op threads of graph-opt and the peers (torch.get_num_threads())")
    r.add_argument("--bitwise", action="store_true", help="verify bitwise, not to tolerance")
    r.add_argument("--time-failed", action="store_true",
                   help="measure a peer whose verification failed too (its row stays FAILED, "
                   "with its figures): torch.compile's speed where it disagrees with eager")
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
