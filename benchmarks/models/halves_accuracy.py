#!/usr/bin/env python3
"""How far halves.py's peak prediction is from the measured peak of the step torch.compile
runs, per half (issue 53, item 2; docs/TorchCompile.md, "The peak of the halves").

    halves_accuracy.py --models resnet50:default[,bert:default] [--budgets 1.0,0.5,0.1]
                       [--activations 100,0] [--threads N]

graph-opt's peak= search (compile.py) plans against halves.py's prediction, so a bound is
refused where the prediction, not the step, cannot get under it. Per model (built as the
harness builds it, dropout off) this prints, for torch's partition at each knapsack budget:

  predicted  halves.py on torch's forward and backward: the whole peak, the forward's, the
             backward's, and what crosses (saved), the parameters and the batch included;
  measured   the same step compiled (Inductor) at that budget and profiled (c10's CPU
             allocator events, as peak_bound.py measures): the whole peak, the forward's, the
             bytes live when backward starts, the backward's;

and, for graph-opt's plans at each `--activations` bound (MiB of saved activations, checkpoint's
activations= in bytes, unmet=closest as the peak= search plans), the predicted figures (the
peak= search's own view of them: halves.py, read from Inductor's code where halves.py counts
values whose allocation it cannot tell), and with --measure-plans the plan compiled as the
partition and measured the same way.
Diagnostic output only: nothing is written. Exit 0, or 2 on bad arguments.
"""
import argparse
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers  # noqa: E402

MiB = 2 ** 20


def _profiled(step, args, held, *patches):
    """(whole, forward, at backward start, backward) peaks of one profiled step compiled
    under `patches` (config patch contexts), after a compile and a warm-up step."""
    import contextlib

    import torch

    torch._dynamo.reset()
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        mine = copy.deepcopy(step)
        run = peers.training_step(torch.compile(mine), args)
        for _ in range(3):  # compile, then warm up
            peers.clear_grads(list(mine.parameters()))
            run()
        peers.clear_grads(list(mine.parameters()))
        m = peers.step_memory(run)
    return tuple(m[k] + held for k in ("peak", "forward_peak", "at_backward", "backward_peak"))


def measured(step, args, budget, held):
    """The peaks of the step compiled with torch's partition at knapsack budget `budget`."""
    import torch._functorch.config as functorch_config
    return _profiled(step, args, held, functorch_config.patch(activation_memory_budget=budget))


def measured_plan(step, args, activations, held):
    """The same peaks for graph-opt's plan at `activations` bytes of saved activations
    (unmet=closest, as the peak= search plans), compiled with that plan as the partition."""
    import torch
    import torch._functorch.config as functorch_config
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    graph_opt = peers._graph_opt()
    from graph_opt.joint import import_joint

    class Plan(CustomPartitionerFn):
        def __call__(self, gm, joint_inputs, **kwargs):
            partitioner = graph_opt.partitioner(peak=1 << 50, strict=True, verify=False)
            attempt = partitioner._attempt(
                gm, joint_inputs, kwargs, import_joint(gm, kwargs["num_fwd_outputs"]),
                activations=activations, closest=True)
            return attempt.fw, attempt.bw

        def uuid(self):
            return None

    return _profiled(step, args, held,
                     torch._inductor.config.patch(custom_partitioner_fn=Plan(),
                                                  fx_graph_cache=False),
                     functorch_config.patch(enable_autograd_cache=False))


