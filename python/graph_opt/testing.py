"""Helpers for checking round trips: an ExportedProgram's graph module run on
flat inputs (torch 2.11's ep.module() does not take joint training programs),
and bitwise comparison of outputs. Used by python/tests and
python/tools/roundtrip_zoo.py."""
import torch

__all__ = ["bitwise_equal", "flat_inputs", "outputs_by_signature", "run_flat",
           "saved_activation_bytes"]


def flat_inputs(ep):
    """Copies of what ep.graph_module's placeholders take, in order: weights,
    buffers and constants by target, then the example user inputs."""
    args, kwargs = ep.example_inputs
    user = iter(t for t in torch.utils._pytree.tree_flatten((args, kwargs))[0]
                if isinstance(t, torch.Tensor))
    flat = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT:
            flat.append(next(user).clone())
        else:  # a non-persistent buffer is among the constants
            source = ep.state_dict if spec.target in ep.state_dict else ep.constants
            flat.append(source[spec.target].detach().clone())
    return flat


def run_flat(gm, inputs, seed=0):
    """gm(*inputs) without autograd, after torch.manual_seed(seed) (graph-opt's
    executor seeds the same generator, so random operators agree); the outputs
    flattened to a list, None entries dropped."""
    torch.manual_seed(seed)
    with torch.no_grad():
        out = gm(*inputs)
    return [o for o in torch.utils._pytree.tree_flatten(out)[0] if o is not None]


def _bytes(t):
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def bitwise_equal(a, b):
    """Same count, and each pair the same dtype, shape and bytes."""
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(_bytes(x), _bytes(y))
        for x, y in zip(a, b))


def outputs_by_signature(graph, outputs, ep):
    """graph-opt's outputs of ``graph`` (in graph order, as execute returns them) in the
    order of ``ep``'s output specs (the writer puts buffer mutations first)."""
    index = {o["name"]: i for i, o in enumerate(graph.outputs)}
    return [outputs[index[s.arg.name]] for s in ep.graph_signature.output_specs]


def saved_activation_bytes(fn, args, exclude=()):
    """Bytes autograd keeps for backward while `fn(*args)` runs forward: the
    distinct storages torch.autograd.graph.saved_tensors_hooks receives, less
    those of `exclude` (the parameters) and of `args`. Measured outside the
    system that chose them, so eager, torch.compile and graph-opt's plan are
    counted alike. Returns (bytes, fn's result)."""
    storages = {}

    def pack(t):
        st = t.untyped_storage()
        storages[st.data_ptr()] = st.nbytes()
        return t
    flat = torch.utils._pytree.tree_flatten((list(args), list(exclude)))[0]
    skip = {t.untyped_storage().data_ptr() for t in flat if isinstance(t, torch.Tensor)}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn(*args)
    return sum(n for ptr, n in storages.items() if ptr not in skip), result
