"""torch.fx <-> graph-opt's IR, in memory.

Both directions go through torch.export's own serialization schema, the one
the C++ .pt2 importer and writer speak: `from_fx` serializes the GraphModule
with torch's GraphModuleSerializer and hands the JSON to the importer;
`to_fx` has the C++ writer produce the JSON and deserializes it with torch's
ExportedProgramDeserializer, so every node carries meta["val"] (a fake
tensor of its declared type) and torch.export's verifier accepts the result.
See docs/Python.md.
"""
import contextlib
import operator

import torch
from torch._export.serde import schema as _schema
from torch._export.serde import serialize as _serde
from torch.export import graph_signature as _sig

from . import _C
from ._C import Error
from .program_json import Unsupported, exported_program, program_json

__all__ = ["from_fx", "to_fx", "to_exported_program"]

# Where to_fx leaves the signature and the weights, so that from_fx(to_fx(g))
# needs neither roles nor weights.
SIGNATURE_KEY = "graph_opt_signature"
WEIGHTS_KEY = "graph_opt_weights"

_INPUT_KINDS = {
    "parameter": _sig.InputKind.PARAMETER,
    "buffer": _sig.InputKind.BUFFER,
    "constant": _sig.InputKind.CONSTANT_TENSOR,
    "user_input": _sig.InputKind.USER_INPUT,
}
_OUTPUT_KINDS = {
    "user_output": _sig.OutputKind.USER_OUTPUT,
    "loss": _sig.OutputKind.LOSS_OUTPUT,
    "gradient": _sig.OutputKind.GRADIENT_TO_PARAMETER,
    "input_gradient": _sig.OutputKind.GRADIENT_TO_USER_INPUT,
    "buffer_mutation": _sig.OutputKind.BUFFER_MUTATION,
}


def _role(entry, kinds, what, index):
    """("parameter", "fc.weight") or "user_input" -> (kind, target)."""
    kind, target = (entry, None) if isinstance(entry, str) else tuple(entry)
    if kind not in kinds:
        raise Error(f"from_fx: {what} {index}: unknown role {kind!r} (one of {', '.join(kinds)})")
    if target is None and kind not in ("user_input", "user_output", "loss"):
        raise Error(f"from_fx: {what} {index}: role {kind!r} needs a target name")
    return kinds[kind], target


def _signature(gm, input_roles, output_roles):
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    result = output_node.args[0]
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    input_roles = input_roles or ["user_input"] * len(placeholders)
    output_roles = output_roles or ["user_output"] * len(outputs)
    if len(input_roles) != len(placeholders):
        raise Error(f"from_fx: {len(input_roles)} input roles for {len(placeholders)} placeholders")
    if len(output_roles) != len(outputs):
        raise Error(f"from_fx: {len(output_roles)} output roles for {len(outputs)} outputs")
    inputs = []
    for i, (node, entry) in enumerate(zip(placeholders, input_roles)):
        kind, target = _role(entry, _INPUT_KINDS, "input", i)
        inputs.append(_sig.InputSpec(kind, _sig.TensorArgument(name=node.name), target,
                                     persistent=True if kind == _sig.InputKind.BUFFER else None))
    outs = []
    for i, (node, entry) in enumerate(zip(outputs, output_roles)):
        if node is None:
            continue  # AOTAutograd's gradient of an input that needs none: left out
        kind, target = _role(entry, _OUTPUT_KINDS, "output", i)
        if not isinstance(node, torch.fx.Node):
            raise Error(f"from_fx: output {i} is {node!r}, not a tensor node "
                        "(graph-opt's outputs are tensors)")
        outs.append(_sig.OutputSpec(kind, _sig.TensorArgument(name=node.name), target))
    return _sig.ExportGraphSignature(input_specs=inputs, output_specs=outs)


