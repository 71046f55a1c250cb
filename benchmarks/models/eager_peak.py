#!/usr/bin/env python3
"""graph_opt.auto_checkpoint on the zoo's models and those outside it in eager PyTorch
(issue 53, item 6; issue 82, item 3; docs/Checkpointing.md, "peak= in eager PyTorch").

    eager_peak.py --models resnet50:default[,hf-distilbert:default,...]
                  [--shares 0.9,0.75,0.6] [--no-per-block] [--steps 3] [--timed 8]
                  [--threads N] [-o DIR]

Per model (built as the harness builds it: peers.build, dropout on), in one process:

1. The plain step's whole peak U: one profiled step (peers.peak_bytes_of: c10's CPU
   allocator events, the running total's peak above the step's start) plus the parameters,
   buffers and the batch, which were allocated before it.
2. For each share F of `--shares`: the bound inputs + F x (U - inputs) (F of the way from
   what the step holds before it starts to its unbudgeted peak), a fresh copy of the model
   through graph_opt.auto_checkpoint(peak=bound), its whole peak measured the same way
   (outside graph-opt), and `--steps` SGD steps from the same weights and RNG seed with and
   without the plan: the losses must be bitwise equal (dropout on: checkpoint replays the
   RNG). The step times of the plain and the fitted model are timed interleaved (`--timed`
   pairs after one warm-up step each): the median ratio fitted/plain, with the pairs' range.
   A bound auto_checkpoint refuses is reported with its message.

3. Per-block checkpointing as users turn it on (peers.per_block_checkpoint: Hugging Face's
   gradient_checkpointing_enable() where the model has it, torch.utils.checkpoint around
   every block otherwise): its whole peak P measured, then auto_checkpoint(peak=P) on a
   fresh copy, and the two timed interleaved (`--timed` pairs): graph-opt's time over
   per-block's, the median ratio and its 95% bootstrap interval (peak_bound.ratio_interval):
   "faster" or "slower" only where the interval excludes 1 (issue 82, item 3: at equal
   measured peak, graph-opt no slower). `--no-per-block` skips it; a model with no block
   reports why.

Checks printed per model (and in the JSON): every fitted point measured <= its bound,
losses equal, each binding bound's point within 5% under it (WITHIN), a smaller bound
never measuring higher, and graph-opt not slower than per-block checkpointing at its peak.
Output: DIR/eager_peak.json and DIR/eager_peak.md. Exit 0 when all checks hold, 1 when one
failed, 2 on bad arguments.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers  # noqa: E402
from peak_bound import ratio_interval, verdict  # noqa: E402

MiB = 2 ** 20
WITHIN = 0.05  # a binding bound's measured peak within this share under it (issue 82: 5%)


def held_bytes(step, args):
    """What the step holds before it starts: parameters, buffers and the batch."""
    tensors = [*step.parameters(), *step.buffers(), *(a for a in args if hasattr(a, "untyped_storage"))]
    return sum(t.untyped_storage().nbytes() for t in {id(t): t for t in tensors}.values())


def whole_peak(step, args):
    """One profiled step's allocations above its start, plus what it holds (held_bytes);
    the gradients and the model's state (batch norm's running statistics) put back."""
    saved = peers.snapshot(step)
    peers.clear_grads(list(step.parameters()))
    above, _, _ = peers.peak_bytes_of(peers.training_step(step, args))
    peers.clear_grads(list(step.parameters()))
    peers.restore(step, saved)
    return above + held_bytes(step, args)


def losses(step, args, steps, seed=7):
    import torch

    opt = torch.optim.SGD(step.parameters(), lr=0.01)
    torch.manual_seed(seed)
    out = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        (loss,) = step(*args)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def step_times(modules, args, pairs):
    """Interleaved step times after one warm-up step each: `pairs` rounds, each running every
    module once, the order turned by one each round (A B C, B C A, ...). One list of times
    per module, in `modules`' order."""
    runs = [peers.training_step(m, args) for m in modules]
    times = [[] for _ in modules]
    for run, module in zip(runs, modules):
        run()
        peers.clear_grads(list(module.parameters()))
    for i in range(pairs):
        for k in range(len(modules)):
            j = (i + k) % len(modules)
            start = time.perf_counter()
            runs[j]()
            times[j].append(time.perf_counter() - start)
            peers.clear_grads(list(modules[j].parameters()))
    return times


