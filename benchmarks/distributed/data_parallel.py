#!/usr/bin/env python3
"""graph-opt's data-parallel pass against torch.nn.parallel.DistributedDataParallel, on the
same ranks of this machine (gloo) and threads (docs/Distributed.md).

    data_parallel.py [--models mlp,gpt2,resnet18] [--ranks 2] [--threads 1] [--runs 5]
                     [--batch N] [--bucket 25MiB] [-o DIR]

Per model (tools/export/export_model.py, train mode, no dropout, tiny sizes, --batch per rank):
  - graph-opt: `torchrun -m graph_opt -- M.pt2 -passes=data-parallel{bucket=...} --benchmark`
    on every rank: the step without collectives (the original graph) and the data-parallel
    step, timed alternately, verified on every rank;
  - DDP: the same module (the exporter's builder, tools/zoo; the archive's weights), timed
    alternately without DDP and wrapped in DistributedDataParallel (bucket_cap_mb the same),
    forward and backward.
Each side's exposed communication is its data-parallel step minus its own step without
communication (what the overlap did not hide). Before timing, each rank runs graph-opt's
data-parallel step and DDP on the same shard of its own (the example inputs made different
per rank) and compares every gradient (--rtol, relative to the gradient's largest element):
exit 1 when a rank's differ. Printed as a table, written to DIR/results.json
(default build/bench/distributed). Timings on shared cores move by several percent; nothing
here asserts one.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
EXPORTER = os.path.join(REPO_ROOT, "tools", "export", "export_model.py")
TOOLS_DIR = os.path.join(REPO_ROOT, "tools")  # the model zoo, tools/zoo, the exporter's builders
PACKAGE_DIR = os.path.join(REPO_ROOT, "build", "python")  # make builds graph_opt here


def fail(message):
    print(f"data_parallel.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_bytes(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "": 1}
    for unit, scale in sorted(units.items(), key=lambda u: -len(u[0])):
        if text.endswith(unit):
            return int(float(text[: len(text) - len(unit)]) * scale)
    raise argparse.ArgumentTypeError(f"{text}: expected bytes (25MiB, 4096)")


def median(xs):
    return statistics.median(xs) if xs else None


def export_tiny(model, output, batch=None):
    """The model's training step at tiny sizes without dropout (train mode, the exporter's
    batch unless `batch`), as OUTPUT/MODEL.pt2 with its facts; returns the archive's path."""
    path = os.path.join(output, f"{model}.pt2")
    export = [sys.executable, EXPORTER, "--model", model, "--mode", "train", "--tiny",
              "--no-dropout", "-o", path]
    if batch:
        export += ["--batch", str(batch)]
    run = subprocess.run(export, capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"exporting {model} failed:\n{run.stderr}")
    return path


# --- the DDP worker, under torchrun ----------------------------------------------------------

def rank_shard(t, rank):
    """Rank `rank`'s inputs: the example's, made different per rank (floats shifted, token ids
    and labels rolled along their last dimension), shapes and dtypes unchanged."""
    if t.dim() == 0:
        return t
    if t.is_floating_point():
        return t + 0.01 * rank
    return t.roll(rank, dims=-1)


def ddp_worker(args):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, TOOLS_DIR)
    import zoo

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.dist_timeout))
    rank = dist.get_rank()
    torch.set_num_threads(args.threads)
    with open(args.facts) as f:
        facts = json.load(f)
    step, built = zoo.build_for_facts(facts)
    # The archive's weights, so both sides train the same model.
    ep = torch.export.load(args.facts.replace(".facts.json", ".pt2"))
    state = {k: v for k, v in ep.state_dict.items()}
    step.load_state_dict(state, strict=False)
    step.train()
    ddp = torch.nn.parallel.DistributedDataParallel(step, bucket_cap_mb=args.bucket / (1 << 20))
    train_args = built.train_args

    def one(module):
        for p in step.parameters():
            p.grad = None
        start = time.perf_counter()
        loss = module(*train_args)[0]
        loss.backward()
        return time.perf_counter() - start

    # Verified before timing: graph-opt's data-parallel step and DDP on the same shard per
    # rank (the example inputs made different per rank) must give the same gradients; for a
    # model with BatchNorm, each rank normalizes with its own shard's statistics in both.
    import graph_opt
    graph = graph_opt.Graph.load(args.facts.replace(".facts.json", ".pt2"))
    graph_opt.run_pipeline(graph, f"data-parallel{{bucket={args.bucket}}}")
    shard = [rank_shard(t, rank) for t in built.train_args]
    outputs = graph_opt.execute(graph, inputs=shard)
    ours = {o["target"]: t for o, t in zip(graph.outputs, outputs) if o["role"] == "gradient"}
    for p in step.parameters():
        p.grad = None
    ddp(*shard)[0].backward()
    theirs = {name: p.grad for name, p in step.named_parameters() if p.grad is not None}
    worst, worst_name = 0.0, None
    for name, grad in theirs.items():
        if name not in ours:
            raise SystemExit(f"rank {rank}: DDP has a gradient for {name}, graph-opt none")
        err = ((ours[name] - grad).abs().max() / grad.abs().max().clamp_min(1e-12)).item()
        if err > worst:
            worst, worst_name = err, name
    agrees = worst <= args.rtol

    times = {"local": [], "ddp": []}
    for i in range(args.warmup + args.runs):
        for name, module in (("local", step), ("ddp", ddp)):
            t = one(module)
            if i >= args.warmup:
                times[name].append(t)
    with open(args.out.replace("{rank}", str(rank)), "w") as f:
        json.dump({"rank": rank, "local_seconds": times["local"], "ddp_seconds": times["ddp"],
                   "gradients_compared": len(theirs), "worst_relative_error": worst,
                   "worst_gradient": worst_name, "agrees_with_ddp": agrees}, f)
    dist.destroy_process_group()
    return 0


