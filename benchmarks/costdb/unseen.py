#!/usr/bin/env python3
"""The cost database on models it has never seen (docs/CostDB.md, issue 54's targets).

Five models outside the zoo, built here from torchvision and transformers configurations with
random weights (nothing downloaded), their training steps exported with
graph_opt.export_training_step: a MobileNetV2, an EfficientNet-B0, a ViT-B/16, a
DistilBERT-style encoder and a recurrent (LSTM) language model. None of them is a source of
the database (--db, e.g. the one `make bench-costdb` builds from the sweeps and the zoo), so
each is predicted from other models' and the sweeps' measurements alone:

    graph-opt-costdb attribute --db DB --runs R model.pt2

The figures per model: the share of its measured node time predicted within 25% node by node
("accurate"; goal 90%), predicted/measured step (goal within 10%), and how its nodes were
predicted (exact, family, operator, learned, in-step, missing). A table (printed, unseen.csv)
and unseen.json in -o.

    python benchmarks/costdb/unseen.py --db build/bench/costdb/costs.sqlite -o build/bench/costdb-unseen
"""
import argparse
import csv
import json
import os
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a cost database none of these models is in")
    ap.add_argument("--costdb", default=os.path.join(REPO, "build", "bin", "graph-opt-costdb"))
    ap.add_argument("--models", default="mobilenet,efficientnet,vit,distilbert,lstm")
    ap.add_argument("--runs", default="5", help="measured runs of each model's profile")
    ap.add_argument("--threads", default="2")
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "build", "bench", "costdb-unseen"))
    args = ap.parse_args()
    if not os.path.exists(args.db):
        sys.exit(f"{args.db}: no such database (make bench-costdb builds one)")
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "unseen.log"), "w")
    rows = []
    for name in filter(None, args.models.split(",")):
        path = os.path.join(args.out, "exports", f"{name}-train.pt2")
        if not os.path.exists(path):
            start = time.time()
            export(name, path)
            print(f"{name}: exported in {time.time() - start:.0f} s", flush=True)
        js = os.path.join(args.out, f"{name}.json")
        cmd = [args.costdb, "attribute", "--db", args.db, "--threads", args.threads,
               "--runs", args.runs, "--json", js, "--csv", os.path.join(args.out, f"{name}.csv"), path]
        start = time.time()
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log.write("$ " + " ".join(cmd) + "\n" + out.stdout + "\n")
        log.flush()
        if out.returncode != 0:
            sys.exit(f"{name}: attribute failed ({out.returncode}):\n{out.stdout[-3000:]}")
        d = json.load(open(js))
        d["model"] = name
        how = {}
        for op in d["operators"]:
            for k, v in op["how"].items():
                how[k] = how.get(k, 0) + v
        d["how"] = how
        rows.append(d)
        print(f"{name}: {d['nodes']} nodes, accurate {100 * d['accurate_share']:.1f}%, "
              f"predicted/measured step {d['predicted_over_measured_step']:.3f}, "
              f"{' '.join(f'{k} {v}' for k, v in how.items() if v)} ({time.time() - start:.0f} s)",
              flush=True)
    with open(os.path.join(args.out, "unseen.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "nodes", "accurate_share", "predicted_over_measured_step",
                    "attributed_share", "predicted_step_s", "measured_step_s", "how"])
        for d in rows:
            w.writerow([d["model"], d["nodes"], d["accurate_share"], d["predicted_over_measured_step"],
                        d["attributed_share"], d["predicted_step_seconds"], d["measured_step_seconds"],
                        " ".join(f"{k}={v}" for k, v in d["how"].items() if v)])
    json.dump({"database": args.db, "models": rows}, open(os.path.join(args.out, "unseen.json"), "w"),
              indent=1)
    print("| model | nodes | within 25% | predicted/measured step | predicted step | measured step | how |")
    print("|---|---|---|---|---|---|---|")
    for d in rows:
        print(f"| {d['model']} | {d['nodes']} | {100 * d['accurate_share']:.1f}% | "
              f"{d['predicted_over_measured_step']:.3f} | {d['predicted_step_seconds'] * 1e3:.1f} ms | "
              f"{d['measured_step_seconds'] * 1e3:.1f} ms | "
              f"{', '.join(f'{k} {v}' for k, v in d['how'].items() if v)} |")
    step_ok = sum(abs(d["predicted_over_measured_step"] - 1) <= 0.10 for d in rows)
    accurate_ok = sum(d["accurate_share"] >= 0.9 for d in rows)
    print(f"step within 10%: {step_ok} of {len(rows)}; 90% of node time within 25%: "
          f"{accurate_ok} of {len(rows)}")


if __name__ == "__main__":
    main()
