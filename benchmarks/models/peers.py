#!/usr/bin/env python3
"""One peer configuration of a zoo model's training step, measured in this process alone.

    peers.py --model NAME:SIZE --config CONFIG [--runs 5] [--warmup 1] [--min-time 0]
             [--threads N] [--facts FILE.facts.json] [--time-failed] [-o OUT.json]

CONFIG is one of
  eager               the training step in eager PyTorch: forward, loss, loss.backward();
  checkpoint          the same with torch.utils.checkpoint.checkpoint(..., use_reentrant=False)
                      around every block (see find_blocks);
  compile             torch.compile (inductor, CPU) of the training-step module, backward
                      included (loss.backward() on the compiled module's output);
  compile-budget=F    the same with torch._functorch.config.activation_memory_budget = F;
  graph-opt-inductor@F  torch.compile with graph-opt's partitioner (graph_opt.partitioner,
                      docs/TorchCompile.md) running repeat{cse,canonicalize,dce},checkpoint
                      with memory_budget=F: the saved activations bounded to F of what torch's
                      own partition saves, the bytes compile-budget=F is held to; graph-opt's
                      plan, Inductor's kernels;
  graph-opt-inductor-share@F  the same at checkpoint{activations=F*100%}: F of graph-opt's own
                      unoptimised saved activations (all that backward reads);
  checkpoint-compile  torch.utils.checkpoint around every block (as checkpoint), under
                      torch.compile.

The model is built by the project's model zoo (tools/zoo, which the exporter
tools/export/export_model.py builds its models with): build_model(NAME, sizes, seed 0, dropout
on) and train_step_module, the sizes resolved as `export_model.py --model NAME --mode train
[--tiny]` resolves them, i.e. the very model that
the harness's NAME:SIZE .pt2 holds. With --facts (the .pt2's FILE.facts.json) the sizes, seed,
dropout setting and model configuration are checked against what was exported.

What is measured, in order (harness.py runs each configuration in its own process, so that
compile caches and allocator state do not carry over from one to the next):

1. Verification. For every configuration but eager, eager's first step runs on an untouched
   copy of the model with the RNG seeded, and the configuration's first step from the same
   state and seed (for compile, this is where it compiles: its wall time is reported as
   compile_seconds, apart from the step times). The loss and every parameter's gradient are
   compared with eager's: bitwise, or within rtol (max |a - b| <= rtol * max |b| per tensor;
   1e-5 for checkpoint, 1e-3 for compile), or else against eager's step in float64: each
   tensor's error within max(rtol, 2x float32 eager's own error) (a float32 step can be
   ill-conditioned; see verify). A configuration that disagrees is not timed: its
   verification is FAILED. Inductor draws other random numbers than eager (and the same
   again where it recomputes), so for a model with dropout compile is verified on the same
   model with every dropout probability 0 (same weights and inputs; "(dropout off)"), then
   the model itself is compiled and timed. With --time-failed, a configuration that disagrees is
   timed and measured all the same (its status stays "failed").
2. --warmup unmeasured steps, then --runs measured steps, and more while they total less than
   --min-time seconds (up to 50x --runs: a few milliseconds' step measured five times is at the
   mercy of one slow step): the wall time of forward, loss and backward (gradients are set to
   None before each step, outside the timed region, so every step allocates them afresh, as
   graph-opt's graphs do). Median, quartiles (linear interpolation, as graph-opt's), min and
   max.
3. One extra step under torch.profiler with profile_memory=True: the allocation events of
   c10's CPU allocator ("[memory]", size positive when allocated, negative when freed) summed
   in time order; the peak of that running total is the step's peak above its start
   (peak_bytes). Counted: every tensor the step allocates through c10's CPU allocator
   (activations, saved tensors, temporaries, gradients, the loss), requested bytes; not
   counted: the weights and inputs (allocated before the step), memory that does not go
   through that allocator (oneDNN's scratchpads, Python objects), and frees of blocks
   allocated before the step.
   In that step alone (the timed steps run without it), loss.backward() runs inside
   torch.profiler.record_function("graph-opt:backward"); the running total of the events
   that start before that region does is backward_start_bytes: what forward left for
   backward, the tensors saved for it and the loss (the forward's temporaries are freed by
   then), graph-opt's "live at backward start" figure. For compile the compiled backward
   runs inside loss.backward() (autograd calls it), so the region's start is where backward
   starts there too; the seed gradient of the loss is allocated inside it, not counted.

4. One more step, untimed: the activation bytes its forward keeps for backward, measured the
   same way for every configuration outside the system that chose them
   (graph_opt.testing.saved_activation_bytes: the distinct storages
   torch.autograd.graph.saved_tensors_hooks receives, the model's parameters, buffers and the
   step's inputs excluded) as saved_bytes. Not for checkpoint: torch.utils.checkpoint keeps
   each block's inputs itself, where no hook sees them (under torch.compile it does not: there
   AOTAutograd saves them). graph-opt-inductor@F also records graph-opt's own figures
   (graph_opt: the plan's saved bytes, planning seconds, fallbacks); a fallback to torch's
   partitioner makes the row an error.

Output: a JSON object (to -o, atomically, and a one-line summary on stdout): status "ok",
"failed" (verification) or "error" (with a message: a model with no block to checkpoint, a
torch.compile failure, ...). Exit 0 when the JSON was written, 2 on bad arguments.
"""
import argparse
import copy
import dataclasses
import json
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_ROOT, "tools"))
sys.path.insert(0, os.path.join(REPO_ROOT, "tools", "report"))

