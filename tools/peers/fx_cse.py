"""torch.fx's CSE (``torch.fx.passes.dialect.common.cse_pass.CSEPass``) on a ``.pt2`` graph,
with the merges it makes spelled out.

``CSEPass`` returns a new GraphModule and a ``modified`` flag, not which node it merged into
which. ``replay_cse`` runs the same algorithm over the original nodes and records, for every
node it drops, the node whose value it reuses; ``check_replay`` runs the real pass and checks,
node by node, that the graph it built is the original with exactly those nodes removed and
their uses redirected (any difference is an error, so the mapping is exact on every graph it
is used on).

What CSEPass does (torch 2.11, cse_pass.py): every ``call_function`` node whose target's
overload packet is not in ``banned_ops`` is keyed by (target, hash of its args and kwargs
after substituting already-merged nodes); a later node with the same key and equal
target/args/kwargs (``==``) reuses the first one. ``CSEPass()`` bans *nothing*:
``get_CSE_banned_ops()`` (random ops such as ``aten.native_dropout`` and nine in-place ops) is
only used when passed as ``banned_ops``. Placeholders, outputs and ``get_attr`` nodes are never
merged; higher-order ops' bodies (submodules) are not visited.

graph-opt's names for an fx node (``gir_outputs``): a node with one tensor result is named
after the fx node; a node with several results (``native_layer_norm``, ``native_dropout``,
``max_pool2d_with_indices``) is one graph-opt node whose results are named after the fx
``getitem`` users, ``<node>_none_<i>`` for a ``None`` result (loading names its getitem
``as_none``) and ``<node>_unused_<i>`` for one nothing reads; a node without a result
(``aten::_assert_tensor_metadata``) has no name in graph-opt. In a joint graph the forward ends with the node that computes the loss (the
``LOSS_OUTPUT`` of the signature): later nodes are backward, as in graph-opt's importer.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import operator
import re
import subprocess

CSV_COLUMNS = ("replaced", "kept", "op", "replaced_outputs", "kept_outputs", "replaced_phase",
               "kept_phase", "flags", "replaced_operands", "kept_operands")

# Flags on a merge (the CSV's ``flags`` column, ``;``-joined):
#   random       the op draws random numbers (tagged nondeterministic_seeded, or in
#                cse_pass.rand_ops): two calls give different values, merging is wrong
#   side-effect  fx's Node.is_impure() (e.g. aten::_assert_tensor_metadata)
#   in-place     the op's schema mutates an argument
#   mixed-types  the arguments are == but not of the same types (1 and 1.0 or True)
#   cross-phase  a forward node reused by a backward node (kept alive across the loss)
#   no-result    the node has no result, so graph-opt has no name for it
FLAGS = ("random", "side-effect", "in-place", "mixed-types", "cross-phase", "no-result")


@dataclasses.dataclass
class Merge:
    replaced: object  # fx.Node
    kept: object  # fx.Node
    flags: list


def qualified_op_name(target) -> str:
    """``aten::add.Tensor``, ``aten::view`` (``.default`` left out): graph-opt's spelling and
    the exporter's facts' (export_model._qualified_op_name)."""
    import torch

    if isinstance(target, torch._ops.OpOverload):
        name, overload = target._schema.name, target._overloadname
        return name if overload == "default" else f"{name}.{overload}"
    if target is operator.getitem:
        return "getitem"
    module = getattr(target, "__module__", None) or ""
    return f"{module}.{getattr(target, '__name__', repr(target))}"


def banned_ops(which: str) -> set:
    """``none``: what ``CSEPass()`` bans (nothing); ``default``: ``get_CSE_banned_ops()``."""
    from torch.fx.passes.dialect.common.cse_pass import get_CSE_banned_ops

    return set() if which == "none" else set(get_CSE_banned_ops())


def _aten_target(node):
    return getattr(node.target, "overloadpacket", node.target)


def replay_cse(graph, banned) -> dict:
    """CSEPass.call's loop over ``graph``'s original nodes. Returns {replaced: kept}, where
    kept is the surviving node (CSEPass never maps to a node it drops, so no chains)."""
    from torch.fx import Node
    from torch.utils._pytree import tree_flatten

    env, hash_env, token_map, replaced = {}, {}, {}, {}
    for n in graph.nodes:
        if n.op in ("placeholder", "output", "get_attr") or _aten_target(n) in banned:
            env[n] = n
            continue

        def substitute(arg_list):
            flat, spec = tree_flatten(arg_list)
            return tuple(env[v] if isinstance(v, Node) and v in env else v for v in flat), spec

        args, args_spec = substitute(n.args)
        kwargs, kwargs_spec = substitute(n.kwargs)
        token = {"target": n.target, "args": args, "args_spec": args_spec, "kwargs": kwargs,
                 "kwargs_spec": kwargs_spec}
        hash_val = (n.target, hash((args, kwargs)))
        if hash_val in hash_env and token_map[hash_val] == token:
            env[n] = hash_env[hash_val]
            replaced[n] = env[n]
            continue
        env[n] = n
        if hash_val not in hash_env:
            hash_env[hash_val] = n
            token_map[hash_val] = token
    return replaced


def check_replay(gm, banned, replaced: dict) -> None:
    """Runs the real CSEPass and raises AssertionError unless its graph is ``gm``'s without the
    ``replaced`` nodes, in the same order, each use of a replaced node reading its kept node."""
    from torch.fx import Node
    from torch.fx.passes.dialect.common.cse_pass import CSEPass
    from torch.utils._pytree import tree_map

    result = CSEPass(banned_ops=banned)(gm)
    new = list(result.graph_module.graph.nodes)
    old = [n for n in gm.graph.nodes if n not in replaced]
    if len(new) != len(old):
        raise AssertionError(f"CSEPass left {len(new)} nodes, the replay {len(old)}")
    if result.modified != bool(replaced):
        raise AssertionError(f"CSEPass says modified={result.modified}, the replay found "
                             f"{len(replaced)} merges")
    old_index = {n: i for i, n in enumerate(old)}
    new_index = {n: i for i, n in enumerate(new)}

    def shape(args, index, resolve):
        return tree_map(lambda a: ("node", index[resolve(a)]) if isinstance(a, Node) else a, args)

    for o, m in zip(old, new):
        resolve = lambda a: replaced.get(a, a)  # noqa: E731
        if (o.op, o.target) != (m.op, m.target) or \
                shape((o.args, o.kwargs), old_index, resolve) != \
                shape((m.args, m.kwargs), new_index, lambda a: a):
            raise AssertionError(f"CSEPass's node {m.name} ({m.op} {m.target}) is not the "
                                 f"replay's {o.name} ({o.op} {o.target}) with merged operands")


def _strict_equal(a, b) -> bool:
    """== and the same types all the way down (CSEPass compares with ==, so 1 == 1.0 == True
    and 0.0 == -0.0 pass)."""
    from torch.fx import Node

    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return repr(a) == repr(b)  # tells 0.0 from -0.0
    if isinstance(a, Node):
        return True  # the operands are the same after merging, by construction
    return a == b


def gir_outputs(node) -> list:
    """The names graph-opt gives ``node``'s results (see the module's doc)."""
    import torch

    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        # A None result keeps graph-opt's name even where loading added a getitem for it
        # (torch.export.load names those as_none, as_none_1, ...).
        by_index = {u.args[1]: u.name for u in node.users if u.target is operator.getitem}
        return [f"{node.name}_none_{i}" if v is None
                else by_index.get(i, f"{node.name}_unused_{i}") for i, v in enumerate(val)]
    if val is None and isinstance(node.target, torch._ops.OpOverload) \
            and not node.target._schema.returns:
        return []
    return [node.name]


def gir_operands(node) -> list:
    """The nodes ``node`` reads (args then kwargs, flattened), each by graph-opt's name for
    the node (its first result's name; a getitem stands for its producer)."""
    from torch.fx import Node
    from torch.utils._pytree import tree_flatten

    names = []
    for a in tree_flatten((node.args, node.kwargs))[0]:
        if isinstance(a, Node):
            if a.target is operator.getitem:
                a = a.args[0]
            outs = gir_outputs(a) if a.op == "call_function" else [a.name]
            names.append(outs[0] if outs else a.name)
    return names


def phases(ep) -> dict:
    """fx node -> "forward" or "backward": the nodes after the loss's node are backward."""
    loss = next((s.arg.name for s in ep.graph_signature.output_specs
                 if s.kind.name == "LOSS_OUTPUT"), None)
    result, backward = {}, False
    for n in ep.graph.nodes:
        result[n] = "backward" if backward else "forward"
        if loss is not None and n.name == loss:
            backward = True
    return result


def merge_flags(replaced, kept, phase: dict) -> list:
    import torch
    from torch.fx.passes.dialect.common.cse_pass import rand_ops

    flags = []
    target = replaced.target
    if isinstance(target, torch._ops.OpOverload) and (
            torch.Tag.nondeterministic_seeded in target.tags or target.overloadpacket in rand_ops):
        flags.append("random")
    if replaced.is_impure(impure_random=False):
        flags.append("side-effect")
    if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
        flags.append("in-place")
    if not _strict_equal((replaced.args, replaced.kwargs), (kept.args, kept.kwargs)):
        flags.append("mixed-types")
    if phase[kept] != phase[replaced]:
        flags.append("cross-phase")
    if not gir_outputs(replaced):
        flags.append("no-result")
    return flags


@dataclasses.dataclass
class FxResult:
    path: str
    num_nodes: int  # every node of the graph (placeholders and output included)
    merges: list  # Merge, getitems of merged nodes left out
    getitems: int  # getitem nodes CSEPass dropped along with their merged producers
    phase: dict


def run_fx_cse(path: str, banned_which: str = "none", check: bool = True) -> FxResult:
    import torch

    ep = torch.export.load(path)
    gm = ep.graph_module
    banned = banned_ops(banned_which)
    replaced = replay_cse(gm.graph, banned)
    if check:
        check_replay(gm, banned, replaced)
    phase = phases(ep)
    merges, getitems = [], 0
    for r, k in replaced.items():
        if r.target is operator.getitem and r.args[0] in replaced:
            getitems += 1  # part of its producer's merge: graph-opt has no getitem nodes
            continue
        merges.append(Merge(r, k, merge_flags(r, k, phase)))
    return FxResult(path, len(gm.graph.nodes), merges, getitems, phase)


def csv_text(result: FxResult) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for m in result.merges:
        w.writerow([m.replaced.name, m.kept.name, qualified_op_name(m.replaced.target),
                    ";".join(gir_outputs(m.replaced)), ";".join(gir_outputs(m.kept)),
                    result.phase[m.replaced], result.phase[m.kept], ";".join(m.flags),
                    ";".join(gir_operands(m.replaced)), ";".join(gir_operands(m.kept))])
    return out.getvalue()


# --- checking the names against graph-opt's own dump ------------------------------------

_GIR_NODE = re.compile(r"^\s+(?:(%[^=]+?)\s*=\s*)?([A-Za-z_][\w.]*::[\w.]+)\(")


def parse_gir_nodes(text: str) -> dict:
    """graph-opt -S text -> {first output name (or "" for none): [(outputs, op, phase)]}."""
    nodes, phase = {}, None
    for line in text.splitlines():
        if line.strip() in ("forward:", "backward:"):
            phase = line.strip()[:-1]
            continue
        m = _GIR_NODE.match(line)
        if not m or phase is None:
            continue
        outs = [o.strip().lstrip("%") for o in m.group(1).split(",")] if m.group(1) else []
        nodes.setdefault(outs[0] if outs else "", []).append((outs, m.group(2), phase))
    return nodes


def check_names(result: FxResult, graph_opt: str) -> list:
    """Runs ``graph_opt PATH -S`` and returns what disagrees with this module's naming and
    phases, over every fx operator node of the graph (not only the merged ones)."""
    import torch

    proc = subprocess.run([graph_opt, result.path, "-S"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{graph_opt} {result.path} -S failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[:500]}")
    gir = parse_gir_nodes(proc.stdout)
    problems = []
    for n, phase in result.phase.items():
        if n.op != "call_function" or n.target is operator.getitem or \
                isinstance(n.target, torch._ops.HigherOrderOperator):
            continue  # getitems are results; graph-opt inlines the wrappers' bodies
        outs, op = gir_outputs(n), qualified_op_name(n.target)
        if not outs:
            continue  # a result-less node has no name to look it up by
        found = gir.get(outs[0], [])
        if not found:
            problems.append(f"{n.name}: graph-opt has no node named {outs[0]}")
        elif (found[0][0], found[0][1], found[0][2]) != (outs, op, phase):
            problems.append(f"{n.name}: fx {outs} {op} {phase}, graph-opt {found[0]}")
    return problems
