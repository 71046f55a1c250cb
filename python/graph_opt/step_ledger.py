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


def saved_bytes(fw, num_fwd_outputs, static_names):
    """What a forward half keeps for backward beyond the parameters and buffers (named in
    `static_names`): its saved activations and the saved inputs that are not parameters (the
    batch, a previous graph's output), distinct storages."""
    names = saved_by_torch(fw, num_fwd_outputs)
    nodes = [n for n in fw.graph.nodes if n.name in names]
    return _distinct_bytes(n for n in nodes if storage_root(n).name not in static_names)


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


def _whole_model(module):
    """(the model `module` is part of where FSDP2 says (the root of its fully_shard tree: a
    sharded block's forward is a frame of its own), else `module`; whether FSDP2 shards it)."""
    get_state = getattr(module, "_get_fsdp_state", None)
    if get_state is None:
        return module, False
    try:
        for state in get_state()._state_ctx.all_states:
            if state._is_root:
                return state._modules[0], True
    except Exception:
        pass
    return module, True


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
        model, found.fsdp = _whole_model(module)
        found.model_resident = _tensor_bytes([*model.parameters(), *model.buffers()])
        code = getattr(tx, "f_code", None)
        found.runs = max(1, sum(1 for m in model.modules()
                                if getattr(type(m).forward, "__code__", None) is code))
    return found


class StepLedger:
    def __init__(self):
        self.entries = {}  # (frame, bucket) -> GraphEntry
        self.frames = []  # frame ids in the order first compiled: the forward's order
        # the model's parameters and buffers, as the frames compiled so far know them
        self.model_resident = 0

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
        held = self._held(self.entries, (frame, bucket), not_compiled)
        return Position(frame, bucket, compile_id, compiling.frame_resident, held, resident,
                        gradients, frozenset(n.name for n in _static_inputs(gm, kwargs)),
                        compiling.runs, compiling.fsdp, compiling.frame_ratio)

    def _held(self, entries, key, not_compiled=0):
        """What the graphs of `entries` other than `key` hold while it runs (a graph that runs
        several times in the step, as each of its runs), and `not_compiled` bytes of
        parameters of graphs after it."""
        me = self._order(*key)
        held = Held(not_compiled=not_compiled)
        # the frame's graphs not compiled yet come after this one: their parameters, and in
        # backward their gradients
        held.forward = not_compiled
        held.backward = 2 * not_compiled
        for other, e in entries.items():
            if other == key:
                continue
            if self._order(*other) < me:
                held.before += 1
                held.forward += e.runs * (e.resident + e.saved)
                held.backward += e.runs * (e.resident + e.saved)
            else:
                held.after += 1
                held.forward += e.runs * e.resident
                held.backward += e.runs * (e.resident + e.gradients)
        return held

    def entry(self, position, saved, forward_peak, backward_peak):
        return GraphEntry(position.frame, position.bucket, position.compile_id,
                          position.resident, position.gradients, saved, forward_peak,
                          backward_peak, position.runs)

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
            before = sum(e.runs * (e.resident + e.saved) for k, e in entries.items()
                         if self._order(*k) < me)
            after = [e for k, e in entries.items() if self._order(*k) > me]
            ratio = (sum(e.runs * e.saved for e in entries.values())
                     / max(1, sum(e.runs * e.resident for e in entries.values())))
            if position.frame_ratio is not None:
                # no more than the frame computes per parameter byte: one small graph's own
                # ratio (an input layer's 4 KiB of parameters against 1 MiB saved) priced
                # DDP's first bucket at 4 GiB
                ratio = min(ratio, position.frame_ratio)
            last = min(later, entry.resident)  # the last one's own: in its peak
            others = (before + entry.resident + entry.saved
                      + (later - last) * (1 + ratio))
            scale = last / max(entry.resident, 1)
            best = max(best,
                       int(others + sum(e.runs * e.resident for e in after)
                           + scale * entry.forward_peak),
                       int(others + sum(e.runs * (e.resident + e.gradients) for e in after)
                           + scale * entry.backward_peak))
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
        where it is reached), or (0, None) with no graph."""
        return self._steps_peak(self.entries)

    def index(self, frame, bucket):
        """The graph's place among the step's graphs known now, from 0 in forward order."""
        return sorted(self.entries, key=lambda k: self._order(*k)).index((frame, bucket))
