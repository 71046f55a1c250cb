#!/usr/bin/env python3
"""Eager PyTorch references for graph-opt's executor: each zoo model run as an nn.Module.

    make_eager_references.py --zoo DIR [--rtol R]

make_references.py runs the exported graph itself (torch.fx.Interpreter), which the executor
must match bitwise. This script checks the other end: the ORIGINAL module, run eagerly by
PyTorch, which the executor must match within float tolerance. It covers every archive of DIR
without random operators:

- every ``*-eval.pt2``: ``model.eval()`` forward (dropout inactive);
- every train archive whose graph has no random operator (mlp, cnn, the ResNets and llama,
  and the ``*-train-nodrop.pt2`` of bert, bert-mlm, gpt2 and t5, exported with
  ``--no-dropout``): the training wrapper's loss, ``loss.backward()``.

Train archives with active dropout (``bert-train.pt2``, ...) are skipped: eager dropout draws
its masks differently from the graph.

Eval graphs may hold higher-order wrappers (llama's rotary embedding runs under
``@torch.no_grad()``: ``wrap_with_set_grad_enabled``); ``torch.fx.Interpreter`` runs their
bodies, as graph-opt's importer inlines them.

For each archive the module is rebuilt with the model zoo the exporter exported it from
(tools/zoo: ``zoo.build_for_facts`` on the archive's ``.facts.json``: same builder, sizes,
config, seed, dropout setting, untied parameters), and then the archive's weights are loaded
into it (``ep.state_dict`` and ``ep.constants``, keyed by the signature's targets, which are
the module's FQNs): every parameter must be in the archive, every parameter and buffer input
of the archive must exist in the module with the same dtype and shape. The example inputs are
the archive's (``ep.example_inputs``).

It writes ``DIR/<name>.eager.pt``, a torch.save of ``{"inputs": [user inputs in signature
order], "outputs": {label: tensor}}`` with the outputs in signature order, labelled

- ``"loss #0"``: the loss (train);
- ``"gradient <target>"``: the parameter's ``.grad`` after ``loss.backward()`` (train);
- ``"buffer_mutation <target>"``: the buffer's value after the step, for every buffer the
  signature marks as mutated (BatchNorm running statistics, num_batches_tracked);
- ``"user_output #k"``: the k-th tensor of the eval module's output, flattened as
  ``torch.export`` flattens it.

``<target>`` is the signature's FQN (``model.conv1.weight`` in train archives, whose wrapper
holds the model as ``model``).

As a sanity check it also runs the exported graph with ``torch.fx.Interpreter`` on the same
inputs and prints, per archive, the largest absolute difference and the largest relative
difference (per output: max |eager - graph| / max(max |eager|, max |graph|)) over all
outputs, naming the worst output (see ``compare``: outputs no larger than ``--atol`` are
numerically zero and checked by absolute difference). An archive with a relative difference
above ``--rtol`` or differing integer outputs is reported as MISMATCH and the script exits 1
(after writing the references: the executor is compared with them, not with the graph).

The default rtol is 1e-3, not 1e-5: eval graphs agree bitwise, and most training steps to
about 1e-6, but the tiny ResNet-50/152 training steps reach 1e-4..1e-5. Their layer4
BatchNorms see 2 values per channel (batch 2, 1x1 spatial at --image-size 32), whose backward
is dominated by cancellation, and the joint graph computes BatchNorm's backward with
decomposed ops in another order than the eager kernel. Both float32 results are then far
from the float64 result (100% on some gradients) while agreeing with each other to ~1e-4:
rounding, not a wrong graph.

A reference newer than its archive, this script and the zoo's sources is kept ("cached").
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOOLS_DIR = os.path.join(_HERE, "..", "..", "tools")
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.abspath(_TOOLS_DIR))
import zoo  # noqa: E402
from make_references import fast_export_load, flat_inputs  # noqa: E402

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


def facts_of(path: str) -> dict:
    with open(path[: -len(".pt2")] + ".facts.json") as f:
        return json.load(f)


def random_operators(facts: dict, torch) -> list[str]:
    """The operators of a train archive that draw random numbers (from its facts)."""
    found = []
    for key in facts["operators"]:
        ns, _, rest = key.partition("::")
        name, _, overload = rest.partition(".")
        try:
            op = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")
        except (AttributeError, RuntimeError):
            continue  # not an operator overload (a Python function target)
        if torch.Tag.nondeterministic_seeded in op.tags:
            found.append(key)
    return found


def archive_weights(ep) -> dict:
    """target -> tensor for every parameter and buffer input of the signature."""
    from torch.export.graph_signature import InputKind

    weights = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict.get(spec.target)
            weights[spec.target] = t if t is not None else ep.constants[spec.target]
    return weights


def load_weights(module, weights: dict, torch) -> int:
    """Copies the archive's weights into ``module``. Returns how many tensors of the seeded
    initialisation already equalled the archive's (for the report)."""
    params = dict(module.named_parameters(remove_duplicate=False))
    buffers = dict(module.named_buffers(remove_duplicate=False))
    missing = [n for n in params if n not in weights]
    if missing:
        raise RuntimeError(f"{len(missing)} parameters of the module are not in the archive, "
                           f"first {missing[0]}")
    same = 0
    with torch.no_grad():
        for target, t in weights.items():
            dst = params.get(target, buffers.get(target))
            if dst is None:
                raise RuntimeError(f"the archive's {target} is no parameter or buffer of the "
                                   f"rebuilt module")
            if dst.dtype != t.dtype or dst.shape != t.shape:
                raise RuntimeError(f"{target}: module has {dst.dtype}{list(dst.shape)}, archive "
                                   f"{t.dtype}{list(t.shape)}")
            same += int(torch.equal(dst, t))
            dst.copy_(t)
        for name, p in params.items():  # every parameter now holds the archive's values
            assert torch.equal(p, weights[name]), name
    return same


