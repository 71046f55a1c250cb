"""The verifier where users train: graph-opt's partition of a joint graph against torch's own.

graph_opt.partitioner(..., verify=True) / graph_opt.backend(..., verify=True) call
verify_partition once per joint graph they partition, at compile time: both partitions (the
forward and backward halves graph-opt's plan made, and those torch's default
min_cut_rematerialization_partition makes of the same joint graph) run eagerly, node by node
on ATen's kernels, on the same inputs and the same RNG seed, and every forward output and
every gradient must agree (torch.testing's dtype-aware tolerances) on inputs where torch's
partition computes finite values (a NaN on both sides would agree whatever either computed). The first that differs raises PartitionMismatch naming it, unless torch's own
partitions differ there too (the caller passes another of them: `other`) and graph-opt's
difference is within SPREAD_FACTOR times theirs: the same terms summed in another order
(T5's shared attention bias, whose gradient every layer adds to). Those values are named
in `widened`.

The inputs are made from the joint graph's fake tensors, the user's are not there yet:
floating-point inputs and tangents drawn from a seeded normal distribution, integer inputs
that only aten.embedding reads (as indices) drawn over the table's rows, other integer and
boolean inputs zeros (an index 0 is in range of every embedding and every class list). What
is checked is the partition, graph-opt's rewrite of the step, on the kernels torch's
partition runs too; Inductor's code generation for the halves is torch's and not checked
here. Graphs with symbolic shapes cannot be run on made-up inputs: the partitioner verifies
the copy it planned at concrete sizes (symbolic.py).
"""
import torch

from ._C import Error
from .joint import alias_source, no_dispatch_modes, storage_root

SEED = 20251128


class PartitionMismatch(Error):
    """graph-opt's partition computes another forward output or gradient than torch's."""


class VerifyCannotRun(Error):
    """The check has nothing to compare: torch's own partition gives a value that is not
    finite on every draw of made-up inputs (two NaNs would agree whatever either computed)."""


# The made-up inputs tried in turn until torch's partition computes finite values: floats
# normal (the default), then uniform in [0.5, 1.5] (positive and away from zero: logs,
# square roots and divisions of inputs stay finite), then normal scaled by 0.01 (no exp
# overflows). Integer and boolean inputs are drawn the same way each time.
DRAWS = ("normal", "positive", "small")


def _static(val, what):
    if any(not isinstance(d, int) for d in list(val.shape) + list(val.stride())):
        raise Error(f"verify: {what} has symbolic shape {tuple(val.shape)}: made-up inputs need "
                    "static shapes (compile with dynamic=False)")


_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}


def _index_bound(user, node):
    """The exclusive bound `user` puts on the values of `node` it reads as indices (`node`
    or a view of it): embedding's rows, index_put's and index_select's dimension; 0 for a
    comparison with a number (padding and ignore checks: any value will do); None for
    any other reader."""
    aten = torch.ops.aten
    packet = getattr(user.target, "overloadpacket", None)
    name = getattr(packet, "__name__", "")

    def size(tensor_node, dim):
        val = tensor_node.meta.get("val") if isinstance(tensor_node, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor) or not isinstance(val.shape[dim], int):
            return None
        return val.shape[dim]
    if user.target is aten.embedding.default and storage_root(user.args[1]) is node:
        return size(user.args[0], 0)
    if name in ("index_put", "index_put_", "_unsafe_index_put"):
        positions = [k for k, i in enumerate(user.args[1])
                     if isinstance(i, torch.fx.Node) and storage_root(i) is node]
        if positions and storage_root(user.args[0]) is not node:
            return min(size(user.args[0], k) or 0 for k in positions) or None
        return None
    if name == "index_select" and storage_root(user.args[2]) is node:
        return size(user.args[0], user.args[1])
    if name in _COMPARISONS and not isinstance(user.args[1], torch.fx.Node):
        return 0
    return None


def _index_range(node):
    """The range an integer input's values may be drawn from, where every reader of it
    (through views of it: reshapes, slices) reads it as indices of a table (embedding,
    index_put, index_select; comparisons with a number aside): the least of the tables'
    sizes, else None. All-zero indices would send every token's gradient to row 0 (the
    embedding's backward is an index_put that accumulates): a sum of thousands of terms,
    whose rounding depends on the order each partition adds them in, and two correct
    partitions would differ beyond float32's tolerance (GPT-2's 50257 x 768 table did)."""
    bounds, stack = [], list(node.users)
    while stack:
        user = stack.pop()
        if alias_source(user) is not None:  # a view of the indices: its readers count
            stack.extend(user.users)
            continue
        bound = _index_bound(user, node)
        if bound is None:
            return None
        if bound:
            bounds.append(bound)
    return min(bounds) if bounds else None


