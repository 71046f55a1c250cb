#!/usr/bin/env python3
"""The cost database on models it has never seen (docs/CostDB.md, issue 54's targets).

Five models outside the zoo, built here from torchvision and transformers configurations with
random weights (nothing downloaded), their training steps exported with
graph_opt.export_training_step: a MobileNetV2, an EfficientNet-B0, a ViT-B/16, a
DistilBERT-style encoder and a recurrent (LSTM) language model. None of them is a source of
the database (--db, e.g. the one `make bench-costdb` builds from the sweeps and the zoo), so
each is predicted from other models' and the sweeps' measurements alone:

    graph-opt-costdb attribute --db DB --runs R model.pt2

Each model is attributed --repeat times (default 2), in rounds over the models, and calibrated
to the machine's speed now (attribute's --calibrate). The figures per model, the median over
the runs: the share of its measured node time predicted within 25% node by node ("accurate";
goal 90%), predicted/measured step (goal within 10%), how its nodes were predicted (exact,
family, operator, learned, in-step, missing), and the run-to-run bound: how much of one run's
node time the other run's own measurements match within 25% (no prediction can be expected to
beat it). A table (printed, unseen.csv) and unseen.json in -o.

    python benchmarks/costdb/unseen.py --db build/bench/costdb/costs.sqlite -o build/bench/costdb-unseen
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "build", "python"))


def build(name):
    """(model, loss_fn, example inputs) of one unseen model, random weights, seed 0."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    if name in ("mobilenet", "efficientnet", "vit"):
        import torchvision
        factory = {"mobilenet": torchvision.models.mobilenet_v2,
                   "efficientnet": torchvision.models.efficientnet_b0,
                   "vit": torchvision.models.vit_b_16}[name]
        batch = {"mobilenet": 8, "efficientnet": 4, "vit": 2}[name]
        model = factory(weights=None, num_classes=1000)
        x = torch.randn(batch, 3, 224, 224)
        y = torch.randint(0, 1000, (batch,))
        return model, (lambda m, x, y: F.cross_entropy(m(x), y)), (x, y)
    if name == "distilbert":
        from transformers import DistilBertConfig, DistilBertForSequenceClassification
        config = DistilBertConfig(num_labels=2, attn_implementation="sdpa")
        model = DistilBertForSequenceClassification(config)
        ids = torch.randint(0, config.vocab_size, (8, 64))
        labels = torch.randint(0, 2, (8,))
        return model, (lambda m, ids, labels: F.cross_entropy(m(input_ids=ids).logits, labels)), \
            (ids, labels)
    if name == "lstm":
        class LstmLM(torch.nn.Module):
            def __init__(self, vocab=10000, dim=256, hidden=512):
                super().__init__()
                self.embed = torch.nn.Embedding(vocab, dim)
                self.lstm = torch.nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
                self.head = torch.nn.Linear(hidden, vocab)

            def forward(self, ids):
                out, _ = self.lstm(self.embed(ids))
                return self.head(out)
        model = LstmLM()
        ids = torch.randint(0, 10000, (16, 64))
        targets = torch.randint(0, 10000, (16, 64))
        return model, (lambda m, ids, t: F.cross_entropy(m(ids).flatten(0, 1), t.flatten())), \
            (ids, targets)
    raise SystemExit(f"unknown model {name}")


