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

So each graph is planned against peak= less what the others hold, the forward and the
backward half apart (compile.py adds the two to halves.py's peaks of every candidate). A graph
after k that was not compiled yet when k is planned is known by its frame's parameters only
(dynamo's graph arguments: DDP's later buckets, whose parameters and gradients are counted);
a later frame (after a graph break) is not known until it is compiled. After each graph the
whole step's predicted peak over the graphs known then is recomputed (`step_peak`), so a bound
that a graph compiled later pushes over is reported then.

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


def _distinct_bytes(nodes):
    seen, total = set(), 0
    for n in nodes:
        root = storage_root(n)
        if root.name not in seen:
            seen.add(root.name)
            total += nbytes(root)
    return total


def _static_inputs(gm, kwargs):
    """The primal inputs that live all step: static_lifetime_input_indices (parameters and
    buffers, as dynamo marks them)."""
    primals = [n for n in gm.graph.nodes if n.op == "placeholder"
               and not n.name.startswith("tangents")]
    indices = kwargs.get("static_lifetime_input_indices") or []
    return [primals[i] for i in indices if i < len(primals)]


def resident_and_gradients(gm, kwargs):
    """(bytes of the joint graph's parameters and buffers, bytes of their gradients: the
    joint graph's outputs after the forward's, one per primal, None where it has none)."""
    static = _static_inputs(gm, kwargs)
    outs = output_nodes(gm)[kwargs["num_fwd_outputs"]:]
    primals = [n for n in gm.graph.nodes if n.op == "placeholder"
               and not n.name.startswith("tangents")]
    position = {n.name: i for i, n in enumerate(primals)}
    grads = [outs[position[n.name]] for n in static
             if position[n.name] < len(outs) and isinstance(outs[position[n.name]], torch.fx.Node)]
    return _distinct_bytes(static), sum(nbytes(g) for g in grads)


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
    """Distinct storages' bytes of `tensors` (a DTensor's: its local shard's)."""
    seen, total = set(), 0
    for t in tensors:
        t = getattr(t, "_local_tensor", t)
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            continue
        try:
            storage = t.untyped_storage()
        except Exception:
            continue
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    return total


def _compiled_resident_bytes():
    """What dynamo's frame being compiled says of the step's parameters and buffers: (those
    of its graph arguments, those of the module whose forward it is: its `self`), each None
    where dynamo does not say. The module's are the whole model's where torch.compile(model)
    compiles model's forward (a graph break's later frames have the same `self`); the graph
    arguments' are the frame's (DDP's whole model, which DDPOptimizer splits in buckets)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        graphargs = tx.output.graphargs
    except Exception:
        return None, None
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
    module = getattr(tx, "f_locals", {}).get("self")
    if isinstance(module, torch.nn.Module):
        owned = _tensor_bytes([*module.parameters(), *module.buffers()])
    else:
        owned = None
    return _tensor_bytes(examples), owned


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
        frame_resident, module_resident = _compiled_resident_bytes()
        self.model_resident = max(self.model_resident, module_resident or 0)
        # graphs not compiled yet: the frame's other buckets (DDP), and the model's
        # parameters no graph compiled so far has (the frames after a graph break)
        known = sum(e.resident for k, e in self.entries.items() if k != (frame, bucket))
        known_here = sum(e.resident for k, e in self.entries.items()
                         if e.frame == frame and k != (frame, bucket))
        not_compiled = max(0, (frame_resident or 0) - resident - known_here,
                           self.model_resident - resident - known)
        held = self._held(self.entries, (frame, bucket), not_compiled)
        return Position(frame, bucket, compile_id, frame_resident, held, resident, gradients,
                        frozenset(n.name for n in _static_inputs(gm, kwargs)))

    def _held(self, entries, key, not_compiled=0):
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
                held.forward += e.resident + e.saved
                held.backward += e.resident + e.saved
            else:
                held.after += 1
                held.forward += e.resident
                held.backward += e.resident + e.gradients
        return held

    def entry(self, position, saved, forward_peak, backward_peak):
        return GraphEntry(position.frame, position.bucket, position.compile_id,
                          position.resident, position.gradients, saved, forward_peak,
                          backward_peak)

    def peak_with(self, position, entry):
        """The whole step's predicted peak were `entry` the graph at `position`: the most, over
        the graphs known, of each one's forward and backward peak with what the others hold
        then; and where graphs of its frame are not compiled yet (DDP's later buckets), of
        the last of them, taken to be like this one per parameter byte (so what this one
        saves is held through theirs: a graph planned first would otherwise save all the
        room, and the ones after it find none)."""
        key = (position.frame, position.bucket)
        entries = {**self.entries, key: entry}
        best = 0
        for other, e in entries.items():
            held = self._held(entries, other,
                              position.held.not_compiled if other == key else 0)
            best = max(best, e.forward_peak + held.forward, e.backward_peak + held.backward)
        later = position.held.not_compiled
        if later:
            copies = later / max(entry.resident, 1)
            me = self._order(*key)
            before = sum(e.resident + e.saved for k, e in entries.items()
                         if self._order(*k) <= me)
            after = [e for k, e in entries.items() if self._order(*k) > me]
            others = before + max(0.0, copies - 1) * (entry.resident + entry.saved)
            scale = min(copies, 1.0)
            best = max(best,
                       int(others + sum(e.resident for e in after) + scale * entry.forward_peak),
                       int(others + sum(e.resident + e.gradients for e in after)
                           + scale * entry.backward_peak))
        return best

    def record(self, position, entry):
        self.entries[(position.frame, position.bucket)] = entry

    def step_peak(self):
        """(the whole step's predicted peak over the graphs known now, the (frame, bucket)
        where it is reached), or (0, None) with no graph."""
        best, where = 0, None
        for key, e in self.entries.items():
            held = self._held(self.entries, key)
            peak = max(e.forward_peak + held.forward, e.backward_peak + held.backward)
            if peak > best:
                best, where = peak, key
        return best, where

    def index(self, frame, bucket):
        """The graph's place among the step's graphs known now, from 0 in forward order."""
        return sorted(self.entries, key=lambda k: self._order(*k)).index((frame, bucket))
