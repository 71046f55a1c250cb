"""halves.py: the peak of the forward and backward halves as Inductor's kernels allocate
them (docs/TorchCompile.md, "The peak of the halves"), on small aten graphs made by
make_fx, where every buffer is counted by hand."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graph_opt.halves import halves_peak, kind_of
from graph_opt.joint import storage_root

F32 = 4


def aten(fn, *shapes):
    return make_fx(fn, tracing_mode="fake")(*(torch.randn(s) for s in shapes))


def by_target(gm, name):
    return [n for n in gm.graph.nodes if n.op == "call_function" and name in str(n.target)]


def forward(x, w):
    h = x @ w          # an extern kernel: its own buffer
    a = torch.tanh(h)  # pointwise, saved: realized, written over h (h dies in it)
    b = a * 2          # fused into the sum: no buffer
    return b.sum(), a


def backward(a, tangent):
    return (1 - a * a) * tangent * 2,  # one fused kernel, its result the gradient


ROWS, COLS = 64, 32


def halves():
    return (aten(forward, (ROWS, 16), (16, COLS)), aten(backward, (ROWS, COLS), ()))


def test_kinds_follow_inductor():
    fw, _ = halves()
    kinds = {n.target.__name__.split(".")[0]: kind_of(n) for n in fw.graph.nodes
             if n.op == "call_function"}
    assert kinds == {"mm": "extern", "tanh": "pointwise", "mul": "pointwise",
                     "sum": "reduction"}, kinds


def test_fused_peak_counted_by_hand():
    fw, bw = halves()
    inputs = (ROWS * 16 + 16 * COLS) * F32
    act = ROWS * COLS * F32
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    # forward: the inputs, mm's buffer (tanh writes over it), the loss
    assert got["forward_peak_bytes"] == inputs + act + F32
    assert got["saved_bytes"] == act
    # backward: the saved a, the tangent, then the gradient (a is donated: written over)
    assert got["backward_peak_bytes"] == inputs + F32 + act + F32
    assert got["peak_bytes"] == max(got["forward_peak_bytes"], got["backward_peak_bytes"])


def test_a_saved_value_the_user_also_gets_is_not_written_over():
    """A saved value that is also an output of the step (a causal LM's logits beside its
    loss) is not donated to the backward (AOTAutograd's collect_fw_donated_buffer_idxs), so
    the gradient kernel cannot write over it: measured on a 32k-vocabulary head returning
    its logits, the prediction was 314.5 MiB against 407.3 measured before this rule, and
    exact after it."""
    def forward_with_a(x, w):
        loss, a = forward(x, w)
        return loss, a, a  # the user's a, then the same a saved

    fw = aten(forward_with_a, (ROWS, 16), (16, COLS))
    bw = aten(backward, (ROWS, COLS), ())
    inputs = (ROWS * 16 + 16 * COLS) * F32
    act = ROWS * COLS * F32
    got = halves_peak(fw, bw, num_fwd_outputs=2)
    # backward: the loss, a, the tangent, and the gradient in a buffer of its own
    assert got["backward_peak_bytes"] == inputs + F32 + act + F32 + act


def test_unfused_peak_gives_every_operator_a_buffer():
    fw, bw = halves()
    inputs = (ROWS * 16 + 16 * COLS) * F32
    act = ROWS * COLS * F32
    got = halves_peak(fw, bw, num_fwd_outputs=1, fused=False)
    # h, then a beside it (h freed after); b beside a; the loss beside both (b freed after)
    assert got["forward_peak_bytes"] == inputs + 2 * act + F32
    # backward starts with the loss, a and the tangent; a * a beside a (a freed after);
    # each of (1 - ...), * tangent, * 2 beside the one before (which is freed after)
    assert got["backward_peak_bytes"] == inputs + F32 + F32 + 2 * act


def test_views_of_one_buffer_are_one_buffer():
    """unbind's and split's pieces are views of what they split (the list return's alias
    annotation), so saving three heads of one qkv buffer saves one buffer."""
    def qkv(x, w):
        q, k, v = (x @ w).unbind(1)
        return (q * k * v).sum(), q, k, v

    fw = aten(qkv, (8, 16), (16, 3))
    mm = by_target(fw, "mm")[0]
    pieces = [n for n in fw.graph.nodes if n.op == "call_function"
              and "getitem" in str(n.target)]
    assert len(pieces) == 3 and all(storage_root(p) is mm for p in pieces)
    bw = aten(lambda q, k, v, t: (q * t, k * t, v * t), (8,), (8,), (8,), ())
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    assert got["saved_bytes"] == 8 * 3 * F32



@pytest.fixture
def no_workspaces(monkeypatch):
    """Hand counts of buffers: the library kernels' workspaces (measured, and dependent on
    the library) left out; test_a_library_kernels_workspace_is_counted_while_it_runs
    checks them."""
    monkeypatch.setattr("graph_opt.halves.workspace_bytes", lambda *a, **k: 0)


def test_each_result_of_a_multi_output_kernel_is_its_own_buffer(no_workspaces):
    """convolution_backward (an extern kernel) makes three results: its input gradient
    dies in the next kernel while its weight gradient lives to the end of the step, and
    its bias gradient, read by nothing, is freed as it ends. Held as one buffer, the
    input gradient would stay allocated beside the later matmul."""
    N, C, H = 2, 4, 8

    def backward(grad_out, x, weight, p, q):
        gi, gw, gb = torch.ops.aten.convolution_backward(
            grad_out, x, weight, [C], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
            [True, True, True])
        s = (gi * 2).sum()          # gi's last reader
        return gw, torch.mm(p * s, q)  # a large buffer after gi has died

    shapes = [(N, C, H, H), (N, C, H, H), (C, C, 3, 3), (64, 64), (64, 64)]
    fw = aten(lambda x: (x.sum(), x), (N, C, H, H))
    bw = aten(backward, *shapes)
    # forward: its input and its loss; saved: the input itself (a placeholder)
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    act = N * C * H * H * F32
    gw, gb, mm = C * C * 9 * F32, C * F32, 64 * 64 * F32
    loss = F32
    # backward starts with the forward's input, its loss, and the tangent-like inputs
    # (grad_out, weight, p, q are placeholders here, held to the end)
    start = act + loss + act + gw + 2 * mm
    # the kernel: all three results at once, then gb (unread) is freed
    at_conv = start + act + gw + gb
    # the sum: gi dies there; p * s, realized as the matmul's input (the scalar dies in
    # it), then the matmul's result beside it
    at_mm = start + gw + mm + mm
    assert got["backward_peak_bytes"] == max(at_conv, at_mm), got


def test_a_max_pool_backward_computes_its_indices_inline():
    """Inductor lowers a max pool's backward to a loop of its own (a gather over each
    window), though its operator is listed with the extern kernels whose inputs are
    realized: the indices it reads, made from the forward's saved offsets, are computed
    inside that loop and never allocated. Counted as a buffer, they read 12% high on
    examples/user_model.py's network at batch 32."""
    N, C, H = 2, 4, 8
    pool = ([2, 2], [2, 2], [0, 0], [1, 1])

    def backward(x, grad_out, offsets):
        indices = torch.ops.prims._low_memory_max_pool_offsets_to_indices(
            offsets, pool[0], [H, H], *pool[1:])
        return (torch.ops.aten.max_pool2d_with_indices_backward(
            grad_out, x, *pool, False, indices),)

    fw = aten(lambda x: (x.sum(), x), (N, C, H, H))
    bw = make_fx(backward, tracing_mode="fake")(
        torch.randn(N, C, H, H), torch.randn(N, C, H // 2, H // 2),
        torch.zeros(N, C, H // 2, H // 2, dtype=torch.int8))
    pooling = by_target(bw, "max_pool2d_with_indices_backward")
    assert [kind_of(n) for n in pooling] == ["pointwise"]
    X, G, O, loss = N * C * H * H * F32, N * C * (H // 2) ** 2 * F32, N * C * (H // 2) ** 2, F32
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    # backward: the input (held), the loss, the gradient and the offsets (inputs to it
    # here), then the input's gradient; no int64 indices beside them
    assert got["backward_peak_bytes"] == X + loss + G + O + X, got


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                    reason="Inductor's CPU layout optimization needs oneDNN")
def test_inputs_a_convolution_reads_are_copied_to_channels_last_and_saved(no_workspaces):
    """Inductor's layout optimization copies a convolution's graph inputs (the batch, a 3x3
    weight) to channels-last as the forward starts; where they are saved for backward, the
    copies are what is saved, live beside the parameters until backward's last read."""
    N, C, O, H = 2, 3, 4, 8

    def conv(x, w):
        return torch.ops.aten.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)

    def forward(x, w):
        r = torch.relu(conv(x, w))
        return r.sum(), x, w, r

    def backward(x, w, r, t):
        g = torch.ops.aten.threshold_backward(t.expand(r.shape), r, 0)
        _, gw, _ = torch.ops.aten.convolution_backward(
            g, x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])
        return (gw,)

    fw = aten(forward, (N, C, H, H), (O, C, 3, 3))
    bw = aten(backward, (N, C, H, H), (O, C, 3, 3), (N, O, H, H), ())
    X, W, Y, loss = N * C * H * H * F32, O * C * 9 * F32, N * O * H * H * F32, F32
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    # forward: the inputs and their copies, the convolution's result (relu writes over
    # it), the loss
    assert got["forward_peak_bytes"] == 2 * (X + W) + Y + loss, got
    assert got["saved_bytes"] == Y and got["layout_copy_bytes"] == X + W
    # backward: what forward left, the tangent, and the weight gradient (the threshold's
    # result written over the saved r)
    assert got["backward_peak_bytes"] == 2 * (X + W) + Y + loss + F32 + W, got
    # the same graphs run node by node: no layout optimization, no copies
    plain = halves_peak(fw, bw, num_fwd_outputs=1, fused=False)
    assert plain["saved_bytes"] == Y


def test_a_library_kernels_workspace_is_counted_while_it_runs():
    """oneDNN's convolution backward holds its weight gradient in a blocked layout of its
    own and reorders it back: at a 3x3 convolution of 256 channels, bytes the size of the
    weight and more beyond its results. The step's peak includes them (the allocator serves
    them as any tensor), so the kernel's step peaks at what is live with its results plus
    its workspace, measured by running the operator once on tensors of its signature.
    Without it this backward read low by the workspace."""
    from torch.profiler import ProfilerActivity, profile

    from graph_opt.workspace import workspace_bytes
    N, C, H = 2, 256, 4
    args = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)

    def backward(g, x, w):
        _, gw, _ = torch.ops.aten.convolution_backward(g, x, w, [0], *args,
                                                       [False, True, False])
        return (gw,)

    fw = aten(lambda x: (x.sum(), x), (N, C, H, H))
    bw = aten(backward, (N, C, H, H), (N, C, H, H), (C, C, 3, 3))
    (kernel,) = by_target(bw, "convolution_backward")
    measured = workspace_bytes(kernel)
    # the same call profiled here: its highest point above its result
    g, x, w = torch.randn(N, C, H, H), torch.randn(N, C, H, H), torch.randn(C, C, 3, 3)

    def call():
        return torch.ops.aten.convolution_backward(g, x, w, [0], *args, [False, True, False])
    call()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = call()
    del result
    total = peak = 0
    for e in sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        total += e.nbytes()
        peak = max(peak, total)
    assert measured == peak - total
    if torch.backends.mkldnn.is_available():
        assert measured >= C * C * 9 * F32  # at least one copy of the weight
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    act, gw = N * C * H * H * F32, C * C * 9 * F32
    # the forward's input (read again as the saved g) and loss; x and w, placeholders past
    # the saved one, held as tangents are
    start = act + F32 + act + gw
    assert got["backward_peak_bytes"] == start + gw + measured, got


