"""One peak= for the whole step, across the graphs torch.compile makes of it
(docs/TorchCompile.md, "One bound for the whole step").

torch.compile hands the partitioner one joint graph at a time, in the order the forward runs
them: DDP's bucket graphs (DDPOptimizer splits one dynamo frame at its buckets) and the frames
a graph break leaves (FSDP2's per-block graphs, a user's torch._dynamo.graph_break()). While
graph k runs, what the other graphs of the step hold stays allocated:

- a graph before k (in forward order): its parameters and buffers, and what its forward saved
  for backward (freed when its backward runs, after k's);
- a graph after k: its parameters and buffers, and during k's backward the gradients of its
  parameters too (its backward ran before k's).

So each graph is planned against peak= less what the others hold, and every candidate
partition of it is priced at the whole step's predicted peak were it chosen (peak_with;
compile.py's _price). Graphs the step runs that the partitioner has not seen are taken to be
like the one being planned, per parameter byte: the ones after it not compiled yet (their
parameters known: DDP's later buckets from dynamo's graph arguments of the frame it splits;
the frames after a graph break from the model whose forward the first frame is), and its own
further runs (a block class's compiled forward runs once per block: FSDP2's per-block frames,
the model found from FSDP2's root). After each graph the whole step's predicted peak over the
graphs known then is recomputed (`step_peak`), so a bound that a graph compiled later pushes
over is reported then.

Under FSDP2 each rank also holds, outside every graph (Sharding, read from FSDP2's state):
its shards of every parameter, all step; the unsharded parameters of the groups FSDP2 keeps
gathered from forward to backward (the root's: reshard_after_forward is off there), all step,
and their gradients until the root's reduce-scatter; the shards of the gradients reduced so
far. A sharded block's graph holds its gathered parameters only while it runs (FSDP2 frees
them after its forward and gathers them again, one block ahead, for its backward). The
collectives themselves peak outside the graphs: the root's post-backward, after every graph's
backward, holds its unsharded gradients, the reduce-scatter's input (as large) and output (a
shard; gloo's reduce-scatter one more), a floor no partition lowers (measured on 1 and 2 gloo
ranks to the byte).

The ledger belongs to one partitioner: the graphs it plans are taken as one step. A frame
compiled again (new shapes, a guard that failed) replaces its earlier graphs;
torch._dynamo.reset() (frame numbers start again) empties the ledger.
"""
import dataclasses

import torch

from .joint import nbytes, output_nodes, saved_by_torch, storage_root


@dataclasses.dataclass
class Held:
    """What the other graphs of the step hold while one runs: bytes during its forward and
    during its backward, the graphs counted before and after it, and the parameter bytes of
    its frame's graphs not compiled yet (in both figures; their gradients in the backward's)."""
    forward: int = 0
    backward: int = 0
    before: int = 0
    after: int = 0
    not_compiled: int = 0

    def record(self):
        return {"held_forward_bytes": self.forward, "held_backward_bytes": self.backward,
                "graphs_before": self.before, "graphs_after": self.after,
                "not_compiled_parameter_bytes": self.not_compiled}


@dataclasses.dataclass
class GraphEntry:
    """One graph of the step as planned: `resident` (its parameters and buffers: inputs that
    live all step), `gradients` (of those), `saved` (what its forward keeps for backward beyond
    them, its saved inputs included), its own halves' forward and backward peaks."""
    frame: int
    bucket: int
    compile_id: tuple
    resident: int
    gradients: int
    saved: int
    forward_peak: int
    backward_peak: int
    runs: int = 1  # how many times it runs in the step (Compiling.runs)
    # of `resident`, the bytes held from its run to the step's end (all of it but where
    # FSDP2 frees a sharded block's gathered parameters after its forward)
    kept: int = None
    # of `saved`, the graph's own inputs it saves that are not parameters (a previous
    # graph's output, the batch, a mask), {storage key: bytes}: DDP's buckets pass one
    # tensor to several graphs, held once (StepLedger._before_holds)
    saved_inputs: dict = dataclasses.field(default_factory=dict)
    inputs: frozenset = frozenset()  # the storage keys of those inputs, saved or not

    def __post_init__(self):
        if self.kept is None:
            self.kept = self.resident

    def gradients_held(self, world):
        """Its gradients once its backward ran: those of kept parameters whole, the rest
        as FSDP2's shards (1/world of them)."""
        share = self.kept / self.resident if self.resident else 1.0
        return int(self.gradients * share + self.gradients * (1 - share) / world)


