"""graph-opt inside torch.compile: its recomputation plan under Inductor's kernels.

    import graph_opt
    torch._inductor.config.custom_partitioner_fn = graph_opt.partitioner(
        "repeat{cse,canonicalize,dce},checkpoint{activations=30%}")
    step = torch.compile(model)

    # or, one line:
    step = torch.compile(model, backend=graph_opt.backend("checkpoint{activations=30%}"))

AOTAutograd hands the partitioner the joint forward+backward graph. graph-opt
imports it (graph_opt.from_fx), runs the pipeline with FLOP costs (nothing
real can run there: the inputs are fake tensors), and expresses the plan as
torch's own activation-checkpointing tags, node.meta["recompute"] =
MUST_SAVE / MUST_RECOMPUTE, on the joint graph. torch's
min_cut_rematerialization_partition then builds the forward and backward
halves, so AOTAutograd's calling convention, RNG functionalization of
recomputed random operators, and the backward's ordering stay torch's. The
saved set torch builds is checked against graph-opt's plan.

A graph graph-opt cannot take (symbolic shapes, an operator it does not
know, a plan that fails, a saved set that differs) falls back to torch's
default partitioner with one warning naming the reason, counted in stats();
strict=True raises instead. See docs/TorchCompile.md.
"""
import contextlib
import copy
import dataclasses
import functools
import hashlib
import operator
import os
import re
import warnings

import torch
from torch._functorch import config as _functorch_config
from torch._functorch.partitioners import _must_be_in_forward, \
    min_cut_rematerialization_partition
from torch._inductor.custom_graph_pass import CustomPartitionerFn
from torch.utils.checkpoint import CheckpointPolicy

from . import _C
from ._C import Error
from .fx import from_fx

__all__ = ["DEFAULT_PIPELINE", "GraphOptPartitioner", "Plan", "backend", "partitioner",
           "plan_joint", "reset_stats", "stats"]

DEFAULT_PIPELINE = "repeat{cse,canonicalize,dce},checkpoint{activations=30%}"

# Passes that only read the graph or rewrite it in ways whose effect torch's partitioner
# and Inductor make themselves: their rewrites are not carried over (only checkpoint's plan
# is), they shape the graph the planner sees.
_PLANNING_PASSES = {"cse", "canonicalize", "dce", "repeat", "checkpoint", "liveness",
                    "reinplace"}


class PlanMismatch(Error):
    """torch's partitioner built another saved set than graph-opt planned."""


# ---------------------------------------------------------------------------------------------
# Statistics


@dataclasses.dataclass
class _Stats:
    graphs: int = 0          # joint graphs partitioned with graph-opt's plan
    fallbacks: int = 0       # joint graphs handed to torch's partitioner instead
    inference_graphs: int = 0
    inference: list = dataclasses.field(default_factory=list)
    reasons: list = dataclasses.field(default_factory=list)
    plans: list = dataclasses.field(default_factory=list)
    planning_seconds: float = 0.0


_STATS = _Stats()


def stats():
    """What graph-opt did inside torch.compile in this process: {"graphs":
    joint graphs partitioned with graph-opt's plan, "fallbacks": graphs given
    to torch's default partitioner, "reasons": one line per fallback,
    "inference_graphs": graphs without backward through the pipeline,
    "inference": per such graph, its nodes before and after and the values
    the pipeline replaced, "plans": per partitioned graph, its saved and recomputed values
    and bytes,
    "planning_seconds": graph-opt's own time}."""
    return {"graphs": _STATS.graphs, "fallbacks": _STATS.fallbacks,
            "inference_graphs": _STATS.inference_graphs,
            "inference": [dict(i) for i in _STATS.inference],
            "reasons": list(_STATS.reasons), "plans": [dict(p) for p in _STATS.plans],
            "planning_seconds": _STATS.planning_seconds}


def reset_stats():
    global _STATS
    _STATS = _Stats()


