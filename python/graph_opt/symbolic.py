"""Joint graphs with symbolic shapes, planned at concrete sizes (docs/TorchCompile.md,
"Symbolic shapes").

A loop whose batches change shape (padded-to-longest sequences, a last short batch) makes
dynamo recompile with SymInt sizes (torch's automatic dynamic shapes): the joint graph's
tensors have sizes such as ``2*s27`` and it computes sizes with Python's ``operator.mul``,
``sym_size`` and the like. graph-opt's IR is static, so the partitioner plans a copy of the
joint graph at one size for every symbol (`concrete_joint`): the hint torch's ShapeEnv
recorded (the size the graph was traced at), or under a byte bound the largest size the
user allowed (``torch._dynamo.mark_dynamic(t, dim, max=...)``, the ShapeEnv's value ranges).
The plan names nodes, not sizes: its recompute tags go on the symbolic graph, whose halves
torch's partitioner builds, and hold at every size.
"""
import dataclasses

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import free_symbols
from torch.fx.node import map_aggregate
from torch.utils._pytree import tree_map

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _values(node):
    val = node.meta.get("val")
    return list(val) if isinstance(val, (list, tuple)) else [val]


def _symbols_of(value):
    """The free symbols of a meta value (a SymInt, or a fake tensor's sizes, strides and
    storage offset)."""
    if isinstance(value, _SYMBOLIC):
        return free_symbols(value)
    if isinstance(value, torch.Tensor):
        return free_symbols([*value.shape, *value.stride(), value.storage_offset()])
    return set()


def _shape_env(gm):
    for node in gm.graph.nodes:
        for v in _values(node):
            for s in ([v] if isinstance(v, _SYMBOLIC) else
                      list(v.shape) if isinstance(v, torch.Tensor) else []):
                if isinstance(s, _SYMBOLIC):
                    return s.node.shape_env
    return None


def symbols(gm):
    """The free symbols of a graph's sizes, in order of first appearance."""
    found = {}
    for node in gm.graph.nodes:
        for v in _values(node):
            for s in sorted(_symbols_of(v), key=str):
                found.setdefault(s, None)
    return list(found)


def is_symbolic(gm):
    return bool(symbols(gm))


@dataclasses.dataclass
class Sizes:
    """The size each symbol of a joint graph is planned at: `values` {symbol: int};
    `hints` {symbol: the ShapeEnv's hint}; `bounds` {symbol: its largest allowed value, None
    where unbounded}; `largest` whether bounded symbols were taken at their largest."""
    values: dict
    hints: dict
    bounds: dict
    largest: bool

    @property
    def unbounded(self):
        return [str(s) for s, b in self.bounds.items() if b is None]

    def record(self):
        """What stats()["plans"][i]["symbolic"] says: each symbol's hint, bound and the size
        planned at."""
        return {str(s): {"hint": self.hints[s], "max": self.bounds[s],
                         "planned_at": self.values[s]} for s in self.values}


def _hints(env):
    """{symbol: its hint} for every symbol of the ShapeEnv `env` that has one."""
    if env is None:
        return {}
    # (torch 2.11 names the hints backed_var_to_val; var_to_val before)
    hints = getattr(env, "backed_var_to_val", None)
    if hints is None:
        hints = env.var_to_val
    return {s: int(v) for s, v in hints.items()}


def plan_sizes(gm, largest=False):
    """The Sizes of `gm`'s symbols: each at its hint, or with `largest` at the upper end of
    its value range where that is finite (else its hint). A symbol without a hint (an
    unbacked size: data-dependent) is an error naming it."""
    env = _shape_env(gm)
    known = _hints(env)
    values, hints, bounds = {}, {}, {}
    for s in symbols(gm):
        hint = known.get(s)
        if hint is None:
            raise ValueError(f"the size {s} has no hint (a data-dependent size); graph-opt "
                             "plans symbolic shapes at the sizes torch traced them with")
        upper = env.var_to_range[s].upper if s in env.var_to_range else None
        bound = int(upper) if isinstance(upper, (int, sympy.Integer)) else None  # int_oo: none
        hints[s], bounds[s] = int(hint), bound
        values[s] = bound if largest and bound is not None else int(hint)
    return Sizes(values, hints, bounds, largest)


