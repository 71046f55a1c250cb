#!/usr/bin/env python3
"""torch.optim references for graph-opt's add-optimizer pass: three training steps.

    make_optimizer_references.py --zoo DIR [--archives mlp-train,...] [--steps 3]

For each archive (default: the training steps without random operators of mlp, cnn,
resnet18 and bert: ``mlp-train``, ``cnn-train``, ``resnet18-train``,
``bert-train-nodrop``) and each optimizer the pass makes, with the pass's default
hyperparameters (``adamw``: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2;
``sgd``: lr 1e-3, momentum 0.9, dampening 0, weight_decay 0, no nesterov), it runs
``--steps`` training steps on the archive's example inputs (the same batch every step) twice:

``"eager"``
    The module rebuilt exactly as make_eager_references.py rebuilds it
    (zoo.build_for_facts on the archive's facts, the archive's weights loaded), in
    train mode: ``zero_grad(set_to_none=True)``, forward, ``loss.backward()``, then
    ``torch.optim.AdamW(fused=False)`` / ``torch.optim.SGD(fused=False)`` (the single-tensor
    for-loop on CPU). add-optimizer must agree with it within float rounding.

``"graph"``
    The exported joint graph itself, run by ``torch.fx.Interpreter`` (which graph-opt's
    executor matches bitwise, ExecutorParityTest) for the loss, the gradients and the
    BatchNorm buffer updates, with ``torch.optim``'s fused path (``fused=True``: the
    ``_fused_adamw_`` / ``_fused_sgd_`` kernels the pass calls) for the update. This isolates
    the update from how eager autograd rounds: it is what the pass must reproduce (nearly)
    exactly. It matters for ill-conditioned models: the tiny ResNet-18 (batch 2, 32x32
    images: its last BatchNorms see two values per channel) is chaotic in float32. A 1e-7
    relative change of its weights changes the weights after three SGD steps by 20x their
    scale, eager float32 and float64 disagree by 100%, and torch.optim's own fused=True and
    fused=False AdamW, given the same gradients, differ by 1 ulp after one step and by 3e-3
    after three. No update can follow the eager trajectory there beyond the first step.

After each step it records the loss of that step, every parameter and buffer and the
optimizer state, keyed like the pass keys its optimizer_state inputs:
``<parameter>.exp_avg``, ``<parameter>.exp_avg_sq``, ``<parameter>.step`` (AdamW) and
``<parameter>.momentum_buffer`` (SGD). It writes ``DIR/<archive>.<kind>.optim.pt``, a
torch.save of

    {"inputs": [user inputs in signature order],
     "hyper": {"lr": ..., ...},
     "eager": [{"loss": 0-d tensor, "parameters": {target: tensor},
                "buffers": {target: tensor}, "state": {name: tensor}}, ...],
     "graph": [...the same...]}

which unittests/Pass/AddOptimizerTest.cpp compares with three executor runs of the archive's
graph after add-optimizer (keepUpdates). A reference newer than its archive, this script,
make_eager_references.py and the zoo's sources (tools/zoo) is kept ("cached").
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import make_eager_references as eager  # noqa: E402  (also puts tools/ on the path)
import zoo  # noqa: E402
from make_references import fast_export_load, flat_inputs  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

DEFAULT_ARCHIVES = ["mlp-train", "cnn-train", "resnet18-train", "bert-train-nodrop"]

# The pass's defaults (passes/AddOptimizerPass.h).
HYPER = {
    "adamw": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2},
    "sgd": {"lr": 1e-3, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0},
}


def make_optimizer(kind: str, params, fused: bool, torch):
    h = HYPER[kind]
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=h["lr"], betas=(h["beta1"], h["beta2"]),
                                 eps=h["eps"], weight_decay=h["weight_decay"], fused=fused)
    return torch.optim.SGD(params, lr=h["lr"], momentum=h["momentum"],
                           dampening=h["dampening"], weight_decay=h["weight_decay"],
                           nesterov=False, fused=fused)


def rebuilt_module(ep, facts: dict, torch):
    """The exported training module with the archive's weights, in train mode."""
    module, _ = zoo.build_for_facts(facts)
    eager.load_weights(module, eager.archive_weights(ep), torch)
    module.train()
    params = dict(module.named_parameters(remove_duplicate=False))
    if len({id(p) for p in params.values()}) != len(params):
        raise RuntimeError("the training module shares a parameter under two names")
    return module, params


def record(loss, module, params: dict, optimizer, torch) -> dict:
    """What one step left: its loss, every parameter, buffer and piece of state."""
    state = {}
    for name, p in params.items():
        for key, value in optimizer.state[p].items():
            if isinstance(value, torch.Tensor):
                state[f"{name}.{key}"] = value.detach().clone()
    return {
        "loss": loss.detach().clone(),
        "parameters": {n: p.detach().clone() for n, p in params.items()},
        "buffers": {n: b.detach().clone() for n, b in module.named_buffers(remove_duplicate=False)},
        "state": state,
    }


