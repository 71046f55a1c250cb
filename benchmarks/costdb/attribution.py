#!/usr/bin/env python3
"""The operator cost database's goal, measured (docs/CostDB.md): every model's step predicted
leave-one-model-out and set against its measured step.

1. One database: the bundled sweeps (tools/costdb/sweeps) and every model's training graph,
   each measured under its own source name ("tiny:bert" for the zoo's, "default:bert" for a
   default-size export).
2. Per model: `graph-opt-costdb attribute --exclude-source <its own source>`: the database
   holds no measurement taken only from that model's graph, only other models' and the
   sweeps'. With `--leave-out family`, every source of the model's family (FAMILIES: every
   ResNet; a model's tiny and default-size graphs) is left out, as a new model of a family
   the database never saw would be predicted. The step is measured by the profile analysis
   (median of --runs).
3. A table (printed, and attribution.csv), attribution.json, and a plot of predicted against
   measured time per operator class (predicted_vs_measured.png, matplotlib). The figure that
   judges it: "accurate", the share of the measured node time predicted within 25% node by
   node, beside the predicted/measured step and "attributed" (nodes with any prediction).

    python benchmarks/costdb/attribution.py --costdb build/bin/graph-opt-costdb \
        --zoo build/zoo --exports build/bench/exports -o build/bench/costdb
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO_MODELS = ["mlp", "cnn", "resnet18", "resnet50", "resnet152", "bert", "gpt2", "llama", "t5"]
DEFAULT_MODELS = ["resnet50", "bert", "gpt2"]
# Architectures that share their operators' shapes and kinds; any other model is its own.
FAMILIES = {"resnet18": "resnet", "resnet50": "resnet", "resnet152": "resnet"}


def family(source):
    """'tiny:resnet18' -> 'resnet': the architecture, whatever the size."""
    name = source.split(":", 1)[1]
    return FAMILIES.get(name, name)


def run(cmd, log):
    """Runs a command, its output to `log` and echoed; fails loudly."""
    start = time.time()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write("$ " + " ".join(cmd) + "\n" + out.stdout + "\n")
    log.flush()
    if out.returncode not in (0, 1):  # 1: some configurations failed, the rest stored
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-3000:]}")
    return out.stdout, time.time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--costdb", default=os.path.join(REPO, "build", "bin", "graph-opt-costdb"))
    ap.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    ap.add_argument("--exports", default=os.path.join(REPO, "build", "bench", "exports"))
    ap.add_argument("--zoo-models", default=",".join(ZOO_MODELS))
    ap.add_argument("--default-models", default=",".join(DEFAULT_MODELS),
                    help="default-size exports <name>-train.pt2 in --exports ('' for none)")
    ap.add_argument("--sweeps", default=os.path.join(REPO, "tools", "costdb", "sweeps"))
    ap.add_argument("--min-time", default="0.02")
    ap.add_argument("--runs", default="5", help="measured runs of each model's profile")
    ap.add_argument("--keep", action="store_true", help="add to an existing database")
    ap.add_argument("--neighbours", action="store_true",
                    help="measure every model's configurations at nearby sizes too "
                         "(graph-opt-costdb measure --neighbours)")
    ap.add_argument("--in-step", action="store_true",
                    help="record every model's configurations' times inside its step too "
                         "(graph-opt-costdb measure --in-step): the other models' in-step "
                         "times then calibrate each prediction")
    ap.add_argument("--leave-out", choices=["model", "family"], default="model",
                    help="what each model is predicted without: its own graph's measurements, "
                         "or every graph of its family's")
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "build", "bench", "costdb"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    db = os.path.join(args.out, "costs.sqlite")
    if not args.keep and os.path.exists(db):
        os.remove(db)
    log = open(os.path.join(args.out, "attribution.log"), "w")

    models = []  # (source, path)
    for m in filter(None, args.zoo_models.split(",")):
        models.append((f"tiny:{m}", os.path.join(args.zoo, f"{m}-train.pt2")))
    for m in filter(None, args.default_models.split(",")):
        models.append((f"default:{m}", os.path.join(args.exports, f"{m}-train.pt2")))
    for source, path in models:
        if os.path.exists(path):
            continue
        if not source.startswith("default:"):
            sys.exit(f"{path}: missing (make builds the zoo)")
        # As the model harness does (benchmarks/models/harness.py): the exporter at default size.
        print(f"{source}: exporting the training step at default size into {path}", flush=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        exporter = os.path.join(REPO, "tools", "export", "export_model.py")
        run([sys.executable, exporter, "--model", source.split(":", 1)[1], "--mode", "train", "-q",
             "-o", path], log)

    measure = [args.costdb, "measure", "--db", db, "--min-time", args.min_time]
    sweeps = sorted(os.path.join(args.sweeps, f) for f in os.listdir(args.sweeps) if f.endswith(".json"))
    out, seconds = run(measure + sweeps, log)
    print(f"sweeps: {seconds:.0f} s")
    measured = {}
    for source, path in models:
        out, seconds = run(measure + ["--source", source, path] +
                           (["--neighbours"] if args.neighbours else []) +
                           (["--in-step", "--runs", args.runs] if args.in_step else []), log)
        line = [l for l in out.splitlines() if l.startswith(path)]
        measured[source] = (line[0].split(": ", 1)[1] if line else "", seconds)
        print(f"{source}: {measured[source][0]} ({seconds:.0f} s)")

    rows = []
    for source, path in models:
        js = os.path.join(args.out, f"attribution-{source.replace(':', '-')}.json")
        cs = os.path.join(args.out, f"attribution-{source.replace(':', '-')}.csv")
        left_out = [source] if args.leave_out == "model" else \
            [s for s, _ in models if family(s) == family(source)]
        # A model's neighbours (measure --neighbours) are its shapes too.
        excludes = [a for s in left_out for t in (s, s + ":neighbours") for a in ("--exclude-source", t)]
        out, seconds = run([args.costdb, "attribute", "--db", db, *excludes,
                            "--runs", args.runs, "--json", js, "--csv", cs, path], log)
        d = json.load(open(js))
        d["source"] = source
        d["left_out"] = left_out
        rows.append(d)
        ratio = d["predicted_step_seconds"] / d["measured_step_seconds"]
        print(f"{source}: predicted {d['predicted_step_seconds'] * 1e3:.2f} ms, measured "
              f"{d['measured_step_seconds'] * 1e3:.2f} ms ({ratio:.3f}), accurate "
              f"{100 * d['accurate_share']:.1f}%, attributed "
              f"{100 * d['attributed_share']:.1f}%, exact {100 * d['exact_share']:.1f}% "
              f"(without {', '.join(left_out)}; {seconds:.0f} s)")

    counts = subprocess.run([args.costdb, "show", "--db", db], stdout=subprocess.PIPE, text=True).stdout
    print(counts.strip())
    with open(os.path.join(args.out, "attribution.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "nodes", "predicted_nodes", "exact_nodes", "measurements_used",
                     "predicted_step_s", "measured_step_s", "predicted_over_measured",
                     "accurate_share", "attributed_share", "exact_share", "left_out"])
        for d in rows:
            w.writerow([d["source"], d["nodes"], d["predicted_nodes"], d["exact_nodes"],
                        d["measurements"], d["predicted_step_seconds"], d["measured_step_seconds"],
                        d["predicted_step_seconds"] / d["measured_step_seconds"],
                        d["accurate_share"], d["attributed_share"], d["exact_share"],
                        " ".join(d["left_out"])])
    json.dump({"database": counts.strip(), "leave_out": args.leave_out, "models": rows},
              open(os.path.join(args.out, "attribution.json"), "w"), indent=1)
    within = f"within {100 * rows[0]['tolerance']:.0f}%" if rows else ""
    print(f"leave-one-{args.leave_out}-out")
    print(f"| model | nodes | predicted (exact) | predicted step | measured step | predicted/measured "
          f"| {within} | attributed |")
    print("|---|---|---|---|---|---|---|---|")
    for d in rows:
        print(f"| {d['source']} | {d['nodes']} | {d['predicted_nodes']} ({d['exact_nodes']}) | "
              f"{d['predicted_step_seconds'] * 1e3:.2f} ms | {d['measured_step_seconds'] * 1e3:.2f} ms | "
              f"{d['predicted_step_seconds'] / d['measured_step_seconds']:.3f} | "
              f"{100 * d['accurate_share']:.1f}% | {100 * d['attributed_share']:.1f}% |")
    met = sum(abs(d["predicted_step_seconds"] / d["measured_step_seconds"] - 1) <= 0.10 for d in rows)
    accurate = sum(d["accurate_share"] >= 0.9 for d in rows)
    print(f"step within 10%: {met} of {len(rows)} models; 90% of the node time {within}: "
          f"{accurate} of {len(rows)}")
    plot(rows, os.path.join(args.out, "predicted_vs_measured.png"), args.leave_out)


def plot(rows, path, leave_out):
    """Predicted against measured time per operator class (summed over a model's nodes)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 6))
    lo, hi = 1e9, 0
    for d in rows:
        xs, ys = [], []
        for op in d["operators"]:
            if op["measured_seconds"] and op["predicted_seconds"] > 0:
                xs.append(op["measured_seconds"] * 1e3)
                ys.append(op["predicted_seconds"] * 1e3)
        if xs:
            ax.scatter(xs, ys, s=12, label=d["source"], alpha=0.7)
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured per step (ms)")
    ax.set_ylabel(f"predicted per step (ms), leave-one-{leave_out}-out")
    ax.set_title("Operator classes: predicted vs measured")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    os.replace(path + ".tmp.png", path)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
