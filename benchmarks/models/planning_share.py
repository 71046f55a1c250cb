#!/usr/bin/env python3
"""graph-opt's share of a torch.compile (issue 53, item 5; docs/TorchCompile.md, "What
planning costs").

    planning_share.py [--models gpt2:default] [--runs 2] [--peak BYTES] [--threads 2]
                      [--torch-min-cut]

Per model and run, in a fresh process each (so that nothing compiled is reused): the
training step (peers.build, dropout off) compiled with graph_opt.backend(verify=False)
(peak= where given), Inductor's caches off, and its first step (compile included) timed;
prints graph_opt.compile.stats()'s planning_seconds, that time and their ratio, then the part
of planning_seconds that was torch's min-cut partitioning the plan's tagged graph
(partition_seconds: torch.compile's default partitioner makes the same call in graph-opt's
place) and the share without it, what graph-opt adds to the compile, one line per run
("RESULT model run planning first_step share partition own_share"). With --torch-min-cut,
torch's default partition of the same joint graph, untagged, is timed inside the same compile
too (torch_min_cut; left out of the first step's time). Exit 1 where a graph fell back.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timing_torchs_min_cut(partitioner, seconds):
    """`partitioner` behind one that first times torch's default partition (its min-cut at
    activation_memory_budget=1.0, what plain torch.compile runs) on a copy of the untagged
    joint graph, appending the time to `seconds`."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.custom_graph_pass import CustomPartitionerFn
    from graph_opt.candidates import copy_joint

    class Timed(CustomPartitionerFn):
        def __call__(self, gm, joint_inputs, **kwargs):
            copy = copy_joint(gm)
            start = time.perf_counter()
            min_cut_rematerialization_partition(copy, joint_inputs, **kwargs)
            seconds.append(time.perf_counter() - start)
            return partitioner(gm, joint_inputs, **kwargs)

        def uuid(self):
            return partitioner.uuid()

        def __getattr__(self, name):
            return getattr(partitioner, name)
    return Timed()


def one_run(model, peak, threads, torch_min_cut):
    sys.path.insert(0, HERE)
    import torch
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    torch.set_num_threads(threads)
    import graph_opt
    import peers
    step, args, _ = peers.build(model, None, dropout=False)
    backend = graph_opt.backend(verify=False, **({"peak": peak} if peak else {}))
    torchs = []
    if torch_min_cut:
        backend.partitioner = timing_torchs_min_cut(backend.partitioner, torchs)
    compiled = torch.compile(step, backend=backend)
    start = time.perf_counter()
    (loss,) = compiled(*args)
    loss.backward()
    total = time.perf_counter() - start - sum(torchs)  # the extra min-cut is not the compile's
    st = graph_opt.compile.stats()
    print(f"{st['planning_seconds']:.2f} {st['partition_seconds']:.2f} {total:.1f} "
          f"{st['fallbacks']} {sum(torchs):.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2:default")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--peak", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-min-cut", action="store_true",
                    help="also time torch's default partition of the same joint graph, "
                         "untagged, inside the same compile (its time is left out of the "
                         "first step's)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        one_run(a.one, a.peak, a.threads, a.torch_min_cut)
        return 0
    failed = False
    for run in range(1, a.runs + 1):
        for model in a.models.split(","):
            cmd = [sys.executable, __file__, "--one", model, "--threads", str(a.threads)]
            if a.torch_min_cut:
                cmd.append("--torch-min-cut")
            if a.peak:
                cmd += ["--peak", str(a.peak)]
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": str(a.threads)})
            last = out.stdout.strip().splitlines()[-1:] if out.returncode == 0 else []
            if not last:
                print(f"{model} run {run}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                failed = True
                continue
            planning, partition, total, fallbacks, torchs = last[0].split()
            failed |= fallbacks != "0"
            own = float(planning) - float(partition)
            print(f"RESULT {model} {run} planning {planning} s first_step {total} s "
                  f"share {float(planning) / float(total):.3f} partition {partition} s "
                  f"own_share {own / float(total):.3f} fallbacks {fallbacks}"
                  + (f" torch_min_cut {torchs} s" if a.torch_min_cut else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
