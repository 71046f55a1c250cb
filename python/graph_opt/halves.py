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
  for), and every tensor such a kernel reads (Inductor realizes their inputs); pooling and
  upsampling, though listed with them in needs_realized_inputs, are lowered to loops that
  fuse as pointwise values do (a max pool's backward computes its indices from the saved
  offsets inline);
- the result of a reduction (a torch Tag.reduction operator, or an operator Inductor
  decomposes that is not pointwise: layer norm, softmax, ... hold reductions);
- every output of a half (views resolved to the value they view);
- each result of a multi-output operator that runs as a kernel: a buffer of its own, made
  by that kernel and freed after its own last reader (a result nothing reads is freed as
  the kernel ends), as Inductor's wrapper holds the results apart;
- a fused value Inductor's lowering realizes after all (_realized_on_reuse: read by several
  operators and heavy, or reading too many buffers, or reading several and read by an
  operator in needs_realized_inputs).
Everything else (pointwise operators, which Inductor inlines into their readers) allocates
nothing; a view aliases what it views. A realized value lives until the last realized value
that reads it, through any chain of fused values between them, has been computed. A fused
kernel (not an extern one) whose realized input dies in it, with the same size, read
element for element (no slice, transpose, broadcast or gather on the way), writes over that
input (Inductor's in-place reuse): no new buffer; graph inputs of the forward half
(parameters and the batch) are never written over. On the CPU, a value realized on reuse
whose readers are its row sum and pointwise kernels over the same rows may be held one row
at a time in a kernel-local buffer, never allocated (_kernel_local: a cross-entropy's gradient
over a wide vocabulary) where Inductor's fusion order puts the value and all its readers in
one kernel, which this model cannot tell: such values are allocated and counted
("row_local_values"), and the partitioner reads Inductor's own code there. The kernels run
in graph order or in Inductor's least-peak-first order, whichever peaks lower
(reorder_for_peak_memory keeps the order it estimates lowest).

Where Inductor's layout optimization takes the forward (convolutions on the CPU), the graph
inputs a convolution reads are copied to channels-last as the forward starts, and saved in
that copy where backward reads them (_channels_last_copies).

A library kernel (a convolution, a matmul, attention) holds a workspace beyond its results
while it runs (oneDNN reorders a convolution's weight, and its backward's weight gradient,
into a blocked layout of its own): measured once per signature by running the operator
(workspace.py), on the layouts Inductor's layout optimization gives a convolution, and
counted at its kernel's step.

What it does not model (why compile.py's search keeps a margin under peak=): which fused
values Inductor copies into a buffer of their own for an extern kernel while other readers
inline them, its BFS and DFS orders, its fusion of kernels that reuse a buffer freed earlier,
and the exact layouts of a backward's convolution arguments (taken channels-last under the
layout optimization, workspace.channels_last_strides).
"""
import functools
import operator

import torch

from .fx import tensor_attribute
from .joint import alias_source, nbytes, output_nodes, storage_root
from .workspace import channels_last_strides, workspace_bytes

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
    if target in fallbacks or packet.__name__ in _MATMULS:
        return "extern"
    if target in realized_inputs or packet in realized_inputs:
        # pooling and upsampling: Inductor lowers them to a loop of their own (gathers over
        # windows), which fuses as pointwise values do; only some of their inputs are
        # realized (_realized_on_reuse). With no lowering they run as a fallback.
        return "pointwise" if target in lowerings else "extern"
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


def _concrete(size):
    """A byte count as a number: a symbolic one (an RNG state's, whose fake tensor has a
    symbolic length) by the value it was traced with."""
    if isinstance(size, torch.SymInt):
        return int(size.node.hint) if size.node.has_hint() else 0
    return size


def _nbytes(node):
    return _concrete(nbytes(node))


def _multi_output_bytes(node):
    """What a kernel allocates when it runs: the sum of a multi-output operator's tensor
    results, or the bytes of a single result."""
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        return sum(_concrete(v.untyped_storage().nbytes()) for v in val
                   if isinstance(v, torch.Tensor))
    return _nbytes(node)


def _result_of(node):
    """The multi-output operator `node` is a result of (a getitem that views nothing), or
    None. Each such result is a buffer of its own: allocated with its operator's kernel and
    freed after its own last reader, as Inductor's wrapper holds them apart (a
    convolution_backward's input gradient dies in the next kernel while its weight gradient
    lives to the end of the step)."""
    if node.op != "call_function" or node.target is not operator.getitem:
        return None
    owner, index = node.args[0], node.args[1]
    vals = owner.meta.get("val") if isinstance(owner, torch.fx.Node) else None
    if (type(index) is int and isinstance(vals, (list, tuple)) and -len(vals) <= index < len(vals)
            and isinstance(vals[index], torch.Tensor) and alias_source(node) is None):
        return owner
    return None


def _flat(node):
    """Whether `node`'s value is laid out as its elements in order (contiguous)."""
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.is_contiguous()


