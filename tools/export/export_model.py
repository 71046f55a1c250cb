#!/usr/bin/env python3
"""Export graph-opt's model zoo to ``.pt2`` archives with ``torch.export``.

The models come from the zoo package, tools/zoo (``zoo.MODELS``, ``zoo.build_model``: the
builders, their size presets and seeded inputs); this file is the exporter and its command
line, and the zoo does not import it. Two forms per model:

``--mode eval``
    The inference graph: ``torch.export.export(model.eval(), example_args)``. Models whose
    eager output is not a plain tensor (the transformers models return ``ModelOutput``
    objects) are wrapped in a module that returns the logits.

``--mode train``
    The joint training step: a wrapper module whose ``forward`` runs the model in training
    mode (dropout active, BatchNorm on batch statistics) and returns the loss
    (cross-entropy for classifiers, next-token / masked LM loss for GPT-2 / BERT-MLM). It is
    exported with ``torch.export.export`` and turned into one forward+backward graph by
    AOTAutograd's ``aot_export_joint_with_descriptors`` on ``ep.module()`` (graph_opt.export),
    which records every node's module: forward nodes their own, backward nodes the forward
    module they differentiate (``_export_forward_backward``, the earlier path, drops all node
    metadata). Its graph signature has parameters, buffers and user inputs as inputs, and as
    outputs: the buffer mutations (BatchNorm running statistics,
    ``OutputKind.BUFFER_MUTATION``), the loss (``LOSS_OUTPUT``) and one gradient per
    parameter (``GRADIENT_TO_PARAMETER``); the loss's incoming gradient is
    ``full_like(loss, 1)``. Module paths are relative to the user's model (the training-step
    wrapper's ``model.`` is taken off: ``layer3.1.conv2``).

    The joint export runs the core ATen decompositions except those of the backward
    operators (every ``aten::*_backward`` and ``*_backward_data`` overload in the table:
    ``native_batch_norm_backward``, ``threshold_backward``, ``native_layer_norm_backward``,
    ``gelu_backward``, ``_softmax_backward_data``, ``nll_loss_backward``, ...), which eager
    autograd runs as one fused kernel each. ``--decompose-backward`` decomposes them too, into
    a dozen elementwise ops and reductions apiece (ResNet-50: 479 ``mul`` and 213 ``sub``): the
    core ATen form. Both graphs compute the same step; the default is eager's own kernels,
    and fewer nodes. (``--keep-fused-backward``, the option before it was the default, is
    still accepted.)

Tied weights (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``; BERT-MLM's decoder
weight is the word embedding and its decoder bias is ``cls.predictions.bias``; Llama's
``lm_head.weight`` is ``model.embed_tokens.weight``; T5's ``shared.weight`` is also
``encoder.embed_tokens.weight``, ``decoder.embed_tokens.weight`` and ``lm_head.weight``) are a known
limitation of joint export: ``torch.export`` lifts one placeholder for the shared Parameter,
and ``_export_forward_backward`` then fails with "Found a parameter that did not receive a
gradient". In train mode the exporter therefore *unties* them before export: every alias
of a shared Parameter after the first gets its own ``nn.Parameter`` holding a clone of the
same initial values (see ``untie_shared_parameters``), and each copy gets its own gradient
(the training step is then that of the untied model: the two copies drift apart after the
first optimizer step). A Parameter with any number of aliases gives one pair per alias,
each naming the first name as the original. A name that forward never reads once untied
(BERT-MLM's ``cls.predictions.bias``, which is only read as ``cls.predictions.decoder.bias``;
T5's ``shared.weight``, read only through the embed_tokens modules) is removed instead, once,
since it would be a parameter without a gradient. The facts file lists the pairs under
``"untied"`` as ``[alias, original]`` or ``[alias, original, "dropped NAME: ..."]`` (the note
on the first pair that names the dropped parameter).
Eval exports keep the ties: there, ``torch.export`` lifts one placeholder per name (both
``PARAMETER`` inputs), and the archive's weights config points both names at one weight
file (see docs/Pt2ArchiveFormat.md, "Shared storage").

``--no-dropout``: every dropout probability of the text models' configs is 0 (BERT's
``hidden_dropout_prob``, ``attention_probs_dropout_prob`` and ``classifier_dropout``; GPT-2's
``resid_pdrop``, ``embd_pdrop``, ``attn_pdrop`` and ``summary_first_dropout``; T5's
``dropout_rate``; Llama has none), so their
training graph draws no random numbers and can be compared with eager PyTorch
(test/Inputs/make_eager_references.py); the other models have no dropout and are unchanged.
The exporter fails if the graph still has a random operator (``aten::native_dropout``; in
train mode any operator tagged ``nondeterministic_seeded``). The facts record
``"dropout": true|false``. ``zoo.build_for_facts(facts)`` rebuilds the exported module of a
facts file (same builder, sizes, config, seed, dropout setting, untied parameters).

Nothing is downloaded: torchvision models use ``weights=None`` and transformers models are
built from configs; all weights are random with a fixed seed (``--seed``, default 0), and
inputs and labels come from a separate seeded generator, so two runs give the same archive
contents.

Beside ``FILE.pt2`` the exporter writes ``FILE.facts.json``: what a C++ importer test must
match, read from the ExportedProgram (node counts, operator histogram, signature roles with
dtypes and shapes). ``num_nodes`` counts every ``call_function`` node of ``ep.graph``,
``operator.getitem`` included; ``getitem_nodes`` counts the getitems alone and
``num_op_nodes = num_nodes - getitem_nodes`` is the number of operator calls, which is
what ``models/model.json`` holds (the serializer folds getitems into the producer's
``outputs``; compare importer node counts with ``num_op_nodes``: a ``torch.export.load``
round trip adds getitems for ``None`` outputs, so Python's own count changes after
reloading). ``operators`` is keyed ``ns::name`` or ``ns::name.overload`` (``.default`` is
left out). Higher-order ops (``torch.ops.higher_order.*``, e.g. the
``wrap_with_set_grad_enabled`` of a ``@torch.no_grad()`` function in an eval graph) are
counted in ``higher_order_ops`` (name -> calls, bodies included); ``num_inlined_op_nodes``
and ``inlined_operators`` describe the graph as graph-opt imports it, with the body of each
``wrap_with_set_grad_enabled`` / ``wrap_with_autocast`` in place of the call (equal to
``num_op_nodes`` and ``operators`` when there is none).

TorchScript (``-o FILE.pt``): in eval mode the eval module is traced with
``torch.jit.trace`` on the example inputs (``--script``: ``torch.jit.script`` instead, for
models whose Python scripts: mlp, cnn, the ResNets); in train mode the training-step wrapper
(in train mode, shared parameters left tied) is traced on the training inputs (inputs plus
labels), returning the 0-dim loss instead of ``(loss,)``, so that
``torch.jit.load(FILE)(*inputs).backward()`` is one eager training step (forward, then
autograd's backward: the "eager PyTorch" baseline of the C++ benchmarks); its parameter and
buffer names are the .pt2's (``model.conv1.weight``) and their values the initial ones
(tracing runs the step; the BatchNorm statistics it moved are restored). The check after
writing runs that backward and requires a finite gradient for every parameter. A model whose
trace is not faithful (a TracerWarning: active dropout, size arithmetic) is refused; mlp, cnn
and the ResNets trace (the TracerWarning of train-mode BatchNorm's batch-size check, which can
only raise, is ignored). The module is saved with ``torch.jit.save`` and the extra file
``graphopt/input_types``, the forward inputs' types in the .gir type syntax
(``f32[2, 3, 32, 32], i64[8]``), which graph-opt's TorchScript importer reads because
TorchScript keeps no shapes. Beside ``FILE.pt`` goes ``FILE-ts.facts.json`` (``-ts`` so that
an eval ``.pt2`` and ``.pt`` of the same stem never share a facts file): ``model``,
``mode`` ("eval" or "train"), ``format`` ("torchscript"), ``method`` ("trace" or "script"),
``input_types``, ``parameters`` and ``buffers`` (``{"target", "dtype", "shape"}`` in
``named_parameters()`` / ``named_buffers()`` order), ``outputs`` (``{"dtype", "shape"}`` of
the tensors the saved module returns on the example inputs, tuples flattened), ``dropout``,
with dtypes written as .gir names (``f32``, ``i64``, ...). The text models (bert, bert-mlm,
gpt2) trace into graphs with size arithmetic that the importer does not lower; tracing them
is attempted, and a failure is reported as an export error (exit 1).

Usage:
    export_model.py --list
    export_model.py --model resnet18 --mode train --batch 2 --image-size 32 -o r18.pt2
    export_model.py --model gpt2 --mode eval --tiny -o gpt2.pt2
    export_model.py --model gpt2 --mode train --tiny --no-dropout -o gpt2-nodrop.pt2
    export_model.py --model cnn --mode eval --tiny -o cnn.pt            # traced TorchScript
    export_model.py --model cnn --mode eval --tiny --script -o cnn.pt   # scripted
    export_model.py --model resnet18 --mode train -o r18-train.pt      # traced training step
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import operator
import os
import sys
import tempfile
import time
import zipfile

# The model zoo is its own package, tools/zoo (it does not import the exporter).
_TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TOOLS_DIR not in sys.path:
    sys.path.insert(0, _TOOLS_DIR)
from zoo import (MODELS, Built, ModelSpec, Sizes, UsageError, build_model,  # noqa: E402
                 current_seed, dropout_enabled, graph_opt_export, resolve_sizes)

EXIT_OK = 0
EXIT_EXPORT_FAILED = 1
EXIT_USAGE = 2


def _torch():
    import torch

    return torch


# --------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------


def random_ops(graph, mode: str) -> list[str]:
    """Operators of ``graph`` that draw random numbers: ``aten::native_dropout`` always,
    and in train mode every op tagged ``nondeterministic_seeded`` (in eval graphs
    ``aten::dropout`` carries that tag but runs with train=False, an identity)."""
    torch = _torch()
    found = set()
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if node.target.name() == "aten::native_dropout" or (
            mode == "train" and torch.Tag.nondeterministic_seeded in node.target.tags
        ):
            found.add(_qualified_op_name(node.target))
    return sorted(found)


def export_program(spec: ModelSpec, built: Built, mode: str, decompose_backward: bool = False):
    """Returns (ExportedProgram, list of untied parameter pairs)."""
    torch = _torch()
    model = built.model
    if mode == "eval":
        module = built.eval_wrap(model.eval())
        ep = torch.export.export(module, built.eval_args)
        return ep, []

    # graph_opt.export, the code users export their own models with: untie shared
    # Parameters (dropping an alias forward never reads once untied), the joint graph with
    # module paths (docs/Importing.md).
    model.train()
    step = built.loss_wrap(model).train()
    return graph_opt_export().joint_program(step, model, built.train_args, decompose_backward)


def _qualified_op_name(target) -> str:
    torch = _torch()
    if isinstance(target, torch._ops.OpOverload):
        name = target._schema.name  # "aten::add"
        overload = target._overloadname
        return name if overload == "default" else f"{name}.{overload}"
    module = getattr(target, "__module__", None) or ""
    return f"{module}.{getattr(target, '__name__', repr(target))}"


def _tensor_meta(val) -> dict:
    torch = _torch()
    if isinstance(val, torch.Tensor):
        return {"dtype": str(val.dtype), "shape": [int(s) for s in val.shape]}
    if val is None:
        return {"dtype": None, "shape": None}
    return {"dtype": type(val).__name__, "shape": None, "value": repr(val)}


_INPUT_KIND = {
    "PARAMETER": "parameter",
    "BUFFER": "buffer",
    "USER_INPUT": "user_input",
    "CONSTANT_TENSOR": "constant_tensor",
    "CUSTOM_OBJ": "custom_obj",
    "TOKEN": "token",
}
_OUTPUT_KIND = {
    "USER_OUTPUT": "user_output",
    "LOSS_OUTPUT": "loss",
    "BUFFER_MUTATION": "buffer_mutation",
    "PARAMETER_MUTATION": "parameter_mutation",
    "GRADIENT_TO_PARAMETER": "gradient",
    "GRADIENT_TO_USER_INPUT": "gradient_to_user_input",
    "USER_INPUT_MUTATION": "user_input_mutation",
    "TOKEN": "token",
}


def _shared_storage_groups(ep) -> list[list[str]]:
    """Names in state_dict/constants that share one storage (one weight file)."""
    torch = _torch()
    groups: dict[tuple, list[str]] = {}
    for table in (ep.state_dict, ep.constants):
        for name, t in table.items():
            if isinstance(t, torch.Tensor):
                key = (t.untyped_storage().data_ptr(), t.dtype)
                groups.setdefault(key, []).append(name)
    return [names for names in groups.values() if len(names) > 1]


# The higher-order ops graph-opt's importer inlines, and the position of their body graph.
INLINED_HIGHER_ORDER = {"wrap_with_set_grad_enabled": 1, "wrap_with_autocast": 4}


def _inlined_operators(graph, owner, operators: dict, hops: dict) -> int:
    """Counts the operator calls of ``graph`` as graph-opt imports it: the body of each
    inlined higher-order wrapper (``INLINED_HIGHER_ORDER``) in place of the call, read
    recursively from ``owner`` (the GraphModule holding the body submodules). Adds to
    ``operators`` (keyed like the facts' ``operators``) and ``hops`` (higher-order op
    name -> calls, at any depth) and returns the number of operator calls."""
    torch = _torch()
    count = 0
    for node in graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            name = node.target.name()
            hops[name] = hops.get(name, 0) + 1
            if name in INLINED_HIGHER_ORDER:
                body = getattr(owner, node.args[INLINED_HIGHER_ORDER[name]].target)
                count += _inlined_operators(body.graph, body, operators, hops)
                continue
        key = _qualified_op_name(node.target)
        operators[key] = operators.get(key, 0) + 1
        count += 1
    return count


def collect_facts(ep, model_name: str, mode: str, sizes: Sizes, built: Built, untied) -> dict:
    torch = _torch()
    from torch._export.serde.schema import SCHEMA_VERSION

    operators: dict[str, int] = {}
    num_nodes = 0
    getitems = 0
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        num_nodes += 1
        if node.target is operator.getitem:
            getitems += 1
            continue
        key = _qualified_op_name(node.target)
        operators[key] = operators.get(key, 0) + 1

    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    inputs = []
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        entry = {
            "name": name,
            "kind": _INPUT_KIND.get(spec.kind.name, spec.kind.name.lower()),
            "target": spec.target,
        }
        if spec.kind.name == "BUFFER":
            entry["persistent"] = bool(spec.persistent)
        node = placeholders.get(name)
        entry.update(_tensor_meta(node.meta.get("val") if node is not None else None))
        inputs.append(entry)

    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    out_vals = out_node.args[0]
    out_vals = list(out_vals) if isinstance(out_vals, (tuple, list)) else [out_vals]
    outputs = []
    for spec, val in zip(ep.graph_signature.output_specs, out_vals):
        entry = {
            "name": getattr(spec.arg, "name", None),
            "kind": _OUTPUT_KIND.get(spec.kind.name, spec.kind.name.lower()),
            "target": spec.target,
        }
        meta = val.meta.get("val") if isinstance(val, torch.fx.Node) else val
        entry.update(_tensor_meta(meta))
        outputs.append(entry)

    def count(kind, table):
        return sum(1 for e in table if e["kind"] == kind)

    inlined_operators: dict[str, int] = {}
    higher_order: dict[str, int] = {}
    inlined = _inlined_operators(ep.graph, ep.graph_module, inlined_operators, higher_order)

    return {
        "model": model_name,
        "mode": mode,
        "torch_version": torch.__version__,
        "schema_version": list(SCHEMA_VERSION),
        "num_nodes": num_nodes,
        "num_op_nodes": num_nodes - getitems,
        "getitem_nodes": getitems,
        "operators": dict(sorted(operators.items())),
        "higher_order_ops": dict(sorted(higher_order.items())),
        "num_inlined_op_nodes": inlined,
        "inlined_operators": dict(sorted(inlined_operators.items())),
        "inputs": inputs,
        "outputs": outputs,
        "num_parameters": count("parameter", inputs),
        "num_buffers": count("buffer", inputs),
        "num_user_inputs": count("user_input", inputs),
        "num_constant_tensors": count("constant_tensor", inputs),
        "num_gradients": count("gradient", outputs),
        "num_buffer_mutations": count("buffer_mutation", outputs),
        "num_losses": count("loss", outputs),
        "num_user_outputs": count("user_output", outputs),
        "state_dict_keys": len(ep.state_dict),
        "constants_keys": len(ep.constants),
        "shared_storage": _shared_storage_groups(ep),
        "untied": untied,
        "sizes": dataclasses.asdict(sizes),
        "config": built.config,
        "seed": current_seed(),
        "dropout": dropout_enabled(),
    }


def check_signature(facts: dict) -> None:
    """The invariants the C++ side relies on; a failure is an exporter bug."""
    if facts["mode"] != "train":
        return
    problems = []
    if facts["num_losses"] != 1:
        problems.append(f"expected one loss output, found {facts['num_losses']}")
    params = {e["target"] for e in facts["inputs"] if e["kind"] == "parameter"}
    grads = {e["target"] for e in facts["outputs"] if e["kind"] == "gradient"}
    if params != grads:
        problems.append(f"parameters without gradient: {sorted(params - grads)}")
    bn_stats = {
        e["target"]
        for e in facts["inputs"]
        if e["kind"] == "buffer" and e["target"].endswith(("running_mean", "running_var"))
    }
    mutated = {e["target"] for e in facts["outputs"] if e["kind"] == "buffer_mutation"}
    if not bn_stats <= mutated:
        problems.append(f"BatchNorm statistics not mutated: {sorted(bn_stats - mutated)}")
    if problems:
        raise RuntimeError("joint graph signature check failed: " + "; ".join(problems))


def check_archive(path: str, facts: dict) -> None:
    """Re-read the written archive: model.json's node count must match the facts."""
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.endswith("/models/model.json")]
        if len(names) != 1:
            raise RuntimeError(f"{path}: expected one models/model.json, found {names}")
        doc = json.loads(z.read(names[0]))
    nodes = len(doc["graph_module"]["graph"]["nodes"])
    if nodes != facts["num_op_nodes"]:
        raise RuntimeError(
            f"{path}: models/model.json has {nodes} nodes, ExportedProgram has "
            f"{facts['num_op_nodes']} non-getitem call_function nodes"
        )


