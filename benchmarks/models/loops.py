#!/usr/bin/env python3
"""Coverage: the training loops users write, through graph-opt's partitioner (issue 83 item
4; docs/TorchCompile.md, "Every loop reaches the planner").

    loops.py [--models bert:tiny,gpt2:tiny,llama:tiny,t5:tiny,resnet50:tiny]
             [--loops fixed,varying,bf16,accumulate,dropout,checkpointed,ddp,fsdp2]
             [--steps 3] [--inner inductor|eager] [--memory-budget 0.3]
             [--peak-share F] [-o DIR]

Per model (peers.build: the zoo's models as the exporter builds them; image models at batch
IMAGE_BATCH) and loop, the step is
trained `--steps` AdamW steps twice on the same data, in one process (two for the
distributed loops): with plain torch.compile, and with
graph_opt.backend(memory_budget=B, inner=..., verify=True). Loops:

- fixed: one shape every step;
- varying: the sequence length (text models: +8 per step) or the batch (image models: +1 per
  step) changes every step: dynamo recompiles with symbolic sizes at the second;
- bf16: under torch.autocast("cpu", dtype=torch.bfloat16);
- accumulate: two micro-batches per optimizer step (gradient accumulation);
- dropout: the model's dropout on (fallback_random=True in both runs, so the two draw alike);
- checkpointed: the model checkpoints itself (Hugging Face's gradient_checkpointing_enable(),
  non-reentrant; torchvision ResNets: torch.utils.checkpoint around every block);
- ddp: DistributedDataParallel on 2 gloo ranks, buckets of 0.02 MB (several small bucket
  graphs, as a large model's buckets are);
- fsdp2: fully_shard on every block and the root, 2 gloo ranks.

With --peak-share F, graph-opt's bound is peak= instead of memory_budget=: F times the whole
step's peak plain torch.compile measures (one more step, profiled: c10's allocator events
above its start, plus the parameters (a rank's shards under FSDP2) and the batch; the ranks'
largest under DDP and FSDP2), and the same step of graph-opt's is measured against it: the
bound is the rank's whole step, across every graph torch.compile makes of it (step_ledger.py).

Per cell: the graphs graph-opt planned, its fallbacks with their reasons, the bounds it could
not meet (stats()["unmet"]), and the largest relative difference of its losses from plain
torch.compile's (rank 0's for the distributed loops, whose graphs, fallbacks and partitions are
both ranks'). A cell passes where nothing fell back
and the losses agree within 2e-3 (2e-2 under bf16, or, where more, the distance between plain
torch.compile's losses and those of the same step on ATen's kernels, aot_eager: two correct
steps part by that much in bf16). Output: DIR/loops.json and DIR/loops.md;
exit 0 when written, 1 when a cell failed, 2 on bad arguments.
"""
import argparse
import json
import os
import socket
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

import torch  # noqa: E402

LOOPS = ("fixed", "varying", "bf16", "accumulate", "dropout", "checkpointed", "ddp", "fsdp2")
DEFAULT_MODELS = "bert:tiny,gpt2:tiny,llama:tiny,t5:tiny,resnet50:tiny"
RTOL = {"bf16": 2e-2}
DEFAULT_RTOL = 2e-3
# loops whose tolerance widens to torch.compile's own distance from ATen's kernels
SPREAD_LOOPS = ("bf16",)
WORLD = 2
DDP_BUCKET_MB = 0.02


def _caches_off():
    # A compile served from a cache never calls the partitioner.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


# Image models at this batch, not the zoo's tiny batch of 2: there the last BatchNorms of a
# ResNet normalize over two values per channel and float32 training is chaotic (two correct
# partitions' losses part by 30% within three steps; docs/TorchCompile.md, "What is verified").
IMAGE_BATCH = 8


def build(spec, dropout):
    import argparse as _argparse

    import peers
    import zoo
    name, _, size = spec.partition(":")
    if name in zoo.MODELS and zoo.MODELS[name].kind == "image":
        sizes = zoo.resolve_sizes(name, zoo.MODELS[name], _argparse.Namespace(
            tiny=size == "tiny", batch=IMAGE_BATCH, image_size=None, seq_len=None))
        built = zoo.build_model(name, sizes, peers.SEED, dropout=dropout)
        step, _ = zoo.train_step_module(built)
        return step, tuple(built.train_args)
    step, args, _ = peers.build(spec, None, dropout=dropout)
    return step, tuple(args)


def _is_text(args):
    return any(not t.is_floating_point() and t.dim() >= 2 for t in args
               if isinstance(t, torch.Tensor))


