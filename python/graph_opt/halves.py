"""The peak of the step torch.compile runs: the forward and backward halves torch's
partitioner built from graph-opt's tags, in the order they run, as Inductor allocates their
buffers (docs/TorchCompile.md, "The peak of the halves").

graph-opt plans on the joint graph in its own executor's order, where every operator writes
a buffer of its own. Inductor runs two graphs instead, and its kernels fuse: a pointwise
chain writes one buffer, not one per operator, and a kernel whose input dies in it may write
over that input. What crosses from one half to the other is what AOTAutograd keeps alive:
the forward's outputs (the loss, which the caller holds through backward, and the tensors
saved for backward, which AOTAutograd releases as the compiled backward reads them for the
last time: it clears ctx.saved_tensors before the call and donates those buffers). The
gradients backward produces stay alive to the end of the step.

halves_peak() walks each half twice (graph order, and Inductor's least-peak-first order),
with the allocation rules below; it reads fx graphs only (meta["val"] for sizes, torch's
operator tags and Inductor's lowering tables and thresholds for what fuses).

What allocates a buffer (a "realized" value), as Inductor's lowering decides it:
- the result of an operator Inductor runs as an extern kernel (matmuls, convolutions,
  attention, its fallbacks: every operator it has neither a lowering nor a decomposition
  for), and every tensor such a kernel reads (Inductor realizes their inputs);
- the result of a reduction (a torch Tag.reduction operator, or an operator Inductor
  decomposes that is not pointwise: layer norm, softmax, ... hold reductions);
- every output of a half (views resolved to the value they view);
- a fused value Inductor's lowering realizes after all (_realized_on_reuse: read by several
  operators and heavy, or reading too many buffers).
Everything else (pointwise operators, which Inductor inlines into their readers) allocates
nothing; a view aliases what it views. A realized value lives until the last realized value
that reads it, through any chain of fused values between them, has been computed. A fused
kernel (not an extern one) whose realized input dies in it, with the same size, writes over
that input (Inductor's in-place reuse): no new buffer; graph inputs of the forward half
(parameters and the batch) are never written over. The kernels run in graph order or in
Inductor's least-peak-first order, whichever peaks lower (reorder_for_peak_memory keeps the
order it estimates lowest).

What it does not model (why compile.py's search keeps a margin under peak=): which fused
values Inductor copies into a buffer of their own for an extern kernel while other readers
inline them, its BFS and DFS orders, its fusion of kernels that reuse a buffer freed earlier.
"""
import functools
import operator

import torch

from .joint import alias_source, nbytes, output_nodes, storage_root

# Matmul-like operators Inductor lowers to extern kernels or templates (their inputs
# realized) that are missing from lowering.needs_realized_inputs.
_MATMULS = ("mm", "addmm", "bmm", "baddbmm", "_int_mm", "convolution", "addmv", "mv",
            "_scaled_mm")


@functools.lru_cache(maxsize=None)
def _inductor_tables():
    from torch._inductor import lowering
    from torch._inductor.decomposition import select_decomp_table
    return lowering.lowerings, lowering.fallbacks, lowering.needs_realized_inputs, \
        select_decomp_table()


def kind_of(node):
    """'view', 'extern', 'reduction' or 'pointwise' (what fuses), for a call_function."""
    if _is_view(node):
        return "view"
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return "extern"
    lowerings, fallbacks, realized_inputs, decompositions = _inductor_tables()
    packet = target.overloadpacket
    if (target in fallbacks or target in realized_inputs or packet in realized_inputs
            or packet.__name__ in _MATMULS):
        return "extern"
    tags = target.tags
    if torch.Tag.reduction in tags:
        return "reduction"
    if torch.Tag.pointwise in tags:
        return "pointwise"
    if target in lowerings:
        return "pointwise"  # lowered to a loop body of its own (gathers, scatters, ...)
    if target in decompositions:
        return "reduction"  # a composite that is not pointwise: holds reductions
    return "extern"


def _multi_output_bytes(node):
    """A multi-output operator's buffers: the sum of its tensor results."""
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        return sum(v.untyped_storage().nbytes() for v in val if isinstance(v, torch.Tensor))
    return nbytes(node)


def _base(node):
    """The value whose buffer `node` reads: views resolved (joint.storage_root), and a
    result of a multi-output operator to the operator, which Inductor runs as one kernel
    (_multi_output_bytes: one allocation for all its results)."""
    node = storage_root(node)
    if node.op == "call_function" and node.target is operator.getitem:
        return node.args[0]
    return node


def _is_view(node):
    return node.target is operator.getitem or alias_source(node) is not None