def _check_supported(gm):
    """What the serializer would reject less clearly, named by node: first what
    the graph is made of (calls of modules, methods, Python functions), then
    the types."""
    def where(node):
        return f"from_fx: node '{node.name}' ({node.op} {node.target})"
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_method"):
            raise Error(f"{where(node)}: {node.op} is not supported; give an ATen-level graph "
                        "(torch.export or AOTAutograd output), where every call is an operator")
        if node.op == "call_function" and not isinstance(
                node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)) \
                and node.target is not operator.getitem:
            # (higher-order operators: the importer inlines those it can and names the others)
            raise Error(f"{where(node)}: only operator overloads (torch.ops.*) are supported, "
                        f"not {node.target!r}")
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "call_function"):
            continue
        val = node.meta.get("val")
        for v in val if isinstance(val, (tuple, list)) else [val]:
            if isinstance(v, torch.Tensor) and any(
                    not isinstance(s, int) for s in list(v.shape) + list(v.stride())):
                raise Error(f"{where(node)}: symbolic shape {tuple(v.shape)}; graph-opt needs "
                            "static shapes")
            if isinstance(v, torch.SymInt):
                raise Error(f"{where(node)}: a symbolic integer; graph-opt needs static shapes")
        if node.op == "placeholder" and not isinstance(val, torch.Tensor):
            raise Error(f"{where(node)}: no meta['val'] tensor; graph-opt needs the "
                        "placeholder's type (trace with fake tensors: torch.export or "
                        "AOTAutograd)")


def tensor_attribute(gm, node):
    """The tensor a get_attr node reads (a dotted target walks submodules), else None."""
    if node.op != "get_attr":
        return None
    value = gm
    for part in str(node.target).split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, torch.Tensor) else None


def _lift_tensor_attributes(gm, signature):
    """Tensors a GraphModule reads as attributes (get_attr: a constant made while tracing,
    such as the ``torch.tensor(-1e4)`` of a masking ``where``, which AOTAutograd leaves as
    ``_tensor_constant0``) as graph inputs with the role "constant", as torch.export lifts
    them: a copy of the module in which each is a placeholder of the get_attr node's own
    name (so a plan names it as the module does), placed before the first user input, with
    its spec in the signature. Returns (module, signature, {target: tensor}); the module
    itself where it reads none. A target that is also an input's is an Error."""
    attrs = [(n, tensor_attribute(gm, n)) for n in gm.graph.nodes]
    attrs = [(n, t) for n, t in attrs if t is not None]
    if not attrs:
        return gm, signature, {}
    specs = list(signature.input_specs)
    taken = {s.target for s in specs if s.target}
    for node, _ in attrs:
        if str(node.target) in taken:
            raise Error(f"from_fx: node '{node.name}' (get_attr {node.target}): the attribute's "
                        "name is also an input's target")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    position = next((i for i, s in enumerate(specs) if s.kind == _sig.InputKind.USER_INPUT),
                    len(specs))
    graph, env = torch.fx.Graph(), {}
    for i, node in enumerate(placeholders + [None]):
        if i == position:
            for attr, tensor in attrs:
                env[attr] = graph.placeholder(attr.name)
                env[attr].meta.update(attr.meta)
                env[attr].meta.setdefault("val", tensor)
        if node is not None:
            env[node] = graph.node_copy(node, lambda x: env[x])
    for node in gm.graph.nodes:
        if node not in env:
            env[node] = graph.node_copy(node, lambda x: env[x])
    lifted = [_sig.InputSpec(_sig.InputKind.CONSTANT_TENSOR, _sig.TensorArgument(attr.name),
                             str(attr.target)) for attr, _ in attrs]
    signature = _sig.ExportGraphSignature(input_specs=specs[:position] + lifted + specs[position:],
                                          output_specs=signature.output_specs)
    return (torch.fx.GraphModule(gm, graph), signature,
            {str(attr.target): tensor for attr, tensor in attrs})