def timing(base, other):
    """other's time over base's (lists from step_times): the median ratio, its 95% bootstrap
    interval, the verdict, and the per-pair ratios' range."""
    ratio, low, high = ratio_interval(base, other)
    ratios = sorted(y / x for x, y in zip(base, other))
    return {"time_ratio": ratio, "time_interval": [low, high],
            "time_verdict": verdict(ratio, low, high), "time_ratio_range": [ratios[0], ratios[-1]]}


def fit(step, args, bound, steps, pairs, timed=True):
    """auto_checkpoint(peak=bound) on a fresh copy of `step`: its measured whole peak, its
    losses against the plain step's, and (with `timed`; else the caller times it) its step
    time against the plain step's over interleaved pairs. Returns (the point: status
    "refused" with graph-opt's message where it refuses the bound; the fitted copy, or
    None)."""
    import graph_opt

    point = {"bound_bytes": bound}
    fitted = copy.deepcopy(step)
    start = time.perf_counter()
    try:
        graph_opt.auto_checkpoint(fitted, args, peak=bound, loss_fn=lambda m, *xs: m(*xs)[0])
    except graph_opt.Error as e:
        point.update(status="refused", message=str(e), plan_seconds=time.perf_counter() - start)
        return point, None
    point["plan_seconds"] = time.perf_counter() - start
    plan = fitted.graph_opt_plan
    point.update(status="planned", regions=fitted.graph_opt_regions,
                 rounds=plan["eager_rounds"], whole=plan.get("eager_regions_whole"),
                 graph_opt_measured_bytes=plan["eager_measured_peak_bytes"],
                 measured_bytes=whole_peak(fitted, args))
    want = losses(copy.deepcopy(step), args, steps)
    got = losses(copy.deepcopy(fitted), args, steps)
    point["losses_equal"] = want == got
    point["losses"] = {"plain": want, "fitted": got}
    if pairs and timed:
        a, b = step_times([copy.deepcopy(step), copy.deepcopy(fitted)], args, pairs)
        point.update(plain_seconds=statistics.median(a), fitted_seconds=statistics.median(b),
                     **timing(a, b))
    return point, fitted


def describe(point):
    if point["status"] != "planned":
        return f"bound {point['bound_bytes'] / MiB:.1f} MiB refused: {point['message']}"
    return (f"bound {point['bound_bytes'] / MiB:.1f} MiB, measured "
            f"{point['measured_bytes'] / MiB:.1f} MiB "
            f"({point['measured_bytes'] / point['bound_bytes']:.3f} of it; graph-opt's "
            f"allocator {point['graph_opt_measured_bytes'] / MiB:.1f}), {point['rounds']} "
            f"round(s), {len(point['regions'])} regions, losses "
            f"{'equal' if point['losses_equal'] else 'DIFFER'}"
            + (f", time {point['time_ratio']:.3f}x [{point['time_interval'][0]:.3f}, "
               f"{point['time_interval'][1]:.3f}] {point['time_verdict']}"
               if "time_ratio" in point else ""))


def per_block(step, args, steps, pairs):
    """Per-block checkpointing's measured peak, and graph-opt's plan at that peak timed
    against it (item 3 of the docstring)."""
    blocked = copy.deepcopy(step)
    try:
        how = peers.per_block_checkpoint(blocked)
    except peers.PeerError as e:
        return {"status": "no blocks", "message": str(e)}
    peak = whole_peak(blocked, args)
    point, fitted = fit(step, args, peak, steps, pairs, timed=False)
    result = {"status": "measured", "how": how, "peak_bytes": peak, "graph_opt": point}
    if pairs and fitted is not None:
        plain, blocks, fitted = step_times(
            [copy.deepcopy(step), copy.deepcopy(blocked), copy.deepcopy(fitted)], args, pairs)
        result.update(plain_seconds=statistics.median(plain),
                      seconds=statistics.median(blocks), against_plain=timing(plain, blocks))
        point.update(fitted_seconds=statistics.median(fitted), against_plain=timing(plain, fitted),
                     **timing(blocks, fitted))
    return result


