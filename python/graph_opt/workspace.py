"""What a vendor-library kernel allocates beyond its results while it runs (its workspace),
measured (docs/TorchCompile.md, "The peak of the halves").

oneDNN's convolutions on the CPU reorder their weight into a blocked layout of their own as
they run, and a convolution's backward holds its weight gradient in that layout and reorders
it back: ResNet-50's 512x512 3x3 convolution at batch 8 peaks 9 MiB above its 0.8 MiB result
forward and 18 MiB above its results backward. cuDNN and cuBLAS take workspaces the same way.
These bytes come from the same allocator as every tensor, so the step's peak includes them,
and no shape rule gives them: they depend on the library, its version, the algorithm it
picks, the layouts and the threads. So they are measured: the operator is run once on real
tensors of the node's sizes, strides and dtype under the profiler's memory events, and the
highest point of the call above its results is the workspace (a second call's where the first
held any: a library's first use of a shape may take scratch later calls do not). Measured
once per signature (operator, argument sizes, strides, dtypes, devices, the other arguments,
the thread count) and process.

Only operators that call such libraries are measured (_MEASURED: convolutions, matmuls,
attention): running an arbitrary operator on made-up data could have effects (collectives,
random state) or fail on data it depends on (indices). Where the measurement cannot run (a
profiler already active, a shape without a hint, a meta tensor, an error), the workspace is
taken as 0 and not remembered, so a later plan measures it."""
import operator

import torch

# Overload packets whose kernels call oneDNN, MKL, cuDNN, cuBLAS or a flash-attention
# kernel with workspaces of their own
_MEASURED = frozenset((
    "convolution", "convolution_backward", "_convolution", "mm", "addmm", "bmm", "baddbmm",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
))

_CONVOLUTIONS = frozenset(("convolution", "convolution_backward", "_convolution"))

_measured = {}


def measured_op(node):
    """Whether `node` runs an operator whose workspace is measured."""
    target = getattr(node, "target", None)
    return (isinstance(target, torch._ops.OpOverload)
            and target.overloadpacket.__name__ in _MEASURED)


def _hint(size):
    if isinstance(size, torch.SymInt):
        if not size.node.has_hint():
            raise ValueError("a size without a hint")
        return int(size.node.hint)
    return int(size)


def _signature(target, args, strides):
    """A hashable signature of a call: each tensor argument ("tensor", sizes, strides, dtype,
    device), the j-th tensor's strides taken from `strides[j]` where given (the layout the
    kernel reads it in, where that is not the graph's)."""
    count = [0]

    def sig(a):
        if isinstance(a, torch.fx.Node):
            val = a.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise ValueError("an argument without a tensor value")
            if val.device.type == "meta":
                raise ValueError("a meta tensor")
            j, count[0] = count[0], count[0] + 1
            sizes = tuple(_hint(s) for s in val.shape)
            given = strides.get(j)
            layout = tuple(_hint(s) for s in (given if given is not None else val.stride()))
            return ("tensor", sizes, layout, val.dtype, str(val.device))
        if isinstance(a, (list, tuple)):
            return tuple(sig(x) for x in a)
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return _hint(a)
        return a
    return (str(target), sig(args), torch.get_num_threads())