def _declare_python_tags(gm):
    """Operators tagged random in Python only (torch._prims and Inductor's prims, such as
    prims::inductor_seeds, set OpOverload.tags there; their C++ registration lacks the tag):
    declared random to the C++ library, so that its passes never merge, clone or recompute
    them."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and \
                torch.Tag.nondeterministic_seeded in target.tags:
            _C.declare_random_operator(target._schema.name)


def module_type_name(ty):
    """torch.export writes a module's type as its name; dynamo (torch.compile)
    and AOTAutograd record the type itself, which the serializer refuses."""
    return ty if isinstance(ty, str) else f"{ty.__module__}.{ty.__qualname__}"


def _stack_with_type_names(stack):
    return {key: (path, module_type_name(ty)) for key, (path, ty) in stack.items()}


@contextlib.contextmanager
def _metadata_for_serializer(gm, phases=None):
    """torch's serializer keeps nn_module_stack, stack_trace and custom and
    drops seq_nr and fwd_nn_module_stack: for the time of the serialization,
    a backward node without a module stack gets its forward node's (types
    as names), and seq_nr goes into custom, as does the node's phase where
    `phases` gives one (the key graph-opt's own .pt2 writer uses). The
    module's metadata is restored after."""
    phases = phases or {}
    saved = []
    try:
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            meta = node.meta
            saved.append((meta, "nn_module_stack" in meta, meta.get("nn_module_stack"),
                          "custom" in meta, meta.get("custom")))
            stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack")
            if stack:
                meta["nn_module_stack"] = _stack_with_type_names(stack)
            if meta.get("seq_nr") is not None:
                meta["custom"] = {**(meta.get("custom") or {}), "seq_nr": meta["seq_nr"]}
            if node.name in phases:
                meta["custom"] = {**(meta.get("custom") or {}),
                                  _C.PT2_CUSTOM_KEY: {"phase": phases[node.name]}}
        yield
    finally:
        for meta, had_stack, stack, had_custom, custom in saved:
            for key, had, value in (("nn_module_stack", had_stack, stack),
                                    ("custom", had_custom, custom)):
                if had:
                    meta[key] = value
                else:
                    meta.pop(key, None)


def _flat_example_inputs(example_inputs):
    if example_inputs is None:
        return []
    args, kwargs = example_inputs if (isinstance(example_inputs, tuple) and len(example_inputs) == 2
                                      and isinstance(example_inputs[1], dict)) \
        else (example_inputs, {})
    flat, _ = torch.utils._pytree.tree_flatten((args, kwargs))
    return [t for t in flat if isinstance(t, torch.Tensor)]


def _torch_program_json(gm, signature, module_call_graph, verifiers):
    """The program JSON through torch's serializer: what program_json leaves to it."""
    try:
        serialized = _serde.GraphModuleSerializer(signature, module_call_graph).serialize(gm)
    except Exception as e:  # the serializer's own errors name the node
        raise Error(f"from_fx: torch's serializer refused the graph: {e}") from e
    program = exported_program(serialized, verifiers)
    return _serde._to_json_bytes(program).decode("utf-8")


def from_fx(module, input_roles=None, output_roles=None, weights=None, example_inputs=None,
            name=None, phases=None, type_check="cpu"):
    """An ATen-level GraphModule (or an ExportedProgram) as a graph_opt.Graph.

    For an ExportedProgram the roles, weights and example inputs are its own.
    For a GraphModule, `input_roles` gives one entry per placeholder and
    `output_roles` one per output: "user_input" / "user_output" / "loss", or
    (role, target) for "parameter", "buffer", "constant", "gradient",
    "input_gradient", "buffer_mutation"; by default every input is a user
    input and every output a user output, or, for a GraphModule from to_fx,
    what its signature says. `weights` maps targets to tensors (inputs
    without one get seeded stand-ins when the graph runs). Node metadata
    becomes attributes: `module` (from nn_module_stack, else
    fwd_nn_module_stack), `source` (stack_trace), `seq_nr`, and every entry
    of meta["custom"]. An output that is None (AOTAutograd's gradient of an
    input that needs none) is left out. `phases` maps node names to
    "forward", "backward" or "optimizer" (in graph order, phases may only
    advance); by default a joint graph's backward starts after its "loss"
    output. `type_check`: the kernels the declared result types are checked
    against (docs/Importing.md): "cpu" runs each node's CPU kernel on stand-ins
    (about one unplanned step of the model), "meta" asks the meta kernels
    (no time; for a graph that is planned, not run: graph_opt's partitioner).
    Unsupported input raises graph_opt.Error naming the node."""
    if isinstance(module, torch.export.ExportedProgram):
        ep = module
        gm, signature = ep.graph_module, ep.graph_signature
        weights = {**ep.state_dict, **ep.constants, **(weights or {})}
        if example_inputs is None:
            example_inputs = ep.example_inputs
        module_call_graph = ep.module_call_graph
        verifiers = [v.dialect for v in ep.verifiers]
    elif isinstance(module, torch.fx.GraphModule):
        gm = module
        stored = gm.meta.get(SIGNATURE_KEY)
        signature = stored if stored is not None and input_roles is None \
            and output_roles is None else _signature(gm, input_roles, output_roles)
        weights = {**gm.meta.get(WEIGHTS_KEY, {}), **(weights or {})}
        module_call_graph = []
        verifiers = ["TRAINING"]
    else:
        raise Error(f"from_fx: expected a torch.fx.GraphModule or an ExportedProgram, "
                    f"got {type(module).__name__}")
    gm, signature, constants = _lift_tensor_attributes(gm, signature)
    weights.update(constants)
    _check_supported(gm)
    _declare_python_tags(gm)
    with _metadata_for_serializer(gm, phases):
        try:
            text = program_json(gm, signature, module_call_graph, verifiers)
        except Unsupported:
            text = _torch_program_json(gm, signature, module_call_graph, verifiers)
    tensors = {k: v for k, v in weights.items() if isinstance(v, torch.Tensor)}
    return _C.Graph._from_program(text, tensors, name or "fx",
                                  _flat_example_inputs(example_inputs), type_check)


def to_exported_program(graph, stand_in_weights=False):
    """The graph as a torch.export.ExportedProgram (weights, constants and
    example inputs included), through torch's deserializer. For a joint
    training graph, run `ep.graph_module` on flat inputs: torch 2.11's
    `ep.module()` does not take joint programs. A weight the graph was read
    without (a .gir file) is an error, unless `stand_in_weights`: then it is
    a seeded stand-in, as graph-opt runs such a graph (for uses that read
    only shapes, such as torch's partitioner)."""
    text, weights, constants, example_inputs = _C._program(graph, stand_in_weights)
    for spec in graph.inputs:
        if spec["role"] != "user_input" and spec["role"] != "optimizer_state" and \
                spec["target"] not in weights and spec["target"] not in constants:
            raise Error(f"to_exported_program: {spec['role']} '{spec['target']}' (input "
                        f"%{spec['name']}) has no weight; an ExportedProgram holds its weights "
                        "(give them to from_fx)")
    serialized = _serde._bytes_to_dataclass(_schema.ExportedProgram, text)
    state_dict = {}
    params = {s["target"] for s in graph.inputs if s["role"] == "parameter"}
    for k, v in weights.items():
        state_dict[k] = torch.nn.Parameter(v, requires_grad=v.requires_grad) if k in params else v
    return _serde.ExportedProgramDeserializer().deserialize(
        serialized, state_dict, constants, (tuple(example_inputs), {}))


def to_fx(graph, stand_in_weights=False):
    """The graph as a torch.fx.GraphModule whose placeholders are every graph
    input in order (parameters, buffers and constants included) and whose
    output is the tuple of graph outputs; every node carries meta["val"], and
    meta["custom"] holds graph-opt's attributes and phase.
    gm.meta["graph_opt_signature"] and gm.meta["graph_opt_weights"] keep the
    roles and the weights for from_fx. `stand_in_weights` as for
    to_exported_program."""
    ep = to_exported_program(graph, stand_in_weights)
    gm = ep.graph_module
    gm.meta[SIGNATURE_KEY] = ep.graph_signature
    gm.meta[WEIGHTS_KEY] = {**ep.state_dict, **ep.constants}
    return gm
