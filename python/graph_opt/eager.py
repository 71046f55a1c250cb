"""graph-opt's recomputation plan for eager PyTorch: graph_opt.auto_checkpoint.

    model = graph_opt.auto_checkpoint(model, (x, y), peak="8GiB",
                                      loss_fn=lambda m, x, y: F.cross_entropy(m(x), y))

The training step is exported once (export_training_step) and planned by the checkpoint
pass at the stated peak, as `graph-opt step.pt2 -passes='checkpoint{peak=...}'` would (the
whole step's peak, weights and inputs included: docs/Checkpointing.md). The plan is then
carried out by torch's own eager mechanisms: each module whose forward holds an activation
graph-opt recomputes runs under torch.utils.checkpoint (use_reentrant=False), with a
selective-checkpoint policy (torch.utils.checkpoint.create_selective_checkpoint_contexts)
that saves what graph-opt keeps and recomputes what it drops. Random operators replay the
same numbers (checkpoint preserves the RNG state), so training computes what it did.

Regions are the smallest modules (or runs of a Sequential's children) holding what the plan
recomputes and where forward reads it, never the whole model (eager_regions.py). One step on
the example inputs records the operators each region's forward calls in eager; they are
aligned with the export's forward nodes of that region by operator name (eager calls a few
operators the export fuses), each call taking its node's decision: saved where the plan
keeps its outputs, recomputed otherwise (a value backward never reads included: selective
checkpoint holds every saved call's outputs until backward). A call with no node is
recomputed, and so is a call that writes in place, or whose output is written in place later
(selective checkpoint cannot keep a tensor that changes). At run time the policy goes by
call index; a call out of line with the recording is recomputed.
docs/Python.md.
"""
import contextlib
import copy
import functools
import os
import tempfile
import time
import types

import torch
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

from . import _C
from ._C import Error, Graph
from .eager_regions import Region, op_key, regions as plan_regions, repeated_blocks
from .export import export_training_step
from .step_call import flat_step
from .joint import check_peak, run_prepared, with_peak

__all__ = ["auto_checkpoint"]