def run_eager(ep, module, facts: dict, torch) -> dict:
    """label -> tensor, in the signature's output order."""
    from torch.export.graph_signature import OutputKind

    args, kwargs = ep.example_inputs
    train = facts["mode"] == "train"
    if train:
        module.train()
        module.zero_grad(set_to_none=True)
        with torch.enable_grad():
            leaves = torch.utils._pytree.tree_leaves(module(*args, **kwargs))
        if len(leaves) != 1 or leaves[0].dim() != 0:
            raise RuntimeError("the training wrapper does not return one scalar loss")
        loss = leaves[0]
        loss.backward()
        leaves = []
    else:
        module.eval()
        with torch.no_grad():
            leaves = torch.utils._pytree.tree_leaves(module(*args, **kwargs))
    params = dict(module.named_parameters(remove_duplicate=False))
    buffers = dict(module.named_buffers(remove_duplicate=False))
    outputs, counts = {}, {}
    for spec in ep.graph_signature.output_specs:
        if spec.kind == OutputKind.LOSS_OUTPUT:
            k = counts["loss"] = counts.get("loss", -1) + 1
            outputs[f"loss #{k}"] = loss.detach().clone()
        elif spec.kind == OutputKind.GRADIENT_TO_PARAMETER:
            grad = params[spec.target].grad
            if grad is None:
                raise RuntimeError(f"eager backward gives {spec.target} no gradient")
            outputs[f"gradient {spec.target}"] = grad.detach().clone()
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            outputs[f"buffer_mutation {spec.target}"] = buffers[spec.target].detach().clone()
        elif spec.kind == OutputKind.USER_OUTPUT:
            k = counts["user"] = counts.get("user", -1) + 1
            if k >= len(leaves):
                raise RuntimeError(f"the eager module returns {len(leaves)} tensors, the "
                                   f"signature has more user outputs")
            outputs[f"user_output #{k}"] = leaves[k].detach().clone()
        else:
            raise RuntimeError(f"unsupported output kind {spec.kind}")
    if not train and counts.get("user", -1) + 1 != len(leaves):
        raise RuntimeError(f"the eager module returns {len(leaves)} tensors, the signature "
                           f"{counts.get('user', -1) + 1} user outputs")
    return outputs


def compare(eager: dict, graph_outputs, torch, atol: float, rtol: float) -> dict:
    """Eager against the graph, output by output (both in signature order).

    For a floating output: abs = max |eager - graph|, scale = max(max |eager|, max |graph|),
    rel = abs / scale. An output whose scale is at most ``atol`` is numerically zero (BERT's
    attention key-bias gradients are exactly 0 in exact arithmetic: softmax ignores a
    per-query constant; in float32 both sides return rounding noise): it is checked by abs
    alone (abs <= atol) and left out of max_rel. Integer outputs must be equal.
    """
    r = {"max_abs": 0.0, "max_rel": 0.0, "worst": None, "near_zero": 0, "failures": []}
    if len(graph_outputs) != len(eager):
        r["failures"].append(f"{len(eager)} eager outputs, {len(graph_outputs)} in the graph")
        return r
    for (label, e), g in zip(eager.items(), graph_outputs):
        if e.dtype != g.dtype or e.shape != g.shape:
            r["failures"].append(f"{label}: eager {e.dtype}{list(e.shape)}, graph "
                                 f"{g.dtype}{list(g.shape)}")
            continue
        if not e.is_floating_point():
            if not torch.equal(e, g):
                r["failures"].append(f"{label}: integer values differ")
            continue
        if e.numel() == 0:
            continue
        diff = (e.double() - g.double()).abs().max().item()
        scale = max(e.double().abs().max().item(), g.double().abs().max().item())
        r["max_abs"] = max(r["max_abs"], diff)
        if scale <= atol:
            r["near_zero"] += 1
            if diff > atol:
                r["failures"].append(f"{label}: |eager - graph| {diff:.3g} > atol {atol:g}")
            continue
        rel = diff / scale
        if r["worst"] is None or rel > r["max_rel"]:
            r["max_rel"], r["worst"] = rel, label
        if rel > rtol:
            r["failures"].append(f"{label}: relative difference {rel:.3g} > rtol {rtol:g}")
    return r


