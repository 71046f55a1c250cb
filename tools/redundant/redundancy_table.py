#!/usr/bin/env python3
"""Runs graph-opt's redundant-op elimination on models and tabulates what it did.

    redundancy_table.py MODEL.pt2 [MODEL.pt2 ...] [--pipeline cse,canonicalize,dce]
                        [--graph-opt PATH] [--steps N] [--rounds K] [--check]
                        [--markdown FILE] [--csv FILE]

For each model, one graph-opt run of `liveness,PIPELINE,liveness --summary --pass-stats
--verify --bitwise` gives: nodes before/after, cse merges (and how many of them cross the
forward/backward boundary), canonicalize folds, dead nodes removed, the simulated peak
before/after (the two liveness passes) and whether the rewritten graph computes bitwise what the
input did (dropout included: both run with the same seed). A second run with
`cse{across-phases=true}` in place of `cse` gives the peak that the memory rule saved: merges it
refused and the peak they would have cost.

With --steps N (> 0), the step time before and after: K rounds (--rounds, default 3) that each
run the input graph and the rewritten graph for N steps (`graph-opt --run N`), alternating so that
the machine's drift touches both alike; a graph's time is the median over all its steps but the
first of each run. The ratio after/before is printed from these medians, measured in this one
invocation.

--check: exit 1 unless every model verifies bitwise and no simulated peak rose. Exit 2: bad
arguments, a missing model or graph-opt, or a graph-opt run that failed (its message is quoted).
Tables go to stdout (markdown) and, with --markdown/--csv, to files written atomically.
"""
import argparse
import csv
import io
import os
import re
import shutil
import statistics
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_GRAPH_OPT = os.path.join(REPO_ROOT, "build", "bin", "graph-opt")
sys.path.insert(0, os.path.join(REPO_ROOT, "tools", "report"))
from make_report import write_atomically  # noqa: E402  (the project's atomic write)

COLUMNS = [
    "model", "nodes_before", "nodes_after", "merges", "merges_across_phases", "folds",
    "dead_removed", "peak_before", "peak_after", "refused_for_memory", "peak_if_merged_across",
    "bitwise", "step_ms_before", "step_ms_after", "step_ratio",
]


class ToolError(Exception):
    pass