def write_outputs(ep, facts: dict, out_path: str) -> str:
    """Writes FILE.pt2 and FILE.facts.json atomically. Returns the facts path."""
    torch = _torch()
    out_dir = os.path.dirname(os.path.abspath(out_path))
    base = os.path.basename(out_path)
    facts_path = facts_path_for(out_path)
    # Save under the final file name inside a temporary directory beside the target (the
    # archive's root folder is named after the file), then rename into place.
    tmp_dir = tempfile.mkdtemp(prefix=".export-", dir=out_dir)
    try:
        tmp_pt2 = os.path.join(tmp_dir, base)
        torch.export.save(ep, tmp_pt2)
        check_archive(tmp_pt2, facts)
        tmp_facts = os.path.join(tmp_dir, os.path.basename(facts_path))
        with open(tmp_facts, "w") as f:
            json.dump(facts, f, indent=1)
            f.write("\n")
        os.replace(tmp_pt2, os.path.abspath(out_path))
        os.replace(tmp_facts, facts_path)
    finally:
        for leftover in os.listdir(tmp_dir):
            os.unlink(os.path.join(tmp_dir, leftover))
        os.rmdir(tmp_dir)
    return facts_path


# --------------------------------------------------------------------------------------
# TorchScript (.pt)
# --------------------------------------------------------------------------------------

