#!/usr/bin/env python3
"""Profiles one model's training step at several batch sizes and finds the largest batch that
fits a memory limit.

    graph-opt-sweep -o OUTDIR [--model resnet152] [--batches 4,8,16,32,64]
                    [--memory-limit 2GiB] [--tiny] [--image-size S] [--seq-len L]
                    [--warmup 1] [--runs 5] [--device cpu|cuda] [--graph-opt PATH]
                    [--keep-exports]

For each batch size, smallest first: export the joint training step with
tools/export/export_model.py into OUTDIR/exports/ (an export that is already there and newer
than the exporter and the model zoo, tools/zoo, is reused), profile it with
`graph-opt -passes=profile{...} --report-dir OUTDIR/b<N> --html=false`, and read
OUTDIR/b<N>/profile.json (peak_bytes, step_time_s).
The sweep stops at the first batch that runs out of memory (graph-opt's message says so, or it
is killed by a signal, as the kernel's OOM killer does); the batches after it are not run.
Before each run, once two batches have run, the line fitted to their peaks plus the largest
overhead seen so far (graph-opt's maximum resident memory minus its measured peak: LibTorch's
code and what the allocator does not count) predicts what the process will need; a batch
predicted not to fit in MemAvailable (/proc/meminfo) is skipped, so that the sweep never
wakes the OOM killer. On CUDA the
device's free memory is not known here and this guard is off.

With --memory-limit, a least-squares line peak = a + b * batch over the batches that ran
predicts the largest batch under the limit, floor((limit - a) / b); that batch is then run
(a "check" row), and if it fits that is the answer. If its measured peak is over the limit
(or it ran out of memory), a smaller batch is checked: where the line through the nearest
measurements under and over the limit meets it (at least 1 or 5% smaller), at most
MAX_CHECKS runs in all, until one fits. The answer is the largest batch measured under the
limit.

Outputs in OUTDIR, each written atomically (a temporary file, then a rename): sweep.csv
(batch,peak_bytes,step_time_s,samples_per_s,status), sweep.json (the rows, the fits, the
limit, the answer and its checks) and sweep.png (peak memory against batch with the line and
the limit; step time and throughput against batch). On a terminal a progress bar shows what
runs; otherwise one line per batch.

Exit codes: 0 the sweep ran (also when nothing fits the limit: sweep.json's largest_batch is
null and the summary says so); 2 bad arguments, a missing graph-opt, or a batch whose export
or profile failed for another reason than memory (the message names the batch and quotes the
failing tool; the rows measured before it are written); 130 interrupted.
"""
import argparse
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(TOOLS_DIR)
EXPORTER = os.path.join(TOOLS_DIR, "export", "export_model.py")
DEFAULT_GRAPH_OPT = os.path.join(REPO_ROOT, "build", "bin", "graph-opt")
sys.path.insert(0, os.path.join(TOOLS_DIR, "report"))
sys.path.insert(0, TOOLS_DIR)

import make_report  # noqa: E402  (human units, matplotlib setup, atomic writes)
import zoo  # noqa: E402  (the exporter's models: tools/zoo)
from make_report import fmt_bytes, fmt_time, parse_bytes, write_atomically  # noqa: E402

PROG = "graph-opt-sweep"
FORMAT = "graph-opt-sweep/1"
DEFAULT_BATCHES = (4, 8, 16, 32, 64)
CSV_COLUMNS = ("batch", "peak_bytes", "step_time_s", "samples_per_s", "status")
MAX_CHECKS = 4  # runs spent checking the predicted batch and the ones below it
# What graph-opt (LibTorch) or the exporter print when an allocation fails.
OOM_PATTERN = re.compile(
    r"out of memory|not enough memory|bad_alloc|can't allocate memory|cannot allocate memory|"
    r"MemoryError|"
    r"OutOfMemoryError", re.IGNORECASE)
OOM_EXIT_CODES = (137,)  # a shell's report of SIGKILL (the OOM killer)
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 2, 130
PLOT_COLORS = {"peak": "#4C72B0", "check": "#55A868", "limit": make_report.LIMIT_COLOR,
               "time": "#DD8452", "throughput": "#8172B3", "oom": "#C44E52"}


class SweepError(Exception):
    """A failure that ends the sweep with exit code 2; the message says what and where."""


# --- arguments ---------------------------------------------------------------------------