def make_inputs(joint, seed=SEED, draw="normal"):
    """{placeholder name: real tensor} for the joint graph's placeholders; floats as `draw`
    (one of DRAWS) says."""
    gen = torch.Generator().manual_seed(seed)
    made = {}
    for node in joint.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            made[node.name] = val  # a SymInt or a constant: as traced
            continue
        _static(val, f"input '{node.name}'")
        if val.dtype.is_floating_point or val.dtype.is_complex:
            data = torch.randn(val.shape, generator=gen, dtype=val.dtype)
            if draw == "positive":
                data = torch.rand(val.shape, generator=gen, dtype=val.dtype) + 0.5
            elif draw == "small":
                data = data * 0.01
        elif (rows := _index_range(node)) is not None:
            data = torch.randint(0, rows, val.shape, generator=gen, dtype=val.dtype)
        else:
            data = torch.zeros(val.shape, dtype=val.dtype)
        real = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device)
        real.copy_(data.to(val.device))
        made[node.name] = real
    return made


def _placeholders(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def run_halves(fw, bw, inputs, num_fwd_outputs, seed=SEED):
    """The forward half, then the backward half on what it saved and the tangents: (forward
    outputs, gradients). Inputs are cloned, so what a half writes in place (BatchNorm's
    running statistics) does not reach the next run."""
    fresh = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    torch.manual_seed(seed)
    with torch.no_grad():
        outs = list(fw(*[fresh[name] for name in _placeholders(fw)]))
        # AOTAutograd's calling convention: the forward returns its outputs, then what it
        # saves (tensors, RNG states among them, then SymInts); the backward takes the SymInts,
        # the tensors, then the tangents.
        saved = outs[num_fwd_outputs:]
        tensors = [v for v in saved if isinstance(v, torch.Tensor)]
        symbols = [v for v in saved if not isinstance(v, torch.Tensor)]
        tangents = [fresh[name] for name in _placeholders(bw) if name.startswith("tangents")]
        args = symbols + tensors + tangents
        if len(args) != len(_placeholders(bw)):
            raise Error(f"verify: the backward half takes {len(_placeholders(bw))} inputs, the "
                        f"forward half saves {len(saved)} and the joint graph has "
                        f"{len(tangents)} tangents")
        grads = list(bw(*args))
    return outs[:num_fwd_outputs], grads


def _differs(mine, theirs):
    """'' when the two agree, else why not."""
    if isinstance(mine, torch.Tensor) != isinstance(theirs, torch.Tensor):
        return "a tensor on one side only"
    if not isinstance(mine, torch.Tensor):
        return "" if mine == theirs else f"{mine!r} against {theirs!r}"
    try:
        torch.testing.assert_close(mine, theirs, equal_nan=True, check_stride=False)
    except AssertionError as e:
        return " ".join(str(e).split())
    return ""


def _first_not_finite(joint, outs, grads):
    """The name of the first forward output or gradient with a NaN or an infinity, or None."""
    for i, value in enumerate(outs + grads):
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()) \
                and not bool(torch.isfinite(value).all()):
            return (f"forward output {i}" if i < len(outs) else
                    f"the gradient of {_describe(joint, i - len(outs))}")
    return None


def _describe(joint, index):
    """The joint graph's input `index` (a primal), for messages."""
    names = _placeholders(joint)
    name = names[index] if index < len(names) else f"#{index}"
    val = next((n.meta.get("val") for n in joint.graph.nodes if n.name == name), None)
    shape = f" {val.dtype} {list(val.shape)}" if isinstance(val, torch.Tensor) else ""
    return f"input {index} ('{name}'{shape})"


# A value two of torch's own partitions disagree on may differ from torch's by this many
# times their largest difference (the spread) before it is a mismatch.
SPREAD_FACTOR = 4


def _largest_difference(a, b):
    """The largest absolute elementwise difference of two same-shaped tensors (infinity
    where their NaNs are not at the same places)."""
    a, b = a.detach().double(), b.detach().double()
    if not torch.equal(a.isnan(), b.isnan()):
        return float("inf")
    diff = (a - b).abs().nan_to_num(nan=0.0)
    return float(diff.max()) if diff.numel() else 0.0