def eager_steps(ep, facts: dict, kind: str, steps: int, torch) -> list[dict]:
    """The module run eagerly: forward, loss.backward(), torch.optim (fused=False)."""
    module, params = rebuilt_module(ep, facts, torch)
    optimizer = make_optimizer(kind, list(params.values()), False, torch)
    args, kwargs = ep.example_inputs
    out = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.enable_grad():
            leaves = torch.utils._pytree.tree_leaves(module(*args, **kwargs))
        if len(leaves) != 1 or leaves[0].dim() != 0:
            raise RuntimeError("the training wrapper does not return one scalar loss")
        leaves[0].backward()
        missing = [n for n, p in params.items() if p.grad is None]
        if missing:
            raise RuntimeError(f"backward gives {missing[0]} no gradient")
        optimizer.step()
        out.append(record(leaves[0], module, params, optimizer, torch))
    return out


def graph_steps(ep, facts: dict, kind: str, steps: int, torch) -> list[dict]:
    """The exported joint graph run by torch.fx.Interpreter (which graph-opt's executor
    matches bitwise) for the loss, the gradients and the buffer updates, and torch.optim's
    fused path (fused=True, the kernels add-optimizer calls) for the update. Each gradient
    is copied into its parameter's layout first, as AccumulateGrad would lay out .grad:
    the fused CPU kernels ignore a gradient's strides."""
    from torch.export.graph_signature import InputKind, OutputKind

    module, params = rebuilt_module(ep, facts, torch)
    buffers = dict(module.named_buffers(remove_duplicate=False))
    optimizer = make_optimizer(kind, list(params.values()), True, torch)
    _, user = flat_inputs(ep, torch)
    out = []
    for _ in range(steps):
        flat, users = [], iter(user)
        for spec in ep.graph_signature.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                flat.append(next(users))
            elif spec.kind == InputKind.PARAMETER:
                flat.append(params[spec.target].detach())
            elif spec.kind == InputKind.BUFFER:
                flat.append(buffers[spec.target])
            else:
                raise RuntimeError(f"unsupported input kind {spec.kind}")
        torch.manual_seed(0)
        with torch.no_grad():
            results = torch.fx.Interpreter(ep.graph_module).run(*flat)
        loss = None
        for spec, r in zip(ep.graph_signature.output_specs, results):
            if spec.kind == OutputKind.LOSS_OUTPUT:
                loss = r
            elif spec.kind == OutputKind.GRADIENT_TO_PARAMETER:
                p = params[spec.target]
                p.grad = torch.empty_like(p).copy_(r)
            elif spec.kind == OutputKind.BUFFER_MUTATION:
                with torch.no_grad():
                    buffers[spec.target].copy_(r)
        optimizer.step()
        out.append(record(loss, module, params, optimizer, torch))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zoo", required=True, help="directory of .pt2 archives (export_zoo.py)")
    p.add_argument("--archives", default=",".join(DEFAULT_ARCHIVES),
                   help="comma-separated archive names without .pt2 (default: %(default)s)")
    p.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    args = p.parse_args(argv)
    if args.steps < 1:
        print("make_optimizer_references.py: --steps must be at least 1", file=sys.stderr)
        return EXIT_USAGE

    from make_references import stamp_says_done, write_stamp

    names = [a for a in args.archives.split(",") if a]
    code = [__file__, eager.__file__, *zoo.SOURCES]
    paths = [os.path.join(args.zoo, name + ".pt2") for name in names]
    expected = [os.path.join(args.zoo, f"{name}.{kind}.optim.pt")
                for name in names for kind in HYPER]
    stamp = os.path.join(args.zoo, f".optimizer-references-{args.steps}-"
                         f"{hashlib.sha1(','.join(names).encode()).hexdigest()[:12]}.stamp")
    if stamp_says_done(stamp, paths, code):
        print(f"every reference cached ({stamp})")
        return EXIT_OK

    import torch

    fast_export_load()
    newest_code = max(os.path.getmtime(f) for f in code)
    print(f"{'archive':<24} {'kind':<6} {'params':>6} {'secs':>6}  losses")
    for name in names:
        path = os.path.join(args.zoo, name + ".pt2")
        if not os.path.exists(path):
            print(f"make_optimizer_references.py: {path}: no such archive", file=sys.stderr)
            return EXIT_USAGE
        facts = eager.facts_of(path)
        if facts["mode"] != "train":
            print(f"make_optimizer_references.py: {name} is not a training step",
                  file=sys.stderr)
            return EXIT_USAGE
        rnd = eager.random_operators(facts, torch)
        if rnd:
            print(f"make_optimizer_references.py: {name} has random operators "
                  f"({', '.join(rnd)}): eager and graph steps would differ", file=sys.stderr)
            return EXIT_USAGE
        ep = None
        for kind in HYPER:
            out = os.path.join(args.zoo, f"{name}.{kind}.optim.pt")
            if os.path.exists(out) and os.path.getmtime(out) > max(os.path.getmtime(path),
                                                                   newest_code):
                print(f"{name:<24} {kind:<6} cached   {out}")
                continue
            start = time.perf_counter()
            ep = ep or torch.export.load(path)
            torch.manual_seed(0)
            eager_run = eager_steps(ep, facts, kind, args.steps, torch)
            graph_run = graph_steps(ep, facts, kind, args.steps, torch)
            _, user = flat_inputs(ep, torch)
            eager.save_atomic({"inputs": list(user), "hyper": dict(HYPER[kind]),
                               "eager": eager_run, "graph": graph_run}, out, torch)
            losses = " ".join(f"{s['loss'].item():.6f}" for s in eager_run)
            print(f"{name:<24} {kind:<6} {len(eager_run[0]['parameters']):>6} "
                  f"{time.perf_counter() - start:>6.2f}  {losses}", flush=True)
    write_stamp(stamp, expected)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
