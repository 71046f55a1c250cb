"""inductor_read.py's walk of an Inductor wrapper's call(): allocations, reuses, views, a
fallback kernel's results and dels, counted by hand on a wrapper written out here (the
end-to-end check against a measured step is in test_compile.py)."""
from graph_opt import inductor_read as ir

MiB = 2 ** 20

WRAPPER = '''
class Runner:
    def call(self, args):
        saved, tangent = args
        args.clear()
        buf0 = empty_strided_cpu((256, 1024), (1024, 1), torch.float32)
        cpp_fused_0(saved, buf0)
        buf1 = buf0; del buf0  # reuse
        buf2 = empty_strided_cpu((512, 512), (512, 1), torch.float32)
        buf3 = torch.ops.aten.some_fallback.default(buf1, buf2)
        buf4 = buf3[0]
        buf5 = buf3[1]
        del buf3
        del saved
        buf6 = reinterpret_tensor(buf2, (262144, ), (1, ), 0); del buf2  # reuse
        del buf4
        return (buf5, buf6, None, )
'''


def test_walks_allocations_reuses_views_and_dels():
    body = ir._call_body(WRAPPER)
    assert body[0].startswith("saved, tangent = args") and body[-1].startswith("return (")
    memory = ir._Memory()
    memory.add("saved", 3 * MiB)  # a donated saved input, freed at its del
    memory.add("tangent", 4, pinned=True)
    start = memory.live
    ir._walk(body, {"buf4": 2 * MiB, "buf5": 1 * MiB}, memory)
    # buf0 (1 MiB) taken by buf1; buf2 (1 MiB); the fallback's two results (3 MiB): all
    # live together with the saved input
    assert memory.peak == start + 5 * MiB
    # saved and buf4 freed; buf1 (never deleted), buf2 as buf6 and buf5 left
    assert memory.live == 4 + 3 * MiB
    assert ir._returned(body) == ["buf5", "buf6", None]
    memory.end(ir._returned(body))  # buf1, not returned, goes with the call
    assert memory.live == 4 + 2 * MiB


def test_storage_bytes_follow_strides():
    assert ir._storage_bytes([4, 8], [8, 1], 4) == 128
    assert ir._storage_bytes([4, 8], [1, 4], 2) == (1 + 3 + 28) * 2  # a transposed layout
    assert ir._storage_bytes([0, 8], [8, 1], 4) == 0
    assert ir._storage_bytes([], [], 8) == 8


def test_a_library_kernels_workspace_peaks_at_its_line():
    """A library kernel's workspace (workspace.py) is held while its line runs: on top of
    what is live with its results. For a kernel with several results, _workspaces gives the
    workspace plus those results (the walk allocates them on the lines after the call);
    for one written `out=` an earlier line allocated, the workspace alone."""
    body = ir._call_body(WRAPPER) + ["extern_kernels.mm(buf5, buf5, out=buf6)"]
    memory = ir._Memory()
    memory.add("saved", 3 * MiB)
    sizes = {"buf4": 2 * MiB, "buf5": 1 * MiB}
    # at buf3's call: saved, buf1 and buf2 (5 MiB) live; its results 3 MiB, workspace 4 MiB
    ir._walk(body, sizes, memory, {"buf3": 4 * MiB + 3 * MiB})
    assert memory.peak == 5 * MiB + 3 * MiB + 4 * MiB
    memory = ir._Memory()
    memory.add("saved", 3 * MiB)
    # the mm's line, after the body: buf1, buf5 and buf6 (3 MiB) live, workspace 10 MiB
    ir._walk(body, sizes, memory, {"buf6": 10 * MiB})
    assert memory.peak == 3 * MiB + 10 * MiB