INPUT_TYPES_FILE = "graphopt/input_types"  # the extra file graph-opt's importer reads

# torch dtype name -> .gir dtype name (docs/IR.md, DTYPE)
_GIR_DTYPES = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "bool",
    "complex64": "c64",
    "complex128": "c128",
}


def facts_path_for(out_path: str) -> str:
    """The facts file written beside an archive.

    ``DIR/STEM.pt2`` -> ``DIR/STEM.facts.json``; ``DIR/STEM.pt`` -> ``DIR/STEM-ts.facts.json``
    (so an eval .pt2 and a TorchScript .pt of one stem never collide).
    """
    out_dir = os.path.dirname(os.path.abspath(out_path))
    base = os.path.basename(out_path)
    if base.endswith(".pt2"):
        return os.path.join(out_dir, base[: -len(".pt2")] + ".facts.json")
    if base.endswith(".pt"):
        return os.path.join(out_dir, base[: -len(".pt")] + "-ts.facts.json")
    return os.path.join(out_dir, base + ".facts.json")


def gir_dtype(dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    return _GIR_DTYPES.get(name, name)


def gir_type(t) -> str:
    """``f32[2, 3, 32, 32]``: a tensor's type in the .gir syntax (contiguous CPU inputs)."""
    return f"{gir_dtype(t.dtype)}[{', '.join(str(int(s)) for s in t.shape)}]"


def _flatten_tensors(value) -> list:
    """The tensors in a (nested) tuple/list output, in order; non-tensors are skipped."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flatten_tensors(v)]
    return []


def _ts_args(built: Built, mode: str) -> tuple:
    return built.train_args if mode == "train" else built.eval_args


def _snapshot(module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict(keep_vars=True).items()}


def _restore(module, saved: dict) -> None:
    torch = _torch()
    state = module.state_dict(keep_vars=True)
    if list(state) != list(saved):
        raise RuntimeError("parameter and buffer names changed while tracing")
    with torch.no_grad():
        for k, v in state.items():
            v.copy_(saved[k])


@contextlib.contextmanager
def _state_preserved(module):
    """Restores every parameter and buffer of ``module`` (an nn.Module or a ScriptModule)
    on exit: a train-mode forward moves the BatchNorm running statistics, and the saved
    module must hold the initial state, as the .pt2 of the same model does."""
    saved = _snapshot(module)
    try:
        yield
    finally:
        _restore(module, saved)


def _loss_only(step):
    """Makes the training-step wrapper ``step`` (forward returns ``(loss,)``) return the
    0-dim loss itself, so that ``module(*inputs).backward()`` is the training step. The
    instance's class is swapped for a subclass, which keeps every FQN (``model.conv1.weight``)
    equal to the .pt2's."""
    base = type(step)

    class TrainLoss(base):
        def forward(self, *args):
            return base.forward(self, *args)[0]

    TrainLoss.__name__ = TrainLoss.__qualname__ = base.__name__ + "Loss"
    step.__class__ = TrainLoss
    return step


def _benign_tracer_warning(w) -> bool:
    """A TracerWarning raised inside ``torch.nn.functional._verify_batch_size``: train-mode
    BatchNorm turns the traced sizes into a Python bool for a check that can only raise
    (more than one value per channel). The traced graph does not depend on it."""
    import inspect

    import torch.nn.functional as F

    try:
        lines, first = inspect.getsourcelines(F._verify_batch_size)
        path = inspect.getsourcefile(F._verify_batch_size)
    except (AttributeError, OSError, TypeError):
        return False
    return (os.path.abspath(w.filename) == os.path.abspath(path)
            and first <= w.lineno < first + len(lines))


def build_torchscript(built: Built, script: bool, mode: str = "eval"):
    """The module as a ScriptModule.

    eval: the eval module, traced on built.eval_args or scripted. train: the training-step
    wrapper in train mode, returning the loss (see ``_loss_only``), traced on
    built.train_args outside no_grad (its forward builds the autograd graph of the step);
    the parameters and buffers keep their initial values.
    """
    torch = _torch()
    import warnings

    args = _ts_args(built, mode)
    if mode == "train":
        module = _loss_only(built.loss_wrap(built.model.train()).train())
    else:
        module = built.eval_wrap(built.model.eval()).eval()
    if any(not isinstance(a, torch.Tensor) for a in args):
        raise RuntimeError("TorchScript export needs tensor inputs only")
    initial = _snapshot(module)
    grad_mode = torch.enable_grad() if mode == "train" else torch.no_grad()
    with grad_mode, _state_preserved(module):
        if script:
            try:
                return torch.jit.script(module)
            except Exception as e:
                raise RuntimeError(
                    f"torch.jit.script failed (try tracing, without --script): "
                    f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
                ) from e
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", torch.jit.TracerWarning)
            try:
                traced = torch.jit.trace(module, args, strict=True)
            except Exception as e:
                raise RuntimeError(
                    f"torch.jit.trace failed: {type(e).__name__}: "
                    f"{str(e).strip().splitlines()[0]}"
                ) from e
        # A TracerWarning means the trace baked in Python values (sizes turned into
        # constants, data-dependent branches taken once) or that two runs differ (active
        # dropout): the graph would not mean what the model does. Refuse rather than write
        # a silently wrong module.
        tracer = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)
                  and not _benign_tracer_warning(w)]
        if tracer:
            first = str(tracer[0].message).strip().splitlines()[0]
            raise RuntimeError(
                f"torch.jit.trace is not faithful for this model ({len(tracer)} TracerWarning"
                f"{'s' if len(tracer) > 1 else ''}, first: {first}); export it as .pt2"
            )
    _restore(traced, initial)  # tracing and its check ran the step: undo their updates
    return traced