# Inductor's own thresholds, read from its config as it reads them (ir.py StorageBox,
# GraphLowering.run_node): a pointwise value read by several operators is computed once
# into a buffer when its inlined body reads more than realize_reads_threshold buffers or
# runs more than realize_opcount_threshold operations, or, on the CPU, uses one of the
# heavy operations; any fused value is realized past realize_acc_reads_threshold reads.
_HEAVY_ON_CPU = {"exp", "sigmoid"}


def _realized_on_reuse(node, reads, ops, count):
    """Whether Inductor's lowering realizes this fused value: `reads` the buffers its
    inlined body reads, `ops` the operators in it, `count` their number."""
    from torch._inductor import config
    if (len(reads) > config.realize_acc_reads_threshold
            or count > config.realize_opcount_threshold):
        return True
    if len(set(node.users)) <= 1:
        return False
    val = node.meta.get("val")
    on_cpu = isinstance(val, torch.Tensor) and val.device.type == "cpu"
    return ((on_cpu and bool(ops & _HEAVY_ON_CPU))
            or len(reads) > config.realize_reads_threshold)


class _Half:
    """One half as Inductor's kernels run it: the buffers it allocates, which of them each
    kernel reads, and the orders Inductor may run the kernels in."""

    def __init__(self, gm, fused, keep_alive, held, donated, same=None):
        """`keep_alive`: values whose buffers outlive the half (its outputs); `held`:
        {placeholder: bytes} for inputs this half frees after their last read (backward's
        saved values), `donated` those of them a kernel may write over; `same`:
        {placeholder: the placeholder whose buffer it shares}."""
        same = same or {}
        nodes = list(gm.graph.nodes)
        out = next(n for n in reversed(nodes) if n.op == "output")
        kinds = {n: kind_of(n) if fused else ("view" if _is_view(n) else "extern")
                 for n in nodes if n.op == "call_function"}
        def base(n):
            b = _base(n)
            return same.get(b, b)
        realized = {n for n in nodes if n.op == "placeholder"}
        for n, k in kinds.items():
            if k in ("extern", "reduction"):
                realized.add(n)
            if k == "extern":
                realized.update(base(a) for a in n.all_input_nodes)
        realized |= set(keep_alive)
        # which realized buffers each node reads, fused values seen through; a fused
        # value Inductor realizes after all (_realized_on_reuse) reads as a buffer
        reads, inlined = {}, {}
        for n in nodes:
            deps, ops, count = set(), set(), 0
            for a in n.all_input_nodes:
                b = base(a)
                if b in realized:
                    deps.add(b)
                elif b in inlined:
                    deps |= reads[b]
                    ops |= inlined[b][0]
                    count += inlined[b][1]
            reads[n] = deps
            if fused and kinds.get(n) == "pointwise" and n not in realized:
                ops.add(n.target.overloadpacket.__name__)
                count += 1
                if _realized_on_reuse(n, deps, ops, count):
                    realized.add(n)
                else:
                    inlined[n] = (ops, count)
        self.kernels = [n for n in nodes if n.op == "call_function" and n in realized]
        self.reads = {n: reads[n] for n in self.kernels}
        self.inplace = {n: fused and kinds[n] != "extern" for n in self.kernels}
        self.size = {n: _multi_output_bytes(n) for n in self.kernels}
        self.size.update(held)
        self.readers = {}
        for n in self.kernels:
            for d in self.reads[n]:
                self.readers[d] = self.readers.get(d, 0) + 1
        self.keep = set(keep_alive) | {n for n in nodes if n.op == "placeholder"
                                       and n not in held}
        self.keep |= reads[out] & {n for n in nodes if n.op == "placeholder"}
        self.donated = donated
        # inputs no kernel reads are freed as the half starts
        self.unread = sum(b for p, b in held.items() if p not in self.readers and p not in
                          self.keep)

    def _reusable(self, d):
        return d.op != "placeholder" or d in self.donated

    def run(self, order, live):
        """(peak, live after) running the kernels in `order` from `live` bytes.

        Two of Inductor's buffer reuses (its wrapper's memory planning, allow_buffer_reuse):
        a fused kernel writes over an input of the same size that dies in it; and a buffer
        that dies goes to a pool, from which a later allocation of the same size takes it
        (the most recently freed first): it stays allocated until then, and that allocation
        costs nothing. A pooled buffer no later allocation takes is freed where it dies."""
        left = dict(self.readers)
        steps, pool, taken = [], {}, set()
        for n in order:
            size = self.size[n]
            dying = []
            for d in self.reads[n]:
                left[d] -= 1
                if left[d] == 0 and d not in self.keep:
                    dying.append(d)
            inplace = None
            if self.inplace[n]:
                inplace = next((d for d in dying if self._reusable(d)
                                and self.size.get(d) == size), None)
                if inplace is not None:  # written in place of an input dying here
                    dying.remove(inplace)
            pooled = None
            if inplace is None and pool.get(size):
                pooled = pool[size].pop()
                taken.add(pooled)
            for d in dying:
                if self._reusable(d):
                    pool.setdefault(self.size.get(d, 0), []).append(d)
            steps.append((size, inplace is not None or pooled is not None, dying))
        live -= self.unread
        peak = live
        for size, reused, dying in steps:
            if not reused:
                live += size
            peak = max(peak, live)
            live -= sum(self.size.get(d, 0) for d in dying if d not in taken)
        return peak, live

    def least_peak_first(self, live):
        """Inductor's topological_sort_lpmf (torch/_inductor/memory.py) on these kernels:
        among the kernels whose inputs are ready, while one fits under the peak so far the
        one leaving the least live, else the one that peaks least; ties in graph order."""
        position = {n: i for i, n in enumerate(self.kernels)}
        waiting = {n: len({d for d in self.reads[n] if d in position}) for n in self.kernels}
        users = {}
        for n in self.kernels:
            for d in self.reads[n]:
                if d in position:
                    users.setdefault(d, []).append(n)
        left = dict(self.readers)
        ready = {n for n, w in waiting.items() if w == 0}
        order, peak = [], live

        def frees(n):
            return sum(self.size.get(d, 0) for d in self.reads[n]
                       if left[d] == 1 and d not in self.keep)
        while ready:
            gap = peak - live
            n = min(ready, key=lambda n: (self.size[n] if self.size[n] > gap else 0,
                                          self.size[n] - frees(n), position[n]))
            ready.remove(n)
            order.append(n)
            live += self.size[n]
            peak = max(peak, live)
            live -= frees(n)
            for d in self.reads[n]:
                left[d] -= 1
            for u in users.get(n, ()):
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.add(u)
        return order

    def walk(self, live):
        """(peak, live after): the least peak of graph order and least_peak_first's, as
        Inductor's reorder_for_peak_memory keeps the order it estimates lowest."""
        baseline = self.run(self.kernels, live)
        reordered = self.run(self.least_peak_first(live - self.unread), live)
        return min(baseline, reordered)