def channels_last_strides(node, forward_layout_opt):
    """{tensor argument index: strides} for a convolution as Inductor's layout optimization
    runs it, where its IR does not say: where the forward takes the optimization, a
    convolution reads its input and weight channels-last, and a convolution's backward
    reads the input and weight the forward saved in the forward's channels-last layouts (the
    weight's channels-last copy is what is saved: halves.py's _channels_last_copies) and a
    gradient made by kernels over channels-last values (a normalization's or activation's
    backward), channels-last too. On ResNet-50's backward this gives the workspaces its
    convolutions measure in the compiled step (18 MiB at a 512-channel 3x3 one, where a
    contiguous weight would take 27, and 0.3 MiB at a 64-channel one at 56x56, where a
    contiguous gradient would take 6.4: oneDNN reorders it)."""
    if not forward_layout_opt or not measured_op(node):
        return {}
    name = node.target.overloadpacket.__name__
    if name not in _CONVOLUTIONS:
        return {}
    from torch._prims_common import make_channels_last_strides_for
    positions = (0, 1, 2) if name == "convolution_backward" else (0, 1)
    out = {}
    for j in positions:
        val = node.args[j].meta.get("val") if isinstance(node.args[j], torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.dim() in (4, 5):
            try:
                out[j] = make_channels_last_strides_for([_hint(s) for s in val.shape])
            except ValueError:  # a size without a hint: not measured (_signature)
                return {}
    return out


def _real(spec):
    """A real tensor for a ("tensor", sizes, strides, dtype, device) signature."""
    _, sizes, strides, dtype, device = spec
    t = torch.empty_strided(sizes, strides, dtype=dtype, device=device)
    # What a library kernel allocates depends on shapes and layouts, not values: ones,
    # not normal_(), which took 0.16 s for one GPT-2 embedding gradient's 38M elements
    # (13x fill's), and neither garbage nor denormals (uninitialized memory) to slow the run.
    if dtype.is_floating_point or dtype.is_complex:
        t.fill_(1)
    else:
        t.zero_()
    return t


def _build(sig):
    if isinstance(sig, tuple) and sig and sig[0] == "tensor":
        return _real(sig)
    if isinstance(sig, tuple):
        return tuple(_build(s) for s in sig)
    return sig


def _profiled_bytes(call, device):
    """(highest point, end) of the allocations `call` makes on `device`, in bytes."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    kinds = ((DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP) if device == "cpu"
             else (DeviceType.CUDA,))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        results = call()
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() in kinds),
                    key=operator.methodcaller("start_ns"))
    total = peak = 0
    for e in events:
        total += e.nbytes()
        peak = max(peak, total)
    del results
    return peak, total


def workspace_bytes(node, strides=None):
    """The bytes `node`'s kernel allocates above its results at its highest point while it
    runs, measured (see the module's docstring); 0 for operators not measured.
    `strides`: {j: strides} for the j-th tensor argument (positional, then keyword) where
    the kernel reads it in another layout than the graph's (Inductor's layout
    optimization), which changes what the library reorders."""
    if not measured_op(node):
        return 0
    try:
        key = _signature(node.target, (node.args, tuple(node.kwargs.values())),
                         strides or {})
    except ValueError:
        return 0
    if key in _measured:
        return _measured[key]
    if torch._C._autograd._profiler_enabled():
        return 0  # someone is profiling: no nested session; measured at a later plan
    devices = {s[4] for s in _tensor_specs(key[1])}
    if len(devices) != 1:
        return 0
    (device,) = devices
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    try:
        with unset_fake_temporarily(), torch.no_grad():
            args, kwargs = _build(key[1])
            kwargs = dict(zip(node.kwargs.keys(), kwargs))

            def call():
                return node.target(*args, **kwargs)
            kind = device.split(":")[0]
            # A library's first use of a shape may hold more than later calls (what it
            # caches stays in `end`; a first-use scratch would not), never less: a first
            # call that holds nothing above its results settles it, else the second
            # call's figure, as the step's calls see it. MKL's GEMMs on the CPU take their
            # buffers outside torch's allocator, so their first call settles it: running
            # each twice was most of GPT-2's planning without a bound.
            peak, end = _profiled_bytes(call, kind)
            if peak > end:
                peak, end = _profiled_bytes(call, kind)
    except Exception:  # cannot run here: not counted, not remembered
        return 0
    _measured[key] = max(0, peak - end)
    return _measured[key]


def _tensor_specs(sig):
    if isinstance(sig, tuple) and sig and sig[0] == "tensor":
        yield sig
    elif isinstance(sig, tuple):
        for s in sig:
            yield from _tensor_specs(s)