def collect_ts_facts(ts_module, model_name: str, sizes: Sizes, built: Built, script: bool,
                     input_types: str, mode: str = "eval") -> dict:
    torch = _torch()
    with torch.no_grad(), _state_preserved(ts_module):
        outputs = _flatten_tensors(ts_module(*_ts_args(built, mode)))
    if not outputs:
        raise RuntimeError("the module returns no tensor")

    def entries(named):
        return [{"target": n, "dtype": gir_dtype(t.dtype), "shape": [int(s) for s in t.shape]}
                for n, t in named]

    return {
        "model": model_name,
        "mode": mode,
        "format": "torchscript",
        "method": "script" if script else "trace",
        "torch_version": torch.__version__,
        "input_types": input_types,
        "parameters": entries(ts_module.named_parameters()),
        "buffers": entries(ts_module.named_buffers()),
        "outputs": [{"dtype": gir_dtype(t.dtype), "shape": [int(s) for s in t.shape]}
                    for t in outputs],
        "sizes": dataclasses.asdict(sizes),
        "config": built.config,
        "seed": current_seed(),
        "dropout": dropout_enabled(),
    }


def check_torchscript(path: str, ts_module, built: Built, facts: dict) -> None:
    """Re-load the written file: extra file, forward, and the same outputs.

    For a training step also: the same initial parameters and buffers, a 0-dim loss, and
    ``loaded(*inputs).backward()`` gives every parameter a finite gradient.
    """
    torch = _torch()
    extra = {INPUT_TYPES_FILE: ""}
    loaded = torch.jit.load(path, _extra_files=extra)
    stored = extra[INPUT_TYPES_FILE]  # bytes
    if isinstance(stored, bytes):
        stored = stored.decode("utf-8", "replace")
    if stored != facts["input_types"]:
        raise RuntimeError(f"{path}: {INPUT_TYPES_FILE} reads back as {stored!r}, not "
                           f"{facts['input_types']!r}")
    if not loaded._c._has_method("forward"):
        raise RuntimeError(f"{path}: the loaded module has no forward method")
    mode = facts["mode"]
    args = _ts_args(built, mode)
    if mode == "train":
        want_state = ts_module.state_dict()
        got_state = loaded.state_dict()
        if list(got_state) != list(want_state) or not all(
            torch.equal(got_state[k], want_state[k]) for k in want_state
        ):
            raise RuntimeError(f"{path}: the reloaded parameters and buffers differ")
    with torch.no_grad(), _state_preserved(loaded), _state_preserved(ts_module):
        got = _flatten_tensors(loaded(*args))
        want = _flatten_tensors(ts_module(*args))
    if len(got) != len(want) or not all(
        g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w) for g, w in zip(got, want)
    ):
        raise RuntimeError(f"{path}: the reloaded module computes different outputs")
    if mode != "train":
        return
    loss = loaded(*args)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or not loss.requires_grad:
        raise RuntimeError(f"{path}: forward does not return a 0-dim loss that requires grad")
    loss.backward()
    missing = [n for n, p in loaded.named_parameters()
               if p.grad is None or not bool(torch.isfinite(p.grad).all())]
    if missing:
        raise RuntimeError(f"{path}: backward leaves {len(missing)} parameters without a "
                           f"finite gradient, first {missing[0]}")


