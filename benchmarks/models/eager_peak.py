#!/usr/bin/env python3
"""graph_opt.auto_checkpoint on the zoo's models in eager PyTorch (issue 53, item 6;
docs/Checkpointing.md, "peak= in eager PyTorch").

    eager_peak.py --models resnet50:default[,gpt2:default,...] [--shares 0.9,0.75,0.6]
                  [--steps 3] [--timed 5] [--threads N] [-o DIR]

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

Checks printed per model (and in the JSON): every fitted point measured <= its bound, losses
equal. Output: DIR/eager_peak.json and DIR/eager_peak.md. Exit 0 when all checks hold, 1
when one failed, 2 on bad arguments.
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

MiB = 2 ** 20


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


def step_times(plain, fitted, args, pairs):
    """Interleaved step times (A B, B A, ...) after one warm-up step each: (plain, fitted)."""
    runs = {id(plain): peers.training_step(plain, args), id(fitted): peers.training_step(fitted, args)}
    times = {id(plain): [], id(fitted): []}
    for module in (plain, fitted):
        runs[id(module)]()
        peers.clear_grads(list(module.parameters()))
    for i in range(pairs):
        for module in ((plain, fitted) if i % 2 == 0 else (fitted, plain)):
            start = time.perf_counter()
            runs[id(module)]()
            times[id(module)].append(time.perf_counter() - start)
            peers.clear_grads(list(module.parameters()))
    return times[id(plain)], times[id(fitted)]


def run_model(spec, shares, steps, pairs):
    import graph_opt

    step, args, _ = peers.build(spec, None, dropout=True)
    args = tuple(args)
    held = held_bytes(step, args)
    plain_peak = whole_peak(step, args)
    print(f"{spec}: plain whole peak {plain_peak / MiB:.1f} MiB ({held / MiB:.1f} MiB held "
          f"before the step)", flush=True)
    result = {"model": spec, "plain_peak_bytes": plain_peak, "held_bytes": held, "points": []}
    for share in shares:
        bound = held + int(share * (plain_peak - held))
        point = {"share": share, "bound_bytes": bound}
        fitted = copy.deepcopy(step)
        start = time.perf_counter()
        try:
            graph_opt.auto_checkpoint(fitted, args, peak=bound,
                                      loss_fn=lambda m, *xs: m(*xs)[0])
        except graph_opt.Error as e:
            point.update(status="refused", message=str(e), plan_seconds=time.perf_counter() - start)
            print(f"  share {share}: bound {bound / MiB:.1f} MiB refused: {e}", flush=True)
            result["points"].append(point)
            continue
        point["plan_seconds"] = time.perf_counter() - start
        plan = fitted.graph_opt_plan
        point.update(status="planned", regions=fitted.graph_opt_regions,
                     rounds=plan["eager_rounds"],
                     graph_opt_measured_bytes=plan["eager_measured_peak_bytes"],
                     measured_bytes=whole_peak(fitted, args))
        want = losses(copy.deepcopy(step), args, steps)
        got = losses(copy.deepcopy(fitted), args, steps)
        point["losses_equal"] = want == got
        point["losses"] = {"plain": want, "fitted": got}
        if pairs:
            a, b = step_times(copy.deepcopy(step), copy.deepcopy(fitted), args, pairs)
            ratios = sorted(y / x for x, y in zip(a, b))
            point.update(plain_seconds=statistics.median(a), fitted_seconds=statistics.median(b),
                         time_ratio=statistics.median(ratios),
                         time_ratio_range=[ratios[0], ratios[-1]])
        print(f"  share {share}: bound {bound / MiB:.1f} MiB, measured "
              f"{point['measured_bytes'] / MiB:.1f} MiB ({point['measured_bytes'] / bound:.3f} "
              f"of it; graph-opt's allocator {point['graph_opt_measured_bytes'] / MiB:.1f}), "
              f"{point['rounds']} round(s), {len(point['regions'])} regions, losses "
              f"{'equal' if point['losses_equal'] else 'DIFFER'}"
              + (f", time {point['time_ratio']:.3f}x [{point['time_ratio_range'][0]:.3f}, "
                 f"{point['time_ratio_range'][1]:.3f}]" if pairs else ""), flush=True)
        result["points"].append(point)
    result["checks"] = {
        "under_bound": all(p["measured_bytes"] <= p["bound_bytes"]
                           for p in result["points"] if p["status"] == "planned"),
        "losses_equal": all(p["losses_equal"] for p in result["points"]
                            if p["status"] == "planned"),
    }
    return result


def markdown(results):
    lines = ["| model | bound (MiB) | measured (MiB) | of bound | plain (MiB) | rounds | "
             "losses | time fitted/plain [range] | regions |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for p in r["points"]:
            cells = [r["model"], f"{p['bound_bytes'] / MiB:.1f}"]
            if p["status"] != "planned":
                cells += ["refused", "", f"{r['plain_peak_bytes'] / MiB:.1f}", "", "", "",
                          p["message"].replace("|", "/")[:160]]
            else:
                t = (f"{p['time_ratio']:.3f} [{p['time_ratio_range'][0]:.3f}, "
                     f"{p['time_ratio_range'][1]:.3f}]" if "time_ratio" in p else "")
                cells += [f"{p['measured_bytes'] / MiB:.1f}",
                          f"{p['measured_bytes'] / p['bound_bytes']:.3f}",
                          f"{r['plain_peak_bytes'] / MiB:.1f}", str(p["rounds"]),
                          "equal" if p["losses_equal"] else "DIFFER", t,
                          f"{len(p['regions'])}: " + ", ".join(p["regions"][:4])
                          + (", ..." if len(p["regions"]) > 4 else "")]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50:default")
    ap.add_argument("--shares", default="0.9,0.75,0.6")
    ap.add_argument("--steps", type=int, default=3, help="SGD steps whose losses are compared")
    ap.add_argument("--timed", type=int, default=5, help="interleaved timed pairs (0: none)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--out", default="build/bench/eager")
    a = ap.parse_args(argv)
    try:
        shares = [float(s) for s in a.shares.split(",")]
    except ValueError:
        ap.error(f"--shares: not a list of numbers: {a.shares!r}")
    if not all(0 < s < 1 for s in shares):
        ap.error(f"--shares: each share must lie between 0 and 1 (got {a.shares})")
    import torch

    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    results = []
    for model in filter(None, a.models.split(",")):
        results.append(run_model(model, shares, a.steps, a.timed))
        for name, text in (("eager_peak.json", json.dumps(results, indent=1)),
                           ("eager_peak.md", markdown(results))):  # after each model
            tmp = os.path.join(a.out, name + ".tmp")
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, os.path.join(a.out, name))
    print(markdown(results))
    ok = all(all(r["checks"].values()) for r in results)
    print("all checks hold" if ok else "a check FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