def _moves_elements(a):
    """Whether reading `a` reads an element at another position than the one it has in the
    buffer `a` views (joint.storage_root): some view on the way is not a reshape of a
    contiguous value into a contiguous one (a slice, a transpose, an expand, one piece of a
    split)."""
    while (source := alias_source(a)) is not None:
        if not (_flat(a) and _flat(source) and _numel(a) == _numel(source)
                and a.target is not operator.getitem):
            return True
        a = source
    return False


def _numel(node):
    val = node.meta.get("val")
    return val.numel() if isinstance(val, torch.Tensor) else None


def _same_positions(n, a):
    """Whether operator `n` reads operand `a` element for element: a pointwise operator
    whose operand has its result's shape (not broadcast). Anything else (a slice's
    backward, a gather, a concatenation, a broadcast operand) reads elsewhere."""
    if not isinstance(n.target, torch._ops.OpOverload) or torch.Tag.pointwise not in n.target.tags:
        return False
    out, val = n.meta.get("val"), a.meta.get("val")
    return (isinstance(out, torch.Tensor) and isinstance(val, torch.Tensor)
            and tuple(out.shape) == tuple(val.shape))


def _reduces_trailing(n, a):
    """Whether operator `n` is a reduction of operand `a` over `a`'s trailing dimensions:
    it reads each row as the row was written, in its loop's order (Inductor's scheduler
    fuses a kernel into its reader only on such a read, or an element-for-element one:
    Scheduler.fusable_read_and_write)."""
    target = n.target
    if (not isinstance(target, torch._ops.OpOverload) or torch.Tag.reduction not in target.tags
            or not n.args or n.args[0] is not a):
        return False
    val = a.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return False
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    if dims is None:
        return True  # every dimension
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        return True
    if not all(isinstance(d, int) for d in dims):
        return False
    rank = max(val.dim(), 1)
    return sorted(d % rank for d in dims) == list(range(rank - len(dims), rank))


def _loop_numel(n):
    """The elements a kernel's loop runs over: a reduction's operand's, else its result's."""
    target = n.target
    if (isinstance(target, torch._ops.OpOverload) and torch.Tag.reduction in target.tags
            and n.args and isinstance(n.args[0], torch.fx.Node)):
        return _numel(n.args[0])
    return _numel(n)


def _keeps_its_rows(n, realized, base):
    """Whether the loop of fused value `n` keeps its last dimension apart from the others:
    its body reads something broadcast across it (a row's scalar, a column index: 1 <
    elements < n's). Inductor merges the dimensions of a loop whose every read is
    contiguous across them (ir.py's simplify_loops), and then runs it as one flat loop."""
    total = _numel(n)
    if total is None or total <= 1:
        return False
    seen, stack = set(), [n]
    while stack:
        m = stack.pop()
        for a in m.all_input_nodes:
            if a in seen:
                continue
            seen.add(a)
            count = _numel(a)
            if count is not None and 1 < count < total:
                return True
            if base(a) not in realized:
                stack.append(a)
    return False