def batch_at(args, step_index, varying, generator):
    """The step's arguments, drawn like the example's on `generator` (same dtypes, integers
    below the example's largest + 1), for `varying` with the sequence length (text:
    dimension 1 of every integer tensor of 2+ dimensions, +8 per step) or the batch (images:
    dimension 0, +1 per step) grown."""
    text = _is_text(args)
    grow = step_index if varying else 0
    out = []
    for t in args:
        if not isinstance(t, torch.Tensor):
            out.append(t)
            continue
        shape = list(t.shape)
        if text and t.dim() >= 2:
            shape[1] += 8 * grow
        elif not text and t.dim() >= 1:
            shape[0] += grow
        if t.is_floating_point():
            out.append(torch.randn(shape, generator=generator, dtype=t.dtype))
        else:
            high = max(1, int(t.max()) + 1)
            out.append(torch.randint(0, high, shape, generator=generator, dtype=t.dtype))
    return tuple(out)


def checkpoint_itself(step):
    """The model checkpointing itself (peers.per_block_checkpoint: Hugging Face's
    gradient_checkpointing_enable() where it has it, else torch.utils.checkpoint around every
    block): what was done, in words."""
    import peers
    return peers.per_block_checkpoint(step)


def shard_blocks(step):
    from torch.distributed.fsdp import fully_shard
    import peers
    for _, block in peers.find_blocks(step):
        fully_shard(block)
    fully_shard(step)


def whole_step_peak(compiled, step, batch, loop):
    """One more step of `compiled`, profiled: its allocations above its start (c10's
    allocator events, peers.step_memory) plus the parameters (this rank's) and the batch
    (peers.held_bytes)."""
    import peers
    from torch.profiler import record_function

    def run_step(mark_backward=False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=loop == "bf16"):
            loss = compiled(*batch)[0]
        with record_function(peers.BACKWARD_REGION):
            loss.float().backward()

    for p in step.parameters():
        p.grad = None
    above = peers.step_memory(run_step)["peak"]
    for p in step.parameters():
        p.grad = None
    return above + peers.held_bytes(step, batch)


def train(step, args, loop, steps, backend, rank=0, measure=False):
    """`steps` AdamW steps of `step` compiled with `backend`: the losses (and with
    `measure`, the whole step's peak of one more step: whole_step_peak)."""
    compiled = torch.compile(step, backend=backend)
    opt = torch.optim.AdamW(step.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1000 + rank)
    losses = []
    torch.manual_seed(7 + rank)
    for i in range(steps):
        batch = batch_at(args, i, loop == "varying", data)
        opt.zero_grad(set_to_none=True)
        if loop == "accumulate":
            total = 0.0
            for micro in (batch, batch_at(args, i, False, data)):
                loss = compiled(*micro)[0] / 2
                loss.backward()
                total += loss.item()
            losses.append(total)
        else:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=loop == "bf16"):
                loss = compiled(*batch)[0]
            loss.float().backward()
            losses.append(loss.item())
        opt.step()
    if measure:
        return losses, whole_step_peak(compiled, step, batch, loop)
    return losses


def _plain(args):
    return "inductor" if args.inner == "inductor" else "aot_eager"


def _mine(args, peak=None):
    import graph_opt
    if peak is not None:
        return graph_opt.backend(inner=args.inner, peak=peak, verify=True)
    return graph_opt.backend(inner=args.inner, memory_budget=args.memory_budget, verify=True)