@dataclasses.dataclass
class Position:
    """Where a graph being planned stands in its step: its key and what the others hold."""
    frame: int
    bucket: int
    compile_id: tuple
    frame_resident: int  # the parameter bytes of its whole dynamo frame, or None
    held: Held
    resident: int  # its own parameters and buffers
    gradients: int
    static_names: frozenset  # their placeholders' names
    runs: int = 1
    fsdp: bool = False
    # what the frame's graphs could save per byte of their parameters at most (None: unknown)
    frame_ratio: float = None
    kept: int = None  # of `resident`, what stays after its run (GraphEntry.kept)
    sharding: "Sharding" = None  # FSDP2's holdings outside the graphs, or None
    inputs: frozenset = frozenset()  # GraphEntry.inputs

    def __post_init__(self):
        if self.kept is None:
            self.kept = self.resident


def _distinct_bytes(nodes):
    seen, total = set(), 0
    for n in nodes:
        root = storage_root(n)
        if root.name not in seen:
            seen.add(root.name)
            total += nbytes(root)
    return total


def _primals(gm):
    return [n for n in gm.graph.nodes if n.op == "placeholder"
            and not n.name.startswith("tangents")]


def _static_indices(gm, kwargs):
    """The positions among the primal inputs of those that live all step:
    static_lifetime_input_indices (parameters and buffers, as dynamo marks them)."""
    count = len(_primals(gm))
    return [i for i in kwargs.get("static_lifetime_input_indices") or [] if i < count]


def _static_inputs(gm, kwargs):
    primals = _primals(gm)
    return [primals[i] for i in _static_indices(gm, kwargs)]


def resident_and_gradients(gm, kwargs):
    """(bytes of the joint graph's parameters and buffers, bytes of their gradients: the
    joint graph's outputs after the forward's, one per primal, None where it has none)."""
    primals = _primals(gm)
    indices = _static_indices(gm, kwargs)
    outs = output_nodes(gm)[kwargs["num_fwd_outputs"]:]
    grads = [outs[i] for i in indices if i < len(outs) and isinstance(outs[i], torch.fx.Node)]
    return _distinct_bytes(primals[i] for i in indices), sum(nbytes(g) for g in grads)


def _storage_key(frame, node):
    """A key for the storage of a graph input's example value: the graphs dynamo makes of one
    frame (DDP's buckets) share the fake tensors of what they pass each other; the frame
    in the key, since a storage's address is unique only while it lives."""
    try:
        return frame, node.meta["val"].untyped_storage()._cdata
    except Exception:
        return None


def input_keys(gm, kwargs, frame):
    """The storage keys of the joint graph's inputs that are not parameters or buffers."""
    static = set(_static_indices(gm, kwargs))
    keys = (_storage_key(frame, n) for i, n in enumerate(_primals(gm)) if i not in static)
    return frozenset(k for k in keys if k is not None)


def saved_of(fw, num_fwd_outputs, static_names, frame):
    """(bytes, {storage key: bytes}): what a forward half keeps for backward beyond the
    parameters and buffers (named in `static_names`), distinct storages: its saved
    activations and the saved inputs that are not parameters (the batch, a previous graph's
    output); and of those, the saved inputs by storage key (StepLedger._before_holds holds
    an input several graphs of the frame save once)."""
    names = saved_by_torch(fw, num_fwd_outputs)
    nodes = [n for n in fw.graph.nodes if n.name in names]
    inputs = {}
    for n in nodes:
        root = storage_root(n)
        if root.op == "placeholder" and root.name not in static_names:
            key = _storage_key(frame, root)
            if key is not None:
                inputs[key] = nbytes(root)
    return (_distinct_bytes(n for n in nodes if storage_root(n).name not in static_names),
            inputs)