def test_a_kernel_writes_over_a_dying_input_only_element_for_element():
    """Inductor writes a kernel's result over an input that dies in it only where each
    element is read where it is written: through a transpose (or a slice, a broadcast, a
    gather) the result needs a buffer of its own beside the input."""
    fw = aten(forward, (ROWS, 16), (16, COLS))
    inputs = (ROWS * 16 + 16 * COLS) * F32
    act = ROWS * COLS * F32
    start = inputs + F32 + act + F32  # the inputs, the loss, the saved a, the tangent
    same = aten(lambda a, t: (torch.tanh(a) * t,), (ROWS, COLS), ())
    got = halves_peak(fw, same, num_fwd_outputs=1)
    assert got["backward_peak_bytes"] == start, got  # written over the saved a
    moved = aten(lambda a, t: (torch.tanh(a.t()) * t,), (ROWS, COLS), ())
    got = halves_peak(fw, moved, num_fwd_outputs=1)
    assert got["backward_peak_bytes"] == start + act, got  # beside it


def test_kernels_fused_on_a_shared_read_write_over_none_of_it():
    """Two pointwise results over as many elements that read one buffer, neither reading the
    other, are one kernel in Inductor (its horizontal fusion on the shared read), and its
    in-place rule takes an input only where the kernel is its one remaining reader: neither
    result is written over the buffer they share, though it dies there. (A residual MLP's
    backward reads its saved pre-activation in a recomputed gelu and in gelu's backward this
    way; halves.py had the last of the two write over it, one buffer under the measured
    peak, and a plan under peak= measured over its bound.)"""
    def siblings(x, w):
        h = x @ w            # an extern kernel: its own buffer
        a = torch.tanh(h)    # saved: realized, reads h
        b = h * 3            # saved: realized, reads h, fused with tanh's kernel
        return a.sum() + b.sum(), a, b

    fw = aten(siblings, (ROWS, 16), (16, COLS))
    bw = aten(lambda a, b, t: (a * b * t,), (ROWS, COLS), (ROWS, COLS), ())
    inputs = (ROWS * 16 + 16 * COLS) * F32
    act = ROWS * COLS * F32
    got = halves_peak(fw, bw, num_fwd_outputs=1)
    # h, a and b live together; scalars (the sums, the loss) beside them
    assert inputs + 3 * act <= got["forward_peak_bytes"] <= inputs + 3 * act + 4 * F32, got


