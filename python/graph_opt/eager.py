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

Regions are modules below the model: an activation the model's own forward makes (not a
submodule's) stays saved, since a checkpoint of the whole model recomputes all of forward at
once. One step on the example inputs records the operators each region's forward calls in eager;
they are aligned with the export's forward nodes of that region by operator name (eager
calls a few operators the export fuses), each call taking its node's decision; a call with
no node is saved, and a call that writes in place, or whose output is written in place
later, is recomputed (selective checkpoint cannot keep a tensor that changes). At run
time the policy goes by call index; a call out of line with the recording is saved (or
recomputed where it writes in place).
docs/Python.md.
"""
import contextlib
import functools
import os
import tempfile
import types

import torch
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

from . import _C, run_pipeline
from ._C import Error, Graph
from .export import export_training_step
from .joint import check_peak, with_peak

__all__ = ["auto_checkpoint"]


def _op_key(name):
    """aten::relu_ and aten::relu.default alike: the functional operator's name."""
    name = name.split(".", 1)[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _module_path(node):
    module = node["attributes"].get("module")
    return module.strip('"') if isinstance(module, str) else None


# Modules that only hold or chain others: a region is one of their children (a checkpoint of
# a whole Sequential recomputes all of it at backward's first use of any of it).
_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)


def _region_of(path, modules):
    """The shallowest module on `path`'s way down from the root that is not a container
    (ModuleList, ModuleDict, Sequential: they hold or chain their children): "" (the model
    itself) for an operator the model's own forward calls."""
    if not path:
        return ""
    parts = path.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        module = modules.get(prefix)
        if module is not None and not isinstance(module, _CONTAINERS):
            return prefix
    return ""


def _regions(graph, recomputed, model):
    """{module path: [(operator, recomputed?), ...] in forward order}: the modules to run
    under checkpoint, each the shallowest called module below the model holding a
    recomputed activation (one forward call of it runs its operators in the export's
    order)."""
    modules = dict(model.named_modules())
    forward = [n for n in graph.nodes if n["phase"] == "forward" and n["op"].startswith("aten::")]
    # An activation the model's own forward makes (no submodule's) stays saved: a region of
    # the whole model would recompute all of forward at backward's first use of any of it,
    # every recomputed activation live at once (measured: a higher peak than no plan).
    paths = {_region_of(_module_path(n) or "", modules)
             for n in forward if set(n["outputs"]) & recomputed}
    paths.discard("")

    def inside(n, region):
        p = _module_path(n) or ""
        return not region or p == region or p.startswith(region + ".")
    return {region: [(_op_key(n["op"]), bool(set(n["outputs"]) & recomputed))
                     for n in forward if inside(n, region)] for region in sorted(paths)}


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
        self.calls.append([_op_key(schema.name), False, schema.is_mutable])
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.made_by.setdefault(t.untyped_storage()._cdata, index)
        return out


def _decide(calls, nodes):
    """Per call of a region's forward, recompute or not: the graph's decision where the call
    lines up with a node (difflib's alignment of operator names: eager calls a few operators
    the export fuses, such as dropout's empty_like, bernoulli_ and div_ for native_dropout),
    else saved. A call whose output is written in place later, or that writes in place
    itself, is recomputed: selective checkpoint cannot keep a tensor that changes."""
    import difflib

    decisions = [False] * len(calls)
    matcher = difflib.SequenceMatcher(a=[c[0] for c in calls], b=[op for op, _ in nodes],
                                      autojunk=False)
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            decisions[block.a + i] = nodes[block.b + i][1]
    return [(name, recompute or written or writes)
            for (name, written, writes), recompute in zip(calls, decisions)]


def _policy(decisions):
    """A selective-checkpoint policy over one region's calls, by their index in the forward
    (and again in the recomputation); a call out of line with the recording is saved, or
    recomputed where it writes in place."""
    counts = {False: 0, True: 0}

    def policy(ctx, func, *args, **kwargs):
        key = _op_key(func._schema.name) if hasattr(func, "_schema") else str(func)
        k = counts[bool(ctx.is_recompute)]
        counts[bool(ctx.is_recompute)] = k + 1
        if k < len(decisions) and decisions[k][0] == key:
            recompute = decisions[k][1]
        else:
            recompute = bool(getattr(func, "_schema", None) and func._schema.is_mutable)
        return CheckpointPolicy.PREFER_RECOMPUTE if recompute else CheckpointPolicy.MUST_SAVE
    return policy


def _checkpointed_forward(self, *args, **kwargs):
    """A planned module's forward: its own under torch.utils.checkpoint with its policy. A
    method of the module (not a closure over it), so copy.deepcopy of the model gives a copy
    that runs its own parameters."""
    forward = functools.partial(self._graph_opt_forward, self)
    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)
    decisions = self._graph_opt_decisions
    return checkpoint(forward, *args, use_reentrant=False,
                      context_fn=lambda: create_selective_checkpoint_contexts(_policy(decisions)),
                      **kwargs)


def _plan_module(module, decisions):
    """Runs `module`'s forward under checkpoint with `decisions`' policy. Its own forward
    (the class's, or one set on the instance) is kept to put back (_unplan_module)."""
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
    module.forward = types.MethodType(_checkpointed_forward, module)