# ---------------------------------------------------------------------------------------------
# The pipeline, for graphs that cannot run


def _split_top(text):
    """'a,b{c,d},e' -> ['a', 'b{c,d}', 'e']: commas outside braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise Error(f"pipeline '{text}': unbalanced '}}'")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise Error(f"pipeline '{text}': unbalanced '{{'")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _entry(text):
    m = re.fullmatch(r"([A-Za-z0-9_-]+)\s*(?:\{(.*)\})?", text, re.S)
    if not m:
        raise Error(f"pipeline entry '{text}' is not NAME or NAME{{options}}")
    return m.group(1), m.group(2)


def compile_pipeline(text, inference=False, activations=None):
    """The pipeline as it runs inside torch.compile, where the joint graph's
    inputs are fake tensors: checkpoint plans from FLOP counts
    (cost=flops,measure=false, added where not given), and passes that run
    the graph or change what it computes are refused, naming the entry. For
    an inference graph (`inference`), checkpoint entries are left out:
    without backward there is nothing to recompute. `activations` (bytes),
    where given, replaces every checkpoint entry's activations= bound."""
    out = []
    for part in _split_top(text):
        name, options = _entry(part)
        if name not in _PLANNING_PASSES:
            raise Error(f"pipeline entry '{part}': '{name}' cannot run inside torch.compile "
                        f"(the graph's inputs are fake tensors, and only a recomputation plan "
                        f"reaches torch's partitioner); allowed: "
                        f"{', '.join(sorted(_PLANNING_PASSES))}")
        if name == "repeat":
            nested = compile_pipeline(options or "", inference, activations)
            if nested:
                out.append(f"repeat{{{nested}}}")
            continue
        opts = _split_top(options) if options else []
        keys = {o.split("=", 1)[0].strip(): o.split("=", 1)[1].strip() if "=" in o else ""
                for o in opts}
        if name == "checkpoint":
            if keys.get("cost", "flops") != "flops":
                raise Error(f"pipeline entry '{part}': cost={keys['cost']} runs the graph; "
                            "inside torch.compile checkpoint plans with cost=flops")
            if keys.get("measure", "false") not in ("false", "0"):
                raise Error(f"pipeline entry '{part}': measure={keys['measure']} runs the "
                            "graph; inside torch.compile checkpoint plans with measure=false")
            opts += [o for k, o in (("cost", "cost=flops"), ("measure", "measure=false"))
                     if k not in keys]
            if activations is not None:
                opts = [o for o in opts if o.split("=", 1)[0].strip() != "activations"]
                opts.append(f"activations={int(activations)}")
            if inference:
                continue
        if name == "liveness" and keys.get("scratch", "none") != "none":
            raise Error(f"pipeline entry '{part}': scratch={keys['scratch']} runs the graph")
        out.append(f"{name}{{{','.join(opts)}}}" if opts else name)
    return ",".join(out)


# ---------------------------------------------------------------------------------------------
# The plan


@dataclasses.dataclass
class Plan:
    """graph-opt's choice on a joint graph, by fx node name.

    `saved`: forward values (placeholders included) backward reads, as
    graph-opt's rewritten graph has it. `recomputed`: forward values backward
    makes again. `backward`: the nodes graph-opt counts as backward (after the
    last node the forward outputs need). `replaced`: {value: the value its
    readers read instead} (cse, canonicalize). `report`: checkpoint's JSON
    report."""
    saved: set
    recomputed: set
    backward: set
    replaced: dict
    report: dict
    statistics: list


def _output_nodes(gm):
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return list(torch.fx.node.map_arg(out.args[0], lambda n: n)
                if isinstance(out.args[0], (list, tuple)) else [out.args[0]])