def parse_batches(text):
    """'4,8,16' -> [4, 8, 16] (sorted, without repeats); argparse type."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a list of batch sizes: give positive integers separated by "
            "commas, e.g. 4,8,16,32,64")
    batches = sorted({int(p) for p in parts})
    if batches[0] < 1:
        raise argparse.ArgumentTypeError(f"'{text}': batch sizes must be at least 1")
    return batches


def _count(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer >= {minimum}")
        return value
    return parse


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Profiles a model's training step at several batch sizes (peak memory, "
                    "step time; sweep.csv, sweep.json, sweep.png in OUTDIR) and, with "
                    "--memory-limit, finds the largest batch under the limit: predicted by a "
                    "line fitted to the peaks, then checked by a run.")
    ap.add_argument("--model", default="resnet152",
                    help="a model of tools/export/export_model.py --list (default resnet152)")
    ap.add_argument("--batches", type=parse_batches, default=list(DEFAULT_BATCHES),
                    metavar="N,N,...",
                    help="batch sizes, run smallest first (default 4,8,16,32,64)")
    ap.add_argument("--memory-limit", type=parse_bytes, metavar="BYTES",
                    help="find the largest batch whose peak stays under this (bytes, or e.g. "
                         "2GiB, 512MiB, 1.5GB); without it only the table and plot")
    ap.add_argument("--tiny", action="store_true",
                    help="the exporter's small configuration of the model (for tests)")
    ap.add_argument("--image-size", type=_count(1), metavar="S",
                    help="image side for image models (passed to the exporter)")
    ap.add_argument("--seq-len", type=_count(2), metavar="L",
                    help="sequence length for text models (passed to the exporter)")
    ap.add_argument("--warmup", type=_count(0), default=1, metavar="N",
                    help="profile pass: runs before measuring (default 1)")
    ap.add_argument("--runs", type=_count(1), default=5, metavar="N",
                    help="profile pass: measured runs, medians reported (default 5)")
    ap.add_argument("--device", choices=("cpu", "cuda"),
                    help="graph-opt's --device (default: graph-opt's, cuda where a GPU is)")
    ap.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                    help="directory for the results, the exports and each batch's profile")
    ap.add_argument("--graph-opt", default=DEFAULT_GRAPH_OPT, metavar="PATH",
                    help=f"the graph-opt binary (default: this checkout's build, "
                         f"{os.path.relpath(DEFAULT_GRAPH_OPT, REPO_ROOT)})")
    ap.add_argument("--keep-exports", action="store_true",
                    help="keep the .pt2 exports this run made in OUTDIR/exports (a later "
                         "sweep reuses them); by default they are removed at the end")
    args = ap.parse_args(argv)
    _check_model(ap, args)
    return args


def _check_model(ap, args):
    """The model exists and the size options apply to it (what the exporter would refuse)."""
    spec = zoo.MODELS.get(args.model)
    if spec is None:
        ap.error(f"argument --model: unknown model '{args.model}' "
                 f"(known: {', '.join(zoo.MODELS)})")
    if spec.kind == "text" and args.image_size is not None:
        ap.error(f"argument --image-size: does not apply to {args.model} (a text model)")
    if spec.kind != "text" and args.seq_len is not None:
        ap.error(f"argument --seq-len: does not apply to {args.model} (not a text model)")


# --- running the tools -------------------------------------------------------------------

def read_meminfo_available():
    """MemAvailable in bytes, or None where there is no such file or line. The environment
    variable GRAPHOPT_SWEEP_MEMINFO names another file in /proc/meminfo's format (tests)."""
    path = os.environ.get("GRAPHOPT_SWEEP_MEMINFO", "/proc/meminfo")
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def run_child(cmd, log_path, tick):
    """Runs cmd with its stdout and stderr in log_path; calls tick() while it runs.

    Returns (exit code, negative for a signal; its maximum resident set size in bytes, or
    None; the log's text)."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                tick()
                time.sleep(0.2)
        except BaseException:
            # Interrupted: let the child clean up as on Ctrl-C (the exporter removes its
            # temporary directory), then make sure it is gone.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code  # reaped here; keep Popen from waiting again
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return code, usage.ru_maxrss * 1024 if usage.ru_maxrss else None, text


def is_out_of_memory(code, text):
    return code < 0 or code in OOM_EXIT_CODES or bool(OOM_PATTERN.search(text))


def describe_exit(code):
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_lines(text, n=12):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return "\n".join("  " + l for l in lines[-n:]) or "  (no output)"


class Sweep:
    def __init__(self, args, progress):
        self.args = args
        self.progress = progress
        self.out = os.path.abspath(args.output)
        self.exports_dir = os.path.join(self.out, "exports")
        self.rows = []  # in the order they ran
        self.made_exports = []  # .pt2 files this run wrote (removed without --keep-exports)
        self.device = args.device

    # Exports are named by everything that shapes them, so a reused one is the same graph.
    def export_path(self, batch):
        a = self.args
        name = f"{a.model}{'-tiny' if a.tiny else ''}-train-b{batch}"
        if a.image_size:
            name += f"-i{a.image_size}"
        if a.seq_len:
            name += f"-s{a.seq_len}"
        return os.path.join(self.exports_dir, name + ".pt2")

    def export(self, batch, label):
        """The export for `batch`: reused if newer than the exporter, else made now.
        Returns (path, None) or (None, row status) when it ran out of memory."""
        path = self.export_path(batch)
        facts = path[:-len(".pt2")] + ".facts.json"
        if (os.path.isfile(path) and os.path.isfile(facts)
                and os.path.getmtime(path) >= max(os.path.getmtime(f)
                                                  for f in [EXPORTER, *zoo.SOURCES])):
            return path, None
        self.progress.stage(label, f"batch {batch}: exporting")
        a = self.args
        cmd = [sys.executable, EXPORTER, "--model", a.model, "--mode", "train",
               "--batch", str(batch), "-o", path, "--quiet"]
        if a.tiny:
            cmd.append("--tiny")
        if a.image_size:
            cmd += ["--image-size", str(a.image_size)]
        if a.seq_len:
            cmd += ["--seq-len", str(a.seq_len)]
        log = path[:-len(".pt2")] + ".export.log"
        try:
            code, _, text = run_child(cmd, log, self.progress.tick)
        except BaseException:
            os.unlink(log)  # interrupted: nothing to read in it
            raise
        if code == 0:
            os.unlink(log)
            self.made_exports.append(path)
            return path, None
        if is_out_of_memory(code, text):
            return None, f"export ran out of memory ({describe_exit(code)})"
        raise SweepError(f"batch {batch}: exporting {a.model} failed ({describe_exit(code)}; "
                         f"log {log}):\n{last_lines(text)}")

    def profile(self, batch, label):
        """Exports and profiles `batch`; returns its row (status ok or out_of_memory)."""
        row = {"batch": batch, "peak_bytes": None, "step_time_s": None, "samples_per_s": None,
               "status": "ok", "note": "", "max_rss_bytes": None,
               "simulated_peak_bytes": None, "num_nodes": None, "report_dir": None}
        export, oom = self.export(batch, label)
        if oom:
            row.update(status="out_of_memory", note=oom)
            return row
        report_dir = os.path.join(self.out, f"b{batch}")
        os.makedirs(report_dir, exist_ok=True)
        for stale in ("profile.json", "graph-opt.log"):
            if os.path.exists(os.path.join(report_dir, stale)):
                os.unlink(os.path.join(report_dir, stale))
        a = self.args
        cmd = [a.graph_opt, export, f"-passes=profile{{warmup={a.warmup},runs={a.runs}}}",
               "--report-dir", report_dir, "--html=false"]
        if a.device:
            cmd += ["--device", a.device]
        self.progress.stage(label, f"batch {batch}: profiling")
        log = os.path.join(report_dir, "graph-opt.log")
        code, rss, text = run_child(cmd, log, self.progress.tick)
        row["max_rss_bytes"] = rss
        if code == 0 and not text.strip():
            os.unlink(log)  # keep graph-opt's output only when it said something
        row["report_dir"] = os.path.relpath(report_dir, self.out)
        if code != 0:
            if is_out_of_memory(code, text):
                row.update(status="out_of_memory",
                           note=f"graph-opt ran out of memory ({describe_exit(code)})")
                return row
            raise SweepError(f"batch {batch}: graph-opt failed ({describe_exit(code)}; "
                             f"log {log}):\n{last_lines(text)}")
        profile_path = os.path.join(report_dir, "profile.json")
        try:
            with open(profile_path, encoding="utf-8") as f:
                profile = json.load(f)
            peak, step = profile["peak_bytes"], profile["step_time_s"]
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                       for v in (peak, step)):
                raise ValueError(f"peak_bytes {peak!r} and step_time_s {step!r} should be "
                                 "numbers")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SweepError(f"batch {batch}: cannot read {profile_path}: {e}") from None
        self.device = self.device or profile.get("device")
        row.update(peak_bytes=peak, step_time_s=step,
                   samples_per_s=batch / step if step > 0 else None,
                   simulated_peak_bytes=profile.get("simulated_peak_bytes"),
                   num_nodes=profile.get("num_nodes"))
        return row

    # --- the guard against the OOM killer -------------------------------------------------

    def on_cuda(self):
        return bool(self.device) and self.device.startswith("cuda")

    def guard(self, batch):
        """None when `batch` may run, else why it is skipped ("predicted ... > available")."""
        if self.on_cuda():
            return None
        ok = [r for r in self.rows if r["status"] in ("ok", "check")]
        fit = fit_line([(r["batch"], r["peak_bytes"]) for r in ok])
        if fit is None:
            return None
        # The process needs its measured peak plus what the allocator does not see (LibTorch's
        # code and its own allocations): the largest such overhead seen so far.
        overhead = max([r["max_rss_bytes"] - r["peak_bytes"] for r in ok
                        if r["max_rss_bytes"]] + [0])
        available = read_meminfo_available()
        if available is None:
            return None
        predicted = fit[0] + fit[1] * batch + overhead
        if predicted <= available:
            return None
        return f"skipped: predicted {fmt_bytes(predicted)} > available {fmt_bytes(available)}"

    # --- the sweep -------------------------------------------------------------------------

    def run(self):
        batches = self.args.batches
        stop_note = None
        for i, batch in enumerate(batches):
            label = f"{i + 1}/{len(batches)}"
            if stop_note is None:
                stop_note = self.guard(batch)
                if stop_note is None:
                    self.progress.stage(label, f"batch {batch}")
                    row = self.profile(batch, label)
                    self.add(row)
                    if row["status"] == "out_of_memory":
                        stop_note = f"skipped: batch {batch} ran out of memory"
                    continue
            else:
                # A later batch: the reason given for the first one skipped, or the OOM.
                if stop_note.startswith("skipped: predicted"):
                    stop_note = self.guard(batch) or stop_note
            self.add({"batch": batch, "peak_bytes": None, "step_time_s": None,
                      "samples_per_s": None, "status": "skipped", "note": stop_note,
                      "max_rss_bytes": None, "simulated_peak_bytes": None, "num_nodes": None,
                      "report_dir": None})
        self.progress.advance_done(len(batches))
        return self.answer()

    def add(self, row):
        self.rows.append(row)
        self.progress.log(row_line(row))

    def answer(self):
        """The fits, and with a limit the predicted batch and its checks."""
        ok = [r for r in self.rows if r["status"] == "ok"]
        peak_fit = fit_line([(r["batch"], r["peak_bytes"]) for r in ok])
        time_fit = fit_line([(r["batch"], r["step_time_s"]) for r in ok])
        result = {"points": len(ok), "peak_fit": peak_fit, "time_fit": time_fit,
                  "fitted": None, "checks": [], "largest": None, "note": None}
        limit = self.args.memory_limit
        if limit is None:
            return result
        if peak_fit is None:
            result["note"] = (f"{len(ok)} batch{'es' if len(ok) != 1 else ''} ran: a line "
                              "needs at least 2; give more --batches")
            result["largest"] = largest_measured(self.rows, limit)
            return result
        a, b = peak_fit
        if b <= 0:
            result["note"] = "the peak does not grow with the batch: no line to extrapolate"
            result["largest"] = largest_measured(self.rows, limit)
            return result
        fitted = math.floor((limit - a) / b)
        result["fitted"] = fitted
        if fitted < 1:
            result["largest"] = largest_measured(self.rows, limit)
            if result["largest"] is None:
                result["note"] = (f"nothing fits: the line predicts {fmt_bytes(a + b)} at "
                                  f"batch 1, over the limit ({fmt_bytes(limit)})")
            return result
        batch = fitted
        for n in range(MAX_CHECKS):
            skip = self.guard(batch)
            if skip:
                result["note"] = f"batch {batch} not checked: {skip[len('skipped: '):]}"
                break
            label = f"check {n + 1}"
            self.progress.stage(label, f"batch {batch}")
            row = self.profile(batch, label)
            fits = row["status"] == "ok" and row["peak_bytes"] <= limit
            result["checks"].append({"batch": batch, "peak_bytes": row["peak_bytes"],
                                     "status": row["status"], "fits": fits})
            if row["status"] == "ok":
                row["status"] = "check"
            self.add(row)
            if fits:
                break
            batch = next_check(self.rows, limit, b)
            if batch is None:
                break
        result["largest"] = largest_measured(self.rows, limit)
        if result["largest"] is None and result["note"] is None:
            tried = ", ".join(str(c["batch"]) for c in result["checks"])
            result["note"] = f"nothing fits: no batch measured under the limit (checked {tried})"
        return result


def next_check(rows, limit, slope):
    """The batch to check after a check over the limit, or None when there is none to try.

    Between the largest batch measured under the limit and the smallest one over it (or out of
    memory), where the straight line through those two measurements meets the limit: the line
    fitted to the sweep's small batches can be far off at a large one. Without a measurement
    under the limit, down from the smallest one over it along the fitted slope. Always at
    least 1 or 5% below the batch over the limit."""
    ran = [r for r in rows if r["status"] in ("ok", "check", "out_of_memory")]
    over = [r for r in ran if r["status"] == "out_of_memory" or r["peak_bytes"] > limit]
    under = [r for r in ran if r["status"] != "out_of_memory" and r["peak_bytes"] <= limit]
    hi = min(over, key=lambda r: r["batch"])
    top = hi["batch"] - max(1, math.ceil(0.05 * hi["batch"]))
    lo = max((r for r in under if r["batch"] < hi["batch"]), key=lambda r: r["batch"],
             default=None)
    if lo is None:
        guess = top
        if hi["peak_bytes"] is not None:
            guess = math.floor(hi["batch"] - (hi["peak_bytes"] - limit) / slope)
    elif hi["peak_bytes"] is None or hi["peak_bytes"] <= lo["peak_bytes"]:
        guess = (lo["batch"] + hi["batch"]) // 2
    else:
        guess = math.floor(lo["batch"] + (limit - lo["peak_bytes"]) * (hi["batch"] - lo["batch"])
                           / (hi["peak_bytes"] - lo["peak_bytes"]))
    batch = min(guess, top)
    floor = lo["batch"] + 1 if lo else 1
    if batch < floor:
        return None if floor > top else floor
    return batch


def fit_line(points):
    """Least-squares (intercept, slope) of y = a + b x, or None with fewer than two distinct x."""
    points = [(float(x), float(y)) for x, y in points if y is not None]
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    slope = sxy / sxx
    return my - slope * mx, slope


def partial_result(sweep):
    """The fits of the rows of a sweep that did not finish; no prediction, no check."""
    ok = [r for r in sweep.rows if r["status"] == "ok"]
    return {"points": len(ok), "peak_fit": fit_line([(r["batch"], r["peak_bytes"]) for r in ok]),
            "time_fit": fit_line([(r["batch"], r["step_time_s"]) for r in ok]),
            "fitted": None, "checks": [], "largest": None, "note": "the sweep did not finish"}


def largest_measured(rows, limit):
    """The largest batch that ran with its peak under the limit, as (batch, peak), or None."""
    fitting = [r for r in rows if r["status"] in ("ok", "check") and r["peak_bytes"] <= limit]
    if not fitting:
        return None
    best = max(fitting, key=lambda r: (r["batch"], r["status"] == "check"))
    return best["batch"], best["peak_bytes"], best["status"]


# --- progress ----------------------------------------------------------------------------

class Progress:
    """A one-line bar redrawn with \\r on a terminal; plain lines otherwise."""

    WIDTH = 20

    def __init__(self, total, stream, tty):
        self.total = total
        self.done = 0
        self.stream = stream
        self.tty = tty
        self.start = time.monotonic()
        self.label = ""
        self.what = ""
        self.shown = False
        self.last = None

    def stage(self, label, what):
        self.label, self.what = label, what
        self.tick()

    def advance_done(self, done):
        self.done = done
        self.tick()

    def tick(self):
        if not self.tty:
            return
        filled = min(self.WIDTH, self.WIDTH * self.done // max(1, self.total))
        elapsed = int(time.monotonic() - self.start)
        text = (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.label} {self.what} "
                f"{elapsed // 60}:{elapsed % 60:02d}")
        columns = shutil.get_terminal_size((80, 24)).columns
        text = text[:columns - 1].ljust(columns - 1)
        if self.shown and text == self.last:
            return
        self.stream.write("\r" + text)
        self.stream.flush()
        self.shown, self.last = True, text

    def clear(self):
        if self.tty and self.shown:
            columns = shutil.get_terminal_size((80, 24)).columns
            self.stream.write("\r" + " " * (columns - 1) + "\r")
            self.stream.flush()
            self.shown = False

    def log(self, line):
        """A finished row: above the bar on a terminal, one line otherwise."""
        self.clear()
        self.stream.write(line + "\n")
        self.stream.flush()
        if self.label and not self.label.startswith("check"):
            self.done = min(self.total, self.done + 1)
        self.tick()


def row_line(row):
    if row["status"] in ("ok", "check"):
        kind = "check " if row["status"] == "check" else ""
        return (f"{kind}batch {row['batch']}: peak {fmt_bytes(row['peak_bytes'])}, step "
                f"{fmt_time(row['step_time_s'])}, {row['samples_per_s']:.1f} samples/s")
    if row["status"] == "out_of_memory":
        return f"batch {row['batch']}: out of memory ({row['note']})"
    return f"batch {row['batch']}: {row['note']}"


# --- outputs -----------------------------------------------------------------------------

def csv_bytes(rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in rows:
        w.writerow([r["batch"], _csv_num(r["peak_bytes"], int), _csv_num(r["step_time_s"]),
                    _csv_num(r["samples_per_s"]), r["status"]])
    return buf.getvalue().encode("utf-8")


def _csv_num(v, kind=float):
    if v is None:
        return ""
    return str(int(round(v))) if kind is int else f"{v:.6g}"


def json_bytes(args, sweep, result):
    limit = args.memory_limit
    peak_fit, time_fit = result["peak_fit"], result["time_fit"]
    largest = result["largest"]
    last_check = result["checks"][-1] if result["checks"] else None
    doc = {
        "format": FORMAT,
        "model": args.model, "tiny": args.tiny, "image_size": args.image_size,
        "seq_len": args.seq_len, "warmup": args.warmup, "runs": args.runs,
        "device": sweep.device, "graph_opt": os.path.abspath(args.graph_opt),
        "rows": [{k: r[k] for k in ("batch", "peak_bytes", "step_time_s", "samples_per_s",
                                     "status", "note", "max_rss_bytes",
                                     "simulated_peak_bytes", "num_nodes", "report_dir")}
                 for r in sweep.rows],
        "fit": {
            "points": result["points"],
            "peak_intercept_bytes": peak_fit[0] if peak_fit else None,
            "peak_slope_bytes_per_sample": peak_fit[1] if peak_fit else None,
            "time_intercept_s": time_fit[0] if time_fit else None,
            "time_slope_s_per_sample": time_fit[1] if time_fit else None,
        },
        "memory_limit_bytes": limit,
        "fitted_batch": result["fitted"],
        "checks": result["checks"],
        "check_peak_bytes": last_check["peak_bytes"] if last_check else None,
        "check_fits": last_check["fits"] if last_check else None,
        "largest_batch": largest[0] if largest else None,
        "largest_batch_peak_bytes": largest[1] if largest else None,
        "note": result["note"],
    }
    return (json.dumps(doc, indent=1) + "\n").encode("utf-8")


def plot_png(args, sweep, result):
    plt = make_report.import_pyplot()
    from matplotlib.ticker import MaxNLocator
    fig, (ax_mem, ax_time) = plt.subplots(1, 2, figsize=(12, 4.6))
    title = f"{args.model}{' (tiny)' if args.tiny else ''} training step"
    if sweep.device:
        title += f" on {sweep.device}"
    fig.suptitle(title)
    ok = [r for r in sweep.rows if r["status"] == "ok"]
    checks = [r for r in sweep.rows if r["status"] == "check"]
    ooms = [r for r in sweep.rows if r["status"] == "out_of_memory"]
    limit = args.memory_limit
    # x: every batch in the table, and the predicted one unless it is far beyond them (the
    # limit is then too, and a note says where instead of squashing the plot).
    batches = [r["batch"] for r in sweep.rows] or [1]
    fitted = result["fitted"]
    x_max = max(batches + ([fitted] if fitted and fitted <= 3 * max(batches) else [])) * 1.05
    fit = result["peak_fit"]
    measured = [r["peak_bytes"] for r in ok + checks]
    top = max(measured + ([fit[0] + fit[1] * x_max] if fit else []) + [1])
    limit_drawn = limit is not None and limit <= 1.5 * top
    if limit_drawn:
        top = max(top, limit)
    scale = make_report._byte_unit(top)

    # Peak memory against batch: the runs, the line, the limit, where memory ran out.
    ax = ax_mem
    if ok:
        ax.plot([r["batch"] for r in ok], [r["peak_bytes"] / scale for r in ok], "o",
                color=PLOT_COLORS["peak"], label="measured peak", zorder=3)
    if checks:
        ax.plot([r["batch"] for r in checks], [r["peak_bytes"] / scale for r in checks], "D",
                color=PLOT_COLORS["check"], label="check run", zorder=4)
    if fit:
        a, b = fit
        xs = [0, x_max]
        ax.plot(xs, [(a + b * x) / scale for x in xs], "--", color=PLOT_COLORS["peak"],
                linewidth=1, label=f"fit: {fmt_bytes(a)} + {fmt_bytes(b)}/sample")
    if limit is not None and not limit_drawn:
        where = f"; the line reaches it at batch {fitted}" if fitted else ""
        ax.text(0.98, 0.98, f"limit {fmt_bytes(limit)}: above the plot{where}",
                transform=ax.transAxes, ha="right", va="top", fontsize=9,
                color=PLOT_COLORS["limit"])
    if limit_drawn:
        ax.axhline(limit / scale, color=PLOT_COLORS["limit"], linestyle="--", linewidth=1.2,
                   label=f"limit {fmt_bytes(limit)}")
    largest = result["largest"]
    if largest:
        left = largest[0] < 0.6 * x_max  # the label on the side with room for it
        ax.annotate(f"largest under the limit: {largest[0]}", (largest[0], largest[1] / scale),
                    xytext=(10 if left else -10, -4), textcoords="offset points",
                    ha="left" if left else "right", va="top", fontsize=9)
    for r in ooms:
        ax.axvline(r["batch"], color=PLOT_COLORS["oom"], linestyle=":", linewidth=1.2)
        ax.text(r["batch"], 0.02, " out of memory", rotation=90, color=PLOT_COLORS["oom"],
                transform=ax.get_xaxis_transform(), ha="right", va="bottom", fontsize=9)
    ax.set_xlim(0, x_max)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top * 1.1 / scale)
    make_report._bytes_axis(ax.yaxis, scale)
    ax.set_xlabel("batch size")
    ax.set_ylabel("peak memory")
    ax.set_title("Peak memory")
    if ok or checks or limit_drawn:
        ax.legend(loc="lower right", fontsize=9)  # memory grows with the batch: empty there

    # Step time (left axis) and throughput (right axis) against batch.
    ax = ax_time
    timed = sorted(ok + checks, key=lambda r: r["batch"])
    if timed:
        xs = [r["batch"] for r in timed]
        l1 = ax.plot(xs, [r["step_time_s"] for r in timed], "o-", color=PLOT_COLORS["time"],
                     label="step time")
        ax.set_ylim(bottom=0)
        make_report._time_axis(ax.yaxis)
        ax.set_ylabel("step time (median)")
        ax2 = ax.twinx()
        ax2.spines["right"].set_visible(True)
        l2 = ax2.plot(xs, [r["samples_per_s"] for r in timed], "s--",
                      color=PLOT_COLORS["throughput"], label="throughput")
        ax2.set_ylim(bottom=0)
        ax2.set_ylabel("samples / s")
        ax.legend(l1 + l2, [l.get_label() for l in l1 + l2], loc="lower right", fontsize=9)
        ax.set_xlim(0, x_max)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        make_report._no_data(ax, "no batch ran")
    ax.set_xlabel("batch size")
    ax.set_title("Step time and throughput")
    fig.tight_layout()
    return make_report.figure_png(plt, fig)


def summary_text(args, sweep, result):
    lines = []
    header = ("batch", "peak", "step time", "samples/s", "status")
    table = [header]
    for r in sweep.rows:
        status = r["status"] if r["status"] != "skipped" else r["note"]
        table.append((str(r["batch"]), fmt_bytes(r["peak_bytes"]), fmt_time(r["step_time_s"]),
                      "-" if r["samples_per_s"] is None else f"{r['samples_per_s']:.1f}",
                      status))
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [row[0].rjust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:-1], widths[1:])]
        lines.append("  ".join(cells + [row[-1]]))
    fit = result["peak_fit"]
    if fit:
        lines.append(f"fit over {result['points']} batches: peak = {fmt_bytes(fit[0])} + "
                     f"{fmt_bytes(fit[1])} per sample; step time = "
                     f"{fmt_time(result['time_fit'][0])} + {fmt_time(result['time_fit'][1])} "
                     "per sample")
    limit = args.memory_limit
    if limit is not None:
        largest = result["largest"]
        under = f"largest batch under {fmt_bytes(limit)}"
        fitted = f"fitted {result['fitted']}" if result["fitted"] is not None else "no fit"
        if largest:
            how = "checked" if largest[2] == "check" else "measured in the sweep"
            lines.append(f"{under}: {largest[0]} ({fitted}, {how}: peak "
                         f"{fmt_bytes(largest[1])})")
        else:
            lines.append(f"{under}: none ({fitted})")
        if result["note"]:
            lines.append(f"note: {result['note']}")
    return "\n".join(lines)


def write_outputs(args, sweep, result):
    out = os.path.abspath(args.output)
    write_atomically(os.path.join(out, "sweep.csv"), csv_bytes(sweep.rows))
    write_atomically(os.path.join(out, "sweep.json"), json_bytes(args, sweep, result))
    write_atomically(os.path.join(out, "sweep.png"), plot_png(args, sweep, result))


def clean_exports(sweep, keep):
    """Removes what an export killed half-way left (the exporter's .export-* directory) and,
    unless keep, the exports this run made, and exports/ itself when that empties it."""
    try:
        names = os.listdir(sweep.exports_dir)
    except OSError:
        names = []
    for name in names:
        if name.startswith(".export-"):
            shutil.rmtree(os.path.join(sweep.exports_dir, name), ignore_errors=True)
    if not keep:
        remove_exports(sweep)


def remove_exports(sweep):
    for path in sweep.made_exports:
        for f in (path, path[:-len(".pt2")] + ".facts.json"):
            if os.path.exists(f):
                os.unlink(f)
    try:
        os.rmdir(sweep.exports_dir)  # only when nothing else is left there
    except OSError:
        pass


def main(argv=None):
    args = parse_args(argv)
    if not (os.path.isfile(args.graph_opt) and os.access(args.graph_opt, os.X_OK)):
        print(f"{PROG}: error: graph-opt not found at {os.path.abspath(args.graph_opt)} "
              "(build it with `make build`, or give --graph-opt PATH)", file=sys.stderr)
        return EXIT_FAILED
    try:
        os.makedirs(os.path.join(os.path.abspath(args.output), "exports"), exist_ok=True)
    except OSError as e:
        print(f"{PROG}: error: argument -o: cannot create {args.output}: {e.strerror}",
              file=sys.stderr)
        return EXIT_FAILED
    progress = Progress(len(args.batches), sys.stdout, sys.stdout.isatty())
    sweep = Sweep(args, progress)
    code = EXIT_OK
    result = None
    try:
        result = sweep.run()
    except SweepError as e:
        progress.clear()
        print(f"{PROG}: error: {e}", file=sys.stderr)
        code = EXIT_FAILED
    except KeyboardInterrupt:
        progress.clear()
        print(f"{PROG}: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    finally:
        progress.clear()
        clean_exports(sweep, args.keep_exports)
    if result is None:  # what ran before the failure is still worth having
        result = partial_result(sweep)
    try:
        write_outputs(args, sweep, result)
    except OSError as e:
        print(f"{PROG}: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return EXIT_FAILED
    except make_report.ProfileError as e:  # matplotlib missing
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    if code == EXIT_OK:
        print(summary_text(args, sweep, result))
        print(f"wrote {os.path.join(args.output, 'sweep.csv')}, sweep.json, sweep.png")
    return code


if __name__ == "__main__":
    sys.exit(main())