def _cross_entropy_like_backward(dim):
    """A backward shaped like a cross-entropy's over a wide vocabulary: the logits h
    recomputed by a matmul; a gradient g as wide, a per-row factor (from the labels and the
    tangent, broadcast across the row) times three full-width buffers, so Inductor realizes
    it on reuse (five reads, over realize_reads_threshold) and keeps its rows apart; read by
    its sum over `dim` and by the softmax's backward, which takes the row sum broadcast."""
    def bw(x, w, lab, a, b, c, t):
        h = x @ w                                   # extern: its own buffer
        g = (lab * t) * (a * b + c)
        s = g.sum(dim, keepdim=True)
        return (g - torch.exp(h) * s,)
    return bw


@pytest.mark.parametrize("dim,local", [
    (1, True),    # a row sum: may be fused with g one row at a time
    (-1, True),   # the same dimension
    (0, False),   # a column sum: no shared outer loop, g allocated
])
def test_a_value_inductor_may_hold_one_row_at_a_time_is_counted(dim, local):
    """Inductor's C++ backend fuses a value read by its row sum and by pointwise kernels on
    their shared outer loop, and where its fusion order puts the value and every reader in
    that kernel, holds the value one row at a time in a local buffer
    (try_outer_loop_fusion_with_local_buf): it is never allocated, and the last kernel
    writes over the logits. halves.py cannot tell when it does (on a 4-layer Llama's
    cross-entropy backward: 6 plans of 8), so it allocates such a value and counts it
    (row_local_values; compile.py then reads Inductor's code); with row_local=True it
    drops it. (Each expected figure is also what inductor_read.py reads from Inductor's
    code for these graphs: Inductor holds g one row at a time here for both row sums.)"""
    big, row = (ROWS, COLS), (ROWS, 1)
    fw = aten(lambda x, w, lab, a, b, c: ((x @ w).sum(), x, w, lab, a, b, c),
              (ROWS, 16), (16, COLS), row, big, big, big)
    bw = aten(_cross_entropy_like_backward(dim), (ROWS, 16), (16, COLS), row, big, big, big,
              ())
    inputs = (ROWS * 16 + 16 * COLS + ROWS + 3 * ROWS * COLS) * F32
    act = ROWS * COLS * F32
    # backward starts with the inputs (saved as themselves), the loss and the tangent;
    # then h; the sum beside it; the gradient written over h where g is never allocated,
    # else g beside h (and the gradient written over g)
    start = inputs + F32 + F32
    at_sum = start + act + (ROWS if dim != 0 else COLS) * F32
    counted = halves_peak(fw, bw, num_fwd_outputs=1)
    assert counted["row_local_values"] == (1 if local else 0), counted
    assert counted["backward_peak_bytes"] == at_sum + act, counted
    dropped = halves_peak(fw, bw, num_fwd_outputs=1, row_local=True)
    assert dropped["backward_peak_bytes"] == at_sum + (0 if local else act), dropped