def _compile_position():
    """(frame id, DDP bucket index, (frame id, frame compile id)) of the graph dynamo is
    compiling now, or None outside a dynamo compile (a partitioner called directly)."""
    try:
        from torch._guards import CompileContext, TracingContext
        compile_id = CompileContext.current_compile_id()
    except Exception:
        return None
    if compile_id is None or getattr(compile_id, "frame_id", None) is None:
        return None
    context = TracingContext.try_get()
    ddp = getattr(context, "ddp_optimizer_ctx", None) if context is not None else None
    # DDPOptimizer counts a bucket once it is compiled: the one compiling now is the next
    bucket = ddp.curr_bucket + 1 if ddp is not None else 0
    return compile_id.frame_id, bucket, (compile_id.frame_id, compile_id.frame_compile_id)


def _tensor_bytes(tensors):
    """Distinct tensors' bytes, a DTensor's (FSDP2's sharded parameters) at its full size:
    the graphs take them unsharded."""
    seen, total = set(), 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or id(t) in seen:
            continue
        seen.add(id(t))
        total += _hinted(t.numel()) * t.element_size()
    return total


def _fsdp_roots():
    """[(root module, its FSDP2 states)] for every model fully_shard manages in this
    process (torch.distributed._composable_state's registry)."""
    try:
        from torch.distributed._composable_state import _module_state_mapping
        from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
    except Exception:
        return []
    roots = []
    for module, ref in list(_module_state_mapping.items()):
        state = ref() if callable(ref) else ref
        if isinstance(state, FSDPState) and state._is_root:
            try:
                roots.append((module, list(state._state_ctx.all_states)))
            except Exception:
                roots.append((module, [state]))
    return roots


def _whole_model(module):
    """(the model `module` is part of where FSDP2 shards it (the root of its fully_shard
    tree: a sharded block's forward is a frame of its own, and so is a submodule's forward
    that a graph break leaves), else `module`; FSDP2's states of that model, or None)."""
    for root, states in _fsdp_roots():
        if root is module or any(m is module for m in root.modules()):
            return root, states
    if getattr(module, "_get_fsdp_state", None) is not None:  # not initialised yet
        return module, []
    return module, None


@dataclasses.dataclass
class Sharding:
    """What FSDP2 holds on this rank outside the graphs torch.compile makes (the module's
    docstring): `shard_bytes` all step; `kept_bytes`, the unsharded parameters of the groups
    not resharded after forward, from the root's pre-forward to its post-backward;
    `floor_bytes`, the most its collectives hold at once (`floor_at` says where), which no
    partition of the graphs lowers; `kept_ids`, the ids of those groups' parameter tensors
    (sharded and gathered); `world`, the shard group's size."""
    shard_bytes: int = 0
    kept_bytes: int = 0
    floor_bytes: int = 0
    floor_at: str = ""
    world: int = 1
    kept_ids: frozenset = frozenset()

    def record(self):
        return {"shard_bytes": self.shard_bytes, "kept_unsharded_bytes": self.kept_bytes,
                "collectives_floor_bytes": self.floor_bytes,
                "collectives_floor_at": self.floor_at, "world": self.world}


def _gloo(group):
    try:
        import torch.distributed as dist
        return dist.get_backend(group.mesh_info.shard_process_group) == "gloo"
    except Exception:
        return False


@dataclasses.dataclass
class _Group:
    """One FSDP2 parameter group on this rank: its module's class name, its parameters'
    unsharded and shard bytes, whether FSDP2 keeps it gathered after forward, the ids of its
    parameter tensors, its shard group's size and whether that group is gloo's."""
    name: str
    unsharded: int
    shard: int
    kept: bool
    ids: set
    world: int
    gloo: bool