def export(name, path):
    import graph_opt
    model, loss_fn, inputs = build(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    graph_opt.export_training_step(model, loss_fn, inputs, path=path)


def measured_nodes(csv_path):
    """Each node's measured seconds in an attribution CSV."""
    return {r["node"]: float(r["measured_s"]) for r in csv.DictReader(open(csv_path))
            if r["measured_s"] and float(r["measured_s"]) > 0}


def run_to_run(a, b, tolerance=0.25):
    """What the noise allows: the share of run a's node time that run b's own measurements
    would predict within the tolerance, node by node, after b is scaled by the two runs'
    drift (the median of b/a weighted by a's time). No prediction from other measurements
    can be expected to do better than one run does of the next."""
    pairs = sorted((b[k] / v, v) for k, v in a.items() if k in b)
    total = sum(w for _, w in pairs)
    if not total:
        return None
    seen, drift = 0.0, 1.0
    for ratio, w in pairs:
        seen += w
        if seen >= total / 2:
            drift = ratio
            break
    near = sum(v for k, v in a.items() if k in b and abs(b[k] / drift / v - 1) <= tolerance)
    return near / sum(a.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a cost database none of these models is in")
    ap.add_argument("--costdb", default=os.path.join(REPO, "build", "bin", "graph-opt-costdb"))
    ap.add_argument("--models", default="mobilenet,efficientnet,vit,distilbert,lstm")
    ap.add_argument("--runs", default="5", help="measured runs of each model's profile")
    ap.add_argument("--repeat", type=int, default=2,
                    help="attribute each model this many times, in rounds over the models "
                         "(2 or more also gives the run-to-run bound)")
    ap.add_argument("--calibrate", default="32", help="attribute's --calibrate (0: off)")
    ap.add_argument("--threads", default="2")
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "build", "bench", "costdb-unseen"))
    args = ap.parse_args()
    if not os.path.exists(args.db):
        sys.exit(f"{args.db}: no such database (make bench-costdb builds one)")
    if args.repeat < 1:
        sys.exit(f"--repeat must be at least 1, not {args.repeat}")
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "unseen.log"), "w")
    names = list(filter(None, args.models.split(",")))
    for name in names:
        path = os.path.join(args.out, "exports", f"{name}-train.pt2")
        if not os.path.exists(path):
            start = time.time()
            export(name, path)
            print(f"{name}: exported in {time.time() - start:.0f} s", flush=True)
    runs = {name: [] for name in names}
    for r in range(args.repeat):
        for name in names:
            path = os.path.join(args.out, "exports", f"{name}-train.pt2")
            js = os.path.join(args.out, f"{name}-r{r}.json")
            cs = os.path.join(args.out, f"{name}-r{r}.csv")
            cmd = [args.costdb, "attribute", "--db", args.db, "--threads", args.threads,
                   "--runs", args.runs, "--calibrate", args.calibrate, "--json", js, "--csv", cs, path]
            start = time.time()
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            log.write("$ " + " ".join(cmd) + "\n" + out.stdout + "\n")
            log.flush()
            if out.returncode != 0:
                sys.exit(f"{name}: attribute failed ({out.returncode}):\n{out.stdout[-3000:]}")
            d = json.load(open(js))
            d["csv"] = cs
            runs[name].append(d)
            print(f"{name} (run {r + 1}): accurate {100 * d['accurate_share']:.1f}%, "
                  f"predicted/measured step {d['predicted_over_measured_step']:.3f}, "
                  f"speed {d['speed_factor']:.3f} ({time.time() - start:.0f} s)", flush=True)
    rows = []
    for name in names:
        ds = runs[name]
        d = dict(ds[0])
        d["model"] = name
        how = {}
        for op in d["operators"]:
            for k, v in op["how"].items():
                how[k] = how.get(k, 0) + v
        d["how"] = how
        d["step_ratios"] = [x["predicted_over_measured_step"] for x in ds]
        d["accurate_shares"] = [x["accurate_share"] for x in ds]
        d["speed_factors"] = [x["speed_factor"] for x in ds]
        d["measured_steps"] = [x["measured_step_seconds"] for x in ds]
        d["step_ratio"] = statistics.median(d["step_ratios"])
        d["accurate"] = statistics.median(d["accurate_shares"])
        nodes = [measured_nodes(x["csv"]) for x in ds]
        bounds = [run_to_run(nodes[i], nodes[j]) for i in range(len(nodes))
                  for j in range(len(nodes)) if i != j]
        known = [b for b in bounds if b is not None]
        d["run_to_run"] = statistics.median(known) if known else None
        del d["operators"]
        rows.append(d)
    with open(os.path.join(args.out, "unseen.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "nodes", "accurate_share", "predicted_over_measured_step",
                    "run_to_run_share", "step_ratios", "accurate_shares", "speed_factors",
                    "measured_steps_s", "predicted_step_s", "how"])
        for d in rows:
            w.writerow([d["model"], d["nodes"], d["accurate"], d["step_ratio"], d["run_to_run"],
                        " ".join(f"{x:.4f}" for x in d["step_ratios"]),
                        " ".join(f"{x:.4f}" for x in d["accurate_shares"]),
                        " ".join(f"{x:.4f}" for x in d["speed_factors"]),
                        " ".join(f"{x:.4f}" for x in d["measured_steps"]),
                        d["predicted_step_seconds"],
                        " ".join(f"{k}={v}" for k, v in d["how"].items() if v)])
    tmp = os.path.join(args.out, "unseen.json.tmp")
    json.dump({"database": args.db, "repeat": args.repeat, "calibrate": args.calibrate,
               "models": rows}, open(tmp, "w"), indent=1)
    os.replace(tmp, os.path.join(args.out, "unseen.json"))
    print(f"Median of {args.repeat} attributions per model, in rounds; run-to-run: the share of one "
          "run's node time the other run's measurements predict within 25% (what the noise allows).")
    print("| model | nodes | within 25% | run-to-run | predicted/measured step (each run) | speed | how |")
    print("|---|---|---|---|---|---|---|")
    for d in rows:
        bound = f"{100 * d['run_to_run']:.1f}%" if d["run_to_run"] is not None else "-"
        print(f"| {d['model']} | {d['nodes']} | {100 * d['accurate']:.1f}% | {bound} | "
              f"{d['step_ratio']:.3f} ({', '.join(f'{x:.3f}' for x in d['step_ratios'])}) | "
              f"{', '.join(f'{x:.2f}' for x in d['speed_factors'])} | "
              f"{', '.join(f'{k} {v}' for k, v in d['how'].items() if v)} |")
    step_ok = sum(abs(d["step_ratio"] - 1) <= 0.10 for d in rows)
    accurate_ok = sum(d["accurate"] >= 0.9 for d in rows)
    print(f"step within 10%: {step_ok} of {len(rows)}; 90% of node time within 25%: "
          f"{accurate_ok} of {len(rows)}")


if __name__ == "__main__":
    main()