def _kernel_local(nodes, kinds, realized, reads, unordered, keep_alive, base):
    """The realized fused values Inductor's C++ backend may never allocate: a pointwise value
    realized because several kernels read it (_realized_on_reuse), read by a reduction over
    its trailing dimension and otherwise by pointwise kernels over as many elements, each
    reading it in its loop's order (element for element, or _reduces_trailing), with no
    other kernel between it and them, where the value's loop and its pointwise readers'
    keep their rows apart (_keeps_its_rows).
    Where Inductor's scheduler fuses the value and all its readers into one kernel on their
    shared outer loop (OuterLoopFusedSchedulerNode), it holds the value one row at a time
    in a local buffer instead of a global one (CppScheduling's
    try_outer_loop_fusion_with_local_buf). Whether it does depends on the order its greedy
    fusion takes pairs in, which this model does not follow: on a 4-layer Llama's
    cross-entropy backward (the one-hot gradient of the 32k-wide logits, read by its row
    sum and by the log-softmax's backward) it did for 6 of 8 plans (125 MiB never
    allocated) and not for the other 2, whose graphs around the value are the same.
    halves_peak() therefore allocates these values and reports them ("row_local_values");
    the partitioner reads Inductor's own code where there are any (compile.py). Where the
    value's loop is flat, Inductor stores it and the last reader writes over it. CPU only:
    Triton's kernels hold no such local buffer (not modelled on CUDA)."""
    kernels = [n for n in nodes if n.op == "call_function" and n in realized
               and _result_of(n) is None]
    position = {n: i for i, n in enumerate(kernels)}
    ancestors, readers = {}, {}
    for n in kernels:  # graph order is a topological order
        mask = 0
        for d in reads[n]:
            k = _result_of(d) or d
            if k in position:
                mask |= ancestors[k] | (1 << position[k])
            readers.setdefault(d, []).append(n)
        ancestors[n] = mask
    kept = set(keep_alive)
    local = set()
    for p in kernels:
        rs = readers.get(p)
        val = p.meta.get("val")
        if (kinds.get(p) != "pointwise" or p in kept or not rs
                or not (isinstance(val, torch.Tensor) and val.device.type == "cpu")
                or not _keeps_its_rows(p, realized, base)):
            continue
        by_rows = any(kinds.get(r) == "reduction" and _numel(r) not in (None, 1) for r in rs)
        if not by_rows or any(
                kinds.get(r) not in ("pointwise", "reduction") or _loop_numel(r) != _numel(p)
                or p in unordered[r]
                or (kinds.get(r) == "pointwise" and not _keeps_its_rows(r, realized, base))
                for r in rs):
            continue
        bit = 1 << position[p]
        between = [k for k in kernels if ancestors[k] & bit and k not in rs
                   and any(ancestors[r] >> position[k] & 1 for r in rs)]
        if not between:
            local.add(p)
    return local


def _is_view(node):
    return node.target is operator.getitem or alias_source(node) is not None


# Inductor's own thresholds, read from its config as it reads them (ir.py StorageBox,
# GraphLowering.run_node): a pointwise value read by several operators is computed once
# into a buffer when its inlined body reads more than realize_reads_threshold buffers or
# runs more than realize_opcount_threshold operations, or, on the CPU, uses one of the
# heavy operations; any fused value is realized past realize_acc_reads_threshold reads.
_HEAVY_ON_CPU = {"exp", "sigmoid"}


def _needs_realized_inputs(node):
    """Whether Inductor lists `node`'s operator in lowering.needs_realized_inputs: a value
    read by it and by other operators is realized where its body reads several buffers."""
    target = getattr(node, "target", None)
    if not isinstance(target, torch._ops.OpOverload):
        return False
    realized_inputs = _inductor_tables()[2]
    return target in realized_inputs or target.overloadpacket in realized_inputs


def _realized_on_reuse(node, reads, ops, count):
    """Whether Inductor's lowering realizes this fused value: `reads` the buffers its
    inlined body reads, `ops` the operators in it, `count` their number."""
    from torch._inductor import config
    if (len(reads) > config.realize_acc_reads_threshold
            or count > config.realize_opcount_threshold):
        return True
    if len(set(node.users)) <= 1:
        return False
    if len(reads) > 1 and any(_needs_realized_inputs(u) for u in node.users):
        return True  # GraphLowering.run_node's realize_hint for such a reader
    val = node.meta.get("val")
    on_cpu = isinstance(val, torch.Tensor) and val.device.type == "cpu"
    return ((on_cpu and bool(ops & _HEAVY_ON_CPU))
            or len(reads) > config.realize_reads_threshold)


