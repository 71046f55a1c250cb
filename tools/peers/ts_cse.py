"""TorchScript's ``EliminateCommonSubexpression`` and ``EliminateDeadCode`` on the zoo's eval
models, traced.

Each model is rebuilt as tools/export/export_model.py builds it (the zoo's ``build_model``,
tools/zoo: the same builder, tiny sizes, seed and dropout setting; the eval wrapper in eval
mode) and traced with ``torch.jit.trace`` under ``torch.no_grad()`` on its example inputs.
The exporter refuses a trace that raised a TracerWarning (the text models' traces bake sizes
in); here that does not matter (the graph is only looked at, never run), so the warnings are
counted and reported, and ``check_trace`` is off. The module's graph is inlined
(``traced.inlined_graph``, a copy: submodule calls become their bodies, as in any TorchScript
optimization pipeline), then
``torch._C._jit_pass_cse`` (EliminateCommonSubexpression) and ``torch._C._jit_pass_dce``
(EliminateDeadCode) run on it in that order.

Every node a pass removes is classified (``classify``) as one of:
  constant   prim::Constant: in a .pt2 graph literals are inline arguments
  attribute  prim::GetAttr: reading a parameter off the module; .pt2 parameters are inputs
  list       prim::ListConstruct / TupleConstruct / ...Unpack: argument packing; a .pt2
             node's list arguments are inline
  shape      aten::size, prim::NumToTensor, aten::Int and arithmetic on sizes (anything with
             no tensor result, or whose tensor operands all come from sizes, constants
             aside: ``floor_divide(NumToTensor(size), 2)``): the .pt2
             graphs have static shapes, so there is nothing of this kind to merge
  tensor     a tensor computation: its counterpart is the .pt2 graph's node of the same
             ATen operator (``aten::X`` here, ``aten::X.overload`` there)
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import warnings

TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CLASSES = ("constant", "attribute", "list", "shape", "tensor")
CLASS_NOTE = {
    "constant": "no counterpart: .pt2 literals are inline arguments",
    "attribute": "no counterpart: .pt2 parameters are graph inputs",
    "list": "no counterpart: .pt2 list arguments are inline",
    "shape": "no counterpart: .pt2 shapes are static",
    "tensor": "tensor computation",
}
_LIST_KINDS = {"prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack",
               "prim::TupleUnpack", "prim::DictConstruct"}
_SHAPE_SOURCES = {"aten::size", "prim::NumToTensor", "aten::dim", "aten::len", "aten::numel",
                  "prim::shape"}


def _zoo():
    if TOOLS_DIR not in sys.path:
        sys.path.insert(0, TOOLS_DIR)
    import zoo

    return zoo


def eval_models() -> list:
    return list(_zoo().MODELS)


def trace_eval_model(name: str, seed: int = 0):
    """(traced module, number of TracerWarnings) for the zoo's tiny eval ``name``."""
    import torch

    zoo = _zoo()
    spec = zoo.MODELS[name]
    tiny = spec.tiny
    sizes = zoo.Sizes(batch=tiny["batch"], image_size=tiny.get("image_size"),
                      seq_len=tiny.get("seq_len"), tiny=True)
    built = zoo.build_model(name, sizes, seed, dropout=True)
    module = built.eval_wrap(built.model.eval()).eval()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always", torch.jit.TracerWarning)
        traced = torch.jit.trace(module, built.eval_args, check_trace=False)
    return traced, sum(1 for w in caught if issubclass(w.category, torch.jit.TracerWarning))


def _walk(block):
    for n in block.nodes():
        yield n
        for b in n.blocks():
            yield from _walk(b)


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value.type(), torch._C.TensorType)


def classify(graph) -> dict:
    """Node key (its outputs' debug names) -> class, for every node of ``graph`` with a
    result."""
    tainted = set()  # tensors computed from sizes (prim::NumToTensor and arithmetic on it)
    classes = {}
    for n in _walk(graph.block()):
        kind, outs = n.kind(), list(n.outputs())
        tensor_inputs = [v for v in n.inputs() if _is_tensor(v)]
        if kind == "prim::Constant":
            cls = "constant"
        elif kind == "prim::GetAttr":
            cls = "attribute"
        elif kind in _LIST_KINDS:
            cls = "list"
        elif kind in _SHAPE_SOURCES or not any(_is_tensor(v) for v in outs) or (
                any(v.debugName() in tainted for v in tensor_inputs) and
                all(v.debugName() in tainted or v.node().kind() == "prim::Constant"
                    for v in tensor_inputs)):
            cls = "shape"
            tainted.update(v.debugName() for v in outs)
        else:
            cls = "tensor"
        if outs:
            classes[_key(n)] = (kind, cls)
    return classes


def _key(node) -> tuple:
    return tuple(v.debugName() for v in node.outputs())


def _histogram(graph) -> collections.Counter:
    return collections.Counter(n.kind() for n in _walk(graph.block()))


def _run_pass(graph, fn, classes) -> collections.Counter:
    """Runs ``fn(graph)``; returns Counter{(kind, class): removed}. Checks the removed nodes
    found by name add up to the change in the kind histogram."""
    before, keys = _histogram(graph), {_key(n) for n in _walk(graph.block()) if n.outputs()}
    fn(graph)
    after = {_key(n) for n in _walk(graph.block()) if list(n.outputs())}
    removed = collections.Counter(classes[k] for k in keys - after)
    by_kind = collections.Counter()
    for (kind, _), count in removed.items():
        by_kind[kind] += count
    change = before - _histogram(graph)
    if by_kind != change:
        raise AssertionError(f"removed nodes by name {dict(by_kind)} differ from the change of "
                             f"the node kinds {dict(change)}")
    return removed


@dataclasses.dataclass
class TsResult:
    model: str
    tracer_warnings: int
    nodes: tuple  # before, after CSE, after DCE
    cse: collections.Counter  # (kind, class) -> removed by CSE
    dce: collections.Counter  # (kind, class) -> removed by DCE


def run_ts_cse(name: str, seed: int = 0) -> TsResult:
    import torch

    traced, tracer_warnings = trace_eval_model(name, seed)
    graph = traced.inlined_graph  # a copy: the module's own graph is left alone
    classes = classify(graph)
    n0 = sum(_histogram(graph).values())
    cse = _run_pass(graph, torch._C._jit_pass_cse, classes)
    n1 = sum(_histogram(graph).values())
    dce = _run_pass(graph, torch._C._jit_pass_dce, classes)
    n2 = sum(_histogram(graph).values())
    return TsResult(name, tracer_warnings, (n0, n1, n2), cse, dce)
