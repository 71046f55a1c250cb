#!/usr/bin/env python3
"""Reference results for graph-opt's executor: each zoo graph run by PyTorch itself.

    make_references.py --zoo DIR [--seed N]

For every DIR/<name>.pt2 this loads the ExportedProgram, binds its inputs in signature order
(parameters and buffers from the state dict, constant tensors from the constants, user inputs
from the archive's example inputs), seeds the RNG with torch.manual_seed(seed) and runs the
very graph graph-opt imports with torch.fx.Interpreter: the same operators in the same order,
so the executor must match it bitwise (dropout included). It writes DIR/<name>.ref.pt, a
torch.save of {"seed": int, "inputs": [user inputs], "outputs": [every graph output, in
signature order]}, read in C++ with torch::jit::pickle_load.

A reference newer than its archive and this script is kept ("cached").
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile


def fast_export_load() -> None:
    """torch.export.load with its type hints remembered (python/graph_opt/_serde_cache.py),
    loaded by path: these fixtures run before the package is built."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                        "python", "graph_opt", "_serde_cache.py")
    spec = importlib.util.spec_from_file_location("graph_opt_serde_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install()


def flat_inputs(ep, torch):
    from torch.export.graph_signature import InputKind

    args, kwargs = ep.example_inputs
    user = list(torch.utils._pytree.tree_leaves((args, kwargs)))
    flat, users = [], iter(user)
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            flat.append(next(users))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict.get(spec.target)
            flat.append(t if t is not None else ep.constants[spec.target])
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            flat.append(ep.constants[spec.target])
        else:
            raise RuntimeError(f"unsupported input kind {spec.kind}")
    return flat, user


def stamp_says_done(stamp: str, inputs, code) -> bool:
    """Whether STAMP, written by the last run that finished, is newer than every input and
    code file, and every output it lists is still there: then nothing is stale and the
    script need not import torch (2-3 s each on the suite's critical path, issue 52)."""
    try:
        stamped = os.path.getmtime(stamp)
        with open(stamp) as f:
            outputs = [line.strip() for line in f if line.strip()]
        if any(os.path.getmtime(p) >= stamped for p in [*inputs, *code]):
            return False
    except OSError:
        return False
    return all(os.path.exists(o) for o in outputs)


def write_stamp(stamp: str, outputs) -> None:
    """Records a finished run (stamp_says_done), atomically."""
    tmp = stamp + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(o + "\n" for o in outputs))
    os.replace(tmp, stamp)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zoo", required=True, help="directory of .pt2 archives")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    archives = sorted(glob.glob(os.path.join(args.zoo, "*.pt2")))
    if not archives:
        print(f"make_references.py: no .pt2 archives in {args.zoo}", file=sys.stderr)
        return 2

    stamp = os.path.join(args.zoo, f".references-seed{args.seed}.stamp")
    if stamp_says_done(stamp, archives, [__file__]):
        print(f"cached   every reference ({stamp})")
        return 0

    import torch

    fast_export_load()
    script_time = os.path.getmtime(__file__)
    for path in archives:
        out = path[: -len(".pt2")] + ".ref.pt"
        if os.path.exists(out) and os.path.getmtime(out) > max(os.path.getmtime(path), script_time):
            print(f"cached   {out}")
            continue
        ep = torch.export.load(path)
        flat, user = flat_inputs(ep, torch)
        torch.manual_seed(args.seed)
        with torch.no_grad():
            outputs = torch.fx.Interpreter(ep.graph_module).run(*flat)
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out), suffix=".tmp")
        os.close(fd)
        torch.save({"seed": args.seed, "inputs": list(user), "outputs": list(outputs)}, tmp)
        os.replace(tmp, out)
        print(f"wrote    {out} ({len(outputs)} outputs)")
    write_stamp(stamp, [path[: -len(".pt2")] + ".ref.pt" for path in archives])
    return 0


if __name__ == "__main__":
    sys.exit(main())
