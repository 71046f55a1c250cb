"""peak= bounds the whole step where torch.compile makes several graphs of it: DDP's bucket
graphs, the frames a graph break leaves (step_ledger.py; docs/TorchCompile.md, "One bound for
the whole step")."""
import datetime
import socket
import warnings

import pytest
import torch
import torch.distributed as dist

import graph_opt
from graph_opt import compile as goc
from graph_opt.step_ledger import Held, Position, StepLedger
from models import measured_whole_peak, profiled_whole_peak

MiB = 2 ** 20
# no recomputation: every graph saves what its backward reads
SAVE_ALL = "checkpoint{activations=100%}"


class Block(torch.nn.Module):
    """GELU(W2 GELU(W1 x)), 256 wide: a forward of its own (dynamo compiles a module of
    torch's own, such as nn.Sequential, only inside a frame of the user's)."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(256, 256)
        self.down = torch.nn.Linear(256, 256)

    def forward(self, x):
        return torch.nn.functional.gelu(self.down(torch.nn.functional.gelu(self.up(x))))


class Blocks(torch.nn.Module):
    """`blocks` residual blocks x + GELU(W2 GELU(W1 x)), 256 wide, on 1024 rows: each
    block's activations (1 MiB each) are several times its parameters (0.5 MiB), so where
    the step's graphs save them all the step peaks at about 20 MiB. With `breaks`, a graph
    break between blocks: one dynamo frame per block, as FSDP2's per-block hooks make."""

    def __init__(self, blocks=4, breaks=False):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(blocks))
        self.breaks = breaks

    def forward(self, x):
        if not self.breaks:
            for b in self.blocks:
                x = x + b(x)
            return x.square().mean()
        # unrolled: dynamo cannot resume a frame after a graph break inside a loop
        x = x + self.blocks[0](x)
        torch._dynamo.graph_break()
        x = x + self.blocks[1](x)
        torch._dynamo.graph_break()
        x = x + self.blocks[2](x)
        torch._dynamo.graph_break()
        x = x + self.blocks[3](x)
        return x.square().mean()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def one_rank(monkeypatch):
    """A one-rank gloo group in this process (DDP under torch.compile splits its graph at its
    buckets all the same), buckets of 0.3 MiB: one per block."""
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.setattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", int(0.3 * MiB))
    dist.init_process_group("gloo", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    yield
    dist.destroy_process_group()


def _trained(model, wrap, x, **options):
    """(the whole step's measured peak, the plans' records, stats()["unmet"]): the step
    compiled with graph_opt.backend(**options) (and `wrap` around the model), run three
    times, the third measured (DDP rebuilds its gradient buckets at the second); the
    gradients checked against eager's."""
    torch._dynamo.reset()
    goc.reset_stats()
    want = torch.autograd.grad(model(x), list(model.parameters()))
    compiled = torch.compile(wrap(model), backend=graph_opt.backend(**options))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in model.parameters():
            p.grad = None
        compiled(x).backward()
        got = [p.grad for p in model.parameters()]
        for g, w in zip(got, want):
            assert torch.allclose(g, w, rtol=1e-4, atol=1e-6)
        for p in model.parameters():
            p.grad = None
        compiled(x).backward()
        peak = measured_whole_peak(compiled, model, x)
    stats = goc.stats()
    return peak, stats["plans"], stats["unmet"]


def test_peak_bounds_a_ddp_step_across_its_bucket_graphs(one_rank):
    """DDP hands the partitioner one graph per bucket; before the step ledger each was planned
    as if it were the whole step, so a bound the step could meet measured as no bound at all
    (as with no bound at all, at 70% of it): every graph saved what it liked, and the buckets' saved
    activations add up. Now each bucket graph is planned against the bound less what the
    others hold (the ones before: parameters and saved activations; the ones not compiled
    yet: parameters and gradients, and like this one per parameter byte), and the step
    measures under the bound."""
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(0)
    model, x = Blocks(), torch.randn(1024, 256)
    ddp = lambda m: DistributedDataParallel(m, bucket_cap_mb=0.3)  # noqa: E731
    unbounded, _, _ = _trained(model, ddp, x, inner="eager", pipeline=SAVE_ALL)
    bound = int(0.7 * unbounded)
    peak, plans, unmet = _trained(model, ddp, x, inner="eager", peak=bound)
    assert len(plans) == 4 and not unmet, unmet
    assert peak <= bound, f"measured {peak / MiB:.2f} MiB over {bound / MiB:.2f} MiB"
    steps = [p["step"] for p in plans]
    # one frame, four buckets in forward order; the first knew the others' parameters only
    assert [s["bucket"] for s in steps] == [0, 1, 2, 3]
    assert [s["graphs_before"] for s in steps] == [0, 1, 2, 3]
    assert steps[0]["not_compiled_parameter_bytes"] > 0 == steps[3]["not_compiled_parameter_bytes"]
    assert steps[0]["frame_parameter_bytes"] == sum(p.nbytes for p in model.parameters())
    assert steps[-1]["step_peak_bytes"] <= bound
    # the earlier buckets recompute to leave room for the later ones
    assert plans[0]["recomputed"]


def test_an_estimate_of_the_buckets_to_come_is_no_unmet_bound(one_rank):
    """DDP's first bucket graphs are priced with the buckets not compiled yet taken like
    them, an estimate: at a bound just over the step's least predicted peak, the first ones
    cannot meet it on that estimate. They are not reported unmet then: once the last bucket
    is known the step is within the bound, and their records say they met it then (before:
    an unmet warning per early bucket for a step that measured under its bound)."""
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(0)
    model, x = Blocks(), torch.randn(1024, 256)
    ddp = lambda m: DistributedDataParallel(m, bucket_cap_mb=0.3)  # noqa: E731
    _, plans, _ = _trained(model, ddp, x, inner="eager", peak=1)
    least = plans[-1]["step"]["step_peak_bytes"]
    bound = int(least / (1 - goc._PEAK_MARGIN / 8))
    peak, plans, unmet = _trained(model, ddp, x, inner="eager", peak=bound)
    assert not unmet, unmet
    assert any(p.get("peak_met_once_the_step_was_known") for p in plans), plans
    assert all(p["peak_met"] for p in plans)
    assert peak <= bound, f"measured {peak / MiB:.2f} MiB over {bound / MiB:.2f} MiB"


def test_a_bound_held_back_is_settled_when_stats_are_asked():
    """A bound held back on the estimate of graphs to come (a graph the ledger expects that
    never comes: a parameter no graph takes) is settled by stats() on the graphs known:
    reported where the step is over the bound, else the record says it was met."""
    for step_peak, reported in ((500, False), (5000, True)):
        goc.reset_stats()
        partitioner = goc.partitioner(peak=1000)
        position = _position(3, 0, 100)
        partitioner._ledger.frames[:] = [3]
        partitioner._ledger.record(position, partitioner._ledger.entry(position, 0, 0,
                                                                       step_peak - 100))
        record = {"peak_met": False}
        partitioner._provisional.append((record, "peak=1000 cannot be met: held back"))
        goc._UNSETTLED.add(partitioner)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stats = goc.stats()
        assert bool(stats["unmet"]) == reported and bool(caught) == reported, stats["unmet"]
        assert record["peak_met"] == (not reported)
        assert not goc._UNSETTLED


def test_peak_bounds_a_step_that_graph_breaks_across_its_frames():
    """A graph break between blocks (as FSDP2's per-block hooks make): one frame per block,
    compiled as the forward reaches it. Each frame's graph is planned against what the frames
    before it hold (their parameters and saved activations); the last plan's step peak is the
    whole step's, and the step measures under the bound."""
    torch.manual_seed(0)
    model, x = Blocks(breaks=True), torch.randn(1024, 256)
    unbounded, _, _ = _trained(model, lambda m: m, x, inner="eager", pipeline=SAVE_ALL)
    bound = int(0.7 * unbounded)
    peak, plans, _ = _trained(model, lambda m: m, x, inner="eager", peak=bound)
    steps = [p["step"] for p in plans]
    assert len(steps) == 4 and len({s["frame"] for s in steps}) == 4
    assert [s["graphs_before"] for s in steps] == [0, 1, 2, 3]
    assert steps[-1]["step_peak_bytes"] <= bound
    assert peak <= bound, f"measured {peak / MiB:.2f} MiB over {bound / MiB:.2f} MiB"


def _fsdp2_save_all_then_bound(make, x, share):
    """({"save all": its measured peak, "bound": ...}, the bound, the last model): a model
    `make()` builds (FSDP2-sharded) compiled with no recomputation, then with peak= at
    `share` of that step's measured peak; each trained two steps, the third profiled
    (profiled_whole_peak), stats() left from the bounded one."""
    peaks = {}
    for label in ("save all", "bound"):
        model = make()
        options = ({"pipeline": SAVE_ALL} if label == "save all"
                   else {"peak": int(share * peaks["save all"])})
        torch._dynamo.reset()
        goc.reset_stats()
        compiled = torch.compile(model, backend=graph_opt.backend(inner="eager", **options))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                for p in model.parameters():
                    p.grad = None
                compiled(x).backward()
            peaks[label] = profiled_whole_peak(compiled, model, x)
    return peaks, options["peak"], model


def test_peak_bounds_an_fsdp2_step_whose_block_graph_runs_once_per_block(one_rank):
    """FSDP2 (fully_shard on every block and the root) under torch.compile: each sharded
    block's forward is a frame of its own, compiled once and run once per block (every block
    shares its class's forward), so the partitioner sees one block graph for four runs. The
    ledger finds the model from FSDP2's root and counts the block graph's runs: its plan is
    priced as four runs, each holding what it saves through the ones after it, and the step
    measures under the bound."""
    from torch.distributed.fsdp import fully_shard

    def sharded(m):
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m)
        return m

    torch.manual_seed(0)
    x = torch.randn(1024, 256)
    def make():
        model = sharded(Blocks())
        torch.manual_seed(0)
        for p in model.parameters():  # the same weights both times
            torch.nn.init.normal_(p, std=0.05)
        return model

    peaks, bound, model = _fsdp2_save_all_then_bound(make, x, 0.7)
    plans = goc.stats()["plans"]
    runs = [p["step"]["runs"] for p in plans]
    assert 4 in runs, runs
    # FSDP2's holdings outside the graphs read from its state: here every parameter is in
    # a block (the root holds none), one rank's shards are the whole model
    shards = sum(p._local_tensor.untyped_storage().nbytes() for p in model.parameters())
    assert all(p["step"]["fsdp2"]["shard_bytes"] == shards for p in plans)
    assert all(p["step"]["fsdp2"]["kept_unsharded_bytes"] == 0 for p in plans)
    assert peaks["bound"] <= bound, (f"measured {peaks['bound'] / MiB:.2f} MiB over "
                                     f"{bound / MiB:.2f} MiB")


