"""graph-opt's plan on AOTAutograd's joint graph, as torch's checkpoint tags.

graph_opt.compile's partitioner uses these: the pipeline made fit for fake
inputs (compile_pipeline), the joint graph imported forward first and planned
(plan_joint), the plan applied as node.meta["recompute"] tags (tag_joint), and
the saved set torch builds checked against it (check_saved). See
docs/TorchCompile.md.
"""
import dataclasses
import operator
import re

import torch
from torch._functorch.partitioners import _must_be_in_forward
from torch.utils.checkpoint import CheckpointPolicy

from . import _C
from ._C import Error
from .fx import from_fx
from .symbolic import is_size_node

DEFAULT_PIPELINE = "repeat{cse,canonicalize,dce},checkpoint{activations=30%}"


def passes_inside_compile():
    """(the passes that run inside torch.compile, {pass: why it may not}), as each pass
    declares of itself in its C++ class (PassTraits.h, `insideCompile`): passes that only read
    the graph or rewrite it in ways that carry over to the joint graph (cse's merges and
    canonicalize's folds as replacements of one value by another, checkpoint's plan as tags),
    each covered by the torch.compile tests (python/tests/test_compile.py), and why a pass
    that could run on fake inputs is refused (reinplace: its in-place rewrite cannot be
    carried to the joint graph). The first maps each name to whether it is a test pass;
    compile_pipeline's messages list the others."""
    allowed, refused = {}, {}
    for p in _C.registered_passes():
        if p["inside_compile"]:
            allowed[p["name"]] = p["hidden"]
        elif p["not_inside_compile"]:
            refused[p["name"]] = p["not_inside_compile"]
    return allowed, refused


class PlanMismatch(Error):
    """torch's partitioner built another saved set than graph-opt planned."""


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


def check_peak(peak):
    """`peak` (bytes: an int, or a string with a unit, "6GiB", "700MiB", "8GB") as the text
    checkpoint{peak=} takes; Error naming it where it is not a positive amount of bytes.
    Strings go through the pass options' own parser (MemoryAmount)."""
    if isinstance(peak, bool) or not isinstance(peak, (int, str)):
        raise Error(f"peak={peak!r}: bytes, as an int or a string with a unit (\"6GiB\")")
    if isinstance(peak, int) and peak <= 0:
        raise Error(f"peak={peak}: a positive number of bytes")
    _C._bytes_option("peak", str(peak))  # raises where it is not bytes
    return "".join(str(peak).split())  # as written, without spaces: "700 MiB" -> "700MiB"


def with_peak(pipeline, peak, closest=False):
    """`pipeline` with every checkpoint entry (in repeat{} too) bounded by peak=`peak`
    (check_peak's text) in place of its budget=, peak= and activations= (the default
    pipeline's activations=30% would otherwise recompute under a peak that needs none);
    with `closest`, unmet=closest too (the closest plan where the peak is out of reach);
    planner=torch, which takes no peak, is refused naming the entry."""
    return with_bound(pipeline, f"peak={peak}", closest)


def with_bound(pipeline, bound, closest=False):
    """with_peak's rewrite with any one bound option (`bound`: "peak=...",
    "activations=BYTES") in place of the entries' budget=, peak= and activations=."""
    out = []
    for part in _split_top(pipeline):
        name, options = _entry(part)
        if name == "repeat":
            out.append(f"repeat{{{with_bound(options or '', bound, closest)}}}")
            continue
        if name != "checkpoint":
            out.append(part)
            continue
        opts = _split_top(options) if options else []
        if any(o.replace(" ", "") == "planner=torch" for o in opts):
            raise Error(f"pipeline entry '{part}': planner=torch has no peak bound (its one "
                        "bound is activation_memory_budget); peak= goes with graph-opt's "
                        "planners")
        # the stated bound is the bound: shares of the activations the entry had go too
        dropped = ("budget", "peak", "activations") + (("unmet",) if closest else ())
        opts = [o for o in opts if o.split("=", 1)[0].strip() not in dropped]
        opts.append(bound)
        if closest:
            opts.append("unmet=closest")
        out.append(f"checkpoint{{{','.join(opts)}}}")
    return ",".join(out)