def _ancestors(nodes):
    seen, stack = set(), [n for n in nodes if isinstance(n, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def _no_dispatch_modes():
    """The dispatch modes active here (AOTAutograd's FakeTensorMode) set aside."""
    return torch.utils._python_dispatch._disable_current_modes()


def _forward_first(gm, num_fwd_outputs):
    """The joint graph as graph-opt imports it: forward first, then backward,
    with their phases. Forward is what the forward outputs need and what torch
    places in forward whatever needs it (writes to inputs, such as the
    BatchNorm running statistics Inductor's joint graph updates at its very
    end: torch's _must_be_in_forward), with everything those need; backward
    is the rest. torch's forward half runs these writes at its end, so moving
    them there is what torch runs. Returns (GraphModule, {name: phase})."""
    outputs = _output_nodes(gm)
    seeds = outputs[:num_fwd_outputs] + [
        n for n in gm.graph.nodes if n.op == "call_function" and _must_be_in_forward(n)]
    forward = _ancestors(seeds)
    body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    order = ([n for n in gm.graph.nodes if n.op == "placeholder"]
             + [n for n in body if n in forward] + [n for n in body if n not in forward]
             + [n for n in gm.graph.nodes if n.op == "output"])
    graph, env = torch.fx.Graph(), {}
    for n in order:
        env[n] = graph.node_copy(n, lambda x: env[x])
    phases = {n.name: "forward" if n in forward else "backward"
              for n in body if n.op == "call_function"}
    return torch.fx.GraphModule(gm, graph), phases


def _constant_string(text):
    """An attribute as the binding prints it ('"relu"') -> relu."""
    return text[1:-1] if len(text) >= 2 and text[0] == '"' and text[-1] == '"' else text


def _tensor_operands(node):
    """A call's tensor operands in schema order, lists flattened: the order of
    the operands graph-opt's importer gives the node."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return list(node.all_input_nodes)
    values = []
    for i, arg in enumerate(schema.arguments):
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, torch.fx.Node):
                values.append(v)
    return values


def _recomputed_values(nodes):
    """{a recomputation's result: the value it makes again}. A recomputation
    names the value it was made for (recompute_of); a multi-output one makes
    the original node's results in order."""
    producer = {}
    for n in nodes:
        for v in n["outputs"]:
            producer[v] = n
    found = {}
    for n in nodes:
        of = n["attributes"].get(_C.RECOMPUTE_OF_ATTR)
        if of is None:
            continue
        of = _constant_string(of)
        original = producer.get(of)
        if original is not None and len(original["outputs"]) == len(n["outputs"]):
            found.update(zip(n["outputs"], original["outputs"]))
        else:
            found[n["outputs"][0]] = of
    return found


def _replacements(gm, nodes, graph_outputs):
    """What graph-opt's rewrites made each fx value into: {X: Y} where every
    reader of X reads Y in the rewritten graph (cse merged X into Y,
    canonicalize folded X to Y). Readers are matched by name and operand
    position; checkpoint's recomputations count as reading what they
    recompute. A value read as two different ones is an Error."""
    by_name = {n.name: n for n in gm.graph.nodes}
    recompute_of = _recomputed_values(nodes)

    def original(name):
        while name in recompute_of:
            name = recompute_of[name]
        return name

    found = {}

    def note(old, new_name, where):
        new = by_name.get(new_name)
        if new is None or new is old:
            return
        if found.setdefault(old, new) is not new:
            raise Error(f"graph-opt's rewrite reads '{old.name}' as both "
                        f"'{found[old].name}' and '{new_name}' ({where})")

    for n in nodes:
        if n["attributes"].get(_C.RECOMPUTE_OF_ATTR) is not None:
            continue
        fx_node = next((by_name[v] for v in n["outputs"] if v in by_name), None)
        if fx_node is None:
            continue
        if fx_node.target is operator.getitem:
            fx_node = fx_node.args[0]
        operands = _tensor_operands(fx_node)
        if len(operands) != len(n["operands"]):
            continue  # another operator now (reinplace): no operand pairs
        for old, new_name in zip(operands, n["operands"]):
            note(old, original(new_name), f"operand of '{fx_node.name}'")
    outputs = [o for o in _output_nodes(gm) if isinstance(o, torch.fx.Node)]
    for old, spec in zip(outputs, graph_outputs):
        note(old, original(spec["name"]), "a graph output")
    return found


def _apply_replacements(gm, found):
    for old, new in found.items():
        old.replace_all_uses_with(new)


def plan_joint(gm, num_fwd_outputs, pipeline=DEFAULT_PIPELINE, name="joint", activations=None):
    """Runs `pipeline` (made fit for fake inputs by compile_pipeline) on
    AOTAutograd's joint graph and returns graph-opt's Plan. The GraphModule
    is not changed."""
    import graph_opt  # the package's run_pipeline (reports loaded)

    gm, phases = _forward_first(gm, num_fwd_outputs)
    # AOTAutograd partitions under its FakeTensorMode: graph-opt's C++ library must not see
    # it (every tensor it makes would go through Python's fake dispatch, slowly).
    with _no_dispatch_modes():
        graph = from_fx(gm, phases=phases, name=name)
        result = graph_opt.run_pipeline(graph, compile_pipeline(pipeline,
                                                                activations=activations))
    nodes = graph.nodes
    recompute_of = _recomputed_values(nodes)
    defined_forward = {s["name"] for s in graph.inputs}
    for n in nodes:
        if n["phase"] == "forward":
            defined_forward.update(n["outputs"])
    saved = {v for n in nodes if n["phase"] != "forward" for v in n["operands"]
             if v in defined_forward}
    return Plan(saved=saved, recomputed=set(recompute_of.values()),
                backward={k for k, v in phases.items() if v == "backward"},
                replaced={old.name: new.name
                          for old, new in _replacements(gm, nodes, graph.outputs).items()},
                report=result["reports"].get("checkpoint", {}),
                statistics=result["statistics"])


def _tag(gm, plan):
    """graph-opt's choice as torch's checkpoint tags on (a copy of) the joint graph:
    a recomputed forward value MUST_RECOMPUTE, every other forward node
    MUST_SAVE (torch saves it where backward needs it, and never recomputes
    it), every backward node MUST_RECOMPUTE (torch computes it in backward,
    as graph-opt does, even when it does not depend on the tangents)."""
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is operator.getitem:  # one of a multi-output node's results
            parent = n.args[0]
            if (parent.name in plan.backward or n.name in plan.recomputed
                    or parent.name in plan.recomputed):
                n.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            continue
        if n.name in plan.backward:
            n.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            continue
        recomputed = n.name in plan.recomputed or any(
            u.target is operator.getitem and u.name in plan.recomputed for u in n.users)
        n.meta["recompute"] = (CheckpointPolicy.MUST_RECOMPUTE if recomputed
                               else CheckpointPolicy.MUST_SAVE)


def _is_rng_state(node):
    """An RNG state torch's partitioner saves for a random operator it recomputes."""
    run_and_save = torch._prims.rng_prims.run_and_save_rng_state
    return node.target is run_and_save or (
        node.target is operator.getitem and node.args[0].target is run_and_save)


def _saved_by_torch(fw_module, num_fwd_outputs):
    """The values torch's forward half hands to backward: its outputs after
    the forward's own, tensors only (not SymInts, not RNG states)."""
    outs = _output_nodes(fw_module)[num_fwd_outputs:]
    return {n.name for n in outs if isinstance(n, torch.fx.Node)
            and isinstance(n.meta.get("val"), torch.Tensor) and not _is_rng_state(n)}


def _viewed(node):
    """The node a view reads its storage from (its schema says the result
    aliases that argument without writing it), or None."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None or len(schema.returns) != 1:
        return None
    alias = schema.returns[0].alias_info
    if alias is None or alias.is_write:
        return None
    for arg, value in zip(schema.arguments, node.args):
        if arg.alias_info is not None and set(arg.alias_info.before_set) & set(
                alias.before_set) and isinstance(value, torch.fx.Node):
            return value
    return None


def _storage_root(node):
    while (base := _viewed(node)) is not None:
        node = base
    return node


def _nbytes(node):
    val = node.meta.get("val") if node is not None else None
    if not isinstance(val, torch.Tensor):
        return 0
    return val.untyped_storage().nbytes()


def _rng_state_bytes(node):
    """An RNG state's size: its fake tensor's may be symbolic; the generator's is not."""
    device = node.meta["val"].device
    state = torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()
    return state.numel() * state.element_size()


def _recomputed_whole(node):
    """A result of a multi-output operator graph-opt recomputes (for one of
    its results, or a random operator it replays from the saved mask): torch
    recomputes the operator itself, random ones from a saved RNG state
    (functionalize_rng_ops), and so saves none of its results."""
    if node.target is not operator.getitem:
        return False
    parent = node.args[0]
    return parent.meta.get("recompute") == CheckpointPolicy.MUST_RECOMPUTE


def _check_saved(plan, torch_saved, joint):
    """The storages of activations torch saves against those graph-opt planned
    to keep, views resolved to the storage they view (torch saves a view's
    base or the view, graph-opt's plan keeps storages); placeholders apart
    (parameters and inputs are there anyway). A difference is a PlanMismatch
    naming the values."""
    def storages(names, planned):
        roots = {}
        for name in names:
            node = joint[name]
            if planned and _recomputed_whole(node):
                continue
            root = _storage_root(node)
            if root.op != "placeholder":
                roots[root.name] = root
        return roots
    mine, theirs = storages(plan.saved, True), storages(torch_saved, False)
    if mine.keys() == theirs.keys():
        return
    extra = sorted(theirs.keys() - mine.keys())
    missing = sorted(mine.keys() - theirs.keys())

    def listing(names):
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        return f"{shown} ({sum(_nbytes(joint[n]) for n in names)} bytes)"
    parts = []
    if extra:
        parts.append(f"torch also saves {listing(extra)}")
    if missing:
        parts.append(f"torch does not save {listing(missing)}")
    raise PlanMismatch("the saved set torch built differs from graph-opt's plan: "
                       + "; ".join(parts))


@functools.lru_cache(maxsize=None)
def _implementation_hash():
    """The package's Python files and its C++ extension: a plan depends on both."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") or name.startswith("_C."):
            h.update(name.encode())
            with open(os.path.join(here, name), "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def _warn_fallback(reason):
    _STATS.fallbacks += 1
    _STATS.reasons.append(reason)
    warnings.warn(f"graph-opt: {reason}; torch's default partitioner partitions this graph "
                  "instead (graph_opt.compile.stats() counts these)", RuntimeWarning,
                  stacklevel=3)


class GraphOptPartitioner(CustomPartitionerFn):
    """torch._inductor.config.custom_partitioner_fn = GraphOptPartitioner(...):
    graph-opt's recomputation plan, built into halves by torch's partitioner.
    See the module's docstring and docs/TorchCompile.md."""

    def __init__(self, pipeline=DEFAULT_PIPELINE, strict=False, memory_budget=None,
                 check_saved=True):
        if memory_budget is not None and not 0.0 <= memory_budget <= 1.0:
            raise Error(f"memory_budget={memory_budget}: a share in [0, 1], as "
                        "torch._functorch.config.activation_memory_budget")
        self.pipeline = pipeline
        self.strict = strict
        self.memory_budget = memory_budget
        self.check_saved = check_saved
        # a bad pipeline is an error now, not at the first compile
        compile_pipeline(pipeline, activations=None if memory_budget is None else 0)

    def uuid(self):
        from . import __version__
        return ("graph-opt", __version__, _implementation_hash(), self.pipeline, self.strict,
                self.memory_budget, self.check_saved)

    def __call__(self, gm, joint_inputs, **kwargs):
        import time
        start = time.perf_counter()
        try:
            try:
                fw, bw, record = self._partition(gm, joint_inputs, kwargs)
            finally:
                _STATS.planning_seconds += time.perf_counter() - start
        except Exception as e:
            if self.strict:
                raise
            reason = f"{type(e).__name__}: {e}".splitlines()[0]
            _warn_fallback(f"graph-opt could not partition a joint graph of "
                           f"{sum(1 for n in gm.graph.nodes if n.op == 'call_function')} "
                           f"nodes ({reason})")
            return min_cut_rematerialization_partition(gm, joint_inputs, **kwargs)
        _STATS.graphs += 1
        _STATS.plans.append(record)
        return fw, bw

    @staticmethod
    def _torch_saved_bytes(gm, joint_inputs, kwargs):
        """The activation bytes (distinct storages, inputs apart) torch's own partition of
        the joint graph saves without a budget: the 1.0 of its activation_memory_budget."""
        ref = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
        for old, new in zip(gm.graph.nodes, ref.graph.nodes):
            new.meta = dict(old.meta)
        joint = {n.name: n for n in ref.graph.nodes}
        with _functorch_config.patch(activation_memory_budget=1.0):
            fw, _ = min_cut_rematerialization_partition(ref, joint_inputs, **kwargs)
        roots = {_storage_root(joint[n]) for n in _saved_by_torch(fw, kwargs["num_fwd_outputs"])}
        return sum(_nbytes(r) for r in roots if r.op != "placeholder")

    def _partition(self, gm, joint_inputs, kwargs):
        num_fwd_outputs = kwargs["num_fwd_outputs"]
        # Work on a copy: torch's partitioner rewrites the joint graph in place, and a
        # failure here must leave the original for the fallback.
        work = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
        for old, new in zip(gm.graph.nodes, work.graph.nodes):
            new.meta = dict(old.meta)
        activations = None
        if self.memory_budget is not None:
            activations = int(self.memory_budget * self._torch_saved_bytes(
                gm, joint_inputs, kwargs))
        plan = plan_joint(work, num_fwd_outputs, self.pipeline, activations=activations)
        by_name = {n.name: n for n in work.graph.nodes}
        _apply_replacements(work, {by_name[a]: by_name[b] for a, b in plan.replaced.items()})
        _tag(work, plan)
        joint = {n.name: n for n in work.graph.nodes}
        # graph-opt's plan alone decides: no knapsack on top of it.
        with _functorch_config.patch(activation_memory_budget=1.0):
            fw, bw = min_cut_rematerialization_partition(work, joint_inputs, **kwargs)
        saved = _saved_by_torch(fw, num_fwd_outputs)
        if self.check_saved:
            _check_saved(plan, saved, joint)
        storages = {_storage_root(joint[n]) for n in saved}
        storages = {r for r in storages if r.op != "placeholder"}
        rng_states = [n for n in _output_nodes(fw)[num_fwd_outputs:]
                      if isinstance(n, torch.fx.Node) and _is_rng_state(n)]
        record = {
            "nodes": sum(1 for n in gm.graph.nodes if n.op == "call_function"),
            "saved": sorted(saved),
            # what the forward keeps for backward beyond its inputs: activations (distinct
            # storages) and the RNG states of recomputed random operators
            "saved_bytes": sum(_nbytes(r) for r in storages)
            + sum(_rng_state_bytes(n) for n in rng_states),
            "activation_bytes": sum(_nbytes(r) for r in storages),
            "rng_states": len(rng_states),
            "activations_bound": activations,
            "recomputed": sorted(plan.recomputed),
            "checkpoint": {k: plan.report.get(k) for k in (
                "budget_unmet", "predicted_peak_bytes", "nodes_added")
                if k in plan.report},
        }
        return fw, bw, record


def rewrite_inference(gm, pipeline=DEFAULT_PIPELINE):
    """Runs `pipeline` (checkpoint left out) on a graph without backward and
    applies what it merged and folded (cse, canonicalize) to `gm`, in place;
    dead nodes are removed. Returns the number of values replaced."""
    pipe = compile_pipeline(pipeline, inference=True)
    if not pipe:
        return 0
    import graph_opt
    with _no_dispatch_modes():
        graph = from_fx(gm, name="inference")
        graph_opt.run_pipeline(graph, pipe)
    found = _replacements(gm, graph.nodes, graph.outputs)
    _apply_replacements(gm, found)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return len(found)


def partitioner(pipeline=DEFAULT_PIPELINE, strict=False, memory_budget=None):
    """A torch._inductor CustomPartitionerFn running `pipeline`; set it as
    torch._inductor.config.custom_partitioner_fn. With `memory_budget` (a share,
    as torch._functorch.config.activation_memory_budget), every checkpoint
    entry bounds the saved activations to that share of what torch's own
    partition of the graph saves, the reference torch's budget has: at the
    same share both systems are held to the same bytes."""
    return GraphOptPartitioner(pipeline, strict=strict, memory_budget=memory_budget)


def _boxed_nop(gm, example_inputs):
    from torch._dynamo.backends.debugging import boxed_nop
    return boxed_nop(gm, example_inputs)


class _Backend:
    """torch.compile(model, backend=graph_opt.backend(...))."""

    def __init__(self, pipeline, inner, strict, memory_budget):
        if inner not in ("inductor", "eager"):
            raise Error(f"backend: inner={inner!r}; one of 'inductor', 'eager'")
        self.partitioner = GraphOptPartitioner(pipeline, strict=strict,
                                               memory_budget=memory_budget)
        self.inner = inner

    def _inference(self, gm):
        """An inference graph through the pipeline; on failure, as it is."""
        nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function")
        try:
            replaced = rewrite_inference(gm, self.partitioner.pipeline)
        except Exception as e:
            if self.partitioner.strict:
                raise
            _warn_fallback(f"graph-opt could not take an inference graph "
                           f"({type(e).__name__}: {e})".splitlines()[0])
            return
        _STATS.inference_graphs += 1
        _STATS.inference.append({"nodes": nodes, "replaced": replaced, "nodes_after": sum(
            1 for n in gm.graph.nodes if n.op == "call_function")})

    def __call__(self, gm, example_inputs, **kwargs):
        if self.inner == "inductor":
            from torch._inductor.compile_fx import compile_fx, compile_fx_inner

            def inner_compile(graph, inputs, **kw):
                if kw.get("is_inference"):
                    self._inference(graph)
                return compile_fx_inner(graph, inputs, **kw)
            with torch._inductor.config.patch(custom_partitioner_fn=self.partitioner):
                return compile_fx(gm, example_inputs, inner_compile=inner_compile, **kwargs)
        from torch._dynamo.backends.common import aot_autograd

        def inference_compiler(graph, inputs):
            self._inference(graph)
            return _boxed_nop(graph, inputs)
        return aot_autograd(
            fw_compiler=_boxed_nop, bw_compiler=_boxed_nop,
            inference_compiler=inference_compiler,
            partition_fn=functools.partial(self.partitioner, compiler="inductor"),
            keep_inference_input_mutations=True,
        )(gm, example_inputs, **kwargs)


def backend(pipeline=DEFAULT_PIPELINE, inner="inductor", strict=False, memory_budget=None):
    """A torch.compile backend: AOTAutograd, graph-opt's partitioner running
    `pipeline` (memory_budget as partitioner()'s), then Inductor
    (inner="inductor") or the graphs as they are (inner="eager", torch's
    aot_eager with graph-opt's partition). Inference graphs go through the
    pipeline (rewrite_inference) and the inner compiler."""
    return _Backend(pipeline, inner, strict, memory_budget)