def save_atomic(obj, out: str, torch) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zoo", required=True, help="directory of .pt2 archives (export_zoo.py)")
    p.add_argument("--rtol", type=float, default=1e-3,
                   help="largest relative eager-vs-graph difference accepted (default 1e-3)")
    p.add_argument("--atol", type=float, default=1e-7,
                   help="outputs no larger than this are numerically zero and compared by "
                   "absolute difference (default 1e-7)")
    args = p.parse_args(argv)
    archives = sorted(glob.glob(os.path.join(args.zoo, "*.pt2")))
    if not archives:
        print(f"make_eager_references.py: no .pt2 archives in {args.zoo}", file=sys.stderr)
        return EXIT_USAGE

    from make_references import stamp_says_done, write_stamp

    stamp = os.path.join(args.zoo, f".eager-references-rtol{args.rtol}-atol{args.atol}.stamp")
    if stamp_says_done(stamp, archives, [__file__, *zoo.SOURCES]):
        print(f"every reference cached ({stamp})")
        return EXIT_OK

    import torch

    fast_export_load()
    newest_code = max(os.path.getmtime(f) for f in [__file__, *zoo.SOURCES])
    mismatches = 0
    outputs = []
    print(f"{'archive':<24} {'outs':>5} {'max_abs':>10} {'max_rel':>10} {'secs':>6}  worst output")
    for path in archives:
        name = os.path.basename(path)[: -len(".pt2")]
        out = path[: -len(".pt2")] + ".eager.pt"
        try:
            facts = facts_of(path)
        except (OSError, ValueError) as e:
            print(f"make_eager_references.py: {name}: cannot read its facts: {e}",
                  file=sys.stderr)
            return EXIT_USAGE
        if facts["mode"] == "train":
            rnd = random_operators(facts, torch)
            if rnd:
                print(f"{name:<24} skipped: random operators {', '.join(rnd)}")
                continue
        outputs.append(out)
        if os.path.exists(out) and os.path.getmtime(out) > max(os.path.getmtime(path),
                                                               newest_code):
            print(f"{name:<24} cached   {out}")
            continue
        start = time.perf_counter()
        ep = torch.export.load(path)
        module, _ = zoo.build_for_facts(facts)
        weights = archive_weights(ep)
        same_init = load_weights(module, weights, torch)
        eager = run_eager(ep, module, facts, torch)

        flat, user = flat_inputs(ep, torch)
        torch.manual_seed(0)
        with torch.no_grad():
            graph_outputs = torch.fx.Interpreter(ep.graph_module).run(*flat)
        if not isinstance(graph_outputs, (list, tuple)):
            graph_outputs = [graph_outputs]
        save_atomic({"inputs": list(user), "outputs": eager}, out, torch)
        secs = time.perf_counter() - start

        r = compare(eager, list(graph_outputs), torch, args.atol, args.rtol)
        mismatches += bool(r["failures"])
        notes = [] if same_init == len(weights) else [
            f"(seeded init differed from the archive in {len(weights) - same_init}/"
            f"{len(weights)} tensors)"]
        if r["near_zero"]:
            notes.append(f"({r['near_zero']} outputs ~0)")
        if r["failures"]:
            notes.append(f"MISMATCH: {'; '.join(r['failures'][:3])}"
                         + (f" (+{len(r['failures']) - 3} more)" if len(r["failures"]) > 3 else ""))
        print(f"{name:<24} {len(eager):>5} {r['max_abs']:>10.3g} {r['max_rel']:>10.3g} "
              f"{secs:>6.2f}  {r['worst']} {' '.join(notes)}", flush=True)
    if mismatches:
        return EXIT_MISMATCH
    write_stamp(stamp, outputs)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