def _sharding(states):
    """Sharding from FSDP2's states of one model (FSDPState._state_ctx.all_states)."""
    groups = []
    for state in states:
        group = getattr(state, "_fsdp_param_group", None)
        if group is None:
            continue
        unsharded = shard = 0
        ids = set()
        for fp in group.fsdp_params:
            dtype = getattr(fp, "param_dtype", None) or fp.sharded_param.dtype
            unsharded += _hinted(torch.Size(fp._orig_size).numel()) * dtype.itemsize
            shard += fp._sharded_param_data.untyped_storage().nbytes()
            ids.add(id(fp.sharded_param))
            if hasattr(fp, "_unsharded_param"):
                ids.add(id(fp._unsharded_param))
        kept = group.post_forward_mesh_info is None
        world = getattr(group.mesh_info, "shard_mesh_size", 1) or 1
        groups.append(_Group(state._modules[0].__class__.__name__, unsharded, shard, kept,
                             ids, world, _gloo(group)))
    found = Sharding(shard_bytes=sum(g.shard for g in groups),
                     kept_bytes=sum(g.unsharded for g in groups if g.kept),
                     world=max([g.world for g in groups] or [1]),
                     kept_ids=frozenset(i for g in groups if g.kept for i in g.ids))
    # The kept groups' collectives (the root's): a resharded block's gather and reduce hold
    # about what its graph's forward and backward held just before, with those graphs' own
    # activations gone, so its graphs' peaks stand for them
    for g in (g for g in groups if g.kept):
        name, unsharded, shard, world = g.name, g.unsharded, g.shard, g.world
        # its post-backward, after every graph's backward: its gradients unsharded, the
        # reduce-scatter's input as large and its output (a shard, gloo's one more; on one
        # rank the input is the output), beside every shard, the other groups' gradient
        # shards and the other kept groups' parameters and gradients
        output = shard * (2 if g.gloo else 1) if world > 1 else 0
        reduce = (found.shard_bytes + (found.shard_bytes - shard) + 2 * unsharded + output
                  + 2 * (found.kept_bytes - unsharded))
        # its pre-forward: the all-gather's output and the parameters copied out of it
        gather = found.shard_bytes + unsharded * (2 if world > 1 else 1)
        for peak, where in ((reduce, f"the reduce-scatter of {name}'s gradients"),
                            (gather, f"the all-gather of {name}'s parameters")):
            if peak > found.floor_bytes:
                found.floor_bytes, found.floor_at = peak, where
    return found


@dataclasses.dataclass
class Compiling:
    """What dynamo's frame being compiled says of the step: the parameter and buffer bytes of
    its graph arguments (DDP: the whole model, which DDPOptimizer splits in buckets), those of
    the model whose forward it is part of (its `self`, or FSDP2's root: the whole model
    where torch.compile(model) compiles model's forward; a graph break's later frames have the
    same `self`), and `runs`: how many modules of the model share the frame's forward (a
    block class's compiled forward runs once per block: FSDP2's per-block frames)."""
    frame_resident: int = None
    model_resident: int = None
    runs: int = 1
    # the frame's graph ends at a graph break: more frames of the step follow it (a graph
    # that ends at its frame's return has none after it but what its caller compiles)
    breaks: bool = False
    fsdp: bool = False  # FSDP2 shards the model (its buffers are outside every graph)
    # the bytes of every value the frame's forward computes: what its graphs could save at
    # most (DDPOptimizer splits this graph in buckets)
    frame_activations: int = None
    sharding: Sharding = None  # FSDP2's holdings outside the graphs, or None
    # of the frame's parameter bytes, the share FSDP2 keeps gathered after its forward
    # (1.0 without FSDP2)
    kept_share: float = 1.0

    @property
    def frame_ratio(self):
        """What the frame's graphs could save per byte of their parameters at most, or None."""
        if self.frame_activations is None or not self.frame_resident:
            return None
        return self.frame_activations / self.frame_resident


def _hinted(n):
    """An int, or a symbolic one's hint, read without guarding on it (int() on a SymInt
    would specialize the frame's shapes)."""
    if isinstance(n, int):
        return n
    hint = getattr(getattr(n, "node", None), "hint", None)
    return int(hint) if hint is not None else 0


def _computed_bytes(graph):
    """The bytes of the tensors a dynamo frame's graph computes (its nodes' example values),
    or None where they cannot be read."""
    try:
        total = 0
        for node in graph.nodes:
            if node.op in ("call_function", "call_method", "call_module"):
                value = node.meta.get("example_value")
                values = value if isinstance(value, (list, tuple)) else [value]
                total += sum(_hinted(v.numel()) * v.element_size() for v in values
                             if isinstance(v, torch.Tensor))
        return total
    except Exception:
        return None