def _unplan_module(module):
    """Puts back the forward _plan_module replaced, if it replaced one."""
    if "_graph_opt_forward" not in module.__dict__:
        return
    own = module.__dict__.pop("_graph_opt_own_forward")
    del module._graph_opt_forward, module._graph_opt_decisions, module.forward
    if own is not None:
        module.forward = own


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
    """{region: its calls} from one step of the model on the example inputs (its state, the
    RNG's included, restored after)."""
    modules = dict(model.named_modules())
    recorded = {}
    originals = {}

    def recording(path, forward):
        @functools.wraps(forward)
        def run(*args, **kwargs):
            if path in recorded:
                return forward(*args, **kwargs)
            with _Recorder() as r:
                out = forward(*args, **kwargs)
            recorded[path] = r.calls
            return out
        return run

    for path in regions:
        originals[path] = modules[path].forward
        modules[path].forward = recording(path, originals[path])
    try:
        with _step_undone(model), torch.enable_grad():
            loss_fn(model, *example_inputs)
    finally:
        for path, forward in originals.items():
            modules[path].forward = forward
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


# Plans tried before auto_checkpoint gives up on a peak eager PyTorch measures over it.
_MAX_ROUNDS = 4


def auto_checkpoint(model, example_inputs, peak, loss_fn=None, pipeline=None):
    """`model` with graph-opt's recomputation plan for a step whose whole peak is at most
    `peak` (bytes: an int, or "8GiB", "700MiB") applied through torch.utils.checkpoint;
    the same module object, changed in place, is returned. `loss_fn(model,
    *example_inputs)` returns the scalar loss (default: model(*example_inputs) is it).
    `pipeline` replaces the planning pipeline (default "checkpoint{peak=PEAK}"; any
    checkpoint entry in it gets peak=PEAK).

    The whole peak is the step's inputs as graph-opt counts them (parameters, buffers,
    the batch) plus what one step on the example inputs allocates above them, measured
    by the allocator once the plan is applied; where that is over `peak` (eager keeps a
    little more than the exported graph: dropout's mask as floats, for one), the plan is
    made again for a peak lower by the excess, at most four times. model.graph_opt_plan is
    the checkpoint pass's report of the plan applied (docs/Checkpointing.md#the-report),
    with "eager_measured_peak_bytes" (the whole step's), "eager_peak_bound_bytes" (`peak`)
    and "eager_rounds" added (its step_peak_bound_bytes is the last round's target). Raises
    graph_opt.Error where the step cannot be exported, no plan reaches the peak (the message
    gives the least reachable) or eager's measured peak stays over it."""
    peak_text = check_peak(peak)
    bound = _C._bytes_option("peak", peak_text)
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    if loss_fn is None:
        def loss_fn(m, *xs):
            return m(*xs)
    with tempfile.TemporaryDirectory(prefix="graph-opt-auto-checkpoint-") as tmp:
        path = os.path.join(tmp, "step.pt2")
        with _step_undone(model):  # the export runs the step
            export_training_step(model, loss_fn, example_inputs, path)
        original = Graph.load(path)
    modules = dict(model.named_modules())
    target, measured = peak_text, None
    try:
        for rounds in range(1, _MAX_ROUNDS + 1):
            for module in modules.values():  # the last round's plan off
                _unplan_module(module)
            pipe = with_peak(pipeline or "checkpoint{}", target)
            try:
                result = run_pipeline(original.clone(), pipe)
            except Error as e:
                if rounds == 1:
                    raise
                raise Error(f"auto_checkpoint: peak={peak_text} ({bound} bytes) is not met in "
                            f"eager PyTorch: with the plan for it the step measures {measured} "
                            f"bytes, and planned for {target} bytes to make up the difference: "
                            f"{e}") from e
            report = result["reports"].get("checkpoint")
            if report is None:
                raise Error(f"auto_checkpoint: pipeline {pipe!r} has no checkpoint entry")
            recomputed = {a["name"] for a in report["activations"]
                          if a["decision"] == "recomputed"}
            regions = _regions(original, recomputed, model)
            recorded = _record(model, loss_fn, example_inputs, regions)
            for path, nodes in regions.items():
                if path in recorded:  # (one the step does not call is left alone)
                    _plan_module(modules[path], _decide(recorded[path], nodes))
            measured = report["input_bytes"] + _measured_peak(model, loss_fn, example_inputs)
            report["eager_measured_peak_bytes"] = measured
            report["eager_peak_bound_bytes"] = bound
            report["eager_rounds"] = rounds
            if measured <= bound:
                break
            target = str(report["step_peak_bound_bytes"] - (measured - bound))
        else:
            raise Error(f"auto_checkpoint: peak={peak_text} ({bound} bytes) is not met in eager "
                        f"PyTorch: the step still measures {measured} bytes after "
                        f"{_MAX_ROUNDS} plans, each tightened by the last one's excess")
    except BaseException:
        for module in modules.values():  # nothing of a plan stays on a failure
            _unplan_module(module)
        raise
    model.graph_opt_plan = report
    model.graph_opt_regions = sorted(p for p in regions if p in recorded)
    return model