PROG = "peers.py"
FORMAT = "graph-opt-peer/1"
SEED = 0            # the exporter's default --seed: the weights and inputs of the .pt2
STEP_SEED = 1234    # the RNG seed before the verified steps (dropout masks)
TOLERANCE = {"checkpoint": 1e-5, "compile": 1e-3, "graph-opt-inductor": 1e-3,
             "graph-opt-inductor-share": 1e-3, "checkpoint-compile": 1e-3}
FLOAT64_FACTOR = 2  # a peer may be this many times further from float64 than eager is
NO_SIGNAL = 1.0  # eager's relative error against float64 above which a tensor is not judged
MAX_RUNS_FACTOR = 50  # --min-time measures at most this many times --runs steps
EXIT_OK, EXIT_BAD = 0, 2


class PeerError(Exception):
    """The configuration cannot run on this model; the message says why."""


def parse_config(text):
    """'eager' | 'checkpoint' | 'compile' | 'compile-budget=F' | 'graph-opt-inductor@F' |
    'checkpoint-compile' -> (kind, budget or None)."""
    if text in ("eager", "checkpoint", "compile", "checkpoint-compile"):
        return text, None
    m = re.fullmatch(r"(compile-budget=|graph-opt-inductor@|graph-opt-inductor-share@)(.*)",
                     text)
    if m:
        try:
            budget = float(m.group(2))
        except ValueError:
            budget = None
        if budget is None or not 0.0 <= budget <= 1.0:
            raise ValueError(f"'{text}': the budget must be a number in [0, 1]")
        kinds = {"compile-budget=": "compile", "graph-opt-inductor@": "graph-opt-inductor",
                 "graph-opt-inductor-share@": "graph-opt-inductor-share"}
        return kinds[m.group(1)], budget
    raise ValueError(f"'{text}': unknown peer (known: eager, checkpoint, compile, "
                     "compile-budget=F, graph-opt-inductor@F, graph-opt-inductor-share@F, "
                     "checkpoint-compile)")


GRAPH_OPT_KINDS = ("graph-opt-inductor", "graph-opt-inductor-share")


def graph_opt_partitioner(kind, budget):
    """graph-opt-inductor's partitioner: (pipeline, memory_budget)."""
    if kind == "graph-opt-inductor":
        # activations= is replaced per graph by memory_budget's bytes
        return "repeat{cse,canonicalize,dce},checkpoint{activations=100%}", budget
    return (f"repeat{{cse,canonicalize,dce}},checkpoint{{activations={budget * 100:g}%}}",
            None)


def _graph_opt():
    """The graph_opt package: installed, or the build tree's, found as the exporter and the
    zoo find it (zoo.graph_opt_export)."""
    import zoo

    zoo.graph_opt_export()
    import graph_opt
    return graph_opt


def quantile(values, q):
    """Linear interpolation between the sorted values, as graph-opt's benchmark has it."""
    s = sorted(values)
    if not s:
        return None
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


# ---------------------------------------------------------------------------------------------
# The model