class _Half:
    """One half as Inductor's kernels run it: the buffers it allocates, which of them each
    kernel reads, and the orders Inductor may run the kernels in."""

    def __init__(self, gm, fused, keep_alive, held, donated, same=None, row_local=False,
                 layout_opt=False):
        """`keep_alive`: values whose buffers outlive the half (its outputs); `held`:
        {placeholder: bytes} for inputs this half frees after their last read (backward's
        saved values), `donated` those of them a kernel may write over; `same`:
        {placeholder: the placeholder whose buffer it shares}; `layout_opt`: the forward
        runs under Inductor's layout optimization (channels-last convolutions; never
        without `fused`)."""
        same = same or {}
        nodes = list(gm.graph.nodes)
        out = next(n for n in reversed(nodes) if n.op == "output")
        kinds = {n: kind_of(n) if fused else ("view" if _is_view(n) else "extern")
                 for n in nodes if n.op == "call_function"}
        # each multi-output operator's results by index (a second getitem of one index
        # reads the first's buffer)
        results, first_of = {}, {}
        for n in nodes:
            if (owner := _result_of(n)) is not None:
                first_of[n] = results.setdefault(owner, {}).setdefault(n.args[1], n)

        def base(n):
            b = storage_root(n)  # a result of a multi-output operator is its own buffer
            b = first_of.get(b, b)
            return same.get(b, b)
        realized = {n for n in nodes if n.op == "placeholder"}
        for n, k in kinds.items():
            if k in ("extern", "reduction"):
                realized.add(n)
            if k == "extern":
                realized.update(base(a) for a in n.all_input_nodes)
        realized |= set(keep_alive)
        # a result read as a buffer makes its operator a kernel, and a kernel's results
        # are buffers
        for owner, rs in results.items():
            if owner in realized or any(r in realized for r in rs.values()):
                realized.add(owner)
                realized.update(rs.values())
        # which realized buffers each node reads, fused values seen through; a fused
        # value Inductor realizes after all (_realized_on_reuse) reads as a buffer
        reads, moved, unordered = self._read_through(nodes, kinds, realized, base, fused)
        # a realized value Inductor may hold one row at a time (_kernel_local): with
        # row_local, never allocated (read through, as a fused value, the rest decided as
        # is); else allocated, and counted
        local = _kernel_local(nodes, kinds, realized, reads, unordered, keep_alive,
                              base) if fused else set()
        self.row_local = len(local)
        if local and row_local:
            realized -= local
            reads, moved, _ = self._read_through(nodes, kinds, realized, base, fused,
                                                 decided=True)
        self.kernels = [n for n in nodes if n.op == "call_function" and n in realized
                        and _result_of(n) is None]
        self.reads = {n: reads[n] for n in self.kernels}
        self.moved = {n: moved[n] for n in self.kernels}
        self.inplace = {n: fused and kinds[n] != "extern" for n in self.kernels}
        self.size = {n: _multi_output_bytes(n) for n in self.kernels}
        # what a library kernel holds beyond its results while it runs (workspace.py)
        self.workspace = {n: workspace_bytes(n, channels_last_strides(n, layout_opt))
                          for n in self.kernels}
        # the results' buffers: each its own size, made by its operator's kernel
        self.producer = {}
        for owner, rs in results.items():
            if owner in realized:
                for r in rs.values():
                    self.size[r] = _nbytes(r)
                    self.producer[r] = owner
        self.size.update(held)
        self.readers = {}
        for n in self.kernels:
            for d in self.reads[n]:
                self.readers[d] = self.readers.get(d, 0) + 1
        self.keep = set(keep_alive) | {n for n in nodes if n.op == "placeholder"
                                       and n not in held}
        self.keep |= reads[out] & {n for n in nodes if n.op == "placeholder"}
        self.donated = donated
        # bytes a kernel frees as soon as it has run: results nothing reads or keeps
        self.loose = {n: 0 for n in self.kernels}
        for owner, rs in results.items():
            if owner in self.loose:
                self.loose[owner] = self.size[owner] - sum(
                    self.size[r] for r in rs.values()
                    if r in self.readers or r in self.keep)
        # inputs no kernel reads are freed as the half starts
        self.unread = sum(b for p, b in held.items() if p not in self.readers and p not in
                          self.keep)
        self.shared = self._read_by_a_fused_sibling() if fused else {}

    @staticmethod
    def _read_through(nodes, kinds, realized, base, fused, decided=False):
        """({node: the realized buffers it reads}, {node: those it reads at other positions
        than it writes}, {node: those it reads out of its loop's order}), fused values seen
        through. Adds to `realized` the fused values Inductor realizes on reuse
        (_realized_on_reuse) and the results of realized multi-output operators; with
        `decided`, `realized` is final and every other fused value is read through.
        `moved[n]`: read through a slice, a transpose, a broadcast, a gather: a kernel
        cannot write over those. `unordered[n]`: the same, except that a reduction over its
        operand's trailing dimensions reads that operand in its loop's order."""
        reads, inlined, moved, unordered = {}, {}, {}, {}
        for n in nodes:
            deps, ops, count, elsewhere, out_of_order = set(), set(), 0, set(), set()
            for a in n.all_input_nodes:
                b = base(a)
                moves, same = _moves_elements(a), _same_positions(n, a)
                shifted = moves or not same
                skewed = moves or not (same or _reduces_trailing(n, a))
                if b in realized:
                    deps.add(b)
                    if shifted:
                        elsewhere.add(b)
                    if skewed:
                        out_of_order.add(b)
                elif b in inlined:
                    deps |= reads[b]
                    elsewhere |= reads[b] if shifted else moved[b]
                    out_of_order |= reads[b] if skewed else unordered[b]
                    ops |= inlined[b][0]
                    count += inlined[b][1]
            reads[n] = deps
            moved[n] = elsewhere
            unordered[n] = out_of_order
            if (owner := _result_of(n)) is not None:
                if owner in realized:
                    realized.add(base(n))
                else:  # a result of a fused operator: read through, as the operator
                    inlined[n] = (ops, count)
            elif fused and kinds.get(n) == "pointwise" and n not in realized:
                ops.add(n.target.overloadpacket.__name__)
                count += 1
                if not decided and _realized_on_reuse(n, deps, ops, count):
                    realized.add(n)
                else:
                    inlined[n] = (ops, count)
        return reads, moved, unordered

    def _made_by(self, d):
        """The kernel that makes buffer d (a result's operator), or None (an input)."""
        d = self.producer.get(d, d)
        return d if d in self.reads else None

    def _read_by_a_fused_sibling(self):
        """{kernel: the buffers it reads that a sibling kernel also reads}, where a sibling is
        another fused (not extern) kernel over as many elements with no path between the two.
        Inductor's scheduler fuses such kernels into one (they share a read: its horizontal
        fusion), and then writes no result over the buffer they share: its in-place rule
        (Scheduler.decide_inplace_update) takes an input only where the kernel is its one
        remaining reader, and the other reader in the same fused kernel has not completed.
        On a residual MLP's backward the recomputed gelu and gelu's backward read the saved
        pre-activation in one kernel, and neither writes over it: one buffer more than
        running them apart (the last one writing over it) would allocate."""
        position = {n: i for i, n in enumerate(self.kernels)}
        ancestors = {}
        for n in self.kernels:  # graph order is a topological order
            mask = 0
            for d in self.reads[n]:
                k = self._made_by(d)
                if k is not None:
                    mask |= ancestors[k] | (1 << position[k])
            ancestors[n] = mask
        readers = {}
        for n in self.kernels:
            if self.inplace[n] and _numel(n) is not None:
                for d in self.reads[n]:
                    readers.setdefault(d, []).append(n)
        shared = {}
        for d, ns in readers.items():
            for i, a in enumerate(ns):
                for b in ns[i + 1:]:
                    if (_numel(a) == _numel(b) and not ancestors[b] >> position[a] & 1
                            and not ancestors[a] >> position[b] & 1):
                        shared.setdefault(a, set()).add(d)
                        shared.setdefault(b, set()).add(d)
        return shared

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
                                and self.size.get(d) == size and d not in self.moved[n]
                                and d not in self.shared.get(n, ())), None)
                if inplace is not None:  # written in place of an input dying here
                    dying.remove(inplace)
            pooled = None
            if inplace is None and pool.get(size):
                pooled = pool[size].pop()
                taken.add(pooled)
            for d in dying:
                if self._reusable(d):
                    pool.setdefault(self.size.get(d, 0), []).append(d)
            steps.append((size, inplace is not None or pooled is not None, dying,
                          self.loose[n], self.workspace[n]))
        live -= self.unread
        peak = live
        for size, reused, dying, loose, workspace in steps:
            if not reused:
                live += size
            peak = max(peak, live + workspace)
            live -= loose + sum(self.size.get(d, 0) for d in dying if d not in taken)
        return peak, live

    def least_peak_first(self, live):
        """Inductor's topological_sort_lpmf (torch/_inductor/memory.py) on these kernels:
        among the kernels whose inputs are ready, while one fits under the peak so far the
        one leaving the least live, else the one that peaks least; ties in graph order."""
        position = {n: i for i, n in enumerate(self.kernels)}
        made_by = self._made_by
        waiting = {n: len({made_by(d) for d in self.reads[n]} - {None}) for n in self.kernels}
        users = {}
        for n in self.kernels:
            for k in {made_by(d) for d in self.reads[n]} - {None}:
                users.setdefault(k, []).append(n)
        left = dict(self.readers)
        ready = {n for n, w in waiting.items() if w == 0}
        order, peak = [], live

        def frees(n):
            return sum(self.size.get(d, 0) for d in self.reads[n]
                       if left[d] == 1 and d not in self.keep)
        while ready:
            gap = peak - live
            n = min(ready, key=lambda n: (self.size[n] if self.size[n] > gap else 0,
                                          self.size[n] - frees(n) - self.loose[n],
                                          position[n]))
            ready.remove(n)
            order.append(n)
            live += self.size[n]
            peak = max(peak, live)
            live -= frees(n) + self.loose[n]
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


