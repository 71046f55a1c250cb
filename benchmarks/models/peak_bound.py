#!/usr/bin/env python3
"""peak= under torch.compile against torch's knapsack, at equal measured peak (issue 53,
items 2 and 4; docs/TorchCompile.md, "peak= against the knapsack").

    peak_bound.py --models gpt2:default[,bert:default,...] [--budgets 0.5,0.3,0.1,0.05]
                  [--extra 0.9,0.7] [--steps 10] [--warmup 2] [--threads N]
                  [--pipeline P] [--predict halves|inductor] [-o DIR]

Per model (built as the harness builds it: peers.build, dropout off so that compiled steps
are deterministic to compare), in one process:

1. `compile`: torch.compile (Inductor) of the training step, no budget: its measured peak is
   the unbudgeted peak U.
2. For each knapsack budget B (`--budgets`): torch.compile at activation_memory_budget=B
   (`knapsack@B`), its peak measured; then graph-opt's partitioner with peak= that measured
   peak (`graph-opt@peak(B)`, graph_opt.backend(peak=..., verify=True): its partition is
   checked against torch's own on every forward output and gradient when it compiles;
   `--pipeline` replaces the partitioner's default pipeline, e.g.
   "repeat{cse,canonicalize,dce},checkpoint{activations=30%,cost=inductor}"; `--predict
   inductor` prices partitions by Inductor's own code, predict="inductor").
   The two steps are timed interleaved (A, B, B, A, ... for --steps pairs after --warmup
   steps each); the ratio of graph-opt's median step time to the knapsack's is printed with
   a 95% interval (bootstrap over the pairs, 2000 resamples): "faster" or "slower" only where
   the interval excludes 1, "tie" otherwise.
3. For each fraction F of `--extra`: graph-opt at peak = inputs + F x (U - inputs), for the
   bounds the knapsack's points do not reach (item 2's sweep from the unbudgeted peak down).
4. Per-block torch.utils.checkpoint under torch.compile (`checkpoint-compile`: every block
   find_blocks finds), a third point for the Pareto plot.

Peaks: one profiled step (peers.peak_bytes_of: c10's CPU allocator events, the running
total's peak above the step's start) plus the bytes of the parameters and the batch, which
were allocated before it: the whole step's peak as peak= bounds it. A graph-opt bound the
plans cannot reach is reported with graph-opt's refusal (the least peak its plans reached).

Checks printed per model (and in the JSON): every graph-opt point measured <= its bound;
within 5% under it where it binds (the bound is under U; 10% until issue 82); monotone (a
smaller bound never measures higher); never above U (a budget no worse than none). Models:
the zoo's (NAME:SIZE) and those outside it, built from configs (unseen_models.py:
hf-causal-lm, hf-distilbert, hf-bart, hf-vit, mobilenet_v2, deep-mlp). Output: DIR/peak_bound.json, DIR/peak_bound.md (the tables), and
DIR/pareto-MODEL.png (measured peak against median step time, the three systems) where
matplotlib is there. Exit 0 when written, 1 when a check failed, 2 on bad arguments.
"""
import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers  # noqa: E402

MiB = 2 ** 20
BOOTSTRAP = 2000
WITHIN = 0.05  # a binding bound's measured peak within this share under it (issue 82: 5%)


def whole_peak(run_step, step, args):
    """The whole step's peak: one profiled step's allocations above its start, plus the
    parameters and the batch."""
    peers.clear_grads(list(step.parameters()))
    above, _, _ = peers.peak_bytes_of(run_step)
    peers.clear_grads(list(step.parameters()))
    return above + peers.held_bytes(step, args)


def compiled(step, args, backend="inductor", budget=None, warmup=2):
    """A compiled copy of the step (its own parameters), compiled and warmed up: (run_step,
    the copy, compile seconds)."""
    import torch
    import torch._functorch.config as functorch_config

    mine = copy.deepcopy(step)
    inner = peers.training_step(torch.compile(mine, backend=backend), args)

    def run(*a, **k):
        # every step under the budget: a step that recompiles (a guard that fails on the
        # second call) would otherwise partition at torch's default and measure that
        with functorch_config.patch(activation_memory_budget=1.0 if budget is None
                                    else budget):
            return inner(*a, **k)
    run.module = inner.module
    start = time.perf_counter()
    peers.clear_grads(list(mine.parameters()))
    run()
    seconds = time.perf_counter() - start
    for _ in range(warmup):
        peers.clear_grads(list(mine.parameters()))
        run()
    return run, mine, seconds


