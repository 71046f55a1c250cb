#!/usr/bin/env python3
"""graph-opt's executor against eager PyTorch on the same training step, interleaved.

    executor_eager.py [--models hf-vit,hf-roberta,...] [--pairs 15] [--threads 2]
                      [--exports DIR] [-o OUT.json]

Every profile, benchmark and verification graph-opt makes runs on its executor, so it must be no
slower than the eager step it stands for (issue 85, item 6). For each model (peers.build: a zoo
model as NAME:SIZE, or one outside the zoo from unseen_models.py; dropout off, so both sides
compute the same step):

1. the training step is exported with graph_opt.export_training_step (once, into --exports,
   reused while it exists) and loaded;
2. one step each way, and the executor's loss checked against eager's (a different step
   would make the timing meaningless);
3. two warm-up steps each, then --pairs pairs: eager (parameters' .grad set to None, forward,
   loss.backward()) and graph_opt.execute on the loaded graph (forward and backward, the
   gradients returned), alternating which goes first, both at --threads intra-op threads in
   this one process.

Printed per model: both medians, executor/eager as the ratio of medians with its 95% bootstrap
interval over the pairs (peak_bound.ratio_interval), and "slower" or "faster" only where the
interval excludes 1 (else "tie"). graph_opt.execute makes a new executor per call, as a user's
call does: its CPU memory plan (docs/Runtime.md) never replays, so each step's buffers come
fresh from the allocator, as eager's do. The JSON (-o, written atomically) has every step time.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import peak_bound  # noqa: E402
import peers  # noqa: E402

DEFAULT_MODELS = "hf-vit,hf-roberta,mobilenet_v2,hf-causal-lm"


def _exported(graph_opt, name, step, args, exports):
    path = os.path.join(exports, name.replace(":", "-") + "-train.pt2")
    if not os.path.exists(path):
        os.makedirs(exports, exist_ok=True)
        graph_opt.export_training_step(step, lambda m, *a: m(*a)[0], tuple(args), path=path)
    return graph_opt.Graph.load(path)


def measure(graph_opt, name, pairs, exports):
    step, args, _ = peers.build(name, None, dropout=False)
    graph = _exported(graph_opt, name, step, args, exports)

    def eager():
        for p in step.parameters():
            p.grad = None
        loss = step(*args)[0]
        loss.backward()
        return loss.detach()

    loss_at = [o["role"] for o in graph.outputs].index("loss")

    def executor():
        return graph_opt.execute(graph)[loss_at]

    want, got = eager(), executor()
    if not torch.allclose(want, got, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"{name}: the executor's loss {got.item()} is not eager's {want.item()}")
    for run in (eager, executor, eager, executor):
        run()
    times = {"eager": [], "executor": []}
    for i in range(pairs):
        order = (eager, executor) if i % 2 == 0 else (executor, eager)
        for run in order:
            start = time.perf_counter()
            run()
            times[run.__name__].append(time.perf_counter() - start)
    ratio, low, high = peak_bound.ratio_interval(times["eager"], times["executor"])
    return {"model": name, "eager_s": times["eager"], "executor_s": times["executor"],
            "ratio": ratio, "interval": [low, high]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--exports", default="build/bench/exports-executor")
    p.add_argument("-o", "--output")
    args = p.parse_args()
    if args.pairs < 2 or args.threads < 1:
        p.error("--pairs must be >= 2 and --threads >= 1")
    import graph_opt
    torch.set_num_threads(args.threads)
    rows = []
    for name in args.models.split(","):
        row = measure(graph_opt, name, args.pairs, args.exports)
        rows.append(row)
        print(f"{name}: eager {statistics.median(row['eager_s']) * 1e3:.1f} ms, executor "
              f"{statistics.median(row['executor_s']) * 1e3:.1f} ms, executor/eager "
              f"{row['ratio']:.3f} (95% {row['interval'][0]:.3f}-{row['interval'][1]:.3f}): "
              f"{peak_bound.verdict(row['ratio'], *row['interval'])}", flush=True)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"threads": args.threads, "pairs": args.pairs, "torch": torch.__version__,
                       "rows": rows}, f, indent=1)
        os.replace(tmp, args.output)


if __name__ == "__main__":
    main()
