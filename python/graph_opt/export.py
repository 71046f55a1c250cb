"""A user's own model to the .pt2 graph-opt reads: the training step or the inference graph.

    import graph_opt
    def loss_fn(model, x, y):
        return torch.nn.functional.cross_entropy(model(x), y)
    graph_opt.export_training_step(model, loss_fn, (x, y), "step.pt2")

The same code exports the model zoo (tools/export/export_model.py, the exporter of the zoo's
models in tools/zoo). See docs/Importing.md.
"""
import contextlib
import os
import tempfile

import torch

from ._C import Error
from .fx import module_type_name, tensor_attribute
from .step_call import captured_tensors, flat_step, reading

__all__ = ["TrainingStep", "export_inference", "export_training_step", "joint_program",
           "untie_shared_parameters"]


class TrainingStep(torch.nn.Module):
    """forward(*inputs) = (loss_fn(model, *inputs),): the module whose joint
    forward+backward graph is the training step. Its `model` attribute holds the
    user's model, so parameter names are "model.<name>"; module paths in the graph
    are the model's own. Tensors loss_fn reads that are neither its arguments nor the
    model's (step_call.captured_tensors: labels it closes over) are this module's buffers
    ``loss_fn_tensor_<i>``, which loss_fn reads in their place while the step runs, so
    that torch.export traces them as inputs (left as they are, they stayed real tensors
    in the traced graph, and AOTAutograd failed on them)."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        owned = {id(t) for t in [*model.parameters(), *model.buffers()]}
        self._captured = [c for c in captured_tensors(loss_fn) if id(c.tensor) not in owned]
        for i, c in enumerate(self._captured):
            self.register_buffer(f"loss_fn_tensor_{i}", c.tensor)

    def forward(self, *inputs):
        lifted = [getattr(self, f"loss_fn_tensor_{i}") for i in range(len(self._captured))]
        with reading(self._captured, lifted):
            return (self.loss_fn(self.model, *inputs),)


def untie_shared_parameters(model):
    """Give every alias of a shared Parameter its own Parameter (a clone, same values).

    The joint export gives one gradient per graph input; a Parameter reachable under two
    names (tied embeddings) is one input with two uses in torch.export's signature, and
    ``_export_forward_backward`` fails on it ("Found a parameter that did not receive a
    gradient"). After this call the names are independent Parameters that start equal and
    get separate gradients. Returns ``[[alias, original], ...]``."""
    first_name = {}
    untied = []
    for name, p in list(model.named_parameters(remove_duplicate=False)):
        if id(p) not in first_name:
            first_name[id(p)] = name
            continue
        owner_path, _, attr = name.rpartition(".")
        owner = model.get_submodule(owner_path) if owner_path else model
        setattr(owner, attr, torch.nn.Parameter(p.detach().clone(), requires_grad=p.requires_grad))
        untied.append([name, first_name[id(p)]])
    if hasattr(model, "config") and untied:
        # Keep transformers from re-tying them should anything call tie_weights().
        try:
            model.config.tie_word_embeddings = False
        except Exception:
            pass
    return untied


def drop_parameter(model, name):
    owner_path, _, attr = name.rpartition(".")
    owner = model.get_submodule(owner_path) if owner_path else model
    if attr not in owner._parameters:
        raise RuntimeError(f"cannot drop parameter {name}: it is not a parameter of "
                           f"{type(owner).__name__} (dropped already?)")
    delattr(owner, attr)


def module_prefix(root, sub):
    """The FQN prefix of submodule ``sub`` inside ``root`` ("model." for TrainingStep)."""
    for name, m in root.named_modules():
        if m is sub:
            return name + "." if name else ""
    raise AssertionError("model is not a submodule of its train-step wrapper")


def unused_parameters(ep):
    """FQNs of parameter inputs of ``ep`` that no node reads."""
    users = {n.name: len(n.users) for n in ep.graph.nodes if n.op == "placeholder"}
    return {spec.target for spec in ep.graph_signature.input_specs
            if spec.kind.name == "PARAMETER" and users.get(spec.arg.name, 1) == 0}


def is_backward_op(op):
    name = op.name() if hasattr(op, "name") else str(op)
    base = name.split("::")[-1].split(".")[0]
    return base.endswith(("_backward", "_backward_data"))


def _forward_decompositions_that_break_backward():
    """Core ATen decompositions of forward operators whose results differ from the operator's
    where its fused backward reads them. AOTAutograd differentiates the operator with its own
    derivative formula and traces only its forward through the decomposition, so the backward
    is fed what the decomposition returns."""
    aten = torch.ops.aten
    return {
        # torch 2.11's decomposition returns the attention weights [N, H, L, S] as its second
        # result, where the operator returns the logsumexp [N, H, L] that
        # _scaled_dot_product_flash_attention_for_cpu_backward reads: every gradient through
        # the attention came out wrong, silently (a Hugging Face T5's, whose relative
        # position bias is SDPA's attn_mask).
        aten._scaled_dot_product_flash_attention_for_cpu.default,
    }


def backward_decompositions(decompose_backward=False):
    """The decomposition table of the joint export: core ATen, without the backward
    operators' own decompositions unless ``decompose_backward``, and without those of
    ``_forward_decompositions_that_break_backward``."""
    from torch._decomp import core_aten_decompositions
    broken = _forward_decompositions_that_break_backward()
    table = {op: fn for op, fn in core_aten_decompositions().items() if op not in broken}
    if decompose_backward:
        return table
    return {op: fn for op, fn in table.items() if not is_backward_op(op)}


def _stack_relative_to(stack, prefix):
    """An nn_module_stack with paths relative to the user's model (the training-step
    wrapper's ``prefix``, "model.", taken off; the wrapper itself becomes the root "")
    and module types as names (fx.module_type_name)."""
    out = {}
    for key, (path, ty) in stack.items():
        if path.startswith(prefix):
            path = path[len(prefix):]
        elif path + "." == prefix:
            path = ""
        out[key] = (path, module_type_name(ty))
    return out


def _attribute_gradient_sum(node):
    """A backward node that differentiates no forward node (autograd's sum of the gradients
    of a tensor used twice, as a residual connection's input) gets the innermost module
    that encloses the modules of all its operands: the common prefix of their stacks
    (`layer4.0` for the sum of `layer4.0.relu`'s and `layer4.0.downsample.0`'s gradients).
    Only for two or more operands that all carry a stack; otherwise it stays unattributed."""
    stacks = [a.meta.get("nn_module_stack") for a in node.all_input_nodes]
    if len(stacks) < 2 or not all(stacks):
        return
    common = list(stacks[0].items())
    for stack in stacks[1:]:
        items = list(stack.items())
        n = 0
        while n < min(len(common), len(items)) and common[n][1][0] == items[n][1][0]:
            n += 1
        common = common[:n]
    if common:
        node.meta["nn_module_stack"] = dict(common)


def export_joint(ep, step, model, train_args, decompose_backward=False):
    """The joint forward+backward program of ``ep`` (``torch.export.export(step)``, its
    output 0 the loss), with module paths on every node.

    AOTAutograd's ``aot_export_joint_with_descriptors`` traces ``ep.module()`` (on the eager
    module it records no module stacks) with ``_record_nn_module_stack``: forward nodes get
    ``nn_module_stack``, backward nodes ``fwd_nn_module_stack``, the stack of the forward
    node they differentiate, which becomes their ``nn_module_stack`` here (the serializer
    keeps only that one). Its inputs and outputs carry descriptors, mapped to the graph
    signature ``_export_forward_backward`` writes: parameters, buffers and user inputs;
    buffer mutations, the loss and one gradient per parameter. Its ``tangents_1`` input,
    the loss's incoming gradient, becomes ``full_like(loss, 1)``, what
    ``_export_forward_backward`` computes. The graph is otherwise the one
    ``_export_forward_backward`` makes (same decompositions, detach nodes removed); see
    docs/Importing.md, "Module paths on training graphs". A gradient sum, which
    differentiates no forward node, gets the module enclosing its operands'
    (``_attribute_gradient_sum``)."""
    try:
        from torch._functorch._aot_autograd import descriptors as D
        from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
        from torch.export.experimental import _remove_detach_pass
        from torch.export.graph_signature import (ExportGraphSignature, InputKind, InputSpec,
                                                  OutputKind, OutputSpec, TensorArgument)
    except ImportError as e:  # not the case on the pinned torch 2.11.0
        raise RuntimeError(f"the joint export needs AOTAutograd internals that torch "
                           f"{torch.__version__} lacks ({e})") from e
    prefix = module_prefix(step, model)
    specs = ep.graph_signature.input_specs
    names = {s.target: s.arg.name for s in specs if s.target}
    persistent = {s.target: s.persistent for s in specs if s.kind == InputKind.BUFFER}
    user_names = [s.arg.name for s in specs if s.kind == InputKind.USER_INPUT]
    with contextlib.ExitStack() as stack:
        joint = aot_export_joint_with_descriptors(
            stack, ep.module(), train_args,
            decompositions=backward_decompositions(decompose_backward),
            _record_nn_module_stack=True)
        gm = joint.graph_module
    graph = gm.graph
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs, descs = list(out_node.args[0]), out_node.meta["desc"]
    losses = [o for o, d in zip(outs, descs) if isinstance(d, D.PlainAOTOutput)]
    if len(losses) != 1:
        raise RuntimeError(f"the training step returns {len(losses)} outputs; the joint "
                           "export wants one, the loss")
    loss = losses[0]

    inputs, tangent = [], None
    for node in [n for n in graph.nodes if n.op == "placeholder"]:
        d = node.meta["desc"]
        if isinstance(d, D.TangentAOTInput):
            tangent = node
            continue
        if isinstance(d, D.ParamAOTInput):
            spec = InputSpec(InputKind.PARAMETER, TensorArgument(names[d.target]), d.target)
        elif isinstance(d, D.BufferAOTInput):
            spec = InputSpec(InputKind.BUFFER, TensorArgument(names[d.target]), d.target,
                             persistent=persistent[d.target])
        elif isinstance(d, D.PlainAOTInput):
            spec = InputSpec(InputKind.USER_INPUT, TensorArgument(user_names[d.idx]), None)
        else:
            raise RuntimeError(f"the joint graph's input {node.name} is {d}, which the "
                               "exporter does not map to the graph signature")
        node.name = node.target = spec.arg.name  # the names torch.export gave them
        inputs.append(spec)
    if tangent is None:
        raise RuntimeError("the joint graph has no tangent input for the loss")
    constants = _lift_tensor_constants(gm, inputs, ep.constants, InputKind, InputSpec,
                                       TensorArgument)
    with graph.inserting_after(loss):
        one = graph.call_function(torch.ops.aten.full_like.default, (loss, 1),
                                  {"pin_memory": False, "memory_format": torch.preserve_format})
    one.meta["val"] = loss.meta["val"]
    tangent.replace_all_uses_with(one)
    graph.erase_node(tangent)

    mutations, rest = [], []
    for out, d in zip(outs, descs):
        if out is None:
            continue
        arg = TensorArgument(out.name)
        if isinstance(d, D.PlainAOTOutput):
            rest.insert(0, (out, OutputSpec(OutputKind.LOSS_OUTPUT, arg, None)))
        elif isinstance(d, D.GradAOTOutput) and isinstance(d.grad_of, D.ParamAOTInput):
            rest.append((out, OutputSpec(OutputKind.GRADIENT_TO_PARAMETER, arg,
                                         d.grad_of.target)))
        elif isinstance(d, D.InputMutationAOTOutput) and isinstance(d.mutated_input,
                                                                    D.BufferAOTInput):
            mutations.append((out, OutputSpec(OutputKind.BUFFER_MUTATION, arg,
                                              d.mutated_input.target)))
        elif isinstance(d, D.GradAOTOutput):
            continue  # a user input's gradient: _export_forward_backward returns none either
        else:
            raise RuntimeError(f"the joint graph's output {out} is {d}, which the exporter "
                               "does not map to the graph signature")
    order = mutations + rest
    out_node.args = (tuple(o for o, _ in order),)
    graph._codegen = torch.fx.graph.CodeGen()  # flat inputs and outputs, as torch.export's
    in_backward = False
    for node in graph.nodes:
        module_stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
        if module_stack:
            node.meta["nn_module_stack"] = _stack_relative_to(module_stack, prefix)
        elif in_backward and node.op == "call_function":
            _attribute_gradient_sum(node)
        in_backward |= node is one
    signature = ExportGraphSignature(input_specs=inputs, output_specs=[s for _, s in order])
    gm.recompile()
    _remove_detach_pass(gm, signature)
    return ep._update(gm, signature, constants=constants)


def _lift_tensor_constants(gm, inputs, constants, InputKind, InputSpec, TensorArgument):
    """Tensors AOTAutograd left as attributes of the joint module (a constant made while
    tracing: Hugging Face Llama's rotary or mask tensors), which torch.export's verifier
    refuses as ``get_attr``: each becomes a lifted tensor constant, an input placed before
    the user inputs as torch.export places them, with its spec added to ``inputs``.
    Returns the program's constants with them."""
    graph = gm.graph
    constants = dict(constants)
    first_user = next((n for n, spec in zip([n for n in graph.nodes if n.op == "placeholder"],
                                            inputs) if spec.kind == InputKind.USER_INPUT), None)
    position = sum(1 for spec in inputs if spec.kind != InputKind.USER_INPUT)
    for node in [n for n in graph.nodes if n.op == "get_attr"]:
        value = tensor_attribute(gm, node)
        if value is None:
            continue
        target = f"lifted_tensor_{len(constants)}"
        while target in constants:
            target += "_"
        if first_user is not None:
            with graph.inserting_before(first_user):
                lifted = graph.placeholder(f"c_{target}")
        else:
            with graph.inserting_before(next(n for n in graph.nodes if n.op != "placeholder")):
                lifted = graph.placeholder(f"c_{target}")
        lifted.meta.update(node.meta)
        node.replace_all_uses_with(lifted)
        graph.erase_node(node)
        delattr(gm, node.target)
        constants[target] = value
        inputs.insert(position, InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(lifted.name),
                                          target))
        position += 1
    return constants


def joint_program(step, model, train_args, decompose_backward=False, untie=True):
    """The joint program of ``step`` (a module whose forward returns ``(loss,)``; ``model``
    its submodule) and the untied pairs ``[[alias, original, note?], ...]``.

    With ``untie`` (the default) shared Parameters are untied first
    (``untie_shared_parameters``); an alias forward never reads once untied (BERT-MLM's
    ``cls.predictions.bias``) would have no gradient, so it is dropped and the step exported
    again, noted on the first pair that names it."""
    step.train()
    untied = untie_shared_parameters(model) if untie else []
    ep = torch.export.export(step, tuple(train_args))
    if drop_unread_aliases(step, model, untied, train_args, ep):
        ep = torch.export.export(step, tuple(train_args))
    return export_joint(ep, step, model, tuple(train_args), decompose_backward), untied


def drop_unread_aliases(step, model, untied, train_args, ep=None):
    """Drops each name of the untied pairs (``untie_shared_parameters``) that ``step``'s
    forward never reads on ``train_args`` (``ep``: its export, made here when not given),
    noting it on the first pair that names it; True when any was dropped. The module then
    holds the parameters its joint export takes as inputs, no more (T5's ``shared.weight``,
    62.75 MiB at t5-small, is read only through the embed_tokens aliases)."""
    if not untied:
        return False
    if ep is None:
        ep = torch.export.export(step, tuple(train_args))
    prefix = module_prefix(step, model)
    unused = unused_parameters(ep)
    dropped = set()
    for entry in untied:
        for name in entry[:2]:
            if prefix + name in unused and name not in dropped:
                drop_parameter(model, name)
                dropped.add(name)
                entry.append(f"dropped {name}: unused by forward once untied")
    return bool(dropped)


def _save_checked(ep, path):
    """torch.export.save to a temporary beside ``path``, read back by graph-opt's importer
    (which verifies the graph), then renamed into place: a failure leaves nothing."""
    from ._C import Graph
    path = os.fspath(path)
    if not path.endswith(".pt2"):
        raise Error(f"{path}: the output of an export is a .pt2 archive")
    out_dir = os.path.dirname(os.path.abspath(path))
    tmp_dir = tempfile.mkdtemp(prefix=".export-", dir=out_dir)
    try:
        tmp = os.path.join(tmp_dir, os.path.basename(path))
        torch.export.save(ep, tmp)
        Graph.load(tmp)  # graph-opt reads it, or says why not
        os.replace(tmp, os.path.abspath(path))
    finally:
        for leftover in os.listdir(tmp_dir):
            os.unlink(os.path.join(tmp_dir, leftover))
        os.rmdir(tmp_dir)


@contextlib.contextmanager
def _export_errors(what, model):
    """torch's export errors as graph_opt.Error naming the call and the model."""
    try:
        yield
    except Error:
        raise
    except Exception as e:
        hint = ""
        if "convert all Tensors to FakeTensors" in str(e):
            # a real tensor in the traced step: read from somewhere graph-opt does not lift
            hint = ("the step reads a tensor that is neither an input nor the model's (one "
                    "loss_fn reaches through an object or a container: graph-opt lifts only "
                    "those it closes over directly, module-level ones and a partial's); pass "
                    "it in example_inputs, or register it as a buffer of the model. ")
        raise Error(f"{what}: exporting {type(model).__name__} failed: {hint}"
                    f"{type(e).__name__}: {e}") from e


def export_training_step(model, loss_fn, example_inputs, path=None, decompose_backward=False,
                         untie=False):
    """The training step of ``model`` as a joint forward+backward program, written to
    ``path`` (a .pt2 graph-opt reads) when given; returns the ExportedProgram.

    ``loss_fn(model, *args, **kwargs)`` returns the loss (a scalar tensor), e.g.
    ``lambda m, x, y: F.cross_entropy(m(x), y)``; None: the model's output is the loss (a
    scalar, or a Hugging Face output's ``.loss``). ``example_inputs``: a tuple of
    positional arguments, a dict of keyword arguments (a Hugging Face batch) or
    ``(args, kwargs)``; tensors loss_fn closes over are lifted (step_call.py, the same
    convention as graph_opt.profile's and auto_checkpoint's). The model is put in training
    mode.
    Every node carries its module path (``layer3.1.conv2``; backward nodes their forward
    module's) and backward operators stay fused unless ``decompose_backward``. Shared
    Parameters (a language-model head tied to its embedding) stay tied: torch.export
    gives each name an input, AOTAutograd reads one of them and returns the whole tied
    gradient for it, and graph-opt's importer ties the inputs, which share storage
    (``tied`` in the .gir); ``untie=True`` gives each alias its own copy and gradient, as
    the zoo exporter does. The archive
    is checked by reading it back with graph-opt's importer before it is renamed into
    place. Errors are graph_opt.Error."""
    if not isinstance(model, torch.nn.Module):
        raise Error(f"export_training_step: model is a {type(model).__name__}, not an nn.Module")
    loss_fn, flat = flat_step(loss_fn, example_inputs, "export_training_step")
    step = TrainingStep(model, loss_fn)
    with _export_errors("export_training_step", model):
        ep, _ = joint_program(step, model, flat, decompose_backward, untie)
    if path is not None:
        _save_checked(ep, path)
    return ep


def export_inference(model, example_inputs, path=None):
    """``torch.export.export(model.eval(), example_inputs)``, written to ``path`` (checked
    as export_training_step's) when given; returns the ExportedProgram."""
    with _export_errors("export_inference", model):
        ep = torch.export.export(model.eval(), tuple(example_inputs))
    if path is not None:
        _save_checked(ep, path)
    return ep


def _load_factory(spec):
    """"package.module:factory" -> the callable."""
    import importlib
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise Error(f"{spec!r}: expected package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise Error(f"{spec}: cannot import {module_name}: {type(e).__name__}: {e}") from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise Error(f"{spec}: {module_name} has no callable {attr!r}")
    return factory


def main(argv=None):
    """python -m graph_opt export package.module:factory -o OUT.pt2 [--eval]

    The factory takes no arguments and returns (model, loss_fn, example_inputs), as
    export_training_step takes them; with --eval, (model, example_inputs) or the same
    triple (loss_fn unused). The current directory is on the import path."""
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="python -m graph_opt export", description=main.__doc__
                                     .splitlines()[0])
    parser.add_argument("factory", help="package.module:factory returning (model, loss_fn, "
                        "example_inputs)")
    parser.add_argument("-o", "--output", required=True, help="the .pt2 to write")
    parser.add_argument("--eval", action="store_true", help="the inference graph, not the "
                        "training step")
    parser.add_argument("--decompose-backward", action="store_true",
                        help="decompose the fused backward operators into core ATen")
    parser.add_argument("--untie", action="store_true",
                        help="give every alias of a shared Parameter its own copy and gradient")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.getcwd())
    try:
        made = _load_factory(args.factory)()
        if not isinstance(made, (tuple, list)) or len(made) not in (2, 3):
            raise Error(f"{args.factory}() returned {type(made).__name__}; expected (model, "
                        "loss_fn, example_inputs)" + (" or (model, example_inputs)"
                                                      if args.eval else ""))
        if args.eval:
            model, example_inputs = made[0], made[-1]
            export_inference(model, example_inputs, args.output)
        else:
            if len(made) != 3:
                raise Error(f"{args.factory}() returned 2 values; a training step needs "
                            "(model, loss_fn, example_inputs)")
            model, loss_fn, example_inputs = made
            export_training_step(model, loss_fn, example_inputs, args.output,
                                 decompose_backward=args.decompose_backward,
                                 untie=args.untie)
    except Error as e:
        print(f"graph_opt export: error: {e}", file=sys.stderr)
        return 2
    print(f"graph_opt export: wrote {args.output}")
    return 0