class _Recorder(torch.utils._python_dispatch.TorchDispatchMode):
    """The operators one forward call of a region runs, in order: [name, whether a later
    call writes its output in place, whether it writes in place itself]."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.made_by = {}  # id of an output's storage -> the call that made it

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if schema.is_mutable:  # a write in place: the call that made what it writes
            for arg, value in zip(schema.arguments, args):
                if arg.alias_info is not None and arg.alias_info.is_write and \
                        isinstance(value, torch.Tensor):
                    maker = self.made_by.get(value.untyped_storage()._cdata)
                    if maker is not None:
                        self.calls[maker][1] = True
        out = func(*args, **kwargs)
        index = len(self.calls)
        # [operator, its output is written in place later, it writes in place]
        self.calls.append([op_key(schema.name), False, schema.is_mutable])
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.made_by.setdefault(t.untyped_storage()._cdata, index)
        return out


def _decide(calls, nodes):
    """Per call of a region's forward, recompute or not: the graph's decision where the call
    lines up with a node (difflib's alignment of operator names: eager calls a few operators
    the export fuses, such as dropout's empty_like, bernoulli_ and div_ for native_dropout),
    else recomputed (a saved call holds all its outputs until backward: saving one the
    plan never saw could hold what the plan frees). A call whose output is written in place
    later, or that writes in place itself, is recomputed: selective checkpoint cannot keep
    a tensor that changes."""
    import difflib

    decisions = [True] * len(calls)
    matcher = difflib.SequenceMatcher(a=[c[0] for c in calls], b=[op for op, _ in nodes],
                                      autojunk=False)
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            decisions[block.a + i] = nodes[block.b + i][1]
    return [(name, recompute or written or writes)
            for (name, written, writes), recompute in zip(calls, decisions)]


def _policy(decisions):
    """A selective-checkpoint policy over one region's calls, by their index in the forward
    (and again in the recomputation); a call out of line with the recording is
    recomputed."""
    counts = {False: 0, True: 0}

    def policy(ctx, func, *args, **kwargs):
        key = op_key(func._schema.name) if hasattr(func, "_schema") else str(func)
        k = counts[bool(ctx.is_recompute)]
        counts[bool(ctx.is_recompute)] = k + 1
        recompute = not (k < len(decisions) and decisions[k][0] == key and not decisions[k][1])
        return CheckpointPolicy.PREFER_RECOMPUTE if recompute else CheckpointPolicy.MUST_SAVE
    return policy


def _checkpointed(function, decisions, written, *args, **kwargs):
    """function(*args, **kwargs) under torch.utils.checkpoint with `decisions`' policy
    (plainly where no gradient is recorded). The buffers `written` (tensors the forward
    writes in place, such as batch norm's running statistics) are put back after each
    recomputation: a recomputed batch norm would update them a second time."""
    if not torch.is_grad_enabled():
        return function(*args, **kwargs)
    runs = []

    def run(*args, **kwargs):
        if not runs:  # the forward
            runs.append(True)
            return function(*args, **kwargs)
        before = [b.detach().clone() for b in written]
        try:
            return function(*args, **kwargs)
        finally:  # (also where checkpoint stops a recomputation early)
            with torch.no_grad():
                for b, value in zip(written, before):
                    b.copy_(value)
    if all(recompute for _, recompute in decisions):
        # Plain checkpoint: a policy that recomputes everything only adds a dispatch mode's
        # cost to every operator
        return checkpoint(run, *args, use_reentrant=False, **kwargs)
    return checkpoint(run, *args, use_reentrant=False,
                      context_fn=lambda: create_selective_checkpoint_contexts(_policy(decisions)),
                      **kwargs)


def _checkpointed_forward(self, *args, **kwargs):
    """A planned module's forward: its own under torch.utils.checkpoint with its policy. A
    method of the module (not a closure over it), so copy.deepcopy of the model gives a copy
    that runs its own parameters."""
    return _checkpointed(functools.partial(self._graph_opt_forward, self),
                         self._graph_opt_decisions,
                         [self.get_buffer(name) for name in self._graph_opt_written],
                         *args, **kwargs)


def _chain(children, input):
    for module in children:
        input = module(input)
    return input


def _run_sequential(sequential, input, run_span):
    """nn.Sequential's forward, each planned span of children (lo, hi, what) of
    sequential._graph_opt_spans run as run_span(children, what, input)."""
    children = list(sequential._modules.values())
    spans = {lo: (hi, what) for lo, hi, what in sequential._graph_opt_spans}
    i = 0
    while i < len(children):
        if i in spans:
            hi, what = spans[i]
            input = run_span(tuple(children[i:hi + 1]), what, input)
            i = hi + 1
        else:
            input = children[i](input)
            i += 1
    return input


def _spanned_forward(self, input):
    """A Sequential's forward with planned spans of its children each under one checkpoint."""
    return _run_sequential(self, input, lambda children, plan, x: _checkpointed(
        functools.partial(_chain, children), plan[0],
        [self.get_buffer(name) for name in plan[1]], x))


def _plan_module(module, decisions, written):
    """Runs `module`'s forward under checkpoint with `decisions`' policy, its buffers named
    `written` put back after each recomputation. Its own forward (the class's, or one set on
    the instance) is kept to put back (_unplan_module)."""
    own = module.__dict__.get("forward")
    if own is None:
        forward = type(module).forward
    elif isinstance(own, types.MethodType) and own.__self__ is module:
        forward = own.__func__
    else:
        def forward(_self, *args, **kwargs):
            return own(*args, **kwargs)
    module._graph_opt_own_forward = own
    module._graph_opt_forward = forward
    module._graph_opt_decisions = decisions
    module._graph_opt_written = written
    module.forward = types.MethodType(_checkpointed_forward, module)


def _plan_spans(sequential, spans):
    """Runs each span (lo, hi, (decisions, the names of the buffers it writes)) of
    `sequential`'s children under one checkpoint."""
    sequential._graph_opt_spans = spans
    sequential.forward = types.MethodType(_spanned_forward, sequential)


def _unplan_module(module):
    """Puts back the forward _plan_module or _plan_spans replaced, if one did."""
    if "_graph_opt_spans" in module.__dict__:
        del module._graph_opt_spans, module.forward
    if "_graph_opt_forward" not in module.__dict__:
        return
    own = module.__dict__.pop("_graph_opt_own_forward")
    del module._graph_opt_forward, module._graph_opt_decisions, module._graph_opt_written
    del module.forward
    if own is not None:
        module.forward = own


def _apply(regions, modules, recorded):
    """Puts each region's plan on the model (a region the step did not call is left alone);
    the keys of the regions applied."""
    spans = {}
    for region in regions:
        if region.key not in recorded:
            continue
        calls, written = recorded[region.key]
        decisions = _decide(calls, region.nodes)
        if region.span is None:
            _plan_module(modules[region.path], decisions, written)
        else:
            spans.setdefault(region.path, []).append((*region.span, (decisions, written)))
    for path, found in spans.items():
        _plan_spans(modules[path], found)
    return sorted(r.key for r in regions if r.key in recorded)


@contextlib.contextmanager
def _step_undone(model):
    """Runs the block (a step of the model: an export, a recording, a measurement) and puts
    back what it changes: the state (buffers such as batch norm's running statistics), the
    gradients (None inside) and the RNG state."""
    params = list(model.parameters())
    grads = [p.grad for p in params]
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    for p in params:
        p.grad = None
    try:
        yield
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        model.load_state_dict(state)
        torch.set_rng_state(rng)


def _record(model, loss_fn, example_inputs, regions):
    """{region's key: (its calls, the names of the buffers it writes, relative to the
    module or Sequential at the region's path)} from one step of the model on the example
    inputs (its state, the RNG's included, restored after)."""
    modules = dict(model.named_modules())
    recorded = {}

    def recording(key, buffers, function, *args, **kwargs):
        if key in recorded:
            return function(*args, **kwargs)
        # Compared by value: native_batch_norm writes the running statistics with no
        # write in its schema and no version counter bump.
        before = [(name, b, b._version, b.detach().clone()) for name, b in buffers]
        with _Recorder() as r:
            out = function(*args, **kwargs)
        recorded[key] = (r.calls, [name for name, b, version, value in before
                                   if b._version != version or not torch.equal(b, value)])
        return out

    def recording_forward(region, forward):
        buffers = list(modules[region.path].named_buffers())
        return functools.wraps(forward)(
            functools.partial(recording, region.key, buffers, forward))

    def recording_spans(path):
        sequential = modules[path]

        def run_span(children, key, input):
            inside = {id(b) for c in children for b in c.buffers()}
            buffers = [(n, b) for n, b in sequential.named_buffers() if id(b) in inside]
            return recording(key, buffers, functools.partial(_chain, children), input)
        return lambda input: _run_sequential(sequential, input, run_span)

    originals = {}  # path -> the forward set on the instance, or None
    spans = {}
    for region in regions:
        if region.span is None:
            module = modules[region.path]
            originals[region.path] = module.__dict__.get("forward")
            module.forward = recording_forward(region, module.forward)
        else:
            spans.setdefault(region.path, []).append((*region.span, region.key))
    for path, found in spans.items():
        originals[path] = modules[path].__dict__.get("forward")
        modules[path]._graph_opt_spans = found  # (lo, hi, key): run_span gets the key
        modules[path].forward = recording_spans(path)
    try:
        with _step_undone(model), torch.enable_grad():
            loss_fn(model, *example_inputs)
    finally:
        for path, own in originals.items():
            modules[path].__dict__.pop("_graph_opt_spans", None)
            del modules[path].forward
            if own is not None:
                modules[path].forward = own
    return recorded


def _measured_peak(model, loss_fn, example_inputs):
    """The bytes one step (forward and backward) allocates above what is live when it
    starts, measured by the allocator: graph-opt's tracking CPU allocator, or CUDA's
    statistics where the model is on a GPU. What the step changes is put back after."""
    with _step_undone(model):
        if any(p.is_cuda for p in model.parameters()):
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            loss_fn(model, *example_inputs).backward()
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated() - base
        with _C._CpuMemoryTracker() as tracker:
            loss_fn(model, *example_inputs).backward()
        return tracker.peak_bytes


def _signature(regions, recorded):
    """What applying a plan puts on the model: each region's key and its per-call decisions
    (two plans that differ only where eager cannot tell them apart measure the same)."""
    return tuple((r.key, tuple(d for _, d in _decide(recorded[r.key][0], r.nodes)))
                 for r in regions if r.key in recorded)


def _peak_of(regions, recorded, model, modules, loss_fn, example_inputs, tried):
    """The whole measured peak of `regions` (as recorded) put on the model: measured once
    per signature, kept in `tried` ({signature: peak}); the plan stays applied where it was
    measured now."""
    applied = _signature(regions, recorded)
    if applied not in tried:
        _unplan_all(modules)
        _apply(regions, modules, recorded)
        tried[applied] = _held_bytes(model, example_inputs) + _measured_peak(model, loss_fn,
                                                                             example_inputs)
    return tried[applied]


def _whole(regions):
    """Copies of `regions` with every operator recomputed."""
    out = []
    for region in regions:
        whole = copy.copy(region)
        whole.nodes = [(op, True) for op, _ in region.nodes]
        out.append(whole)
    return out


# The bound search's rounds (plans measured) and slack: tightened while eager measures over
# the bound, loosened while it measures more than _WITHIN under it (recomputing less is faster).
_MAX_ROUNDS = 6
_WITHIN = 0.05  # issue 82: a binding bound's measured peak within 5% under it
_TIMED_ROUNDS = 3  # timed rounds of _faster_of (each runs both sides once)


def _held_bytes(model, example_inputs):
    """What the step holds before it starts: the parameters, buffers and tensor inputs, each
    storage once (a batch passed twice, as inputs and labels, is held once; the exported
    graph has an input for each)."""
    tensors = [*model.parameters(), *model.buffers(),
               *(x for x in example_inputs if isinstance(x, torch.Tensor))]
    return sum(t.untyped_storage().nbytes()
               for t in {t.untyped_storage()._cdata: t for t in tensors}.values())


def _timed_step(model, loss_fn, example_inputs):
    """Seconds of one step (forward and backward) as the model stands, put back after."""
    cuda = any(p.is_cuda for p in model.parameters())
    with _step_undone(model):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss_fn(model, *example_inputs).backward()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start


def _blocks_within(model, modules, loss_fn, example_inputs, bound, tried):
    """Per-block checkpointing within `bound`, with as few blocks as fit: (measured peak,
    regions, recorded) for the model's repeated blocks (eager_regions.repeated_blocks),
    the first k of them each recomputed whole, k the least that measures within `bound`
    (found by halving, stopped once within _WITHIN of it: each block left out is one less
    recomputed); None where the model has no such blocks or all of them do not fit. The
    earliest blocks are taken: backward reaches them last, when the later blocks' own
    activations are freed, so each recomputes beside less than a later block would."""
    paths = [path for path, _ in repeated_blocks(model)]

    def first(k):
        regions = [Region(path) for path in paths[:k]]
        _unplan_all(modules)
        recorded = _record(model, loss_fn, example_inputs, regions)
        return (_peak_of(regions, recorded, model, modules, loss_fn, example_inputs, tried),
                regions, recorded)
    if not paths:
        return None
    best = first(len(paths))
    if best[0] > bound:
        return None
    over, fits = 0, len(paths)  # no block recomputed is the plain step: over the bound
    while fits - over > 1 and best[0] < bound * (1 - _WITHIN):
        k = (over + fits) // 2
        got = first(k)
        if got[0] <= bound:
            fits, best = k, got
        else:
            over = k
    return best


def _take_blocks(plan_peak, blocks_peak, bound, plan_seconds, blocks_seconds):
    """Whether per-block checkpointing is applied instead of the plan, from their measured
    peaks and timed steps. Where both or neither lands within _WITHIN under `bound`, the
    faster median; where one does, the other only if it is clearly faster (its slowest step
    faster than the first one's fastest): a step that uses the memory the user allowed is
    not given up for a difference inside the timing's noise."""
    plan_close, blocks_close = (peak >= bound * (1 - _WITHIN) for peak in (plan_peak,
                                                                         blocks_peak))
    if plan_close and not blocks_close:
        return max(blocks_seconds) < min(plan_seconds)
    if blocks_close and not plan_close:
        return not max(plan_seconds) < min(blocks_seconds)
    return _median(blocks_seconds) < _median(plan_seconds)


def _median(values):
    return sorted(values)[len(values) // 2]


def _faster_of(fitting, model, modules, loss_fn, example_inputs, bound, tried):
    """`fitting` (measured, report, regions, recorded), or per-block checkpointing within
    `bound` (_blocks_within) where its steps are faster: a plan's selective-checkpoint
    policies cost time on every operator (3.5% of a small causal LM's step), which can
    outweigh what they save. Timed on the example inputs, _TIMED_ROUNDS rounds interleaved
    after a warm-up step each, and chosen by _take_blocks; the medians are recorded in the
    report ("eager_step_seconds")."""
    measured, report, regions, recorded = fitting
    within = _blocks_within(model, modules, loss_fn, example_inputs, bound, tried)
    if within is None:
        return fitting
    blocks_peak, blocks, blocks_recorded = within
    if _signature(blocks, blocks_recorded) == _signature(regions, recorded):
        return fitting
    sides = ((regions, recorded), (blocks, blocks_recorded))
    seconds = ([], [])
    for i in range(_TIMED_ROUNDS + 1):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            _unplan_all(modules)
            _apply(sides[k][0], modules, sides[k][1])
            t = _timed_step(model, loss_fn, example_inputs)
            if i:  # the first round warms up
                seconds[k].append(t)
    _unplan_all(modules)
    times = {"plan": _median(seconds[0]), "blocks": _median(seconds[1])}
    if _take_blocks(measured, blocks_peak, bound, *seconds):
        return (blocks_peak, dict(report, eager_measured_peak_bytes=blocks_peak,
                                  eager_regions_whole="blocks", eager_step_seconds=times),
                blocks, blocks_recorded)
    return (measured, dict(report, eager_step_seconds=times), regions, recorded)


def _unplan_all(modules):
    for module in modules.values():
        _unplan_module(module)



def _probed(rounds, i):
    """What the bound search is told of measured round `i` (`rounds`: auto_checkpoint's
    (measured, report, regions, recorded)): its peak, the target it was planned for, its key
    (the round itself: eager may measure a repeated plan differently once the search moved
    on), whether it is the planner's least (budget_unmet) and whether it recomputes
    nothing."""
    measured, report = rounds[i][0], rounds[i][1]
    return (measured, report["step_peak_bound_bytes"], str(i), bool(report.get("budget_unmet")),
            not any(a["decision"] == "recomputed" for a in report["activations"]))


def _loosest_fitting(rounds, bound):
    """The index of the round measured highest within `bound`, or None."""
    fitting = [i for i, r in enumerate(rounds) if r[0] <= bound]
    return max(fitting, key=lambda i: rounds[i][0]) if fitting else None


def auto_checkpoint(model, example_inputs, peak, loss_fn=None, pipeline=None, timed=True):
    """`model` with graph-opt's recomputation plan for a step whose whole peak is at most
    `peak` (bytes: an int, or "8GiB", "700MiB") applied through torch.utils.checkpoint;
    the same module object, changed in place, is returned. `example_inputs` and `loss_fn`
    as export_training_step takes them (step_call.py): positional arguments, a dict of
    keyword arguments or (args, kwargs); `loss_fn(model, *args, **kwargs)` returns the
    scalar loss (default: the model's output, or its `.loss`).
    `pipeline` replaces the planning pipeline (default "checkpoint{peak=PEAK}"; any
    checkpoint entry in it gets peak=PEAK).

    The whole peak is what the step holds before it starts (parameters, buffers, the batch:
    each storage once) plus what one step on the example inputs allocates above it, measured
    by the allocator once the plan is applied; where that is over `peak` (eager keeps a
    little more than the exported graph: dropout's mask as floats, for one), the plan is
    made again for a peak lower by the excess (doubled for each further plan over), and
    where it is more than 5% under, for a peak higher by the room left (eager often frees
    more than the plan counted on, and recomputing less is faster); once one plan has fitted
    and one has not, the next is made halfway between their targets: graph-opt's one bound
    search (_C.search_bound; docs/Checkpointing.md, "One bound search"). A tightened target under the least the planner reaches
    gets its least-peak plan (unmet=closest). Where no plan fits, checkpoints that keep only
    their inputs (as torch.utils.checkpoint keeps them) are tried: the regions of the plan
    that measured least, each recomputed whole, then the model's repeated blocks
    (eager_regions.repeated_blocks: per-block checkpointing, on as few of the first blocks
    as fit: _blocks_within); "eager_regions_whole" in the report says which ("regions" or
    "blocks"; the report is otherwise the least-measured plan's). At most six plans
    besides, and the loosest that measured within the bound is chosen. With `timed` (the
    default), where the model has repeated blocks and they too, each recomputed whole (as
    few as fit), measure within the bound, the chosen plan and they are timed on
    the example inputs (three interleaved steps each) and the faster is applied (where
    only one of them lands within 5% under the bound, the other only if clearly faster:
    _take_blocks)
    ("eager_step_seconds" in the report). model.graph_opt_plan is the checkpoint pass's
    report of the plan applied (docs/Checkpointing.md#the-report), with
    "eager_measured_peak_bytes" (the whole step's), "eager_peak_bound_bytes" (`peak`) and
    "eager_rounds" (plans measured) added (its
    step_peak_bound_bytes is the target it was planned for). Raises graph_opt.Error where
    the step cannot be exported, or where nothing tried measures within the peak in eager:
    the message gives the least measured, and the planner's own least where the bound is
    below it."""
    peak_text = check_peak(peak)
    bound = _C._bytes_option("peak", peak_text)
    # one flat tuple of inputs and a loss over it (step_call.py: dicts of keyword
    # arguments, a Hugging Face output's .loss, tensors loss_fn closes over)
    loss_fn, example_inputs = flat_step(loss_fn, example_inputs, "auto_checkpoint")
    with tempfile.TemporaryDirectory(prefix="graph-opt-auto-checkpoint-") as tmp:
        path = os.path.join(tmp, "step.pt2")
        with _step_undone(model):  # the export runs the step
            export_training_step(model, loss_fn, example_inputs, path)
        original = Graph.load(path)
    modules = dict(model.named_modules())
    rounds = []  # each plan measured: (measured, report, regions, recorded)
    unplan = functools.partial(_unplan_all, modules)
    tried = {}  # the plans measured, as _signature gives them: their measured peaks
    prepared = {}  # the graph as the passes before checkpoint leave it (run_prepared)

    def probe(target):
        """graph-opt's one bound search's probe (_C.search_bound): the plan for `target`
        bytes of whole peak, put on the model and measured in eager."""
        unplan()  # the last round's plan off
        # A target may lie below the least the planner reaches (the bound, or a target
        # tightened by eager's excess): its closest plan is still worth measuring, since
        # the planner's model of the step is not eager's, and where even it does not fit
        # the checkpoints keeping only their inputs below may.
        pipe = with_peak(pipeline or "checkpoint{}", str(target), closest=True)
        try:
            result = run_prepared(original, pipe, prepared)[1]
        except Error as e:
            fitting = _loosest_fitting(rounds, bound)
            if fitting is not None:  # the plan that fitted, again: the search ends there
                return _probed(rounds, fitting)
            if not rounds:
                raise
            raise Error(f"auto_checkpoint: peak={peak_text} ({bound} bytes) is not met in "
                        f"eager PyTorch: with the plan for it the step measures "
                        f"{rounds[-1][0]} bytes, and planned for {target} bytes to make up "
                        f"the difference: {e}") from e
        report = result["reports"].get("checkpoint")
        if report is None:
            raise Error(f"auto_checkpoint: pipeline {pipe!r} has no checkpoint entry")
        regions = plan_regions(original, report, model)
        recorded = _record(model, loss_fn, example_inputs, regions)
        # a plan eager cannot tell from one measured before is not measured again (and the
        # search goes on from its known peak: each round is its own key)
        measured = _peak_of(regions, recorded, model, modules, loss_fn, example_inputs, tried)
        report["eager_measured_peak_bytes"] = measured
        report["eager_peak_bound_bytes"] = bound
        report["eager_rounds"] = len(tried)
        rounds.append((measured, report, regions, recorded))
        return _probed(rounds, len(rounds) - 1)

    try:
        # Measured on the step that runs: no margin; a plan more than _WITHIN under the bound
        # is loosened (recomputing less is faster); the planner's least-peak plan (its
        # budget_unmet) ends the search over the bound.
        searched = _C.search_bound(bound, 0.0, _WITHIN, _MAX_ROUNDS, bound, 0, probe)
        fitting = None if searched["best"] is None else rounds[searched["best"]]
        least_over = None if fitting is not None else rounds[searched["closest"]]
        report = rounds[-1][1]
        if fitting is None and least_over is not None:
            # Last, checkpoints that keep only their inputs (as torch.utils.checkpoint keeps
            # them): the regions of the plan that measured least, each recomputed whole (the
            # least eager holds with those regions, below what the planner's per-operator
            # decisions keep where its model of the step and eager's differ); then the
            # model's repeated blocks, each recomputed whole (per-block checkpointing).
            _, report, regions, _ = least_over
            whole = _whole(regions)
            if whole:
                unplan()
                recorded = _record(model, loss_fn, example_inputs, whole)
                measured = _peak_of(whole, recorded, model, modules, loss_fn, example_inputs,
                                    tried)
                if measured <= bound:
                    fitting = (measured, dict(report, eager_measured_peak_bytes=measured,
                                              eager_regions_whole="regions"), whole, recorded)
            blocks = None if fitting is not None else _blocks_within(
                model, modules, loss_fn, example_inputs, bound, tried)
            if blocks is not None:
                measured, whole, recorded = blocks
                fitting = (measured, dict(report, eager_measured_peak_bytes=measured,
                                          eager_regions_whole="blocks"), whole, recorded)
        if fitting is None:
            unmet = (f"; the planner's least-peak plan was among them "
                     f"({report['budget_unmet']})" if report.get("budget_unmet") else "")
            whole = (", then checkpoints that keep only their inputs" if least_over is not None
                     else "")
            raise Error(f"auto_checkpoint: peak={peak_text} ({bound} bytes) is not met in eager "
                        f"PyTorch: the step still measures {min(tried.values())} bytes at the "
                        f"least of {len(tried)} plans (each tightened by the last one's "
                        f"excess{whole}){unmet}")
        if timed and fitting[1].get("eager_regions_whole") != "blocks":
            fitting = _faster_of(fitting, model, modules, loss_fn, example_inputs, bound, tried)
        measured, report, regions, recorded = fitting
        report["eager_rounds"] = len(tried)
        unplan()
        applied = _apply(regions, modules, recorded)
    except BaseException:
        unplan()  # nothing of a plan stays on a failure
        raise
    model.graph_opt_plan = report
    model.graph_opt_regions = applied
    return model