def halves_peak(fw, bw, num_fwd_outputs, fused=True):
    """The bytes allocated at the step's highest point when torch.compile runs forward `fw`
    and backward `bw` (fx GraphModules from torch's partitioner, meta["val"] set), with the
    forward's inputs (parameters, buffers, the batch) counted from the start and the
    gradients to the end: {"peak_bytes", "input_bytes", "forward_peak_bytes",
    "backward_peak_bytes", "saved_bytes"} (saved: what crosses from forward to backward).
    `fused`: Inductor's kernels (the rules above); without it every operator writes a
    buffer of its own, as the halves run node by node (graph_opt.backend(inner="eager"))."""
    fw_placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    inputs = sum(nbytes(p) for p in fw_placeholders)
    fw_outs = [o for o in output_nodes(fw) if isinstance(o, torch.fx.Node)]
    keep = {_base(o) for o in fw_outs}
    forward_peak, after_forward = _Half(fw, fused, keep, {}, set()).walk(inputs)
    # What forward keeps for backward beyond its inputs
    crossing = {_base(o) for o in output_nodes(fw)[num_fwd_outputs:]
                if isinstance(o, torch.fx.Node)}
    crossing_bytes = sum(_multi_output_bytes(b) for b in crossing if b.op != "placeholder")
    # Backward's placeholders: the saved values (in the forward's output order after its own
    # outputs) and then the tangents, which autograd allocates as backward starts.
    # A buffer saved as several values (the three heads of one qkv matmul) is one buffer:
    # backward's placeholders for it stand for the first, freed when all are read.
    saved_outs = output_nodes(fw)[num_fwd_outputs:]
    bw_placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
    placeholder_bytes, donated, same, first = {}, set(), {}, {}
    for p, src in zip(bw_placeholders, saved_outs):
        b = _base(src) if isinstance(src, torch.fx.Node) else None
        if b is None or b.op == "placeholder":
            continue
        if b in first:
            same[p] = first[b]
        else:
            first[b] = p
            placeholder_bytes[p] = _multi_output_bytes(b)
            donated.add(p)
    tangents = sum(nbytes(p) for p in bw_placeholders[len(saved_outs):])
    bw_outs = [o for o in output_nodes(bw) if isinstance(o, torch.fx.Node)]
    backward_peak, _ = _Half(bw, fused, {_base(o) for o in bw_outs}, placeholder_bytes,
                             donated, same).walk(after_forward + tangents)
    return {"peak_bytes": max(forward_peak, backward_peak), "input_bytes": inputs,
            "forward_peak_bytes": forward_peak, "backward_peak_bytes": backward_peak,
            "saved_bytes": crossing_bytes}