def timed(run, module):
    peers.clear_grads(list(module.parameters()))
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def interleaved(a, b, steps):
    """(times of a, times of b): pairs in alternating order (a b, b a, ...)."""
    ta, tb = [], []
    for i in range(steps):
        if i % 2 == 0:
            ta.append(timed(*a))
            tb.append(timed(*b))
        else:
            tb.append(timed(*b))
            ta.append(timed(*a))
    return ta, tb


def ratio_interval(ta, tb, seed=0):
    """median(tb) / median(ta) and its 95% bootstrap interval over the pairs."""
    rng = random.Random(seed)
    n = len(ta)
    ratios = []
    for _ in range(BOOTSTRAP):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(tb[i] for i in idx)
                      / statistics.median(ta[i] for i in idx))
    ratios.sort()
    return (statistics.median(tb) / statistics.median(ta),
            ratios[int(0.025 * BOOTSTRAP)], ratios[int(0.975 * BOOTSTRAP) - 1])


def verdict(ratio, low, high):
    if high < 1:
        return "faster"
    if low > 1:
        return "slower"
    return "tie"


def _reason(error):
    """The backend's own message inside torch's BackendCompilerFailed: the first non-empty
    line after "raised:" (torch's hints about TORCHDYNAMO_VERBOSE follow it)."""
    lines = [line.strip() for line in str(error).splitlines()]
    for i, line in enumerate(lines):
        if line.endswith("raised:"):
            return next((rest for rest in lines[i + 1:] if rest), line)
    return lines[0] if lines else type(error).__name__


def graph_opt_point(step, args, bound, warmup, pipeline=None, predict="halves"):
    """graph-opt's partitioner at peak=bound (running `pipeline`, default the partitioner's
    own): (run, module, row) or (None, None, row) where it refused the bound."""
    import torch._dynamo

    graph_opt = peers._graph_opt()  # the installed package or the build tree's
    graph_opt.compile.reset_stats()
    try:
        options = {"pipeline": pipeline} if pipeline else {}
        options["predict"] = predict
        run, module, seconds = compiled(step, args, graph_opt.backend(
            peak=bound, strict=True, verify=True, **options), warmup=warmup)
    except torch._dynamo.exc.BackendCompilerFailed as e:
        return None, None, {"bound": bound, "error": _reason(e)}
    stats = graph_opt.compile.stats()
    plans = stats["plans"]
    row = {"bound": bound, "compile_seconds": seconds,
           "planning_seconds": stats["planning_seconds"],
           "partition_seconds": stats["partition_seconds"],
           "verify_seconds": stats["verify_seconds"],
           "predicted": max(p["halves_peak_bytes"] for p in plans) if plans else None,
           "rounds": [p.get("peak_rounds") for p in plans],
           "verified": [p.get("verified") for p in plans], "graphs": len(plans),
           "fallbacks": stats["fallbacks"],
           # which candidate each graph got: graph-opt's plan, or torch's own partition
           # where that was chosen (docs/TorchCompile.md, "Never worse than no budget")
           "partitions": [p.get("partition") for p in plans]}
    return run, module, row


