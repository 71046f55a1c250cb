#!/usr/bin/env python3
"""graph-opt's share of a torch.compile (issue 53, item 5; docs/TorchCompile.md, "What
planning costs").

    planning_share.py [--models gpt2:default] [--runs 2] [--peak BYTES] [--threads 2]

Per model and run, in a fresh process each (so that nothing compiled is reused): the
training step (peers.build, dropout off) compiled with graph_opt.backend(verify=False)
(peak= where given), Inductor's caches off, and its first step (compile included) timed;
prints graph_opt.compile.stats()'s planning_seconds, that time and their ratio, then the part
of planning_seconds that was torch's min-cut partitioning the plan's tagged graph
(partition_seconds: torch.compile's default partitioner makes the same call in graph-opt's
place) and the share without it, what graph-opt adds to the compile, one line per run
("RESULT model run planning first_step share partition own_share"). Exit 1 where a graph fell
back.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one_run(model, peak, threads):
    sys.path.insert(0, HERE)
    import torch
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    torch.set_num_threads(threads)
    import graph_opt
    import peers
    step, args, _ = peers.build(model, None, dropout=False)
    backend = graph_opt.backend(verify=False, **({"peak": peak} if peak else {}))
    compiled = torch.compile(step, backend=backend)
    start = time.perf_counter()
    (loss,) = compiled(*args)
    loss.backward()
    total = time.perf_counter() - start
    st = graph_opt.compile.stats()
    print(f"{st['planning_seconds']:.2f} {st['partition_seconds']:.2f} {total:.1f} "
          f"{st['fallbacks']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2:default")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--peak", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        one_run(a.one, a.peak, a.threads)
        return 0
    failed = False
    for run in range(1, a.runs + 1):
        for model in a.models.split(","):
            cmd = [sys.executable, __file__, "--one", model, "--threads", str(a.threads)]
            if a.peak:
                cmd += ["--peak", str(a.peak)]
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": str(a.threads)})
            last = out.stdout.strip().splitlines()[-1:] if out.returncode == 0 else []
            if not last:
                print(f"{model} run {run}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                failed = True
                continue
            planning, partition, total, fallbacks = last[0].split()
            failed |= fallbacks != "0"
            own = float(planning) - float(partition)
            print(f"RESULT {model} {run} planning {planning} s first_step {total} s "
                  f"share {float(planning) / float(total):.3f} partition {partition} s "
                  f"own_share {own / float(total):.3f} fallbacks {fallbacks}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