def _differing(joint, my_outs, my_grads, their_outs, their_grads):
    """[(index, name, why)] of the forward outputs and gradients (in that order: the
    backward half's outputs are the gradients of the joint graph's primal inputs) that
    differ from torch's."""
    if len(my_outs) != len(their_outs) or len(my_grads) != len(their_grads):
        raise PartitionMismatch(
            f"graph-opt's partition returns {len(my_outs)} outputs and {len(my_grads)} "
            f"gradients, torch's {len(their_outs)} and {len(their_grads)}")
    found = []
    for i, (a, b) in enumerate(zip(my_outs + my_grads, their_outs + their_grads)):
        if why := _differs(a, b):
            name = (f"forward output {i}" if i < len(my_outs) else
                    f"the gradient of {_describe(joint, i - len(my_outs))}")
            found.append((i, name, why))
    return found


def _widen(differing, mine, theirs, other_run, widened):
    """Passes each differing value torch's other partition (`other_run`: its outputs and
    gradients) differs on too, where graph-opt's largest difference from torch's is within
    SPREAD_FACTOR times that spread, into `widened`; raises PartitionMismatch on the first
    that is not."""
    others = other_run[0] + other_run[1]
    for i, name, why in differing:
        a, b = mine[i], theirs[i]
        c = others[i] if i < len(others) else None
        if not all(isinstance(t, torch.Tensor) and t.shape == b.shape for t in (a, c)):
            raise PartitionMismatch(f"{name} differs from torch's partition: {why}")
        spread, difference = _largest_difference(c, b), _largest_difference(a, b)
        if not (0 < spread < float("inf") and difference <= SPREAD_FACTOR * spread):
            raise PartitionMismatch(
                f"{name} differs from torch's partition: {why}; torch's own partitions "
                f"differ there by at most {spread:.3g}, and graph-opt's by more than "
                f"{SPREAD_FACTOR}x that")
        if widened is not None:
            widened[name] = (difference, spread)


def verify_partition(joint, mine, theirs, num_fwd_outputs, other=None, widened=None):
    """Runs both partitions ((fw, bw) pairs of the joint graph `joint`) on the same made-up
    inputs (the first of DRAWS on which torch's partition's values are all finite; none:
    VerifyCannotRun) and seed and compares every forward output and gradient; raises
    PartitionMismatch on the first that differs. `other`: a function returning another of
    torch's partitions of the joint graph (another budget), called (under the caller's
    dispatch modes: torch's partitioner needs its FakeTensorMode) and run only where values
    differ: a value torch's two partitions differ on too (the same terms summed in another
    order) passes where graph-opt's largest difference from torch's is within
    SPREAD_FACTOR times theirs, and goes into `widened` ({name: (graph-opt's difference,
    torch's spread)}). Returns the number of values compared."""
    # AOTAutograd partitions under its FakeTensorMode: real tensors only with it set aside.
    with no_dispatch_modes():
        # Inputs on which torch's partition computes finite values (DRAWS), else nothing is
        # checked: a NaN on both sides would match whatever either partition computed.
        for draw in DRAWS:
            inputs = make_inputs(joint, draw=draw)
            their_outs, their_grads = run_halves(*theirs, inputs, num_fwd_outputs)
            not_finite = _first_not_finite(joint, their_outs, their_grads)
            if not_finite is None:
                break
        else:
            raise VerifyCannotRun(
                f"verify: {not_finite} is not finite in torch's own partition on each draw of "
                f"made-up inputs ({', '.join(DRAWS)}): there is nothing to compare")
        my_outs, my_grads = run_halves(*mine, inputs, num_fwd_outputs)
        differing = _differing(joint, my_outs, my_grads, their_outs, their_grads)
    if differing and other is not None:
        try:
            partition = other()
        except Exception as e:  # the mismatch stands; say why it could not be weighed
            _, name, why = differing[0]
            raise PartitionMismatch(
                f"{name} differs from torch's partition: {why}; torch's other partition, to "
                f"weigh it against, could not be made ({type(e).__name__}: {e})") from e
        with no_dispatch_modes():
            _widen(differing, my_outs + my_grads, their_outs + their_grads,
                   run_halves(*partition, inputs, num_fwd_outputs), widened)
    elif differing:
        _, name, why = differing[0]
        raise PartitionMismatch(f"{name} differs from torch's partition: {why}")
    return len(my_outs) + sum(1 for g in my_grads if g is not None)