def run_model(spec, shares, steps, pairs, with_per_block=True):
    step, args, _ = peers.build(spec, None, dropout=True)
    args = tuple(args)
    held = held_bytes(step, args)
    plain_peak = whole_peak(step, args)
    print(f"{spec}: plain whole peak {plain_peak / MiB:.1f} MiB ({held / MiB:.1f} MiB held "
          f"before the step)", flush=True)
    result = {"model": spec, "plain_peak_bytes": plain_peak, "held_bytes": held, "points": []}
    for share in shares:
        point, _ = fit(step, args, held + int(share * (plain_peak - held)), steps, pairs)
        point["share"] = share
        print(f"  share {share}: {describe(point)}", flush=True)
        result["points"].append(point)
    if with_per_block:
        block = per_block(step, args, steps, pairs)
        result["per_block"] = block
        if block["status"] == "measured":
            print(f"  per-block ({block['how']}): {block['peak_bytes'] / MiB:.1f} MiB; "
                  f"graph-opt at it: {describe(block['graph_opt'])} (time against per-block)",
                  flush=True)
        else:
            print(f"  per-block: {block['message']}", flush=True)
    result["checks"] = checks(result)
    failed = [k for k, v in result["checks"].items() if not v]
    print(f"  checks: {'all hold' if not failed else 'FAILED: ' + ', '.join(failed)}", flush=True)
    return result


def checks(result):
    planned = [p for p in result["points"] if p["status"] == "planned"]
    block = result.get("per_block", {})
    if block.get("status") == "measured":
        planned_block = [block["graph_opt"]] if block["graph_opt"]["status"] == "planned" else []
    else:
        planned_block = []
    every = planned + planned_block
    binding = [p for p in every if p["bound_bytes"] < result["plain_peak_bytes"]]
    by_bound = sorted(planned, key=lambda p: p["bound_bytes"])
    out = {
        "under_bound": all(p["measured_bytes"] <= p["bound_bytes"] for p in every),
        "losses_equal": all(p["losses_equal"] for p in every),
        "within": all(p["measured_bytes"] >= (1 - WITHIN) * p["bound_bytes"] for p in binding),
        "smaller_bound_not_higher": all(a["measured_bytes"] <= b["measured_bytes"]
                                        for a, b in zip(by_bound, by_bound[1:])),
    }
    if block.get("status") == "measured":
        g = block["graph_opt"]
        out["per_block_met"] = g["status"] == "planned"
        if "time_verdict" in g:
            out["not_slower_than_per_block"] = g["time_verdict"] != "slower"
    return out


def _time_cell(p):
    if "time_ratio" not in p:
        return ""
    low, high = p["time_interval"]
    return f"{p['time_ratio']:.3f} [{low:.3f}, {high:.3f}] {p['time_verdict']}"


def _regions_cell(p):
    return (f"{len(p['regions'])}" + (f" ({p['whole']} whole)" if p.get("whole") else "")
            + ": " + ", ".join(p["regions"][:4]) + (", ..." if len(p["regions"]) > 4 else ""))


