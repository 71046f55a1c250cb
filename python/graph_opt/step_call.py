"""How graph-opt calls a user's training step: one convention for graph_opt.profile,
auto_checkpoint and export_training_step (docs/Python.md, "The training step").

- ``example_inputs``: a tensor, a tuple or list of positional arguments, a dict of keyword
  arguments (a Hugging Face batch, ``model(**batch)``), or ``(args, kwargs)``.
- ``loss_fn(model, *args, **kwargs)`` returns the scalar loss. Without one the model's own
  output is the loss: a scalar tensor, or an output with ``.loss`` (a Hugging Face
  ``ModelOutput``, computed when the batch has labels) or a ``"loss"`` entry.
- Tensors ``loss_fn`` reads that are neither its arguments nor the model's (labels or a mask
  it closes over, a module-level tensor its code names, a ``functools.partial``'s bound
  tensors) are lifted as torch.export lifts constants: buffers of the step module,
  ``loss_fn_tensor_<i>``, read through the closure while the step is traced.

`flat_step` turns all of these into a ``loss_fn(model, *flat)`` over a flat tuple of
inputs, which the exporter and auto_checkpoint's eager measurements call.
"""
import contextlib
import dataclasses
import functools

import torch

from ._C import Error


def _is_batch_dict(value):
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


def split_inputs(example_inputs):
    """(positional arguments as a tuple, keyword arguments as a dict) of `example_inputs`."""
    if hasattr(example_inputs, "keys"):  # a dict, or a Hugging Face BatchEncoding
        return (), dict(example_inputs)
    if isinstance(example_inputs, tuple) and len(example_inputs) == 2 and \
            isinstance(example_inputs[0], (tuple, list)) and _is_batch_dict(example_inputs[1]):
        return tuple(example_inputs[0]), dict(example_inputs[1])
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def model_loss(output, what):
    """The loss a model returned: a scalar tensor, `.loss` (a Hugging Face ModelOutput), a
    "loss" entry, or the first element of a tuple that is a scalar tensor."""
    loss = output
    if not isinstance(output, torch.Tensor):
        if getattr(output, "loss", None) is not None:
            loss = output.loss
        elif isinstance(output, dict) and output.get("loss") is not None:
            loss = output["loss"]
        elif isinstance(output, (tuple, list)) and output and \
                isinstance(output[0], torch.Tensor) and output[0].dim() == 0:
            loss = output[0]
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shown = type(output).__name__ if not isinstance(output, torch.Tensor) \
            else f"a tensor of shape {tuple(output.shape)}"
        raise Error(f"{what}: without loss_fn the model's output is the loss, and it returned "
                    f"{shown}, not a scalar loss (nor an output with .loss: a Hugging Face "
                    "model computes it when the batch has labels); pass loss_fn(model, *inputs)")
    return loss


def _refuse_output_style(loss_fn, what):
    """A loss of torch.nn.functional or a loss module (F.cross_entropy, nn.MSELoss()) takes
    (output, target), not (model, *inputs): say what to write instead."""
    if isinstance(loss_fn, torch.nn.Module) or \
            getattr(loss_fn, "__module__", None) == "torch.nn.functional":
        name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
        raise Error(f"{what}: loss_fn is called as loss_fn(model, *inputs) (by profile, "
                    f"auto_checkpoint and export_training_step alike); {name} takes the "
                    f"model's output: write lambda model, x, y: {name}(model(x), y)")


def flat_step(loss_fn, example_inputs, what):
    """(``loss(model, *flat)``, flat): `example_inputs` as one flat tuple (positional
    arguments, then the keyword arguments' values in their order) and the loss of the step
    on it, by `loss_fn` (the convention above) or the model's own output."""
    args, kwargs = split_inputs(example_inputs)
    keys = list(kwargs)
    flat = args + tuple(kwargs[k] for k in keys)
    if loss_fn is not None:
        if not callable(loss_fn):
            raise Error(f"{what}: loss_fn is a {type(loss_fn).__name__}, not a function")
        _refuse_output_style(loss_fn, what)
    if not keys:
        if loss_fn is None:
            return (lambda m, *xs: model_loss(m(*xs), what)), flat
        return loss_fn, flat
    n = len(args)

    def loss(m, *xs):
        named = dict(zip(keys, xs[n:]))
        if loss_fn is None:
            return model_loss(m(*xs[:n], **named), what)
        return loss_fn(m, *xs[:n], **named)
    loss.graph_opt_reads = loss_fn  # what captured_tensors looks into
    return loss, flat


@dataclasses.dataclass
class _Captured:
    """A tensor a loss function reads that is not an argument: where it is read from."""
    kind: str  # "cell", "global", "partial_arg", "partial_keyword"
    holder: object
    key: object
    tensor: torch.Tensor


def captured_tensors(fn, seen=None):
    """The tensors `fn` reads that are neither its arguments nor a module's: its closure's
    cells, module-level names its code reads, a functools.partial's bound arguments, and
    those of the functions it closes over (flat_step's wrapper: the user's loss_fn), each
    once."""
    seen = set() if seen is None else seen
    if id(fn) in seen or fn is None:
        return []
    seen.add(id(fn))
    found = []
    if isinstance(fn, functools.partial):
        found += [_Captured("partial_arg", fn, i, a) for i, a in enumerate(fn.args)
                  if isinstance(a, torch.Tensor)]
        found += [_Captured("partial_keyword", fn, k, v) for k, v in fn.keywords.items()
                  if isinstance(v, torch.Tensor)]
        return found + captured_tensors(fn.func, seen)
    inner = getattr(fn, "graph_opt_reads", None)
    if inner is not None:
        found += captured_tensors(inner, seen)
    code = getattr(fn, "__code__", None)
    if code is None:
        return found
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
            found.append(_Captured("cell", cell, None, value))
        elif callable(value) and not isinstance(value, (torch.nn.Module, type)):
            found += captured_tensors(value, seen)
    module_globals = getattr(fn, "__globals__", {})
    for name in code.co_names:
        value = module_globals.get(name)
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
            found.append(_Captured("global", module_globals, name, value))
    return found


def _partial_state(p):
    return p.__reduce__()[2]  # (func, args, keywords, __dict__)


@contextlib.contextmanager
def reading(captured, tensors):
    """While it is open, each captured place reads the corresponding tensor of `tensors`
    (the step module's buffers, traced as inputs) instead of the user's: a cell's contents,
    a module-level name, a partial's bound argument (through its __setstate__)."""
    saved = []
    try:
        for c, t in zip(captured, tensors):
            if c.kind == "cell":
                saved.append((c, c.holder.cell_contents))
                c.holder.cell_contents = t
            elif c.kind == "global":
                saved.append((c, c.holder[c.key]))
                c.holder[c.key] = t
            else:
                func, args, keywords, extra = _partial_state(c.holder)
                saved.append((c, (func, args, keywords, extra)))
                args, keywords = list(args), dict(keywords or {})
                if c.kind == "partial_arg":
                    args[c.key] = t
                else:
                    keywords[c.key] = t
                c.holder.__setstate__((func, tuple(args), keywords, extra))
        yield
    finally:
        for c, value in reversed(saved):
            if c.kind == "cell":
                c.holder.cell_contents = value
            elif c.kind == "global":
                c.holder[c.key] = value
            else:
                c.holder.__setstate__(value)