def _compiling():
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        graphargs = tx.output.graphargs
    except Exception:
        return Compiling()
    examples = []
    for arg in graphargs:
        try:
            t = arg.example
        except Exception:
            continue
        source = getattr(getattr(arg, "source", None), "name", "")
        source = source() if callable(source) else str(source)
        if isinstance(t, torch.nn.Parameter) or (isinstance(t, torch.Tensor)
                                                 and "_buffers" in source):
            examples.append(t)
    reason = getattr(tx.output, "compile_subgraph_reason", None)
    found = Compiling(frame_resident=_tensor_bytes(examples),
                      breaks=bool(getattr(reason, "graph_break", False)),
                      frame_activations=_computed_bytes(tx.output.graph))
    module = getattr(tx, "f_locals", {}).get("self")
    if isinstance(module, torch.nn.Module):
        model, states = _whole_model(module)
        found.fsdp = states is not None
        if states:
            try:
                found.sharding = _sharding(states)
                kept = _tensor_bytes([t for t in examples if id(t) in found.sharding.kept_ids])
                found.kept_share = kept / found.frame_resident if found.frame_resident else 1.0
            except Exception:  # FSDP2's internals read otherwise: its holdings not counted
                found.sharding = None
        found.model_resident = _tensor_bytes([*model.parameters(), *model.buffers()])
        code = getattr(tx, "f_code", None)
        found.runs = max(1, _frames_sharing(model, code, states is not None))
    return found


def _frames_sharing(model, code, sharded):
    """How many modules of `model` run `code` (a forward) as a dynamo frame of their own:
    every one that shares it, but under FSDP2 (`sharded`) not those inside a sharded module
    other than the root (a sharded block's frame inlines its submodules' forwards: a
    Llama's per-layer norms are in its block's graph, its final norm is a frame of its own)."""
    count = 0
    stack = [(model, False)]
    while stack:
        module, inside = stack.pop()
        if not inside and getattr(type(module).forward, "__code__", None) is code:
            count += 1
        inside = inside or (sharded and module is not model
                            and getattr(module, "_get_fsdp_state", None) is not None)
        stack.extend((child, inside) for child in module.children())
    return count


