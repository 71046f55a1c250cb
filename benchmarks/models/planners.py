#!/usr/bin/env python3
"""checkpoint's planners side by side on graph-opt's executor (docs/Checkpointing.md).

    planners.py [--models resnet50:default,...] [--budgets 50,30,10,5]
                [--planners torch,greedy,greedy@torch,structured,milp] [-o DIR] [harness options]

For each model and budget B (a share of the activations):
  - torch:   checkpoint{planner=torch,activations=B%}, torch.compile's own partitioner;
  - greedy:  checkpoint{activations=B%}, graph-opt's default planner at the same B;
  - greedy@torch: checkpoint{activations=S}, S the bytes torch's plan saves (graph-opt's
    measure), so the two planners are compared at the same saved activations;
  - structured: checkpoint{planner=structured,activations=B%}, the plan that follows the
    model's blocks;
  - milp: checkpoint{planner=milp,activations=B%,time-limit=60}, the best plan found with
    its proven gap to the optimum (the relaxation's bound);
(--planners chooses among them; greedy@torch needs torch)
each after repeat{cse,canonicalize,dce}, verified bitwise and timed alternately with the
original graph by graph-opt --benchmark (the harness's graph-opt rows), and per model the
harness's peers: eager PyTorch and per-block torch.utils.checkpoint. Prints the table
(saved share and extra time predicted, measured backward start and peak, step time,
planning time; results.csv and results.json rewritten after every row, so a run stopped
part way keeps what it measured) and
writes results.csv, results.json and a Pareto plot per model (pareto_<model>.png: every
planner's rows and the peers, step time against peak, backward start and saved activations)
into DIR (default build/bench/planners).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PREFIX = "repeat{cse,canonicalize,dce},"
PLANNERS = ("torch", "greedy", "greedy@torch", "structured", "milp")


def parse_planners(text):
    chosen = [p for p in text.split(",") if p]
    unknown = [p for p in chosen if p not in PLANNERS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown planner {', '.join(unknown) or '(none given)'}: "
            f"choose among {', '.join(PLANNERS)}")
    if "greedy@torch" in chosen and "torch" not in chosen:
        raise argparse.ArgumentTypeError("greedy@torch needs torch's plan: add torch")
    return chosen


def main(argv=None):
    parser = argparse.ArgumentParser(prog="planners.py", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet50:default,bert:default,gpt2:default",
                        type=harness.parse_models)
    parser.add_argument("--budgets", default="50,30,10,5")
    parser.add_argument("--planners", default=",".join(PLANNERS), type=parse_planners)
    parser.add_argument("--peers", default="eager,checkpoint", type=harness.parse_peers)
    parser.add_argument("--runs", type=harness.positive_int(1), default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--peer-min-time", type=float, default=harness.DEFAULT_PEER_MIN_TIME)
    parser.add_argument("--graph-opt", default=harness.DEFAULT_GRAPH_OPT)
    parser.add_argument("--zoo", default=harness.DEFAULT_ZOO)
    parser.add_argument("--exports", default=harness.DEFAULT_EXPORTS)
    parser.add_argument("-o", "--output", default=os.path.join(harness.REPO_ROOT, "build",
                                                               "bench", "planners"))
    args = parser.parse_args(argv)
    args.bitwise, args.time_failed = True, False
    if args.threads is None:
        args.threads = harness.default_threads()
    budgets = [int(b) for b in args.budgets.split(",")]
    rows = []

    def run(model, path, pipeline, label, budget):
        try:
            row, data = harness.benchmark(model, path, PREFIX + pipeline, args)
        except harness.BenchError as e:  # a budget the planner cannot meet: a row saying so
            row, data = harness.empty_row(model, harness.GRAPH_OPT, PREFIX + pipeline,
                                          harness.ORIGINAL_GRAPH, "ERROR",
                                          str(e).splitlines()[-1]), None
        report = (data or {}).get("checkpoint") or {}
        if row["verification"] != "ERROR":
            row["note"] = f"B={budget}%: {pipeline}"
        row["config"] = label
        row["saved_share"] = (report["predicted_saved_activation_bytes"]
                              / report["unoptimised_saved_activation_bytes"]) if report else None
        # The planner's own prediction (its cost model's extra time, a share of the
        # unoptimised step): steadier than the measured step on a busy machine.
        row["predicted_extra_share"] = (report["predicted_extra_seconds"]
                                        / report["unoptimised_step_seconds"]
                                        if report.get("unoptimised_step_seconds") else None)
        rows.append(row)
        print(harness._progress(model, row), flush=True)
        save()
        return report

    def save():
        # After every row, so that a run stopped part way keeps what it measured.
        os.makedirs(args.output, exist_ok=True)
        harness.write_atomically(os.path.join(args.output, "results.csv"), harness.csv_bytes(rows))
        harness.write_atomically(os.path.join(args.output, "results.json"),
                                 (json.dumps({"commit": harness.git_commit(),
                                              "threads": args.threads, "runs": args.runs,
                                              "rows": rows}, indent=2) + "\n").encode())

    try:
        for model in args.models:
            path = harness.model_path(model, args)
            for b in budgets:
                torch_plan = None
                if "torch" in args.planners:
                    torch_plan = run(model, path,
                                     f"checkpoint{{planner=torch,activations={b}%}}",
                                     f"torch@{b}%", b)
                if "greedy" in args.planners:
                    run(model, path, f"checkpoint{{activations={b}%}}", f"greedy@{b}%", b)
                if "structured" in args.planners:
                    run(model, path, f"checkpoint{{planner=structured,activations={b}%}}",
                        f"structured@{b}%", b)
                if "milp" in args.planners:
                    run(model, path, f"checkpoint{{planner=milp,activations={b}%,time-limit=60}}",
                        f"milp@{b}%", b)
                if torch_plan and "greedy@torch" in args.planners:
                    saved = torch_plan["predicted_saved_activation_bytes"]
                    run(model, path, f"checkpoint{{activations={saved}}}",
                        f"greedy@torch{b}%", b)
            baselines = {}
            for config in args.peers:
                data = harness.run_peer(model, path, config, args)
                baselines[config] = data
                row = harness.peer_row(model, config, data, baselines)
                rows.append(row)
                print(harness._progress(model, row), flush=True)
                save()
    except harness.BenchError as e:
        print(f"planners.py: error: {e}", file=sys.stderr)
        return harness.EXIT_BAD
    save()
    plt = harness.make_report.import_pyplot()
    for model in args.models:
        name = "pareto_" + re.sub(r"[^A-Za-z0-9_.-]", "_", model) + ".png"
        harness.plot_pareto(plt, model, [r for r in rows if r["model"] == model],
                            os.path.join(args.output, name))
    print()
    print(planner_table(rows))
    return 0


def planner_table(rows):
    header = ("model", "config", "saved (predicted)", "extra (predicted)", "backward start",
              "peak", "time", "planned in", "verification")
    lines = [header]
    for r in rows:
        share, extra = r.get("saved_share"), r.get("predicted_extra_share")
        lines.append((r["model"], r["config"] if r["system"] != harness.PEER else
                      f"{r['config']} (vs eager)",
                      "-" if share is None else f"{share:.3f}",
                      "-" if extra is None else f"+{100 * extra:.1f}%",
                      harness._fmt_ratio(r.get("backward_start_ratio")),
                      harness._fmt_ratio(r.get("peak_ratio")), harness._fmt_ratio(r["time_ratio"]),
                      "-" if r.get("planning_s") is None else f"{r['planning_s']:.2f} s",
                      r["verification"] or "-"))
    return harness._format_table(lines)


if __name__ == "__main__":
    sys.exit(main())