def _layout_opt(fw):
    """Whether Inductor's layout optimization takes forward `fw`
    (GraphLowering.decide_layout_opt)."""
    from torch._inductor.graph import GraphLowering
    try:
        return bool(GraphLowering.decide_layout_opt(fw, is_inference=False))
    except Exception:  # a graph its heuristics cannot read: not assumed
        return False


def _channels_last_copies(fw):
    """{placeholder: bytes} for the forward's inputs Inductor copies to channels-last.

    Where Inductor's layout optimization takes the forward (GraphLowering.decide_layout_opt:
    on the CPU with oneDNN, any graph with a convolution), a convolution's input and weight
    are read in channels-last: a graph input (the batch, a 3x3 weight) that is not already
    channels-last is copied into a buffer of its own as the forward starts, and where the
    input is saved for backward that copy is what is saved (the backward frees it after its
    last read). ResNet-50 at batch 8: its 3x3 and 7x7 weights and the batch, 47.8 MiB live
    from the forward's start to the backward's, beside the parameters themselves."""
    if not _layout_opt(fw):
        return {}
    convolution = torch.ops.aten.convolution.default
    copies = {}
    for n in fw.graph.nodes:
        if n.op != "call_function" or n.target is not convolution:
            continue
        for a in n.args[:2]:
            val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if (a.op == "placeholder" and isinstance(val, torch.Tensor) and val.dim() in (4, 5)
                    and not val.is_contiguous(memory_format=torch.channels_last
                                              if val.dim() == 4 else torch.channels_last_3d)):
                copies[a] = _nbytes(a)
    return copies