def run_model(spec, budgets, extra, steps, warmup, out, pipeline=None, predict="halves"):
    import torch
    import torch._dynamo

    step, args, _ = peers.build(spec, None, dropout=False)
    held = peers.held_bytes(step, args)
    result = {"model": spec, "input_bytes": held, "knapsack": [], "graph_opt": [],
              "extra": [], "pipeline": pipeline, "predict": predict}
    torch._dynamo.reset()
    run, module, seconds = compiled(step, args, warmup=warmup)
    unbudgeted = whole_peak(run, module, args)
    plain_times = [timed(run, module) for _ in range(steps)]
    result["compile"] = {"peak": unbudgeted, "compile_seconds": seconds,
                         "median_seconds": statistics.median(plain_times)}
    print(f"{spec}: inputs {held / MiB:.1f} MiB, compile peak {unbudgeted / MiB:.1f} MiB, "
          f"step {statistics.median(plain_times) * 1e3:.1f} ms", flush=True)
    del run, module
    for budget in budgets:
        torch._dynamo.reset()
        ka, km, kseconds = compiled(step, args, budget=budget, warmup=warmup)
        kpeak = whole_peak(ka, km, args)
        krow = {"budget": budget, "peak": kpeak, "compile_seconds": kseconds}
        result["knapsack"].append(krow)
        ga, gm, grow = graph_opt_point(step, args, kpeak, warmup, pipeline, predict)
        if ga is not None:
            grow["peak"] = whole_peak(ga, gm, args)
            ta, tb = interleaved((ka, km), (ga, gm), steps)
            r, lo, hi = ratio_interval(ta, tb)
            krow["median_seconds"] = statistics.median(ta)
            grow.update(median_seconds=statistics.median(tb), time_ratio=r,
                        interval=[lo, hi], verdict=verdict(r, lo, hi))
            print(f"  knapsack@{budget}: peak {kpeak / MiB:.1f} MiB | graph-opt@peak "
                  f"{grow['peak'] / MiB:.1f} MiB ({grow['peak'] / kpeak:.3f} of the bound, "
                  f"predicted {grow['predicted'] / MiB:.1f}), time x{r:.3f} "
                  f"[{lo:.3f}, {hi:.3f}] {grow['verdict']}", flush=True)
        else:
            print(f"  knapsack@{budget}: peak {kpeak / MiB:.1f} MiB | graph-opt: "
                  f"{grow['error']}", flush=True)
        result["graph_opt"].append(grow)
        del ka, km, ga, gm
    for fraction in extra:
        bound = int(held + fraction * (unbudgeted - held))
        torch._dynamo.reset()
        ga, gm, grow = graph_opt_point(step, args, bound, warmup, pipeline, predict)
        grow["fraction"] = fraction
        if ga is not None:
            grow["peak"] = whole_peak(ga, gm, args)
            times = [timed(ga, gm) for _ in range(steps)]
            grow["median_seconds"] = statistics.median(times)
            print(f"  peak={fraction:g} of the way: bound {bound / MiB:.1f} MiB, measured "
                  f"{grow['peak'] / MiB:.1f} ({grow['peak'] / bound:.3f}), predicted "
                  f"{grow['predicted'] / MiB:.1f}", flush=True)
        else:
            print(f"  peak={fraction:g} of the way: bound {bound / MiB:.1f} MiB: "
                  f"{grow['error']}", flush=True)
        result["extra"].append(grow)
        del ga, gm
    torch._dynamo.reset()
    try:
        blocks = copy.deepcopy(step)
        peers.checkpoint_blocks(blocks)
        cr, cm, _ = compiled(blocks, args, warmup=warmup)
        result["checkpoint_compile"] = {
            "peak": whole_peak(cr, cm, args),
            "median_seconds": statistics.median(timed(cr, cm) for _ in range(steps))}
        del cr, cm, blocks
    except Exception as e:  # a peer that cannot run this model (HF Llama's mask under
        # per-block checkpointing and compile) is reported, not fatal
        result["checkpoint_compile"] = {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    result["checks"] = checks(result)
    return result


def checks(result):
    """Every graph-opt point within its bound, within WITHIN under it where it binds,
    monotone in the bound, and never above the unbudgeted step's peak."""
    points = [p for p in result["graph_opt"] + result["extra"] if "peak" in p]
    unbudgeted = result["compile"]["peak"]
    over = [p["bound"] for p in points if p["peak"] > p["bound"]]
    above_unbudgeted = [p["bound"] for p in points if p["peak"] > unbudgeted]
    loose = [p["bound"] for p in points
             if p["bound"] < unbudgeted and p["peak"] < (1 - WITHIN) * p["bound"]]
    ordered = sorted(points, key=lambda p: p["bound"])
    not_monotone = [(a["bound"], b["bound"]) for a, b in zip(ordered, ordered[1:])
                    if a["peak"] > b["peak"]]
    return {"over_bound": over, "too_far_under": loose, "within": WITHIN,
            "above_unbudgeted": above_unbudgeted,
            "not_monotone": not_monotone, "points": len(points)}


def markdown(results):
    lines = ["| model | knapsack budget | knapsack peak (MiB) | graph-opt peak (MiB) | "
             "of the bound | predicted (MiB) | time ratio [95%] | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for k, g in zip(r["knapsack"], r["graph_opt"]):
            if "peak" not in g:
                lines.append(f"| {r['model']} | {k['budget']} | {k['peak'] / MiB:.1f} | "
                             f"refused: {g['error']} | | | | |")
                continue
            lines.append(
                f"| {r['model']} | {k['budget']} | {k['peak'] / MiB:.1f} | "
                f"{g['peak'] / MiB:.1f} | {g['peak'] / k['peak']:.3f} | "
                f"{g['predicted'] / MiB:.1f} | {g['time_ratio']:.3f} "
                f"[{g['interval'][0]:.3f}, {g['interval'][1]:.3f}] | {g['verdict']} |")
    return "\n".join(lines) + "\n"


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    series = [("torch.compile knapsack", [k for k in result["knapsack"] if "median_seconds" in k],
               "o-"),
              ("graph-opt peak=", sorted((g for g in result["graph_opt"] + result["extra"]
                                          if "median_seconds" in g), key=lambda g: g["peak"]),
               "s-")]
    for label, points, style in series:
        if points:
            ax.plot([p["peak"] / MiB for p in points],
                    [p["median_seconds"] * 1e3 for p in points], style, label=label)
    plain = result["compile"]
    ax.plot([plain["peak"] / MiB], [plain["median_seconds"] * 1e3], "k*", ms=10,
            label="torch.compile, no budget")
    block = result.get("checkpoint_compile", {})
    if "peak" in block:
        ax.plot([block["peak"] / MiB], [block["median_seconds"] * 1e3], "^",
                label="per-block checkpoint, compiled")
    ax.set_xlabel("measured peak (MiB, whole step)")
    ax.set_ylabel("median step time (ms)")
    ax.set_title(result["model"])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png")
    os.replace(path + ".tmp.png", path)
    plt.close(fig)
    return True


def fresh_compiles(threads, out):
    """Torch set up for these benchmarks: warnings off, `threads` CPU threads where given,
    every configuration compiled afresh (a cached compile would skip the partitioner), and
    the output folder made."""
    warnings.filterwarnings("ignore")
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    if threads:
        torch.set_num_threads(threads)
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    os.makedirs(out, exist_ok=True)


def write_files(out, texts):
    """Each {name: text} written to a temporary file and renamed into `out`."""
    for name, text in texts.items():
        path = os.path.join(out, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="peak_bound.py", description=__doc__.split("\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--budgets", default="0.5,0.3,0.1,0.05")
    parser.add_argument("--extra", default="")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--predict", default="halves", choices=("halves", "inductor"),
                        help="how graph-opt's partitioner prices a partition (predict=)")
    parser.add_argument("--pipeline", help="graph-opt's pipeline (default the partitioner's; "
                        "peak= replaces its checkpoint bounds)")
    parser.add_argument("-o", "--out", default="build/bench/peak")
    a = parser.parse_args(argv)
    try:
        budgets = [float(b) for b in a.budgets.split(",") if b]
        extra = [float(f) for f in a.extra.split(",") if f]
    except ValueError as e:
        parser.error(f"--budgets/--extra: {e}")
    if a.steps < 2:
        parser.error("--steps: at least 2")
    fresh_compiles(a.threads, a.out)
    results = []
    for spec in a.models.split(","):
        results.append(run_model(spec, budgets, extra, a.steps, a.warmup, a.out, a.pipeline,
                                 a.predict))
        name = spec.replace(":", "-")
        plot(results[-1], os.path.join(a.out, f"pareto-{name}.png"))
        c = results[-1]["checks"]
        print(f"  checks: {c['points']} graph-opt points; over the bound: "
              f"{len(c['over_bound'])}; more than {WITHIN:.0%} under a binding bound: "
              f"{len(c['too_far_under'])}; not monotone: {len(c['not_monotone'])}; above "
              f"the unbudgeted peak: {len(c['above_unbudgeted'])}", flush=True)
        write_files(a.out, {"peak_bound.json": json.dumps(results, indent=1),
                            "peak_bound.md": markdown(results)})  # after each model too
    write_files(a.out, {"peak_bound.json": json.dumps(results, indent=1),
                        "peak_bound.md": markdown(results)})
    print(markdown(results))
    failed = any(r["checks"]["over_bound"] or r["checks"]["not_monotone"]
                 or r["checks"]["above_unbudgeted"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
