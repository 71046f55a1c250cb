"""halves.py: the peak of the forward and backward halves as Inductor's kernels allocate
them (docs/TorchCompile.md, "The peak of the halves"), on small aten graphs made by
make_fx, where every buffer is counted by hand."""
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