def predicted_rows(step, args, budgets, activations, inductor=False):
    """halves.py on torch's partitions at `budgets` and graph-opt's plans at `activations`,
    from the joint graph torch.compile hands the partitioner (the step is compiled once with
    a partitioner that records and then returns torch's default partition)."""
    import torch
    import torch._functorch.config as functorch_config
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    graph_opt = peers._graph_opt()
    from graph_opt.candidates import copy_joint
    from graph_opt.halves import halves_peak
    from graph_opt.joint import import_joint

    rows = []

    def row(name, budget, fw, bw, halves, n):
        if inductor:  # Inductor's own code for the halves, read (inductor_read.py)
            from graph_opt.inductor_read import read_halves
            try:
                halves = dict(halves, inductor=read_halves(fw, bw, n))
            except Exception as e:
                halves = dict(halves, inductor={"error": f"{type(e).__name__}: {e}"})
        rows.append((name, budget, halves))

    class Recorder(CustomPartitionerFn):
        def __call__(self, gm, joint_inputs, **kwargs):
            n = kwargs["num_fwd_outputs"]
            for b in budgets:
                with functorch_config.patch(activation_memory_budget=b):
                    fw, bw = min_cut_rematerialization_partition(
                        copy_joint(gm), joint_inputs, **kwargs)
                row(f"knapsack@{b}", b, fw, bw, halves_peak(fw, bw, n), n)
            partitioner = graph_opt.partitioner(peak=1 << 50, strict=True, verify=False)
            # graph-opt's import only where its plans are asked for: torch's partitions are
            # predicted from graphs graph-opt cannot take too (a tensor constant: BART)
            imported = import_joint(gm, n) if activations else None
            for a in activations:
                attempt = partitioner._attempt(
                    gm, joint_inputs, kwargs, imported, activations=int(a * MiB), closest=True)
                row(f"graph-opt activations={a:g}MiB", a, attempt.fw, attempt.bw,
                    attempt.halves, n)
            with functorch_config.patch(activation_memory_budget=1.0):
                return min_cut_rematerialization_partition(gm, joint_inputs, **kwargs)

        def uuid(self):
            return None  # never cached: it must see the joint graph

    torch._dynamo.reset()
    with torch._inductor.config.patch(custom_partitioner_fn=Recorder(), fx_graph_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        mine = copy.deepcopy(step)
        run = peers.training_step(torch.compile(mine), args)
        peers.clear_grads(list(mine.parameters()))
        run()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--budgets", default="1.0,0.5,0.3,0.1")
    parser.add_argument("--activations", default="100,0",
                        help="graph-opt plans' saved-activation bounds, MiB")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--measure-plans", action="store_true",
                        help="also compile and measure each graph-opt plan (a compile each)")
    parser.add_argument("--inductor-read", action="store_true",
                        help="also read each partition's peak from Inductor's own generated "
                             "code (inductor_read.py: slow, seconds per half)")
    args = parser.parse_args(argv)
    try:
        budgets = [float(b) for b in args.budgets.split(",") if b]
        activations = [float(a) for a in args.activations.split(",") if a]
    except ValueError as e:
        parser.error(f"--budgets/--activations: {e}")
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    for spec in args.models.split(","):
        step, inputs, _ = peers.build(spec, None, dropout=False)
        held = peers.held_bytes(step, inputs)
        print(f"{spec}: parameters and batch {held / MiB:.1f} MiB (MiB below; each figure "
              "includes them)", flush=True)
        for name, budget, h in predicted_rows(step, inputs, budgets, activations,
                                              args.inductor_read):
            line = (f"  {name:34s} predicted whole {h['peak_bytes'] / MiB:7.1f} forward "
                    f"{h['forward_peak_bytes'] / MiB:7.1f} backward "
                    f"{h['backward_peak_bytes'] / MiB:7.1f} saved {h['saved_bytes'] / MiB:7.1f}")
            if h.get("priced_by") == "inductor":  # halves.py could not tell: read instead
                line += (f" (read from Inductor's code; halves.py "
                         f"{h['predicted_peak_bytes'] / MiB:.1f})")
            if "inductor" in h:
                r = h["inductor"]
                line += (f" | Inductor's code: error {r['error']}" if "error" in r else
                         f" | Inductor's code whole {r['peak_bytes'] / MiB:7.1f} forward "
                         f"{r['forward_peak_bytes'] / MiB:7.1f} backward "
                         f"{r['backward_peak_bytes'] / MiB:7.1f} ({r['seconds']:.1f} s)")
            plan = name.startswith("graph-opt")
            if budget is not None and (not plan or args.measure_plans):
                whole, forward, at_backward, backward = (
                    measured_plan(step, inputs, int(budget * MiB), held) if plan
                    else measured(step, inputs, budget, held))
                line += (f" | measured whole {whole / MiB:7.1f} forward {forward / MiB:7.1f} "
                         f"at backward start {at_backward / MiB:7.1f} backward "
                         f"{backward / MiB:7.1f}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