def build(model_spec, facts_path, dropout=True):
    """(training-step module, its arguments, its configuration) as export_model.py builds
    them (with the zoo, tools/zoo); with facts_path, checked against what was exported. The
    models outside the zoo (unseen_models.py: Hugging Face and torchvision models from
    configs, a deep MLP) are built by name too, at their one (default) size."""
    import unseen_models
    import zoo

    name, _, size = model_spec.partition(":")
    if name in unseen_models.MODELS and name not in zoo.MODELS:
        if facts_path:
            raise PeerError(f"model '{name}' is not one the exporter exports: no --facts")
        try:
            return unseen_models.build(name, size, dropout)
        except ValueError as e:
            raise PeerError(str(e)) from None
    if name not in zoo.MODELS:
        raise PeerError(f"unknown model '{name}' (known: {', '.join(zoo.MODELS)}; outside the "
                        f"zoo, from configs: {', '.join(unseen_models.MODELS)})")
    args = argparse.Namespace(tiny=size == "tiny", batch=None, image_size=None, seq_len=None)
    sizes = zoo.resolve_sizes(name, zoo.MODELS[name], args)
    built = zoo.build_model(name, sizes, SEED, dropout=dropout)
    config = json.loads(json.dumps(built.config))
    if facts_path:
        with open(facts_path) as f:
            facts = json.load(f)
        mine = {"model": name, "mode": "train", "sizes": dataclasses.asdict(sizes),
                "seed": SEED, "dropout": dropout, "config": config}
        theirs = {k: facts.get(k, True if k == "dropout" else None) for k in mine}
        diff = [k for k in mine if mine[k] != theirs[k]]
        if diff:
            raise PeerError(f"the eager model differs from the one exported to {facts_path} in "
                            + ", ".join(f"{k} ({mine[k]} here, {theirs[k]} there)" for k in diff))
    step, untied = zoo.train_step_module(built)
    # As the exporter does: an alias the step never reads once untied is dropped (T5's
    # shared.weight), so that the step holds the parameters its graph takes, no more.
    zoo.graph_opt_export().drop_unread_aliases(step, built.model, untied, built.train_args)
    return step, built.train_args, config


def find_blocks(root):
    """The blocks to checkpoint: graph_opt.eager_regions.repeated_blocks (every child of an
    nn.ModuleList or nn.Sequential that has at least two children of its class having
    submodules: ResNet's BasicBlock / Bottleneck in layer1..4, BertLayer, GPT2Block, T5Block,
    LlamaDecoderLayer)."""
    _graph_opt()  # on the path
    from graph_opt.eager_regions import repeated_blocks

    return repeated_blocks(root)


def checkpoint_blocks(step):
    """Route every block's forward through torch.utils.checkpoint (non-reentrant): its
    activations are recomputed in backward instead of kept. Parameter names do not change."""
    from torch.utils.checkpoint import checkpoint

    blocks = find_blocks(step)
    if not blocks:
        raise PeerError("no block to checkpoint (no nn.ModuleList or nn.Sequential with two "
                        "or more children of one class that have submodules)")
    for _, block in blocks:
        inner = block.forward

        def forward(*args, _inner=inner, **kwargs):
            return checkpoint(_inner, *args, use_reentrant=False, **kwargs)

        block.forward = forward
    return [name for name, _ in blocks]



def per_block_checkpoint(step):
    """Per-block checkpointing as a user would turn it on: Hugging Face's own
    gradient_checkpointing_enable() (non-reentrant, as training scripts set it) where the
    model has it, else torch.utils.checkpoint around every block (checkpoint_blocks). Returns
    what was done, in words."""
    for name, module in step.named_modules():
        if getattr(module, "supports_gradient_checkpointing", False) and \
                hasattr(module, "gradient_checkpointing_enable"):
            module.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
            return f"{name or 'the model'}.gradient_checkpointing_enable()"
    names = checkpoint_blocks(step)
    return f"torch.utils.checkpoint around {len(names)} blocks"

# ---------------------------------------------------------------------------------------------
# Steps and their verification


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict(keep_vars=True).items()}


def restore(module, saved):
    import torch

    with torch.no_grad():
        for k, v in module.state_dict(keep_vars=True).items():
            v.copy_(saved[k])


def clear_grads(params):
    for p in params:
        p.grad = None