class StepLedger:
    def __init__(self):
        self.entries = {}  # (frame, bucket) -> GraphEntry
        self.frames = []  # frame ids in the order first compiled: the forward's order
        # the model's parameters and buffers, as the frames compiled so far know them
        self.model_resident = 0
        self.sharding = None  # FSDP2's holdings outside the graphs, once a frame said

    def _order(self, frame, bucket):
        return self.frames.index(frame), bucket

    def enter(self, gm, kwargs):
        """The Position of the joint graph dynamo is compiling now (None outside dynamo):
        what the graphs known of its step hold while it runs."""
        where = _compile_position()
        if where is None:
            return None
        frame, bucket, compile_id = where
        ours = [e for e in self.entries.values() if e.frame == frame]
        if compile_id[1] == 0 and any(e.compile_id != compile_id for e in ours):
            # the frame's first compile, and the ledger has that frame: dynamo was reset
            self.entries.clear()
            self.frames.clear()
            self.model_resident = 0
            self.sharding = None
        for key in [k for k, e in self.entries.items()
                    if e.frame == frame and e.compile_id != compile_id]:
            del self.entries[key]  # compiled again: the new graphs replace the old
        if frame not in self.frames:
            self.frames.append(frame)
        resident, gradients = resident_and_gradients(gm, kwargs)
        compiling = _compiling()
        self.model_resident = max(self.model_resident, compiling.model_resident or 0)
        # graphs not compiled yet: the frame's other buckets (DDP), and where the frame ends
        # at a graph break, the model's parameters no graph compiled so far has (the frames
        # after it), its own further runs apart. (Not where it returns: a parameter no graph
        # takes, unused in the step, is not a graph to come.)
        others = {k: e for k, e in self.entries.items() if k != (frame, bucket)}
        known = sum(e.runs * e.resident for e in others.values())
        known_here = sum(e.resident for e in others.values() if e.frame == frame)
        not_compiled = max(0, (compiling.frame_resident or 0) - resident - known_here,
                           (self.model_resident - compiling.runs * resident - known)
                           if compiling.breaks else 0)
        if compiling.sharding is not None:
            self.sharding = compiling.sharding
        kept = int(resident * compiling.kept_share)
        inputs = input_keys(gm, kwargs, frame)
        held = self._held(self.entries, (frame, bucket), not_compiled, kept, inputs)
        return Position(frame, bucket, compile_id, compiling.frame_resident, held, resident,
                        gradients, frozenset(n.name for n in _static_inputs(gm, kwargs)),
                        compiling.runs, compiling.fsdp, compiling.frame_ratio, kept,
                        self.sharding if compiling.fsdp else None, inputs)

    def _before_holds(self, entries, me, own_inputs):
        """What the graphs of `entries` before place `me` hold while it runs: their saved
        activations, their parameters (but FSDP2's, counted apart), and the inputs they
        saved, each storage once and none the graph at `me` takes itself (in its own peak).
        A graph run several times is counted per run, its saved inputs with it."""
        total, shared = 0, {}
        for other, e in entries.items():
            if self._order(*other) >= me:
                continue
            params = 0 if self.sharding is not None else e.resident
            if e.runs > 1:
                total += e.runs * (e.saved + params)
                continue
            total += e.saved - sum(e.saved_inputs.values()) + params
            shared.update(e.saved_inputs)
        return total + sum(b for k, b in shared.items() if k not in own_inputs)

    def _held(self, entries, key, not_compiled=0, kept=None, inputs=None):
        """What the graphs of `entries` other than `key` hold while it runs (a graph that runs
        several times in the step, as each of its runs), and `not_compiled` bytes of
        parameters of graphs after it; under FSDP2 (self.sharding) what FSDP2 holds outside
        the graphs too, less the `kept` bytes of the graph's own parameters (its entry's
        where it has one) that are among them."""
        me = self._order(*key)
        held = Held(not_compiled=not_compiled)
        sharding = self.sharding
        own_inputs = entries[key].inputs if key in entries else (inputs or frozenset())
        if sharding is not None:
            # FSDP2: every shard, and the kept groups' gathered parameters (the graph's own
            # in its peak); the graphs not compiled yet hold nothing more of their own
            own = entries[key].kept if key in entries else (kept or 0)
            held.forward = held.backward = (sharding.shard_bytes
                                            + max(0, sharding.kept_bytes - own))
        else:
            # the frame's graphs not compiled yet come after this one: their parameters,
            # and in backward their gradients
            held.forward = not_compiled
            held.backward = 2 * not_compiled
        prefetch = 0
        for other, e in entries.items():
            if other == key:
                continue
            if self._order(*other) < me:
                held.before += 1
                if sharding is not None:  # FSDP2 gathers the block before this one ahead
                    prefetch = max(prefetch, e.resident - e.kept)
            else:
                held.after += 1
                if sharding is not None:
                    held.backward += e.runs * e.gradients_held(sharding.world)
                else:
                    held.forward += e.runs * e.resident
                    held.backward += e.runs * (e.resident + e.gradients)
        stays = self._before_holds(entries, me, own_inputs)
        held.forward += stays
        held.backward += stays
        if key in entries and entries[key].runs > 1:
            # its own last run (whose backward runs first): its earlier runs hold what they
            # saved, and their parameters (under FSDP2 the kept ones are in kept_bytes)
            me_entry = entries[key]
            earlier = (me_entry.runs - 1) * (me_entry.saved + (
                0 if sharding is not None else me_entry.resident))
            held.forward += earlier
            held.backward += earlier
            if sharding is not None:
                prefetch = max(prefetch, me_entry.resident - me_entry.kept)
        held.backward += prefetch
        return held

    def entry(self, position, saved, forward_peak, backward_peak, saved_inputs=None):
        return GraphEntry(position.frame, position.bucket, position.compile_id,
                          position.resident, position.gradients, saved, forward_peak,
                          backward_peak, position.runs, position.kept,
                          dict(saved_inputs or {}), position.inputs)

    def peak_with(self, position, entry):
        """The whole step's predicted peak were `entry` the graph at `position`, as far as it
        depends on that choice: the most, over this graph and the graphs known after it, of
        each one's forward and backward peak with what the others hold then; and where this
        graph runs again later in the step (`runs`) or graphs after it are not compiled yet
        (DDP's later buckets, the frames after a graph break), of the last of those. They
        are taken to hold parameters and saved activations in the ratio the graphs known so
        far do (this one as `entry` among them; no more than its frame computes per
        parameter byte), and the last to peak as this one, scaled where its parameters are
        fewer: so what this one saves counts through theirs (a graph planned first would
        otherwise save all the room, and the ones after it find none)."""
        key = (position.frame, position.bucket)
        entries = {**self.entries, key: entry}
        # the graphs before this one peak as they do whatever it saves: their figures left
        # out, the candidates of this one are told apart by what they change (a step peak
        # reached at an earlier graph would price them all alike)
        best = self._steps_peak(entries, key, position.held.not_compiled, since=key)[0]
        later = (entry.runs - 1) * entry.resident + position.held.not_compiled
        if later > 0:
            me = self._order(*key)
            sharding = self.sharding
            after = [e for k, e in entries.items() if self._order(*k) > me]
            ratio = (sum(e.runs * e.saved for e in entries.values())
                     / max(1, sum(e.runs * e.resident for e in entries.values())))
            if position.frame_ratio is not None:
                # no more than the frame computes per parameter byte: one small graph's own
                # ratio (an input layer's 4 KiB of parameters against 1 MiB saved) priced
                # DDP's first bucket at 4 GiB
                ratio = min(ratio, position.frame_ratio)
            last = min(later, entry.resident)  # the last one's own: in its peak
            scale = last / max(entry.resident, 1)
            before = self._before_holds(entries, me, entry.inputs)
            if sharding is None:
                others = (before + entry.resident + entry.saved
                          + (later - last) * (1 + ratio))
                forward_held = others + sum(e.runs * e.resident for e in after)
                backward_held = others + sum(e.runs * (e.resident + e.gradients)
                                             for e in after)
            else:
                # FSDP2: the graphs before and this one's runs hold what they saved (their
                # gathered parameters freed), the later runs' gathered parameters are FSDP2's
                # to free but for the kept share; every shard and the kept groups all along
                # (the kept groups' parameters counted once: this run's and the last's are
                # in their own peaks)
                others = (sharding.shard_bytes
                          + max(0, sharding.kept_bytes - entry.kept - int(scale * entry.kept))
                          + before + entry.saved + (later - last) * ratio)
                forward_held = others
                backward_held = (others + entry.resident - entry.kept
                                 + sum(e.runs * e.gradients_held(sharding.world)
                                       for e in after))
            best = max(best, int(forward_held + scale * entry.forward_peak),
                       int(backward_held + scale * entry.backward_peak))
        # FSDP2's post-backward floor is left out as the graphs before are: the same for
        # every candidate, it would price them all alike, and one that saves more than
        # torch's default would pass for no higher (step_peak counts it, and compile.py
        # reports a floor over the bound)
        return best

    def _steps_peak(self, entries, key=None, not_compiled=0, since=None):
        best, where = 0, None
        for other, e in entries.items():
            if since is not None and self._order(*other) < self._order(*since):
                continue
            held = self._held(entries, other, not_compiled if other == key else 0)
            peak = max(e.forward_peak + held.forward, e.backward_peak + held.backward)
            if peak > best:
                best, where = peak, other
        return best, where

    def record(self, position, entry):
        self.entries[(position.frame, position.bucket)] = entry

    def step_peak(self):
        """(the whole step's predicted peak over the graphs known now, the (frame, bucket)
        where it is reached, or None where FSDP2's collectives reach it outside the graphs),
        or (0, None) with no graph."""
        best, where = self._steps_peak(self.entries)
        if self.sharding is not None and self.sharding.floor_bytes > best:
            return self.sharding.floor_bytes, None
        return best, where

    def index(self, frame, bucket):
        """The graph's place among the step's graphs known now, from 0 in forward order."""
        return sorted(self.entries, key=lambda k: self._order(*k)).index((frame, bucket))
