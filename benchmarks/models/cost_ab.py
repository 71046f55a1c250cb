#!/usr/bin/env python3
"""graph-opt's partitioner under peak=, its plans priced by FLOPs against priced as Inductor runs
them (issue 53, item 3; docs/TorchCompile.md, "Which cost model plans inside torch.compile").

    cost_ab.py --models gpt2:default[,bert:default,...] [--fractions 0.9,0.7] [--steps 10]
               [--warmup 2] [--threads N] [-o DIR]

Per model (built as the harness builds it: peers.build, dropout off), in one process: plain
torch.compile (its measured peak U, the inputs' bytes I); then for each fraction F the bound
I + F x (U - I), and at it graph-opt's partitioner twice, `checkpoint{cost=flops}` and
`checkpoint{cost=inductor}` (both verify=True: each partition is checked against torch's own
on every output and gradient as it compiles). Each side's measured peak (peak_bound.py's
whole_peak) against the bound; the two steps timed interleaved (A B, B A, ... --steps pairs
after --warmup steps each) and the ratio of the medians, inductor's over flops', with a 95%
bootstrap interval: "faster" or "slower" only where it excludes 1. Also each side's planning
seconds (stats()["planning_seconds"]).

Output: DIR/cost_ab.json and DIR/cost_ab.md. Exit 0 when written, 1 when a point went over its
bound, 2 on bad arguments.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers  # noqa: E402
from peak_bound import (MiB, compiled, fresh_compiles, graph_opt_point, interleaved,  # noqa: E402
                        ratio_interval, timed, verdict, whole_peak, write_files)

PIPELINE = "repeat{{cse,canonicalize,dce}},checkpoint{{activations=30%,cost={cost}}}"
COSTS = ("flops", "inductor")


def side(step, args, bound, warmup, cost):
    run, module, row = graph_opt_point(step, args, bound, warmup, PIPELINE.format(cost=cost))
    if run is not None:
        row["peak"] = whole_peak(run, module, args)
    return run, module, row


def run_model(spec, fractions, steps, warmup):
    import torch._dynamo

    step, args, _ = peers.build(spec, None, dropout=False)
    held = peers.held_bytes(step, args)
    torch._dynamo.reset()
    run, module, _ = compiled(step, args, warmup=warmup)
    unbudgeted = whole_peak(run, module, args)
    plain = statistics.median(timed(run, module) for _ in range(steps))
    del run, module
    print(f"{spec}: inputs {held / MiB:.1f} MiB, compile peak {unbudgeted / MiB:.1f} MiB, "
          f"step {plain * 1e3:.1f} ms", flush=True)
    result = {"model": spec, "input_bytes": held, "compile_peak": unbudgeted,
              "compile_median_seconds": plain, "points": []}
    for fraction in fractions:
        bound = int(held + fraction * (unbudgeted - held))
        point = {"fraction": fraction, "bound": bound}
        runs = {}
        for cost in COSTS:
            torch._dynamo.reset()
            r, m, row = side(step, args, bound, warmup, cost)
            point[cost] = row
            if r is not None:
                runs[cost] = (r, m)
        line = f"  {fraction:g} of the way, bound {bound / MiB:.1f} MiB:"
        for cost in COSTS:
            row = point[cost]
            line += (f" {cost} {row['peak'] / MiB:.1f} ({row['peak'] / bound:.3f}, planned in "
                     f"{row['planning_seconds']:.1f} s)" if "peak" in row
                     else f" {cost} refused: {row['error']}")
        if len(runs) == 2:
            tf, ti = interleaved(runs["flops"], runs["inductor"], steps)
            r, lo, hi = ratio_interval(tf, ti)
            point.update(flops_median=statistics.median(tf),
                         inductor_median=statistics.median(ti), time_ratio=r,
                         interval=[lo, hi], verdict=verdict(r, lo, hi))
            line += f"; inductor/flops time x{r:.3f} [{lo:.3f}, {hi:.3f}] {point['verdict']}"
        print(line, flush=True)
        result["points"].append(point)
        del runs
    return result


def markdown(results):
    lines = ["| model | of the way | bound (MiB) | cost=flops peak (MiB) | cost=inductor peak "
             "(MiB) | planning s (flops / inductor) | inductor / flops time [95%] | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for p in r["points"]:
            f, i = p["flops"], p["inductor"]
            cell = lambda row: f"{row['peak'] / MiB:.1f}" if "peak" in row else \
                f"refused: {row['error']}"
            plan = " / ".join(f"{row['planning_seconds']:.1f}" if "planning_seconds" in row
                              else "-" for row in (f, i))
            timing = (f"{p['time_ratio']:.3f} [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]"
                      if "time_ratio" in p else "")
            lines.append(f"| {r['model']} | {p['fraction']:g} | {p['bound'] / MiB:.1f} | "
                         f"{cell(f)} | {cell(i)} | {plan} | {timing} | "
                         f"{p.get('verdict', '')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="cost_ab.py", description=__doc__.split("\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--fractions", default="0.9,0.7")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int)
    parser.add_argument("-o", "--out", default="build/bench/cost_ab")
    a = parser.parse_args(argv)
    try:
        fractions = [float(f) for f in a.fractions.split(",") if f]
    except ValueError as e:
        parser.error(f"--fractions: {e}")
    if a.steps < 2:
        parser.error("--steps: at least 2")
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        parser.error("--fractions: each in (0, 1]")
    fresh_compiles(a.threads, a.out)
    results = [run_model(spec, fractions, a.steps, a.warmup) for spec in a.models.split(",")]
    write_files(a.out, {"cost_ab.json": json.dumps(results, indent=1),
                        "cost_ab.md": markdown(results)})
    print(markdown(results))
    over = [(r["model"], p["fraction"], c) for r in results for p in r["points"]
            for c in COSTS if p[c].get("peak", 0) > p["bound"]]
    if over:
        print(f"over the bound: {over}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