def _evaluate(value, values):
    """A SymInt/SymFloat/SymBool at `values` as a Python number (plain ones as they are)."""
    if not isinstance(value, _SYMBOLIC):
        return value
    result = sympy.sympify(sympy.sympify(value.node.expr).xreplace(values))
    if result.free_symbols:
        raise ValueError(f"the size {value.node.expr} names {sorted(map(str, result.free_symbols))}"
                         ", which have no hint (data-dependent sizes)")
    if isinstance(value, torch.SymBool):
        return bool(result)
    return float(result) if isinstance(value, torch.SymFloat) else int(result)


def _concrete_tensor(t, values, mode):
    """A fake tensor as `t` at concrete sizes: its sizes, strides, storage offset and
    storage's bytes evaluated at `values` (the storage's size is what halves.py and the
    partitioner count for a view)."""
    size = [_evaluate(s, values) for s in t.shape]
    stride = [_evaluate(s, values) for s in t.stride()]
    offset = _evaluate(t.storage_offset(), values)
    nbytes = _evaluate(t.untyped_storage().nbytes(), values)
    with mode:
        storage = torch.empty(nbytes, dtype=torch.uint8, device=t.device).untyped_storage()
        out = torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, offset, size, stride)
    if t.requires_grad and out.is_floating_point():
        out.requires_grad_(True)
    return out


def concrete_joint(gm, sizes, kwargs):
    """(a copy of `gm` at `sizes` (Sizes), the partitioner's keyword arguments for it): every
    node keeps its name; a node whose value is a size (a SymInt placeholder, ``sym_size``,
    ``operator.mul`` of sizes) is that size as a number in its readers' arguments (a size
    placeholder is dropped, and ``static_lifetime_input_indices``, which count the primal
    inputs, follow); tensors' fake values are at the concrete sizes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from .joint import no_dispatch_modes

    # Every symbol the ShapeEnv has a hint for, at its hint, beneath the planned sizes: an
    # expression may name a symbol no fake value's size has (a size argument, a storage's
    # bytes), which FSDP2's graphs of ResNet-50 did.
    shape_env = _shape_env(gm)
    values = {**_hints(shape_env), **sizes.values}
    graph, env = torch.fx.Graph(), {}
    with no_dispatch_modes():
        mode = FakeTensorMode(allow_non_fake_inputs=True)

        def concrete(v):
            if isinstance(v, torch.Tensor):
                return _concrete_tensor(v, values, mode)
            return _evaluate(v, values)

        for node in gm.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, _SYMBOLIC):
                env[node] = _evaluate(val, values)
                continue
            new = graph.node_copy(node, lambda x: env[x])
            new.args = map_aggregate(new.args, lambda a: _evaluate(a, values))
            new.kwargs = map_aggregate(new.kwargs, lambda a: _evaluate(a, values))
            new.meta = {k: v for k, v in node.meta.items() if k != "tensor_meta"}
            if "val" in node.meta:
                new.meta["val"] = tree_map(concrete, val)
            env[node] = new
    return torch.fx.GraphModule(gm, graph), _without_size_inputs(gm, kwargs)


def _without_size_inputs(gm, kwargs):
    """`kwargs` with static_lifetime_input_indices (positions among the primal inputs, as
    torch's partitioner counts them: the placeholders that are no tangents) moved down past
    the size placeholders concrete_joint drops."""
    indices = kwargs.get("static_lifetime_input_indices")
    if not indices:
        return dict(kwargs)
    primals = [n for n in gm.graph.nodes if n.op == "placeholder" and "tangents" not in n.name]
    dropped = [i for i, n in enumerate(primals) if is_size_node(n)]
    moved = [i - sum(1 for d in dropped if d < i) for i in indices if i not in dropped]
    return {**kwargs, "static_lifetime_input_indices": moved}


def is_size_node(node):
    """A node whose value is a size (SymInt, SymFloat, SymBool), not a tensor: no plan's."""
    return isinstance(node.meta.get("val"), _SYMBOLIC)