def compile_pipeline(text, inference=False, activations=None, peak=None, closest=False):
    """The pipeline as it runs inside torch.compile, where the joint graph's
    inputs are fake tensors: checkpoint plans from FLOP counts
    (cost=flops,measure=false, added where not given; cost=inductor and cost=db
    also plan without running the graph), and passes that run
    the graph or change what it computes are refused, naming the entry. For
    an inference graph (`inference`), checkpoint entries are left out:
    without backward there is nothing to recompute. `activations` (bytes),
    where given, replaces every checkpoint entry's activations= bound; `peak`
    (check_peak's text or bytes), where given, every entry's bounds (with_peak, `closest`
    as there); `activations` with `closest`, every entry's bounds as with_bound."""
    if peak is not None:
        text = with_peak(text, peak, closest)
    elif closest and activations is not None:  # the one bound, the closest plan past it
        text, activations = with_bound(text, f"activations={int(activations)}", True), None
    out = []
    for part in _split_top(text):
        name, options = _entry(part)
        allowed, refused = passes_inside_compile()
        listed = ", ".join(sorted(n for n, hidden in allowed.items() if not hidden))
        if name in refused:
            raise Error(f"pipeline entry '{part}': '{name}' is not run inside torch.compile: "
                        f"{refused[name]}; allowed: {listed}")
        if name not in allowed:
            raise Error(f"pipeline entry '{part}': '{name}' cannot run inside torch.compile "
                        f"(the graph's inputs are fake tensors, and only a recomputation plan "
                        f"reaches torch's partitioner); allowed: {listed}")
        if name == "repeat":
            nested = compile_pipeline(options or "", inference, activations)
            if nested:
                out.append(f"repeat{{{nested}}}")
            continue
        opts = _split_top(options) if options else []
        keys = {o.split("=", 1)[0].strip(): o.split("=", 1)[1].strip() if "=" in o else ""
                for o in opts}
        if name == "checkpoint":
            if keys.get("cost", "flops") not in ("flops", "inductor", "db"):
                raise Error(f"pipeline entry '{part}': cost={keys['cost']} runs the graph; "
                            "inside torch.compile checkpoint plans with cost=flops (the "
                            "default), cost=inductor or cost=db")
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
    graph-opt's rewritten graph has it, the generator states of replayed
    random operators apart. `rng_states`: those states (values graph-opt made,
    which the joint graph does not have: torch saves its own RNG state for each
    random operator it recomputes, functionalize_rng_ops). `recomputed`:
    forward values backward makes again. `backward`: the nodes graph-opt counts as backward (those
    _forward_first does not put in forward). `replaced`: {value: the value its
    readers read instead} (cse, canonicalize). `report`: checkpoint's JSON
    report."""
    saved: set
    recomputed: set
    backward: set
    replaced: dict
    report: dict
    rng_states: set = dataclasses.field(default_factory=set)


def output_nodes(gm):
    """The graph's outputs in order (None where AOTAutograd has no gradient)."""
    result = next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0]
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _ancestors(nodes):
    seen, stack = set(), [n for n in nodes if isinstance(n, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def no_dispatch_modes():
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
    outputs = output_nodes(gm)
    seeds = outputs[:num_fwd_outputs] + [
        n for n in gm.graph.nodes if n.op == "call_function" and _must_be_in_forward(n)]
    forward = _ancestors(seeds)
    body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    # (a size input nothing reads: symbolic.concrete_joint's, whose sizes are numbers now)
    order = ([n for n in gm.graph.nodes if n.op == "placeholder"
              and (n.users or isinstance(n.meta.get("val"), torch.Tensor))]
             + [n for n in body if n in forward] + [n for n in body if n not in forward]
             + [n for n in gm.graph.nodes if n.op == "output"])
    graph, env = torch.fx.Graph(), {}
    for n in order:
        env[n] = graph.node_copy(n, lambda x: env[x])
    phases = {n.name: "forward" if n in forward else "backward"
              for n in body if n.op == "call_function"}
    return torch.fx.GraphModule(gm, graph), phases


def _recomputed_values(report):
    """{a recomputation's result: the value it makes again}, from the checkpoint report's
    "recomputations" (the pass hands it over as a value; empty without a checkpoint run)."""
    return {out: of for r in report.get("recomputations", ())
            for out, of in zip(r["outputs"], r["of"])}


def replacements(gm, replaced, recompute_of=None):
    """What graph-opt's rewrites made each fx value into: {X: Y} where every reader of X
    reads Y in the rewritten graph, from run_pipeline's "replaced" (cse merged X into Y,
    canonicalize folded X to Y; the passes record each as they make it). A replacement
    that is no value of `gm` (a constant canonicalize made) is left out: X keeps its own
    node there. Where Y is a recomputation (`recompute_of`, {a recomputation's result:
    the value it makes again}, from _recomputed_values), X is read as what it recomputes."""
    by_name = {n.name: n for n in gm.graph.nodes}
    recompute_of = recompute_of or {}

    def original(name):
        while name in recompute_of:
            name = recompute_of[name]
        return name

    found = {}
    for old_name, new_name in replaced.items():
        old, new = by_name.get(old_name), by_name.get(original(new_name))
        if old is not None and new is not None and new is not old:
            found[old] = new
    return found


def apply_replacements(gm, found):
    for old, new in found.items():
        old.replace_all_uses_with(new)


@dataclasses.dataclass
class JointImport:
    """A joint graph as graph-opt imports it, once per partition: `forward_first`
    (the GraphModule _forward_first makes; its node names are the joint graph's),
    `phases` ({name: phase}) and `graph` (the IR graph; plan_joint plans a clone).
    `prepared`: run_prepared's cache of the graph as the passes before checkpoint
    leave it."""
    forward_first: torch.fx.GraphModule
    phases: dict
    graph: object
    prepared: dict = dataclasses.field(default_factory=dict)


def run_prepared(graph, pipeline, prepared):
    """Runs `pipeline` on a clone of `graph`; returns (the clone, run_pipeline's result).
    The entries before its first checkpoint entry run once per `prepared` (a dict the
    caller keeps, {those entries' text: (the graph after them, what they replaced)}): a
    bound search's rounds differ only in checkpoint's bound, so those passes do not run
    again each round. The result's "replaced" is the whole pipeline's."""
    import graph_opt  # the package's run_pipeline (reports loaded)

    before, rest = _split_at_checkpoint(pipeline)
    base, replaced = graph, {}
    if before:
        if before not in prepared:
            clone = graph.clone()
            prepared[before] = (clone, graph_opt.run_pipeline(clone, before)["replaced"])
        base, replaced = prepared[before]
    work = base.clone()
    result = graph_opt.run_pipeline(work, rest)
    result["replaced"] = compose_replacements(replaced, result["replaced"])
    return work, result


def compose_replacements(first, then):
    """{value: what it is read as} after two runs: `first`'s, each followed through `then`
    (a value first merged into y, y then folded to z, is read as z), and `then`'s own."""
    out = {old: then.get(new, new) for old, new in first.items()}
    out.update(then)
    return {old: new for old, new in out.items() if old != new}


def _split_at_checkpoint(text):
    """(the pipeline's entries before its first checkpoint entry, the rest): what runs
    before checkpoint does not depend on the bound checkpoint plans for. ("", text)
    where a checkpoint entry is nested (in a repeat{...}) or there is none."""
    parts = _split_top(text)
    for i, part in enumerate(parts):
        name, _ = _entry(part)
        if name == "checkpoint":
            return ",".join(parts[:i]), ",".join(parts[i:])
        if "checkpoint" in part:
            break
    return "", text


def import_joint(gm, num_fwd_outputs, name="joint"):
    """The joint graph imported forward first (JointImport). Its declared types are
    checked against the meta kernels (from_fx's type_check="meta"), which run nothing:
    the graph is planned here, never run. The check still mends what FakeTensor declared
    inconsistently (views of split results without their storage offset, which changed
    plans when left); the CPU check ran every node of the step (1.2 s of GPT-2's import)
    and gave the same IR on the zoo's joint graphs (docs/TorchCompile.md)."""
    forward_first, phases = _forward_first(gm, num_fwd_outputs)
    # AOTAutograd partitions under its FakeTensorMode: graph-opt's C++ library must not see
    # it (every tensor it makes would go through Python's fake dispatch, slowly).
    with no_dispatch_modes():
        graph = from_fx(forward_first, phases=phases, name=name, type_check="meta")
    return JointImport(forward_first, phases, graph)


def plan_joint(gm, num_fwd_outputs, pipeline=DEFAULT_PIPELINE, name="joint", activations=None,
               peak=None, closest=False, imported=None):
    """Runs `pipeline` (made fit for fake inputs by compile_pipeline) on
    AOTAutograd's joint graph and returns graph-opt's Plan. The GraphModule
    is not changed. `imported`: the joint graph's JointImport where the caller
    plans it more than once (a clone of its graph is planned), else it is imported."""
    imported = imported or import_joint(gm, num_fwd_outputs, name)
    gm, phases = imported.forward_first, imported.phases
    pipe = compile_pipeline(pipeline, activations=activations, peak=peak, closest=closest)
    with no_dispatch_modes():
        graph, result = run_prepared(imported.graph, pipe, imported.prepared)
    nodes = graph.nodes
    report = result["reports"].get("checkpoint", {})
    recompute_of = _recomputed_values(report)
    # A tensor constant (a get_attr from_fx lifted) is no saved value: torch's backward
    # half reads the attribute itself.
    defined_forward = {s["name"] for s in graph.inputs if s["role"] != "constant"}
    for n in nodes:
        if n["phase"] == "forward":
            defined_forward.update(n["outputs"])
    saved = {v for n in nodes if n["phase"] != "forward" for v in n["operands"]
             if v in defined_forward}
    # A random operator graph-opt replays keeps the generator's state (graphopt::rng_state,
    # whatever the operator): no joint value, and torch keeps its own in its place.
    rng_states = {v for n in nodes if n["op"] == _C.RNG_STATE_OP for v in n["outputs"]}
    return Plan(saved=saved - rng_states, rng_states=rng_states & saved,
                recomputed=set(recompute_of.values()),
                backward={k for k, v in phases.items() if v == "backward"},
                replaced={old.name: new.name for old, new in
                          replacements(gm, result["replaced"], recompute_of).items()},
                report=report)


def _keep_what_torch_cannot_split(gm, plan):
    """Where the plan saves a result of a multi-output node that is also a forward output
    (or a view of one) while it recomputes the node for its other results, torch cannot
    follow: it recomputes that result with the node and saves nothing of it (a layer norm's
    output that a DDP bucket graph, or Hugging Face's checkpointed BERT, returns, read by
    backward through a select). The plan keeps that node instead: it is
    no longer recomputed, its results backward reads are saved, and its operands are saved
    only where something else backward runs still reads them. Changes `plan` in place;
    returns the names no longer recomputed."""
    by_name = {n.name: n for n in gm.graph.nodes}

    def read_in_backward(node):
        return any(u.name in plan.backward or u.name in plan.recomputed for u in node.users)
    kept_total = set()
    changed = True
    while changed:
        changed = False
        for v in sorted(plan.saved):
            if v not in by_name:
                continue
            root = storage_root(by_name[v])
            if root.target is not operator.getitem or \
                    not any(u.op == "output" for u in root.users):
                # torch saves a view of a recomputed single result, and a result of a
                # recomputed node that is not a forward output, as planned
                continue
            node = root.args[0]
            results = [g for g in node.users if g.target is operator.getitem]
            kept = {node.name, root.name} | {g.name for g in results}
            if not kept & plan.recomputed:
                continue
            plan.recomputed -= kept
            kept_total |= kept
            changed = True
            for g in results:
                if read_in_backward(g):
                    plan.saved.add(g.name)
            for operand in node.all_input_nodes:
                if operand.name in plan.saved and not read_in_backward(operand):
                    plan.saved.discard(operand.name)
    return kept_total


def tag_joint(gm, plan):
    """graph-opt's choice as torch's checkpoint tags on (a copy of) the joint graph, in
    place of the user's own checkpoint regions where it has them (user_checkpoint_nodes):
    a recomputed forward value MUST_RECOMPUTE, every other forward node
    MUST_SAVE (torch saves it where backward needs it, and never recomputes
    it), every backward node MUST_RECOMPUTE (torch computes it in backward,
    as graph-opt does, even when it does not depend on the tangents). Where torch cannot
    split what the plan splits, the plan is first made what torch can run
    (_keep_what_torch_cannot_split)."""
    _keep_what_torch_cannot_split(gm, plan)
    for n in gm.graph.nodes:
        # graph-opt's plan replaces the user's own checkpoint regions (torch.utils.checkpoint,
        # Hugging Face's gradient_checkpointing_enable()): their region ids would have
        # torch's partitioner save the boundary between two regions
        # (cleanup_recompute_tags), which graph-opt's plan may recompute.
        n.meta.pop("ac_graph_id", None)
        if n.op != "call_function" or is_size_node(n):  # sizes: torch's partitioner's own
            continue
        if n.target is operator.getitem:  # one of a multi-output node's results
            parent = n.args[0]
            if (parent.name in plan.backward or n.name in plan.recomputed
                    or parent.name in plan.recomputed):
                n.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            else:  # untagged, as its parent is saved (a user's region's tag goes)
                n.meta.pop("recompute", None)
            continue
        if n.name in plan.backward:
            n.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            continue
        recomputed = n.name in plan.recomputed or any(
            u.target is operator.getitem and u.name in plan.recomputed for u in n.users)
        n.meta["recompute"] = (CheckpointPolicy.MUST_RECOMPUTE if recomputed
                               else CheckpointPolicy.MUST_SAVE)


def user_checkpoint_nodes(gm):
    """How many nodes of the joint graph the user's own activation checkpointing tagged
    (torch.utils.checkpoint under torch.compile: a region id and a recompute policy)."""
    return sum(1 for n in gm.graph.nodes if "ac_graph_id" in n.meta)


def is_rng_state(node):
    """An RNG state torch's partitioner saves for a random operator it recomputes."""
    run_and_save = torch._prims.rng_prims.run_and_save_rng_state
    return node.target is run_and_save or (
        node.target is operator.getitem and node.args[0].target is run_and_save)


def check_memory_budget(memory_budget):
    """Raises Error unless `memory_budget` is a share as torch's own is."""
    if not 0.0 <= memory_budget <= 1.0:
        raise Error(f"memory_budget={memory_budget}: a share in [0, 1], as "
                    "torch._functorch.config.activation_memory_budget")


def torch_saved(gm, memory_budget, joint_inputs=None, **kwargs):
    """torch's own partition of the joint graph `gm` (changed: torch rewrites
    the graph it partitions) with activation_memory_budget = `memory_budget`:
    (the names of the values its forward saves, their activation bytes:
    distinct storages, graph inputs apart). `kwargs` as torch's partitioner
    takes them (num_fwd_outputs, static_lifetime_input_indices, ...)."""
    from unittest import mock

    from torch._functorch import config as functorch_config
    from torch._functorch import partitioners

    joint = {n.name: n for n in gm.graph.nodes}
    # torch takes its default partition, budget unapplied and nothing said,
    # when it finds no backward: check that its choice really ran.
    budgets = []
    choose = partitioners.choose_saved_values_set

    def observed(joint_graph, node_info, memory_budget=1):
        budgets.append(memory_budget)
        return choose(joint_graph, node_info, memory_budget=memory_budget)

    with functorch_config.patch(activation_memory_budget=memory_budget), \
            mock.patch.object(partitioners, "choose_saved_values_set", observed):
        fw, _ = partitioners.min_cut_rematerialization_partition(gm, joint_inputs, **kwargs)
    if not budgets:
        raise Error("torch's partitioner took its default partition without choosing the saved "
                    f"values at activation_memory_budget={memory_budget}: it found no backward "
                    "in the joint graph")
    if budgets != [memory_budget]:
        raise Error(f"torch's partitioner chose the saved values at {budgets}, not at "
                    f"activation_memory_budget={memory_budget}: a node's meta['memory_budget'] "
                    "overrides it")
    saved = saved_by_torch(fw, kwargs["num_fwd_outputs"])
    return saved, sum(nbytes(r) for r in activation_storages(joint[n] for n in saved))


def saved_by_torch(fw_module, num_fwd_outputs):
    """The values torch's forward half hands to backward: its outputs after
    the forward's own, tensors only (not SymInts, not RNG states, not the module's tensor
    constants, get_attr, which it holds all along whether handed over or not)."""
    outs = output_nodes(fw_module)[num_fwd_outputs:]
    return {n.name for n in outs if isinstance(n, torch.fx.Node) and n.op != "get_attr"
            and isinstance(n.meta.get("val"), torch.Tensor) and not is_rng_state(n)}


# A storage walk of its own, not graph-opt's AliasInfo, and why: the question is asked of
# torch's fx graphs, of values torch's partition saves (saved_by_torch, on the forward
# module torch built) and of values the saved-set check names, by fx node; the IR graph
# graph-opt planned is a different object (rewritten by cse and checkpoint, imported from a
# reordered copy), and its values do not stand for the nodes of torch's forward module. It
# reads only the schema's alias annotations (a view's result aliases one argument without
# writing it), as AliasInfo does for such nodes; in-place writes cannot occur here (the
# joint graph is functional, and reinplace is refused inside torch.compile).
def _aliased_argument(node):
    """The argument a view's results alias (its schema's alias annotations: its result,
    or each of its list of results as unbind's and split's, aliases that argument without
    writing it), or None."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None or not schema.returns:
        return None
    aliases = [r.alias_info for r in schema.returns]
    if any(a is None or a.is_write for a in aliases):
        return None
    sets = set().union(*(a.before_set for a in aliases))
    for arg, value in zip(schema.arguments, node.args):
        info = arg.alias_info
        if info is None or info.is_write or not isinstance(value, torch.fx.Node):
            continue
        # Tensor(a) -> Tensor(a); Tensor(a -> *) -> Tensor(a)[] (Python sees the list
        # return's annotation without its set, and the argument's flowing into "*")
        if set(info.before_set) & sets or (not sets and "*" in info.after_set):
            return value
    return None


def alias_source(node):
    """The node whose storage `node` views: a view's argument, and for one result of a
    multi-result view (getitem of unbind, split) the argument it views; None for a node
    with storage of its own (a multi-output operator's results are each their own)."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return _aliased_argument(node.args[0])
    return _aliased_argument(node)


def storage_root(node):
    while (base := alias_source(node)) is not None:
        node = base
    return node


def nbytes(node):
    val = node.meta.get("val") if node is not None else None
    if not isinstance(val, torch.Tensor):
        return 0
    return val.untyped_storage().nbytes()


def rng_state_bytes(node):
    """An RNG state's size: its fake tensor's may be symbolic; the generator's is not."""
    device = node.meta["val"].device
    state = torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()
    return state.numel() * state.element_size()


def _recomputed_by_torch(node):
    """A value torch is told to recompute, which it therefore never saves:
    - one graph-opt recomputes (MUST_RECOMPUTE) even where graph-opt's own
      backward also reads the original (a recomputed chain clones a free
      value such as an iota that graph-opt keeps for another reader): torch
      recomputes it for every backward reader;
    - a result of a multi-output operator graph-opt recomputes (for one of
      its results, or a random operator it replays from the saved mask):
      torch recomputes the operator itself, random ones from a saved RNG
      state (functionalize_rng_ops)."""
    if node.meta.get("recompute") == CheckpointPolicy.MUST_RECOMPUTE:
        return True
    return (node.target is operator.getitem
            and node.args[0].meta.get("recompute") == CheckpointPolicy.MUST_RECOMPUTE)


def activation_storages(nodes):
    """The distinct storages `nodes` hold, views resolved to what they view,
    graph inputs apart (parameters and inputs are there anyway)."""
    roots = {storage_root(n) for n in nodes}
    return {r for r in roots if r.op != "placeholder"}


def check_saved(plan, torch_saved, joint):
    """The storages of activations torch saves against those graph-opt planned
    to keep (activation_storages: torch saves a view's base or the view,
    graph-opt's plan keeps storages). A difference is a PlanMismatch naming
    the values."""
    unknown = sorted(n for n in plan.saved if n not in joint)
    if unknown:
        raise PlanMismatch(f"graph-opt's plan saves {', '.join(unknown[:8])}, which the joint "
                           "graph does not have (a value a pass made that torch cannot save)")
    mine = {r.name for r in activation_storages(
        joint[n] for n in plan.saved if not _recomputed_by_torch(joint[n]))}
    theirs = {r.name for r in activation_storages(joint[n] for n in torch_saved)}
    if mine == theirs:
        return
    extra, missing = sorted(theirs - mine), sorted(mine - theirs)

    def listing(names):
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        return f"{shown} ({sum(nbytes(joint[n]) for n in names)} bytes)"
    parts = []
    if extra:
        parts.append(f"torch also saves {listing(extra)}")
    if missing:
        parts.append(f"torch does not save {listing(missing)}")
    raise PlanMismatch("the saved set torch built differs from graph-opt's plan: "
                       + "; ".join(parts))