BACKWARD_REGION = "graph-opt:backward"  # the profiled step's loss.backward(), for peak_bytes_of


def training_step(module, args):
    """The step the configurations time: forward and loss, then loss.backward(). With
    mark_backward=True (the profiled step only), loss.backward() runs inside the profiler
    region BACKWARD_REGION, which tells peak_bytes_of where backward starts."""
    from torch.profiler import record_function

    def run_step(mark_backward=False):
        (loss,) = module(*args)
        if mark_backward:
            with record_function(BACKWARD_REGION):
                loss.backward()
        else:
            loss.backward()
        return loss
    run_step.module = module
    return run_step


def outcome(loss, params):
    return loss.detach().clone(), {n: None if p.grad is None else p.grad.detach().clone()
                                   for n, p in params.items()}


def first_step(run_step, module):
    """A configuration's first step from seed STEP_SEED: ((loss, {name: gradient}), seconds)."""
    import torch

    params = dict(module.named_parameters())
    clear_grads(params.values())
    torch.manual_seed(STEP_SEED)
    start = time.perf_counter()
    loss = run_step()
    seconds = time.perf_counter() - start
    return outcome(loss, params), seconds


def max_rel_err(got, want):
    """max |got - want| / max |want| (0 when equal, inf when want is all zero), in float64."""
    got, want = got.detach().double(), want.detach().double()
    if want.numel() == 0:
        return 0.0
    err = (got - want).abs().max().item()
    if err == 0:
        return 0.0
    scale = want.abs().max().item()
    return err / scale if scale else float("inf")


def verify(kind, pristine, args, got):
    """The verdict on got = (loss, {name: gradient}), a configuration's first step, against
    eager's from the same state and seed (pristine: an untouched copy of the model).

    Bitwise equal, or every tensor within rtol (max |a - b| <= rtol * max |b|): passed. Else
    the eager step runs once more in float64 (weights and floating inputs converted) and each
    tensor's error against it is compared with float32 eager's own: within max(rtol, 2x
    eager's) passes. A float32 step can be ill-conditioned: the tiny ResNet's last BatchNorms
    normalize over two values per channel, and there eager's float32 gradients are 60% off
    float64's, compile's 0.2%. A tensor whose eager error against float64 exceeds NO_SIGNAL
    (more than 100%: an exactly-zero gradient computed in float32) is listed in
    details["no_signal"] and not judged. Returns (verdict, details)."""
    import torch

    rtol = TOLERANCE[kind]
    initial = snapshot(pristine)
    want = first_step(training_step(pristine, args), pristine)[0]
    tensors = [("loss", got[0], want[0])] + [(n, got[1].get(n), want[1][n]) for n in want[1]]
    bitwise, direct = True, {}
    for name, g, w in tensors:
        if (g is None) != (w is None):
            return (f"FAILED: {name}: gradient {'missing' if g is None else 'unexpected'}",
                    {"at": name})
        if g is None:
            continue
        if g.shape != w.shape or g.dtype != w.dtype:
            return (f"FAILED: {name}: {tuple(g.shape)} {g.dtype}, eager "
                    f"{tuple(w.shape)} {w.dtype}", {"at": name})
        if not torch.equal(g, w):
            bitwise = False
            direct[name] = max_rel_err(g, w)
    if bitwise:
        return "passed (bitwise)", {"max_rel_err": 0.0}
    worst = max(direct, key=lambda n: (direct[n] != direct[n], direct[n]))  # NaN first
    details = {"max_rel_err": direct[worst], "at": worst}
    if all(e <= rtol for e in direct.values()):
        return f"passed (rtol {rtol:g})", details

    # Against float64: is the configuration further from the exact step than eager is?
    restore(pristine, initial)
    pristine.double()
    args64 = tuple(a.double() if a.is_floating_point() else a for a in args)
    exact = first_step(training_step(pristine, args64), pristine)[0]
    exact_of = {"loss": exact[0], **exact[1]}
    details["float64"] = {}
    for name, g, w in tensors:
        if name in direct:
            details["float64"][name] = [max_rel_err(g, exact_of[name]),
                                        max_rel_err(w, exact_of[name])]

    # A tensor eager itself gets wrong by more than its own size (a gradient that is zero
    # in exact arithmetic, as a key bias's under softmax, is float32 rounding noise) says
    # nothing about the configuration: listed, not judged.
    details["no_signal"] = sorted(n for n, (m, e) in details["float64"].items()
                                  if e > NO_SIGNAL and m == m)
    judged = {n: v for n, v in details["float64"].items() if n not in details["no_signal"]}

    def excess(errors):  # > 1: further from float64 than the rule allows
        mine, eager = errors
        return mine / max(rtol, FLOAT64_FACTOR * eager) if mine == mine else float("inf")

    worst = max(judged, key=lambda n: excess(judged[n]), default=None)
    if worst is not None and excess(judged[worst]) > 1:
        mine, eager = judged[worst]
        return (f"FAILED: {worst}: error {mine:.3g} against float64, eager's {eager:.3g}",
                details)
    factor = max((m / e for m, e in judged.values() if m > rtol), default=0.0)
    if factor == 0:
        return f"passed (rtol {rtol:g} of float64)", details
    return f"passed (float64: {factor:.2g}x eager's error)", details