def markdown(results):
    lines = ["| model | bound (MiB) | measured (MiB) | of bound | plain (MiB) | rounds | "
             "losses | time fitted/plain [95% interval] | regions |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for p in r["points"]:
            cells = [r["model"], f"{p['bound_bytes'] / MiB:.1f}"]
            if p["status"] != "planned":
                cells += ["refused", "", f"{r['plain_peak_bytes'] / MiB:.1f}", "", "", "",
                          p["message"].replace("|", "/")[:160]]
            else:
                cells += [f"{p['measured_bytes'] / MiB:.1f}",
                          f"{p['measured_bytes'] / p['bound_bytes']:.3f}",
                          f"{r['plain_peak_bytes'] / MiB:.1f}", str(p["rounds"]),
                          "equal" if p["losses_equal"] else "DIFFER", _time_cell(p),
                          _regions_cell(p)]
            lines.append("| " + " | ".join(cells) + " |")
    blocks = [r for r in results if "per_block" in r]
    if blocks:
        lines += ["", "Per-block checkpointing, and graph-opt at its measured peak:", "",
                  "| model | per-block | its peak (MiB) | its time / plain | graph-opt measured "
                  "(MiB) | rounds | losses | graph-opt time / per-block [95% interval] | "
                  "graph-opt time / plain | regions |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in blocks:
            b = r["per_block"]
            if b["status"] != "measured":
                lines.append(f"| {r['model']} | {b['message'][:120]} |" + " |" * 8)
                continue
            g = b["graph_opt"]
            cells = [r["model"], b["how"], f"{b['peak_bytes'] / MiB:.1f}",
                     _time_cell(b["against_plain"]) if "against_plain" in b else ""]
            if g["status"] != "planned":
                cells += ["refused", "", "", g["message"].replace("|", "/")[:160], "", ""]
            else:
                cells += [f"{g['measured_bytes'] / MiB:.1f}", str(g["rounds"]),
                          "equal" if g["losses_equal"] else "DIFFER", _time_cell(g),
                          _time_cell(g["against_plain"]) if "against_plain" in g else "",
                          _regions_cell(g)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(results, path):
    """Per model: step time over plain's against the measured whole peak, for graph-opt's
    points at each share, per-block checkpointing, and graph-opt at per-block's peak (the
    Pareto view: lower and further left is better). No plot without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return False
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, r in zip(axes[0], results):
        ax.plot([r["plain_peak_bytes"] / MiB], [1.0], "ks", label="plain")
        shares = [p for p in r["points"] if p["status"] == "planned" and "time_ratio" in p]
        if shares:
            ax.plot([p["measured_bytes"] / MiB for p in shares],
                    [p["time_ratio"] for p in shares], "o-", color="tab:blue",
                    label="graph-opt (shares)")
        b = r.get("per_block", {})
        if b.get("status") == "measured" and "against_plain" in b:
            ax.plot([b["peak_bytes"] / MiB], [b["against_plain"]["time_ratio"]], "^",
                    color="tab:orange", label="per-block")
            g = b["graph_opt"]
            if "against_plain" in g:
                ax.plot([g["measured_bytes"] / MiB], [g["against_plain"]["time_ratio"]], "D",
                        color="tab:green", label="graph-opt at per-block's peak")
        ax.set_title(r["model"], fontsize=9)
        ax.set_xlabel("measured whole-step peak (MiB)")
        ax.set_ylabel("step time / plain")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50:default")
    ap.add_argument("--shares", default="0.9,0.75,0.6",
                    help="bounds as shares of the way from the inputs to the plain peak "
                    "('': none, the per-block comparison alone)")
    ap.add_argument("--steps", type=int, default=3, help="SGD steps whose losses are compared")
    ap.add_argument("--timed", type=int, default=8, help="interleaved timed rounds (0: none)")
    ap.add_argument("--no-per-block", dest="per_block", action="store_false",
                    help="skip the comparison with per-block checkpointing")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--out", default="build/bench/eager")
    a = ap.parse_args(argv)
    try:  # an empty list: the per-block comparison alone
        shares = [float(s) for s in a.shares.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--shares: not a list of numbers: {a.shares!r}")
    if not all(0 < s < 1 for s in shares):
        ap.error(f"--shares: each share must lie between 0 and 1 (got {a.shares})")
    import torch

    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    results = []
    for model in filter(None, a.models.split(",")):
        results.append(run_model(model, shares, a.steps, a.timed, a.per_block))
        for name, text in (("eager_peak.json", json.dumps(results, indent=1)),
                           ("eager_peak.md", markdown(results))):  # after each model
            tmp = os.path.join(a.out, name + ".tmp")
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, os.path.join(a.out, name))
    plot(results, os.path.join(a.out, "eager_peak.png"))
    print(markdown(results))
    ok = all(all(r["checks"].values()) for r in results)
    print("all checks hold" if ok else "a check FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