class ShardedLM(torch.nn.Module):
    """An embedding, four 256 -> 1024 -> 256 residual blocks on 1024 tokens and a 4096-word
    head with its cross-entropy: under FSDP2 (fully_shard on the blocks and the root) the
    embedding and head are the root's, gathered from its pre-forward to its post-backward,
    outside the blocks' graphs. The blocks are called one by one (no loop: a graph break
    at a sharded block inside a loop would leave the root's forward to eager PyTorch)."""

    def __init__(self, vocab=4096):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 256)
        self.blocks = torch.nn.ModuleList(WideBlock() for _ in range(4))
        self.head = torch.nn.Linear(256, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        x = x + self.blocks[0](x)
        x = x + self.blocks[1](x)
        x = x + self.blocks[2](x)
        x = x + self.blocks[3](x)
        return torch.nn.functional.cross_entropy(self.head(x), ids)


class WideBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(256, 1024)
        self.down = torch.nn.Linear(1024, 256)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)).sin())


def test_peak_under_fsdp2_counts_its_shards_and_the_roots_gathered_parameters(one_rank):
    """FSDP2 holds on each rank, outside every graph torch.compile makes: the shards of
    every parameter, the root's gathered embedding and head from its pre-forward to its
    post-backward, and at the root's post-backward its gradients and the reduce-scatter's
    buffers. Before they were counted the step was predicted 5.5% under what it measures
    (103.04 against 109.03 MiB) and a bound between the two was neither met nor reported
    unmet; now the prediction is within 5% of the measured step, and a bound under it is
    met or reported."""
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    ids = torch.randint(0, 4096, (1024,))
    def make():
        torch.manual_seed(0)
        model = ShardedLM()
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
        return model

    peaks, bound, model = _fsdp2_save_all_then_bound(make, ids, 0.85)
    plans = goc.stats()["plans"]
    predicted = max(p["step"]["step_peak_bytes"] for p in plans)
    fsdp2 = plans[-1]["step"]["fsdp2"]
    assert fsdp2["kept_unsharded_bytes"] == (model.embed.weight.numel()
                                             + model.head.weight.numel()) * 4
    assert fsdp2["shard_bytes"] == sum(p._local_tensor.untyped_storage().nbytes()
                                       for p in model.parameters())
    measured = peaks["bound"]
    assert abs(predicted - measured) <= 0.05 * measured, (
        f"predicted {predicted / MiB:.2f} MiB, measured {measured / MiB:.2f} MiB")
    assert measured < peaks["save all"]
    if measured > bound:
        assert goc.stats()["unmet"], (f"measured {measured / MiB:.2f} MiB over "
                                      f"{bound / MiB:.2f} MiB, and not reported")