def write_torchscript(ts_module, facts: dict, built: Built, out_path: str) -> str:
    """Writes FILE.pt and FILE-ts.facts.json atomically. Returns the facts path."""
    torch = _torch()
    out_path = os.path.abspath(out_path)
    out_dir = os.path.dirname(out_path)
    facts_path = facts_path_for(out_path)
    tmp_dir = tempfile.mkdtemp(prefix=".export-", dir=out_dir)
    try:
        tmp_pt = os.path.join(tmp_dir, os.path.basename(out_path))
        torch.jit.save(ts_module, tmp_pt,
                       _extra_files={INPUT_TYPES_FILE: facts["input_types"]})
        check_torchscript(tmp_pt, ts_module, built, facts)
        tmp_facts = os.path.join(tmp_dir, os.path.basename(facts_path))
        with open(tmp_facts, "w") as f:
            json.dump(facts, f, indent=1)
            f.write("\n")
        os.replace(tmp_pt, out_path)
        os.replace(tmp_facts, facts_path)
    finally:
        for leftover in os.listdir(tmp_dir):
            os.unlink(os.path.join(tmp_dir, leftover))
        os.rmdir(tmp_dir)
    return facts_path


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="export_model.py",
        description="Export a zoo model to a torch.export .pt2 archive (inference graph or "
        "joint forward+backward training step) plus a .facts.json for importer tests.",
    )
    p.add_argument("--list", action="store_true", help="list the models and exit")
    p.add_argument("--model", help="model name (see --list)")
    p.add_argument("--mode", choices=["train", "eval"], help="joint training step or inference")
    p.add_argument("--batch", type=int, help="batch size")
    p.add_argument("--image-size", type=int, help="image side (image models; MLP input is SxS)")
    p.add_argument("--seq-len", type=int, help="sequence length (text models)")
    p.add_argument("--tiny", action="store_true", help="small configuration for tests")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and data (default 0)")
    p.add_argument("--no-dropout", action="store_true",
                   help="every dropout probability of the text models' configs is 0, so the "
                   "training graph has no random op (no-op for the other models)")
    p.add_argument("--decompose-backward", action="store_true",
                   help="train mode: decompose the backward operators eager autograd runs as "
                   "one kernel (native_batch_norm_backward, threshold_backward, ...) into "
                   "core ATen too (by default they are kept)")
    p.add_argument("--keep-fused-backward", action="store_true",
                   help="the default since issue 28; accepted for old command lines")
    p.add_argument("--script", action="store_true",
                   help="with -o FILE.pt: torch.jit.script the model instead of tracing it "
                   "(eval only)")
    p.add_argument("-o", "--output",
                   help="output: FILE.pt2 (torch.export) or FILE.pt (TorchScript: the eval "
                   "forward, or in train mode the traced training step returning the loss)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    return p, p.parse_args(argv)


def main(argv=None) -> int:
    parser, args = parse_args(argv)
    if args.list:
        width = max(len(n) for n in MODELS)
        for name, spec in MODELS.items():
            print(f"{name:<{width}}  {spec.description}")
        return EXIT_OK

    def usage(msg: str) -> int:
        parser.print_usage(sys.stderr)
        print(f"export_model.py: error: {msg}", file=sys.stderr)
        return EXIT_USAGE

    if not args.model:
        return usage("--model is required (or --list)")
    if args.model not in MODELS:
        return usage(f"unknown model '{args.model}'; known: {', '.join(MODELS)}")
    if not args.mode:
        return usage("--mode train|eval is required")
    if not args.output:
        return usage("-o FILE.pt2 or -o FILE.pt is required")
    torchscript = args.output.endswith(".pt")
    if not torchscript and not args.output.endswith(".pt2"):
        return usage(f"output must end in .pt2 (torch.export) or .pt (TorchScript), "
                     f"got '{args.output}'")
    if args.script and not torchscript:
        return usage("--script applies to TorchScript output (-o FILE.pt) only")
    if args.script and args.mode != "eval":
        return usage("--script applies to --mode eval only (the training step is traced)")
    if args.keep_fused_backward and args.decompose_backward:
        return usage("--keep-fused-backward and --decompose-backward contradict each other")
    if args.decompose_backward and (args.mode != "train" or torchscript):
        return usage("--decompose-backward applies to --mode train with -o FILE.pt2 only "
                     "(the joint graph)")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        return usage(f"output directory '{out_dir}' does not exist")
    spec = MODELS[args.model]
    try:
        sizes = resolve_sizes(args.model, spec, args)
    except UsageError as e:
        return usage(str(e))

    if torchscript:
        return _main_torchscript(args, spec, sizes, usage)
    try:
        start = time.perf_counter()
        built = build_model(args.model, sizes, args.seed, dropout=not args.no_dropout)
        ep, untied = export_program(spec, built, args.mode, args.decompose_backward)
        export_s = time.perf_counter() - start
        if args.no_dropout:
            rnd = random_ops(ep.graph, args.mode)
            if rnd:
                raise RuntimeError(f"--no-dropout, yet the {args.mode} graph has random "
                                   f"operators: {', '.join(rnd)}")
        facts = collect_facts(ep, args.model, args.mode, sizes, built, untied)
        check_signature(facts)
        facts["export_seconds"] = round(export_s, 3)
        facts_path = write_outputs(ep, facts, args.output)
        total_s = time.perf_counter() - start
    except UsageError as e:
        return usage(str(e))
    except Exception as e:  # report which model and mode failed, then the cause
        print(
            f"export_model.py: error: exporting {args.model} ({args.mode}) failed: "
            f"{type(e).__name__}: {e}",
            file=sys.stderr,
        )
        return EXIT_EXPORT_FAILED
    if not args.quiet:
        print(
            f"{args.model} {args.mode}: {facts['num_nodes']} call_function nodes "
            f"({facts['num_op_nodes']} ops + {facts['getitem_nodes']} getitem), "
            f"{facts['num_parameters']} parameters, {facts['num_buffers']} buffers, "
            f"{facts['num_gradients']} gradients, {facts['num_buffer_mutations']} buffer "
            f"mutations; export {export_s:.2f}s, total {total_s:.2f}s -> {args.output}, "
            f"{os.path.basename(facts_path)}"
        )
    return EXIT_OK


def _main_torchscript(args, spec: ModelSpec, sizes: Sizes, usage) -> int:
    method = "script" if args.script else "trace"
    try:
        start = time.perf_counter()
        built = build_model(args.model, sizes, args.seed, dropout=not args.no_dropout)
        ts_module = build_torchscript(built, args.script, args.mode)
        export_s = time.perf_counter() - start
        input_types = ", ".join(gir_type(a) for a in _ts_args(built, args.mode))
        facts = collect_ts_facts(ts_module, args.model, sizes, built, args.script, input_types,
                                 args.mode)
        facts["export_seconds"] = round(export_s, 3)
        facts_path = write_torchscript(ts_module, facts, built, args.output)
        total_s = time.perf_counter() - start
    except UsageError as e:
        return usage(str(e))
    except Exception as e:
        print(
            f"export_model.py: error: exporting {args.model} ({args.mode}, TorchScript "
            f"{method}) failed: {type(e).__name__}: {e}",
            file=sys.stderr,
        )
        return EXIT_EXPORT_FAILED
    if not args.quiet:
        print(
            f"{args.model} {args.mode} (TorchScript, {method}): inputs {facts['input_types']}, "
            f"{len(facts['parameters'])} parameters, {len(facts['buffers'])} buffers, "
            f"{len(facts['outputs'])} outputs; export {export_s:.2f}s, total {total_s:.2f}s "
            f"-> {args.output}, {os.path.basename(facts_path)}"
        )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
