#!/usr/bin/env python3
"""graph-opt's shard-parameters against torch.distributed.fsdp.fully_shard (FSDP2), and its
data-parallel against DistributedDataParallel, on the same ranks of this machine (gloo) and
threads: per-rank peak memory and step time of a whole training step (forward, backward,
AdamW) (docs/Distributed.md).

    sharded.py [--models mlp,gpt2,resnet18] [--ranks 2] [--threads 1] [--runs 5] [--batch N]
               [-o DIR]

Per model (tools/export/export_model.py, train mode, no dropout, tiny sizes, --batch per rank):
  - graph-opt, under `torchrun -m graph_opt -- M.pt2 ... --benchmark`, verified on every rank:
    `add-optimizer{kind=adamw},data-parallel` (its "original" is the step without
    collectives: graph-opt's local step) and `shard-parameters,add-optimizer{kind=adamw}`;
  - torch, in this file under torchrun: the exporter's module with the archive's weights and
    torch.optim.AdamW, eager without communication (local), wrapped in DDP, and with
    fully_shard on every module that holds parameters and on the root (FSDP2's per-module
    groups at their finest; reshard_after_forward=True, as graph-opt's default).
Peak per rank = what the rank holds before the step (parameters or their shards, optimizer
state, inputs) + the most CPU bytes the step's tensors held above that, counted by graph-opt's
tracking allocator on both sides (graph-opt's profile; graph_opt._C._CpuMemoryTracker around
torch's step). Exposed communication = a side's step minus its own local step. Before timing,
each rank compares graph-opt's gradient shards with its cut of FSDP's gradients on the same
per-rank inputs (--rtol relative to the gradient's largest element): exit 1 when they differ.
Written to DIR/sharded.json (default build/bench/distributed). Timings on shared cores move
by several percent; nothing here asserts one.
"""
import argparse
import copy
import datetime
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from data_parallel import (PACKAGE_DIR, TOOLS_DIR, export_tiny, fail, median,  # noqa: E402
                           rank_shard, torchrun)

ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2,
                 "i8": 1, "u8": 1, "bool": 1, "c64": 8, "c128": 16}


def input_bytes(graph):
    """Bytes of every graph input (dense, as the executor holds them): what a rank holds
    before its step."""
    total = 0
    for i in graph.inputs:
        m = re.match(r"(\w+)\[([\d, ]*)\]", i["type"])
        if not m:
            continue
        n = 1
        for d in filter(None, m.group(2).split(",")):
            n *= int(d)
        total += n * ELEMENT_BYTES.get(m.group(1), 4)
    return total


def tensor_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        if hasattr(t, "to_local"):
            t = t.to_local()
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


# --- torch's side, under torchrun ---------------------------------------------------------------

