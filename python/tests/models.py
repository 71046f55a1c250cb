"""Small models the Python tests share, and how they measure a step's peak."""
import os
import sys

import torch

# the benchmarks' measurement (benchmarks/models/peers.py), for profiled_whole_peak
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "benchmarks", "models"))


def measured_whole_peak(fn, model, x):
    """The whole step's peak as c10's CPU allocator sees it (graph-opt's tracking
    allocator): what one fn(x).backward() allocates above its start, plus the parameters
    and the batch, which were there before it."""
    import graph_opt
    for p in model.parameters():
        p.grad = None
    with graph_opt._C._CpuMemoryTracker() as tracker:
        fn(x).backward()
    # a DTensor parameter (FSDP2): this rank's shard
    return tracker.peak_bytes + sum(getattr(t, "_local_tensor", t).untyped_storage().nbytes()
                                    for t in [*model.parameters(), x])


def profiled_whole_peak(fn, model, x):
    """The whole step's peak as the benchmarks measure it (peers.step_memory: c10's
    allocation events under torch.profiler, every allocator's): what one fn(x).backward()
    allocates above its start, plus the parameters (a DTensor's: this rank's shard) and the
    batch. Unlike measured_whole_peak it sees FSDP2's gathered parameters, whose storages
    FSDP2 re-grows (resize_) through the allocator they were made with, outside graph-opt's
    tracking allocator."""
    import peers
    for p in model.parameters():
        p.grad = None

    def run_step(mark_backward=False):
        fn(x).backward()

    peak = peers.step_memory(run_step)["peak"]
    for p in model.parameters():
        p.grad = None
    return peak + peers.held_bytes(model, (x,))


class ResidualMLP(torch.nn.Module):
    """`blocks` residual blocks x + down(activation(up(x))), 32 -> 256 -> 32, called from
    the model's own forward: on 256 rows the 256-wide activations (256 KiB each) dominate
    the step's peak, and they are the model's, not a submodule's."""

    def __init__(self, blocks, activation):
        super().__init__()
        self.up = torch.nn.ModuleList(torch.nn.Linear(32, 256) for _ in range(blocks))
        self.down = torch.nn.ModuleList(torch.nn.Linear(256, 32) for _ in range(blocks))
        self.activation = activation

    def forward(self, x):
        for u, d in zip(self.up, self.down):
            x = x + d(self.activation(u(x)))
        return x.square().mean()


class TinyTransformer(torch.nn.Module):
    """`blocks` pre-norm transformer blocks (attention written out: matmuls, a softmax;
    LayerNorm, a GELU MLP) on a batch of token vectors, the mean square as the loss: the
    operators a transformer's step runs, Inductor's reductions and extern matmuls among
    them, at a size whose activations (the [batch, heads, seq, seq] scores) dominate."""

    def __init__(self, blocks=2, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.ModuleList(torch.nn.LayerNorm(dim) for _ in range(blocks))
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(dim, 3 * dim) for _ in range(blocks))
        self.proj = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(blocks))
        self.norm2 = torch.nn.ModuleList(torch.nn.LayerNorm(dim) for _ in range(blocks))
        self.up = torch.nn.ModuleList(torch.nn.Linear(dim, 4 * dim) for _ in range(blocks))
        self.down = torch.nn.ModuleList(torch.nn.Linear(4 * dim, dim) for _ in range(blocks))

    def forward(self, x):
        b, s, d = x.shape
        for i in range(len(self.qkv)):
            q, k, v = self.qkv[i](self.norm1[i](x)).view(b, s, 3, self.heads, -1).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / (d // self.heads) ** 0.5
            attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
            x = x + self.proj[i](attended)
            x = x + self.down[i](torch.nn.functional.gelu(self.up[i](self.norm2[i](x))))
        return x.square().mean()


class PreNormResidualMLP(torch.nn.Module):
    """`blocks` pre-norm residual blocks x + down(gelu(up(layer_norm(x)))), dim -> hidden ->
    dim, as nn.Sequential: a deep MLP whose activations dominate its peak, and whose residual
    stream makes some recomputation plans peak higher than saving everything (each block's
    input is recomputed from the one before, all of them as backward starts)."""

    def __init__(self, blocks=8, dim=64, hidden=256):
        super().__init__()
        self.blocks = torch.nn.Sequential(*(_PreNormBlock(dim, hidden) for _ in range(blocks)))

    def forward(self, x):
        return self.blocks(x).square().mean()


class _PreNormBlock(torch.nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up, self.down = torch.nn.Linear(dim, hidden), torch.nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class MaskedWithAConstant(torch.nn.Module):
    """A forward that builds a tensor while it runs (torch.tensor(-1e4) in a masking
    where): AOTAutograd leaves it in the joint graph as get_attr _tensor_constant0."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = torch.where(h > 0.1, h, torch.tensor(-1e4))
        return self.b(torch.softmax(h, -1))