def _constant_bytes(*halves):
    """The bytes of the tensor constants the halves read (get_attr: a tensor the forward
    built as it was traced), each once: held by the compiled module all step, as its
    parameters are."""
    constants = {}
    for gm in halves:
        for node in gm.graph.nodes:
            value = tensor_attribute(gm, node)
            if value is not None:
                constants[str(node.target)] = value.untyped_storage().nbytes()
    return sum(constants.values())


def halves_peak(fw, bw, num_fwd_outputs, fused=True, row_local=False):
    """The bytes allocated at the step's highest point when torch.compile runs forward `fw`
    and backward `bw` (fx GraphModules from torch's partitioner, meta["val"] set), with the
    forward's inputs (parameters, buffers, the batch) counted from the start and the
    gradients to the end: {"peak_bytes", "input_bytes", "forward_peak_bytes",
    "backward_peak_bytes", "saved_bytes", "layout_copy_bytes"} (saved: the activations that
    cross from forward to backward; layout copies: the channels-last copies of forward
    inputs that cross with them, _channels_last_copies).
    `fused`: Inductor's kernels (the rules above); without it every operator writes a
    buffer of its own, as the halves run node by node (graph_opt.backend(inner="eager")).
    "row_local_values": how many values Inductor may hold one row at a time
    (_kernel_local), allocated here unless `row_local` (then never allocated)."""
    fw_placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    inputs = sum(_nbytes(p) for p in fw_placeholders) + _constant_bytes(fw, bw)
    fw_outs = [o for o in output_nodes(fw) if isinstance(o, torch.fx.Node)]
    keep = {storage_root(o) for o in fw_outs}
    # What forward keeps for backward beyond its inputs
    crossing = {storage_root(o) for o in output_nodes(fw)[num_fwd_outputs:]
                if isinstance(o, torch.fx.Node)}
    copies = _channels_last_copies(fw) if fused else {}
    layout_opt = fused and _layout_opt(fw)
    # a copy no backward reads is freed after its last forward read
    forward = _Half(fw, fused, keep, {p: b for p, b in copies.items() if p not in crossing},
                    set(), row_local=row_local, layout_opt=layout_opt)
    forward_peak, after_forward = forward.walk(inputs + sum(copies.values()))
    crossing_bytes = sum(_multi_output_bytes(b) for b in crossing
                         if b.op not in ("placeholder", "get_attr"))
    # Backward's placeholders: the saved values (in the forward's output order after its own
    # outputs) and then the tangents, which autograd allocates as backward starts.
    # A buffer saved as several values (the three heads of one qkv matmul) is one buffer:
    # backward's placeholders for it stand for the first, freed when all are read.
    saved_outs = output_nodes(fw)[num_fwd_outputs:]
    bw_placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
    placeholder_bytes, donated, same, first = {}, set(), {}, {}
    # a saved value that is also an output the user gets (a causal LM's logits beside its
    # loss) is not donated to the backward (AOTAutograd's collect_fw_donated_buffer_idxs):
    # no kernel writes over it, though the backward still frees its own reference
    user_visible = {storage_root(o) for o in output_nodes(fw)[:num_fwd_outputs]
                    if isinstance(o, torch.fx.Node)}
    for p, src in zip(bw_placeholders, saved_outs):
        b = storage_root(src) if isinstance(src, torch.fx.Node) else None
        if b is None or (b.op == "placeholder" and b not in copies) or b.op == "get_attr":
            continue  # a forward input or a tensor constant: held all along
        if b in first:
            same[p] = first[b]
        else:
            first[b] = p
            placeholder_bytes[p] = copies[b] if b in copies else _multi_output_bytes(b)
            if b not in user_visible:
                donated.add(p)
    tangents = sum(_nbytes(p) for p in bw_placeholders[len(saved_outs):])
    bw_outs = [o for o in output_nodes(bw) if isinstance(o, torch.fx.Node)]
    backward = _Half(bw, fused, {storage_root(o) for o in bw_outs}, placeholder_bytes,
                     donated, same, row_local=row_local, layout_opt=layout_opt)
    backward_peak, _ = backward.walk(after_forward + tangents)
    return {"peak_bytes": max(forward_peak, backward_peak), "input_bytes": inputs,
            "forward_peak_bytes": forward_peak, "backward_peak_bytes": backward_peak,
            "saved_bytes": crossing_bytes,
            "layout_copy_bytes": sum(b for p, b in copies.items() if p in crossing),
            "row_local_values": forward.row_local + backward.row_local}
