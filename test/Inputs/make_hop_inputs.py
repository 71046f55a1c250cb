#!/usr/bin/env python3
"""Write small .pt2 archives holding higher-order ops, for graph-opt's importer tests.

    make_hop_inputs.py -o OUTDIR

torch.export keeps some Python context managers as higher-order ops
(``torch.ops.higher_order.*``) that call a body subgraph. graph-opt inlines the mode
wrappers whose body is exact as it stands and refuses every other one (docs/Importing.md).
Each archive is a real ``torch.export.export`` (eval, training IR) of a tiny module:

    inline-ok.pt2          must import: a ``@torch.no_grad()`` function that opens a nested
                           ``torch.enable_grad()`` region (wrap_with_set_grad_enabled inside
                           wrap_with_set_grad_enabled, one body returning its operand
                           unchanged), an autocast region with autocast disabled, and an
                           enabled autocast region whose body casts explicitly
                           (wrap_with_autocast twice)
    cond.pt2               must fail (exit 2, naming torch.ops.higher_order.cond): torch.cond
    autocast-implicit.pt2  must fail (exit 2): an enabled CPU bfloat16 autocast region around
                           a linear layer, whose f32 -> bf16 cast only autocast performs

The script checks that each archive holds the higher-order ops it is meant to. Files are
written atomically; when every file exists and OUTDIR is newer than this script, nothing is
rewritten and "cached" is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

FILES = ["inline-ok.pt2", "cond.pt2", "autocast-implicit.pt2"]


def modules(torch):
    nn = torch.nn

    @torch.no_grad()
    def rotary(x, freq):
        """Like a rotary embedding's cos/sin under no_grad, with a nested enable_grad."""
        angles = x.unsqueeze(-1) * freq
        with torch.enable_grad():
            scaled = angles * 2.0
        return scaled.cos(), scaled.sin(), freq

    class InlineOk(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("freq", torch.arange(1, 5, dtype=torch.float32))
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            cos, sin, freq = rotary(x, self.freq)
            with torch.autocast("cpu", enabled=False):
                y = self.linear(x)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                z = (y.to(torch.bfloat16) * 3).to(torch.float32)
            return cos.sum(-1) + sin.sum(-1) + z + freq.sum()

    class Cond(nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,))

    class AutocastImplicit(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = self.linear(x)
            return y.float()

    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    return {
        "inline-ok.pt2": (InlineOk(), (x,), {"wrap_with_set_grad_enabled": 2,
                                             "wrap_with_autocast": 2}),
        "cond.pt2": (Cond(), (x,), {"cond": 1}),
        "autocast-implicit.pt2": (AutocastImplicit(), (x,), {"wrap_with_autocast": 1}),
    }


def higher_order_ops(gm, torch) -> dict[str, int]:
    """Higher-order op name -> calls in ``gm`` and in every submodule graph."""
    found: dict[str, int] = {}
    for m in gm.modules():
        if isinstance(m, torch.fx.GraphModule):
            for n in m.graph.nodes:
                if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator):
                    found[n.target.name()] = found.get(n.target.name(), 0) + 1
    return found


def up_to_date(out_dir: str) -> bool:
    if not all(os.path.isfile(os.path.join(out_dir, f)) for f in FILES):
        return False
    return os.stat(out_dir).st_mtime_ns > os.stat(os.path.abspath(__file__)).st_mtime_ns


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="make_hop_inputs.py", description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out-dir", required=True)
    p.add_argument("--force", action="store_true", help="rewrite even when up to date")
    args = p.parse_args(argv)
    if not args.force and os.path.isdir(args.out_dir) and up_to_date(args.out_dir):
        print(f"cached: {args.out_dir}")
        return 0

    import torch

    torch.manual_seed(0)
    os.makedirs(args.out_dir, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=".tmp-", dir=args.out_dir)
    try:
        for name, (module, example, want) in modules(torch).items():
            ep = torch.export.export(module.eval(), example)
            got = higher_order_ops(ep.graph_module, torch)
            if got != want:
                raise RuntimeError(f"{name}: the export holds the higher-order ops {got}, "
                                   f"expected {want} (did torch.export change?)")
            torch.export.save(ep, os.path.join(tmp_dir, name))
        for name in FILES:
            os.replace(os.path.join(tmp_dir, name), os.path.join(args.out_dir, name))
    except Exception as e:
        print(f"make_hop_inputs.py: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    os.utime(args.out_dir)
    for name in FILES:
        print(f"{os.path.join(args.out_dir, name)} "
              f"({os.path.getsize(os.path.join(args.out_dir, name))} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