def run_graph_opt(graph_opt, args):
    proc = subprocess.run([graph_opt] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    return proc.returncode, proc.stdout + proc.stderr


def stats_of(output):
    """(pass, name) -> [values in order] from --pass-stats output."""
    stats = {}
    for m in re.finditer(r"^\s+(-?\d+)  ([\w-]+) - (.+)$", output, re.MULTILINE):
        stats.setdefault((m.group(2), m.group(3).strip()), []).append(int(m.group(1)))
    return stats


def total(stats, pass_name, prefix):
    """The sum of the pass's counters whose names start with `prefix`."""
    return sum(sum(v) for (p, n), v in stats.items() if p == pass_name and n.startswith(prefix))


def exact(stats, pass_name, name):
    return sum(stats.get((pass_name, name), []))


def node_counts(output):
    return [int(n) for n in re.findall(r"^graph @\S+: (\d+) nodes", output, re.MULTILINE)]


def analyse(graph_opt, model, pipeline):
    code, before = run_graph_opt(graph_opt, [model, "--summary"])
    if code != 0:
        raise ToolError(f"{model}: graph-opt --summary failed:\n{before}")
    args = [model, "--summary", f"-passes=liveness,{pipeline},liveness", "--pass-stats",
            "--verify", "--bitwise"]
    code, after = run_graph_opt(graph_opt, args)
    if code not in (0, 1):
        raise ToolError(f"{model}: graph-opt {' '.join(args[1:])} failed:\n{after}")
    stats = stats_of(after)
    peaks = stats.get(("liveness", "peak bytes (simulated)"), [])
    if len(peaks) != 2:
        raise ToolError(f"{model}: expected two liveness peaks in graph-opt's statistics:\n{after}")
    row = {
        "model": os.path.basename(model).removesuffix(".pt2"),
        "nodes_before": node_counts(before)[0],
        "nodes_after": node_counts(after)[0],
        "merges": exact(stats, "cse", "merged"),  # across phases included
        "merges_across_phases": exact(stats, "cse", "merged across phases"),
        "folds": total(stats, "canonicalize", "folded"),
        "dead_removed": exact(stats, "dce", "removed nodes"),
        "peak_before": peaks[0],
        "peak_after": peaks[1],
        "refused_for_memory": total(stats, "cse", "refused: would raise the peak"),
        "bitwise": "PASS" if code == 0 and "verification PASSED" in after else "FAIL",
    }
    if "cse" in pipeline.split(","):
        across = pipeline.replace("cse", "cse{across-phases=true}")
        code, out = run_graph_opt(graph_opt, [model, f"-passes={across},liveness", "--pass-stats"])
        if code != 0:
            raise ToolError(f"{model}: graph-opt -passes={across} failed:\n{out}")
        row["peak_if_merged_across"] = stats_of(out)[("liveness", "peak bytes (simulated)")][-1]
    return row


def step_times(graph_opt, model, passes, steps):
    args = [model, "--run", str(steps)] + ([f"-passes={passes}"] if passes else [])
    code, out = run_graph_opt(graph_opt, args)
    if code != 0:
        raise ToolError(f"{model}: graph-opt {' '.join(args[1:])} failed:\n{out}")
    times = [float(t) for t in re.findall(r"^\s+step \d+: ([\d.]+) ms", out, re.MULTILINE)]
    return times[1:] if len(times) > 1 else times


def time_model(graph_opt, model, pipeline, steps, rounds, row):
    before, after = [], []
    for _ in range(rounds):
        before += step_times(graph_opt, model, "", steps)
        after += step_times(graph_opt, model, pipeline, steps)
    row["step_ms_before"] = round(statistics.median(before), 3)
    row["step_ms_after"] = round(statistics.median(after), 3)
    row["step_ratio"] = round(row["step_ms_after"] / row["step_ms_before"], 3)


def markdown(rows):
    present = [c for c in COLUMNS if any(c in r for r in rows)]
    lines = ["| " + " | ".join(present) + " |", "|" + "---|" * len(present)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in present) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help=".pt2, .pt or .gir inputs")
    parser.add_argument("--pipeline", default="cse,canonicalize,dce")
    parser.add_argument("--graph-opt", default=DEFAULT_GRAPH_OPT,
                        help="graph-opt binary: a path, or a name looked up on PATH")
    parser.add_argument("--steps", type=int, default=0, help="steps per timed run (0: no timing)")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each graph")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless all verify bitwise and no peak rose")
    parser.add_argument("--markdown", help="also write the table here")
    parser.add_argument("--csv", help="also write the rows here")
    args = parser.parse_args()
    if os.sep not in args.graph_opt:  # a bare name: look it up on PATH
        args.graph_opt = shutil.which(args.graph_opt) or args.graph_opt
    if not os.access(args.graph_opt, os.X_OK):
        print(f"redundancy_table: error: no graph-opt at {args.graph_opt}", file=sys.stderr)
        return 2
    if args.steps < 0 or args.rounds < 1:
        print("redundancy_table: error: --steps must be >= 0 and --rounds >= 1", file=sys.stderr)
        return 2
    rows = []
    try:
        for model in args.models:
            if not os.path.isfile(model):
                raise ToolError(f"{model}: no such file")
            row = analyse(args.graph_opt, model, args.pipeline)
            if args.steps:
                time_model(args.graph_opt, model, args.pipeline, args.steps, args.rounds, row)
            rows.append(row)
            print(f"{row['model']}: {row['nodes_before']} -> {row['nodes_after']} nodes, "
                  f"verify {row['bitwise']}", file=sys.stderr, flush=True)
    except ToolError as e:
        print(f"redundancy_table: error: {e}", file=sys.stderr)
        return 2
    table = markdown(rows)
    sys.stdout.write(table)
    if args.markdown:
        write_atomically(args.markdown, table.encode())
    if args.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        write_atomically(args.csv, buf.getvalue().encode())
    if args.check:
        bad = [r["model"] for r in rows
               if r["bitwise"] != "PASS" or r["peak_after"] > r["peak_before"]]
        if bad:
            print(f"redundancy_table: check failed (verification or peak) for: {', '.join(bad)}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