def _position(frame, bucket, resident, compile_id=None, not_compiled=0):
    return Position(frame, bucket, compile_id or (frame, 0), None,
                    Held(not_compiled=not_compiled), resident, resident, frozenset())


def test_the_ledger_counts_what_each_graph_holds_for_the_others():
    """StepLedger alone: a graph before holds its parameters and saved activations; a graph
    after holds its parameters, and its gradients during the backward; the step's peak is
    the most over the graphs; a graph not compiled yet is taken as the one planned, per
    parameter byte (its saved activations held through the last one's backward)."""
    ledger = StepLedger()
    ledger.frames[:] = [7]
    first, second = _position(7, 0, 100), _position(7, 1, 300)
    ledger.record(first, ledger.entry(first, 1000, 2000, 3000))
    ledger.record(second, ledger.entry(second, 500, 1500, 2600))
    held = ledger._held(ledger.entries, (7, 1))
    assert (held.forward, held.backward, held.before, held.after) == (1100, 1100, 1, 0)
    held = ledger._held(ledger.entries, (7, 0))
    assert (held.forward, held.backward, held.before, held.after) == (300, 600, 0, 1)
    assert ledger.step_peak() == (3700, (7, 1))
    assert ledger.index(7, 1) == 1
    # a third bucket not compiled yet, twice the second's parameters: the last 300 bytes of
    # them peak as this one; the 300 before hold parameters and saved activations in the
    # ratio the graphs known do (1500 saved for 400 of parameters)
    planning = _position(7, 1, 300, not_compiled=600)
    candidate = ledger.entry(planning, 500, 1500, 2500)
    assert ledger.peak_with(planning, candidate) == 1100 + 800 + 300 * (1 + 1500 / 400) + 2500
    # no more per parameter byte than the frame computes (DDP: the whole model's forward)
    planning.frame_ratio = 1.0
    assert ledger.peak_with(planning, candidate) == 1100 + 800 + 300 * (1 + 1.0) + 2500
    # a graph run three times in the step peaks at its last run, the two before holding
    # their parameters and what they saved
    ledger = StepLedger()
    ledger.frames[:] = [9]
    block = _position(9, 0, 100)
    block.runs = 3
    ledger.record(block, ledger.entry(block, 1000, 2000, 3000))
    assert ledger.step_peak() == (3000 + 2 * (1000 + 100), (9, 0))
    # an input two graphs before take and save (DDP's buckets pass one mask on) is held
    # once, and not by the graph that takes it itself (its own peak counts it)
    ledger = StepLedger()
    ledger.frames[:] = [5]
    mask = (5, 1234)
    for bucket in (0, 1):
        position = _position(5, bucket, 100)
        ledger.record(position, ledger.entry(position, 300, 500, 600, {mask: 200}))
    held = ledger._held(ledger.entries, (5, 2), inputs=frozenset())
    assert held.forward == 2 * (100 + 300 - 200) + 200
    held = ledger._held(ledger.entries, (5, 2), inputs=frozenset({mask}))
    assert held.forward == 2 * (100 + 300 - 200)
