#!/usr/bin/env python3
"""Writes a joint training graph (.pt2) that computes things twice, for peer_cse.py's tests.

    make_twice.py -o twice.pt2

The module applies the same LayerNorm to its input twice (two ``aten::native_layer_norm``
nodes with equal operands: a multi-output merge, named by getitems in graph-opt) and
``F.dropout`` to the same tensor twice (two ``aten::native_dropout`` calls with equal
operands: random, so merging them is wrong, yet ``CSEPass()`` bans nothing by default). The
archive is exported as tools/export does a training step (``torch.export.export``, then
``_export_forward_backward``), with seeded weights and inputs.
"""
import argparse
import os
import sys
import tempfile

import torch
from torch.export.experimental import _export_forward_backward


class Twice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x, target):
        a = self.norm(x) + self.norm(x)
        b = torch.nn.functional.dropout(a, 0.5, True) * torch.nn.functional.dropout(a, 0.5, True)
        return (torch.nn.functional.cross_entropy(self.fc(b), target),)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True, metavar="FILE.pt2")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    inputs = (torch.randn(2, 8, generator=g), torch.randint(0, 4, (2,), generator=g))
    ep = _export_forward_backward(torch.export.export(Twice().train(), inputs))
    out_dir = os.path.dirname(os.path.abspath(args.output))
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".pt2")
    os.close(fd)
    try:
        torch.export.save(ep, tmp)
        os.replace(tmp, args.output)
    except BaseException:
        os.unlink(tmp)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