def torch_worker(args):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    import graph_opt
    sys.path.insert(0, TOOLS_DIR)
    import zoo

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.dist_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.threads)
    with open(args.facts) as f:
        facts = json.load(f)
    archive = args.facts.replace(".facts.json", ".pt2")
    step, built = zoo.build_for_facts(facts)
    step.load_state_dict(dict(torch.export.load(archive).state_dict), strict=False)
    step.train()
    inputs = [rank_shard(t, rank) for t in built.train_args]

    local = step
    ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(step))
    fsdp = copy.deepcopy(step)
    for module in list(fsdp.modules())[1:]:
        if any(True for _ in module.parameters(recurse=False)):
            fully_shard(module)
    fully_shard(fsdp)

    # FSDP's gradients against graph-opt's shards, on the same per-rank inputs.
    for p in fsdp.parameters():
        p.grad = None
    fsdp(*inputs)[0].backward()
    theirs = {n: p.grad.full_tensor() for n, p in fsdp.named_parameters() if p.grad is not None}
    graph = graph_opt.Graph.load(archive)
    graph_opt.run_pipeline(graph, "shard-parameters")
    outputs = graph_opt.execute(graph, inputs=inputs)
    ours = {o["target"].split("@shard:")[0]: t for o, t in zip(graph.outputs, outputs)
            if o["role"] == "gradient"}
    worst, worst_name = 0.0, None
    for name, grad in theirs.items():
        chunk = -(-grad.numel() // world)
        flat = torch.nn.functional.pad(grad.reshape(-1), (0, chunk * world - grad.numel()))
        mine = flat[rank * chunk:(rank + 1) * chunk]
        if name not in ours:
            raise SystemExit(f"rank {rank}: FSDP has a gradient for {name}, graph-opt none")
        err = ((ours[name] - mine).abs().max() / grad.abs().max().clamp_min(1e-12)).item()
        if err > worst:
            worst, worst_name = err, name

    result = {"rank": rank, "gradients_compared": len(theirs), "worst_relative_error": worst,
              "worst_gradient": worst_name, "agrees_with_fsdp": worst <= args.rtol}
    for name, module in (("local", local), ("ddp", ddp), ("fsdp", fsdp)):
        optimizer = torch.optim.AdamW(module.parameters(), lr=1e-3)

        def one():
            optimizer.zero_grad(set_to_none=True)
            start = time.perf_counter()
            module(*inputs)[0].backward()
            optimizer.step()
            return time.perf_counter() - start

        one()  # the optimizer's state exists from here on, as in a long run
        times = []
        for i in range(args.warmup + args.runs):
            t = one()
            if i >= args.warmup:
                times.append(t)
        optimizer.zero_grad(set_to_none=True)
        held = tensor_bytes(list(module.parameters()) + list(module.buffers()) +
                            [v for s in optimizer.state.values() for v in s.values()
                             if torch.is_tensor(v)] + list(inputs))
        with graph_opt._C._CpuMemoryTracker() as tracker:
            one()
        result[name] = {"step_seconds": times, "held_bytes": held,
                        "peak_above_bytes": tracker.peak_bytes,
                        "peak_bytes": held + tracker.peak_bytes}
    with open(args.out.replace("{rank}", str(rank)), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()
    return 0


# --- the orchestrator ---------------------------------------------------------------------------

PIPELINES = {"data-parallel": "add-optimizer{kind=adamw},data-parallel",
             "shard-parameters": "shard-parameters,add-optimizer{kind=adamw}"}


def graph_opt_input_bytes(path, pipeline, ranks):
    """What a rank of graph-opt holds before its step: the inputs of the rewritten graph."""
    sys.path.insert(0, PACKAGE_DIR)
    import graph_opt
    graph = graph_opt.Graph.load(path)
    graph_opt.run_pipeline(graph, pipeline.replace("data-parallel", f"data-parallel{{world={ranks}}}")
                           .replace("shard-parameters", f"shard-parameters{{world={ranks}}}"))
    return input_bytes(graph)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sharded.py", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,gpt2,resnet18")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="per rank")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--batch", type=int, default=None, help="per rank (default: tiny's)")
    parser.add_argument("--dist-timeout", type=float, default=300)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("-o", "--output", default=os.path.join(os.path.dirname(os.path.dirname(
        HERE)), "build", "bench", "distributed"))
    parser.add_argument("--torch-worker", dest="facts", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.facts:
        return torch_worker(args)
    if args.ranks < 1 or args.runs < 1 or args.threads < 1:
        fail("--ranks, --runs and --threads must be at least 1")
    args.output = os.path.abspath(args.output)
    os.makedirs(args.output, exist_ok=True)
    results = []
    for model in [m for m in args.models.split(",") if m]:
        path = export_tiny(model, args.output, args.batch)
        for side, pipeline in PIPELINES.items():
            torchrun(args.ranks, ["-m", "graph_opt", "--", path, f"-passes={pipeline}",
                                  f"--benchmark={args.runs}", f"--benchmark-warmup={args.warmup}",
                                  "--dist-timeout", str(args.dist_timeout), "--benchmark-json",
                                  os.path.join(args.output, f"{model}.{side}.{{rank}}.json")],
                     args.threads, args.output)
        torchrun(args.ranks, [os.path.abspath(__file__), "--torch-worker",
                              path.replace(".pt2", ".facts.json"), "--threads", str(args.threads),
                              "--runs", str(args.runs), "--warmup", str(args.warmup),
                              "--rtol", str(args.rtol), "--dist-timeout", str(args.dist_timeout),
                              "--out", os.path.join(args.output, f"{model}.torch.{{rank}}.json")],
                 args.threads, args.output)
        held = {side: graph_opt_input_bytes(path, p, args.ranks) for side, p in PIPELINES.items()}
        for rank in range(args.ranks):
            with open(os.path.join(args.output, f"{model}.torch.{rank}.json")) as f:
                theirs = json.load(f)
            row = {"model": model, "rank": rank, "ranks": args.ranks, "threads": args.threads,
                   "gradients_compared": theirs["gradients_compared"],
                   "worst_relative_error": theirs["worst_relative_error"],
                   "agrees_with_fsdp": theirs["agrees_with_fsdp"]}
            for side in PIPELINES:
                with open(os.path.join(args.output, f"{model}.{side}.{rank}.json")) as f:
                    go = json.load(f)
                row[f"graph_opt_{side}_s"] = go["optimized"]["step_seconds_median"]
                row[f"graph_opt_{side}_peak_bytes"] = (held[side] +
                                                       go["optimized"]["peak_bytes_above_inputs"])
                row[f"graph_opt_{side}_verification"] = go.get("verification")
                if side == "data-parallel":
                    row["graph_opt_local_s"] = go["original"]["step_seconds_median"]
            for side in ("local", "ddp", "fsdp"):
                row[f"torch_{side}_s"] = median(theirs[side]["step_seconds"])
                row[f"torch_{side}_peak_bytes"] = theirs[side]["peak_bytes"]
            results.append(row)
        tmp = os.path.join(args.output, "sharded.json.tmp")
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, os.path.join(args.output, "sharded.json"))

    print(f"{args.ranks} gloo ranks, {args.threads} thread(s) each, AdamW, {args.runs} runs after "
          f"{args.warmup} warm-up; step medians in ms (exposed = step - the side's local step); "
          f"peak per rank in KiB (held before the step + the step's most above it)")
    print(f"{'model':9} {'rank':>4} | {'graph-opt':>9} {'DP':>8} {'exp':>7} {'shard':>8} "
          f"{'exp':>7} | {'torch':>8} {'DDP':>8} {'exp':>7} {'FSDP':>8} {'exp':>7} | "
          f"{'peak KiB: DP':>12} {'shard':>8} {'DDP':>8} {'FSDP':>8} | vs FSDP")
    for r in results:
        ms = lambda k: r[k] * 1e3  # noqa: E731
        kib = lambda k: r[k] / 1024  # noqa: E731
        print(f"{r['model']:9} {r['rank']:>4} | {ms('graph_opt_local_s'):9.2f} "
              f"{ms('graph_opt_data-parallel_s'):8.2f} "
              f"{ms('graph_opt_data-parallel_s') - ms('graph_opt_local_s'):7.2f} "
              f"{ms('graph_opt_shard-parameters_s'):8.2f} "
              f"{ms('graph_opt_shard-parameters_s') - ms('graph_opt_local_s'):7.2f} | "
              f"{ms('torch_local_s'):8.2f} {ms('torch_ddp_s'):8.2f} "
              f"{ms('torch_ddp_s') - ms('torch_local_s'):7.2f} {ms('torch_fsdp_s'):8.2f} "
              f"{ms('torch_fsdp_s') - ms('torch_local_s'):7.2f} | "
              f"{kib('graph_opt_data-parallel_peak_bytes'):12.1f} "
              f"{kib('graph_opt_shard-parameters_peak_bytes'):8.1f} "
              f"{kib('torch_ddp_peak_bytes'):8.1f} {kib('torch_fsdp_peak_bytes'):8.1f} | "
              f"{'agree' if r['agrees_with_fsdp'] else 'DIFFER'} ({r['gradients_compared']}, "
              f"{r['worst_relative_error']:.1e})")
    return 0 if all(r["agrees_with_fsdp"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