# --- the orchestrator --------------------------------------------------------------------------

def torchrun(ranks, argv, threads, cwd):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    # This build's graph_opt package, wherever the ranks start.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (PACKAGE_DIR, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(ranks), *argv]
    run = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    return run.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(prog="data_parallel.py", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,gpt2,resnet18")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="per rank")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--batch", type=int, default=None, help="per rank (default: tiny's)")
    parser.add_argument("--bucket", type=parse_bytes, default=25 << 20)
    parser.add_argument("--dist-timeout", type=float, default=300)
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="largest gradient difference from DDP, relative to the gradient's "
                             "largest element, for a rank to agree")
    parser.add_argument("-o", "--output", default=os.path.join(REPO_ROOT, "build", "bench",
                                                               "distributed"))
    # The DDP worker (this file under torchrun).
    parser.add_argument("--ddp-worker", dest="facts", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.facts:
        return ddp_worker(args)
    if args.ranks < 1 or args.runs < 1 or args.threads < 1:
        fail("--ranks, --runs and --threads must be at least 1")
    args.output = os.path.abspath(args.output)
    os.makedirs(args.output, exist_ok=True)
    results = []
    for model in [m for m in args.models.split(",") if m]:
        path = export_tiny(model, args.output, args.batch)
        bucket = f"{args.bucket}"
        torchrun(args.ranks, ["-m", "graph_opt", "--", path,
                              f"-passes=data-parallel{{bucket={bucket}}}",
                              f"--benchmark={args.runs}", f"--benchmark-warmup={args.warmup}",
                              "--dist-timeout", str(args.dist_timeout),
                              "--benchmark-json", os.path.join(args.output,
                                                               f"{model}.graph-opt.{{rank}}.json")],
                 args.threads, args.output)
        torchrun(args.ranks, [os.path.abspath(__file__), "--ddp-worker",
                              path.replace(".pt2", ".facts.json"), "--threads", str(args.threads),
                              "--runs", str(args.runs), "--warmup", str(args.warmup),
                              "--bucket", str(args.bucket), "--rtol", str(args.rtol),
                              "--dist-timeout",
                              str(args.dist_timeout), "--out",
                              os.path.join(args.output, f"{model}.ddp.{{rank}}.json")],
                 args.threads, args.output)
        for rank in range(args.ranks):
            with open(os.path.join(args.output, f"{model}.graph-opt.{rank}.json")) as f:
                go = json.load(f)
            with open(os.path.join(args.output, f"{model}.ddp.{rank}.json")) as f:
                ddp = json.load(f)
            row = {
                "model": model, "rank": rank, "ranks": args.ranks, "threads": args.threads,
                "bucket_bytes": args.bucket, "verification": go.get("verification"),
                "graph_opt_local_s": go["original"]["step_seconds_median"],
                "graph_opt_dp_s": go["optimized"]["step_seconds_median"],
                "graph_opt_peak_bytes": go["optimized"]["peak_bytes_above_inputs"],
                "ddp_local_s": median(ddp["local_seconds"]),
                "ddp_s": median(ddp["ddp_seconds"]),
                "gradients_compared": ddp["gradients_compared"],
                "worst_relative_error": ddp["worst_relative_error"],
                "agrees_with_ddp": ddp["agrees_with_ddp"],
            }
            row["graph_opt_exposed_s"] = row["graph_opt_dp_s"] - row["graph_opt_local_s"]
            row["ddp_exposed_s"] = row["ddp_s"] - row["ddp_local_s"]
            results.append(row)
        tmp = os.path.join(args.output, "results.json.tmp")
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, os.path.join(args.output, "results.json"))
    print(f"{args.ranks} gloo ranks, {args.threads} thread(s) each, {args.runs} runs after "
          f"{args.warmup} warm-up; medians in ms (exposed: the data-parallel step minus the "
          f"same side's step without communication)")
    print(f"{'model':10} {'rank':>4} | {'graph-opt':>9} {'local':>8} {'exposed':>8} | "
          f"{'DDP':>9} {'eager':>8} {'exposed':>8} | graph-opt/DDP  gradients vs DDP  "
          f"verification")
    for r in results:
        print(f"{r['model']:10} {r['rank']:>4} | {r['graph_opt_dp_s'] * 1e3:9.2f} "
              f"{r['graph_opt_local_s'] * 1e3:8.2f} {r['graph_opt_exposed_s'] * 1e3:8.2f} | "
              f"{r['ddp_s'] * 1e3:9.2f} {r['ddp_local_s'] * 1e3:8.2f} "
              f"{r['ddp_exposed_s'] * 1e3:8.2f} | {r['graph_opt_dp_s'] / r['ddp_s']:13.3f}  "
              f"{'agree' if r['agrees_with_ddp'] else 'DIFFER'} ({r['gradients_compared']}, "
              f"{r['worst_relative_error']:.1e})  {r['verification']}")
    return 0 if all(r["agrees_with_ddp"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