def _largest_across_ranks(value):
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return value
    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def run_cell(spec, loop, args, rank=0):
    """One cell in this process: {"losses_torch", "losses_graph_opt", "stats", "how"}."""
    import graph_opt
    from graph_opt import compile as goc
    _caches_off()
    measure = args.peak_share is not None
    out = {}
    # under bf16 the step also runs on ATen's kernels (aot_eager): how far torch.compile's
    # own kernels are from them is the spread two correct steps have (SPREAD_LOOPS)
    labels = ("torch", "aten", "graph_opt") if loop in SPREAD_LOOPS and \
        args.inner == "inductor" else ("torch", "graph_opt")
    for label in labels:
        if label == "torch":
            backend = _plain(args)
        elif label == "aten":
            backend = "aot_eager"
        elif measure:
            out["peak_bound"] = int(args.peak_share * out["peak_torch"])
            backend = _mine(args, peak=out["peak_bound"])
        else:
            backend = _mine(args)
        torch._dynamo.reset()
        goc.reset_stats()
        step, example = build(spec, dropout=loop == "dropout")
        if loop == "checkpointed":
            out["how"] = checkpoint_itself(step)
        if loop == "ddp":
            # small buckets, the first too (DDPOptimizer wants it no larger than the others)
            torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = int(DDP_BUCKET_MB * 2**20)
            step = torch.nn.parallel.DistributedDataParallel(step, bucket_cap_mb=DDP_BUCKET_MB)
        if loop == "fsdp2":
            shard_blocks(step)
        with torch._inductor.config.patch(fallback_random=loop == "dropout"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trained = train(step, example, loop, args.steps, backend, rank,
                            measure=measure and label != "aten")
        if label == "aten":
            out["losses_aten"] = trained
        elif measure:
            out[f"losses_{label}"], peak = trained
            out[f"peak_{label}"] = _largest_across_ranks(peak)
        else:
            out[f"losses_{label}"] = trained
        if label == "graph_opt":
            s = graph_opt.compile.stats()
            out["stats"] = {"graphs": s["graphs"], "fallbacks": s["fallbacks"],
                            "reasons": s["reasons"], "unmet": s["unmet"],
                            "partitions": [p["partition"] for p in s["plans"]],
                            "symbolic": sum(1 for p in s["plans"] if "symbolic" in p),
                            "step_peak": max((p["step"]["step_peak_bytes"] for p in s["plans"]
                                              if "step" in p), default=None),
                            "user_checkpoint": [p["user_checkpoint"] for p in s["plans"]
                                                if "user_checkpoint" in p]}
    return out


def _rank_main(rank, spec, loop, args, port, result_path):
    import torch.distributed as dist
    import peers
    peers._graph_opt()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        result = run_cell(spec, loop, args, rank)
    except Exception as e:
        result = {"error": f"{type(e).__name__}: {e}".splitlines()[0],
                  "traceback": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
    with open(f"{result_path}.{rank}", "w") as f:
        json.dump(result, f)


def run_distributed(spec, loop, args, scratch):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.path.join(scratch, f"{spec.replace(':', '_')}-{loop}")
    mp.spawn(_rank_main, args=(spec, loop, args, port, path), nprocs=WORLD, join=True)
    results = []
    for rank in range(WORLD):
        with open(f"{path}.{rank}") as f:
            results.append(json.load(f))
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        return {"error": errors[0], "traceback": next(r["traceback"] for r in results
                                                      if "error" in r)}
    first = results[0]
    stats = first["stats"]
    # every rank's graphs and fallbacks
    for other in results[1:]:
        for key in ("graphs", "fallbacks", "symbolic"):
            stats[key] += other["stats"][key]
        for key in ("reasons", "unmet", "partitions", "user_checkpoint"):
            stats[key] += other["stats"][key]
    return first


def relative_difference(a, b):
    return max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=0.0)


def cell_row(spec, loop, result, seconds):
    row = {"model": spec, "loop": loop, "seconds": round(seconds, 1)}
    if "error" in result:
        row.update(ok=False, error=result["error"])
        return row
    s = result["stats"]
    diff = relative_difference(result["losses_graph_opt"], result["losses_torch"])
    row.update(graphs=s["graphs"], fallbacks=s["fallbacks"], reasons=s["reasons"],
               unmet=len(s["unmet"]), partitions=s["partitions"], symbolic=s["symbolic"],
               user_checkpoint=s["user_checkpoint"], how=result.get("how"),
               loss_difference=diff, losses_torch=result["losses_torch"],
               losses_graph_opt=result["losses_graph_opt"])
    tolerance = RTOL.get(loop, DEFAULT_RTOL)
    if "losses_aten" in result:
        # two correct steps (torch.compile's kernels and ATen's) part by this much
        row["torch_spread"] = relative_difference(result["losses_torch"], result["losses_aten"])
        row["losses_aten"] = result["losses_aten"]
        tolerance = max(tolerance, row["torch_spread"])
    row["ok"] = s["fallbacks"] == 0 and s["graphs"] > 0 and diff <= tolerance
    if "peak_bound" in result:
        # the bound met, or said unmet and no worse than no bound
        row.update(peak_torch=result["peak_torch"], peak_bound=result["peak_bound"],
                   peak_graph_opt=result["peak_graph_opt"], step_peak=s.get("step_peak"))
        row["peak_within"] = result["peak_graph_opt"] <= result["peak_bound"]
        row["ok"] = row["ok"] and (row["peak_within"] or (
            row["unmet"] > 0 and result["peak_graph_opt"] <= result["peak_torch"]))
    return row


def _mib(b):
    return "-" if b is None else f"{b / 2**20:.2f}"


def peak_markdown(rows):
    lines = ["| model | loop | graphs planned | torch.compile's peak (MiB) | peak= (MiB) | "
             "graph-opt's predicted / measured (MiB) | measured / bound | unmet | losses vs "
             "torch.compile | ok |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['loop']} | error: {r['error'][:80]} | - | - | - "
                         "| - | - | - | no |")
            continue
        lines.append(f"| {r['model']} | {r['loop']} | {r['graphs']} | {_mib(r['peak_torch'])} | "
                     f"{_mib(r['peak_bound'])} | {_mib(r['step_peak'])} / "
                     f"{_mib(r['peak_graph_opt'])} | "
                     f"{r['peak_graph_opt'] / r['peak_bound']:.3f} | {r['unmet']} | "
                     f"{r['loss_difference']:.1e} | {'yes' if r['ok'] else 'no'} |")
    return "\n".join(lines)


def markdown(rows):
    if rows and any("peak_bound" in r for r in rows):
        return peak_markdown(rows)
    lines = ["| model | loop | graphs planned | graph-opt's / torch's partitions | fallbacks | "
             "unmet | losses vs torch.compile | ok |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['loop']} | - | - | error: {r['error'][:80]} | - "
                         f"| - | no |")
            continue
        mine = sum(1 for p in r["partitions"] if p == "graph-opt")
        extra = []
        if r["symbolic"]:
            extra.append(f"{r['symbolic']} symbolic")
        if r["user_checkpoint"]:
            extra.append("user regions " + "/".join(sorted(set(r["user_checkpoint"]))))
        planned = f"{r['graphs']}" + (f" ({', '.join(extra)})" if extra else "")
        fallbacks = str(r["fallbacks"]) + (f": {r['reasons'][0][:90]}" if r["reasons"] else "")
        spread = (f" (torch.compile vs ATen's kernels: {r['torch_spread']:.1e})"
                  if "torch_spread" in r else "")
        lines.append(f"| {r['model']} | {r['loop']} | {planned} | {mine} / "
                     f"{len(r['partitions']) - mine} | {fallbacks} | {r['unmet']} | "
                     f"{r['loss_difference']:.1e}{spread} | {'yes' if r['ok'] else 'no'} |")
    return "\n".join(lines)


def write_outputs(args, rows):
    """loops.json and loops.md in the output directory, each written whole; the table."""
    table = markdown(rows)
    for name, text in (("loops.json", json.dumps({"args": vars(args), "rows": rows}, indent=1)),
                       ("loops.md", table + "\n")):
        partial = os.path.join(args.output, name + ".partial")
        with open(partial, "w") as f:
            f.write(text)
        os.replace(partial, os.path.join(args.output, name))
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--inner", choices=("inductor", "eager"), default="inductor")
    parser.add_argument("--memory-budget", type=float, default=0.3)
    parser.add_argument("--peak-share", type=float, default=None,
                        help="graph-opt under peak= at this share of plain torch.compile's "
                        "measured whole-step peak, measured against it")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("-o", "--output", default="build/bench/loops")
    args = parser.parse_args(argv)
    loops = [x for x in args.loops.split(",") if x]
    bad = [x for x in loops if x not in LOOPS]
    if args.peak_share is not None and not 0 < args.peak_share <= 1:
        parser.error(f"--peak-share {args.peak_share}: a share in (0, 1]")
    if bad or args.steps < 2:
        parser.error(f"unknown loops {bad} (known: {', '.join(LOOPS)})" if bad
                     else "--steps: at least 2 (the varying loop recompiles at the second)")
    if args.threads:
        torch.set_num_threads(args.threads)
    import peers
    peers._graph_opt()  # graph_opt on the path (the build's package)
    os.makedirs(args.output, exist_ok=True)
    rows = []
    for spec in [m for m in args.models.split(",") if m]:
        for loop in loops:
            start = time.perf_counter()
            try:
                result = (run_distributed(spec, loop, args, args.output)
                          if loop in ("ddp", "fsdp2") else run_cell(spec, loop, args))
            except Exception as e:
                result = {"error": f"{type(e).__name__}: {e}".splitlines()[0],
                          "traceback": traceback.format_exc()}
            row = cell_row(spec, loop, result, time.perf_counter() - start)
            rows.append(row)
            write_outputs(args, rows)  # as it goes: a long run stopped keeps its cells
            print(f"loops: {spec} {loop}: " + (f"error {row['error']}" if "error" in row else
                  f"{row['graphs']} graphs, {row['fallbacks']} fallbacks, losses off by "
                  f"{row['loss_difference']:.1e}") + f" ({row['seconds']} s)", flush=True)
    print(write_outputs(args, rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