def step_memory(run_step):
    """One profiled step (see the module's docstring), its live allocations above its start:
    {"peak", "forward_peak" (before the region BACKWARD_REGION around loss.backward()
    starts), "at_backward" (their total when it starts), "backward_peak" (from then on),
    "events" (number of allocation events)}; the last three None when the region was not
    seen."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run_step(mark_backward=True)
    cpu = (DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP)
    events, backward_ns = [], None
    for e in prof.profiler.kineto_results.events():
        if e.name() == "[memory]" and e.device_type() in cpu:
            events.append(e)
        elif e.name() == BACKWARD_REGION:
            backward_ns = e.start_ns() if backward_ns is None else min(backward_ns, e.start_ns())
    events.sort(key=lambda e: e.start_ns())
    total = peak = forward = 0
    at_backward = backward = None if backward_ns is None else 0
    for e in events:
        total += e.nbytes()
        peak = max(peak, total)
        if backward_ns is None or e.start_ns() < backward_ns:
            forward = max(forward, total)
            if backward_ns is not None:
                at_backward = total
        else:
            backward = max(backward, total)
    return {"peak": peak, "forward_peak": forward if backward_ns is not None else None,
            "at_backward": at_backward, "backward_peak": backward, "events": len(events)}


def peak_bytes_of(run_step):
    """One profiled step (step_memory): (peak bytes above its start, backward-start bytes or
    None when the backward region was not seen, number of allocation events)."""
    m = step_memory(run_step)
    return m["peak"], m["at_backward"], m["events"]


def held_bytes(step, args):
    """What the step holds before it runs: its parameters (a DTensor's: this rank's shard,
    FSDP2) and the batch (storages)."""
    held = sum(getattr(p, "_local_tensor", p).untyped_storage().nbytes()
               for p in step.parameters())
    return held + sum(a.untyped_storage().nbytes() for a in args if hasattr(a, "untyped_storage"))


def first_steps(kind, budget, step, args, model, model_config, result, time_failed=False):
    """Prepares the configuration, runs and verifies its first step: the run_step to time
    (with time_failed, the configuration's even where its verification failed)."""
    import torch

    run_step = training_step(step, args)
    if kind == "eager":
        first_step(run_step, step)
        result["verification"] = "reference"
        return run_step
    if kind == "checkpoint":
        pristine = copy.deepcopy(step)
        names = checkpoint_blocks(step)
        result["blocks"], result["block_names"] = len(names), names
        got, _ = first_step(run_step, step)
        result["verification"], result["verification_details"] = verify(
            kind, pristine, args, got)
        return run_step

    import torch._dynamo
    import torch._functorch.config as functorch_config

    def prepare(module):
        """The module to compile: checkpoint-compile's blocks checkpointed (in place)."""
        if kind == "checkpoint-compile":
            names = checkpoint_blocks(module)
            result["blocks"], result["block_names"] = len(names), names
        return module

    if kind in GRAPH_OPT_KINDS:
        pipeline, memory_budget = graph_opt_partitioner(kind, budget)
        torch._inductor.config.custom_partitioner_fn = _graph_opt().partitioner(
            pipeline, memory_budget=memory_budget)
    elif budget is not None:
        functorch_config.activation_memory_budget = budget
    twin, twin_args, twin_config = build(model, None, dropout=False)
    if twin_config == model_config:  # no dropout: verify the very step that is timed
        del twin, twin_args
        pristine = copy.deepcopy(step)
        run_step = training_step(torch.compile(prepare(step), backend="inductor"), args)
        got, result["compile_seconds"] = first_step(run_step, step)
        result["verification"], result["verification_details"] = verify(
            kind, pristine, args, got)
        record_graph_opt(kind, result)
        return run_step
    # Inductor draws its own random numbers (the same again for what it recomputes, but not
    # eager's): verify the compiled step of the same model with every dropout probability 0
    # (same weights and inputs), then compile the model itself.
    mine, theirs = step.state_dict(), twin.state_dict()
    if mine.keys() != theirs.keys() or not all(torch.equal(mine[k], theirs[k]) for k in mine):
        raise PeerError("the dropout-free twin that verifies compile has other weights than "
                        "the model")
    pristine = copy.deepcopy(twin)
    got, seconds = first_step(training_step(torch.compile(prepare(twin), backend="inductor"),
                                            twin_args), twin)
    verdict, details = verify(kind, pristine, twin_args, got)
    passed = verdict.startswith("passed")
    result["verification"] = verdict + " (dropout off)" if passed else verdict
    result["verification_details"] = dict(details, twin_compile_seconds=seconds)
    del twin, pristine, got
    torch._dynamo.reset()
    if kind in GRAPH_OPT_KINDS:
        _graph_opt().compile.reset_stats()  # the twin's plan is not the timed model's
    if passed or time_failed:
        run_step = training_step(torch.compile(prepare(step), backend="inductor"), args)
        _, result["compile_seconds"] = first_step(run_step, step)
        record_graph_opt(kind, result)
    return run_step


def record_graph_opt(kind, result):
    """graph-opt-inductor's own figures from graph_opt.compile.stats(); a fallback to torch's
    partitioner is an error: the row would measure torch's plan under graph-opt's name."""
    if kind not in GRAPH_OPT_KINDS:
        return
    stats = _graph_opt().compile.stats()
    if stats["fallbacks"]:
        raise PeerError(f"graph-opt fell back to torch's partitioner: {stats['reasons'][0]}")
    result["graph_opt"] = {
        "graphs": stats["graphs"], "planning_seconds": stats["planning_seconds"],
        "partition_seconds": stats["partition_seconds"],
        "plan_saved_bytes": sum(p["saved_bytes"] for p in stats["plans"]),
        "recomputed": sum(len(p["recomputed"]) for p in stats["plans"]),
        "pipeline": graph_opt_partitioner(kind, result["budget"])[0],
        "memory_budget": graph_opt_partitioner(kind, result["budget"])[1],
        "activations_bound": [p["activations_bound"] for p in stats["plans"]],
    }


def saved_bytes_of(run_step, step, args):
    """Step 4 of the module's docstring: one untimed step's saved activation bytes."""
    state = list(step.parameters()) + list(step.buffers())
    _graph_opt()
    import graph_opt.testing
    saved, out = graph_opt.testing.saved_activation_bytes(run_step.module, args,
                                                             exclude=state)
    out[0].backward()
    return saved


def measure(config, model, runs, warmup, threads, facts, min_time=0.0, time_failed=False):
    import torch

    kind, budget = parse_config(config)
    torch.set_num_threads(threads)
    result = {"format": FORMAT, "model": model, "config": config, "threads": threads,
              "torch_version": torch.__version__.split("+")[0], "runs": runs, "warmup": warmup,
              "min_time": min_time,
              "status": "ok", "message": None, "verification": None, "blocks": None,
              "compile_seconds": None, "budget": budget, "saved_bytes": None}
    step, args, model_config = build(model, facts)
    params = list(step.parameters())
    initial = snapshot(step)

    # 1. The first step, verified against eager's (compile: compiled here).
    try:
        run_step = first_steps(kind, budget, step, args, model, model_config, result,
                               time_failed)
    except PeerError:
        raise
    except Exception as e:
        raise PeerError(f"{config} failed on its first step: {first_line(e)}") from e
    if result["verification"].startswith("FAILED"):
        result["status"] = "failed"
        if not time_failed:
            return result
    if kind not in ("eager", "checkpoint") and result["compile_seconds"] is None:
        # what would be timed is the eager step under this configuration's name
        raise PeerError(f"{config}: the step to time was not compiled")
    restore(step, initial)

    # 2. Warm-up, then the measured steps.
    times = []
    for _ in range(warmup):
        clear_grads(params)
        run_step()
    while len(times) < runs or (sum(times) < min_time and len(times) < MAX_RUNS_FACTOR * runs):
        clear_grads(params)
        start = time.perf_counter()
        run_step()
        times.append(time.perf_counter() - start)
    result["step_seconds"] = times
    for key, q in (("median", 0.5), ("min", 0), ("max", 1), ("q1", 0.25), ("q3", 0.75)):
        result[f"step_seconds_{key}"] = quantile(times, q)

    # 3. Peak memory above the step's start, and what is live when backward starts, in one
    # more step.
    clear_grads(params)
    result["peak_bytes"], result["backward_start_bytes"], result["memory_events"] = \
        peak_bytes_of(run_step)

    # 4. The activation bytes kept for backward, in one more step.
    if kind != "checkpoint":
        clear_grads(params)
        result["saved_bytes"] = saved_bytes_of(run_step, step, args)
    return result


def write_atomically(path, data):
    from make_report import write_atomically as write

    write(path, data)


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="NAME:SIZE, SIZE tiny or default")
    p.add_argument("--config", required=True,
                   help="eager, checkpoint, compile, compile-budget=F, graph-opt-inductor@F, "
                   "graph-opt-inductor-share@F or checkpoint-compile")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--min-time", type=float, default=0.0,
                   help="measure more steps than --runs while they total less than this many "
                   f"seconds, up to {MAX_RUNS_FACTOR}x --runs (0)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: torch's own choice)")
    p.add_argument("--facts", help="the .pt2's FILE.facts.json, to check the model against")
    p.add_argument("--time-failed", action="store_true",
                   help="measure a configuration whose verification failed too (status stays "
                   "'failed'): what its users get, wrong or not")
    p.add_argument("-o", "--output", help="write the JSON here (default: stdout)")
    args = p.parse_args(argv)
    try:
        parse_config(args.config)
    except ValueError as e:
        p.error(f"argument --config: {e}")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*:(tiny|default)", args.model):
        p.error(f"argument --model: '{args.model}' is not NAME:tiny or NAME:default")
    if (args.runs < 1 or args.warmup < 0 or args.min_time < 0
            or (args.threads is not None and args.threads < 1)):
        p.error("--runs must be >= 1, --warmup >= 0, --min-time >= 0, --threads >= 1")

    import torch

    threads = args.threads or torch.get_num_threads()
    try:
        result = measure(args.config, args.model, args.runs, args.warmup, threads, args.facts,
                         args.min_time, args.time_failed)
    except PeerError as e:
        result = {"format": FORMAT, "model": args.model, "config": args.config,
                  "threads": threads, "status": "error", "message": str(e)}
        if e.__cause__ is not None:
            traceback.print_exception(e.__cause__, file=sys.stderr)
    except Exception as e:  # anything else the model or torch raised: an error for this row
        traceback.print_exc(file=sys.stderr)
        result = {"format": FORMAT, "model": args.model, "config": args.config,
                  "threads": threads, "status": "error", "message": first_line(e)}
    text = json.dumps(result, indent=2) + "\n"
    if args.output:
        write_atomically(args.output, text.encode())
    else:
        sys.stdout.write(text)
    if result["status"] == "ok":
        summary = (f"{args.model} {args.config}: {result['verification']}, median "
                   f"{result['step_seconds_median'] * 1e3:.3f} ms, peak {result['peak_bytes']} B")
        if result.get("backward_start_bytes") is not None:
            summary += f", backward start {result['backward_start_bytes']} B"
        if result.get("saved_bytes") is not None:
            summary += f", saved {result['saved_bytes']} B"
        if result.get("compile_seconds") is not None:
            summary += f", compile {result['compile_seconds']:.1f} s"
        if result.get("graph_opt"):
            summary += f" (graph-opt {result['graph_opt']['planning_seconds']:.1f} s)"
        if result.get("blocks") is not None:
            summary += f", {result['blocks']} blocks"
    elif result["status"] == "failed":
        summary = f"{args.model} {args.config}: verification {result['verification']}"
    else:
        summary = f"{args.model} {args.config}: error: {result['message']}"
    print(summary, file=sys.stderr if not args.output else sys.stdout, flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
