"""Where auto_checkpoint puts its checkpoints (python/graph_opt/eager_regions.py), on
exported steps written out by hand: each node a dict as graph_opt.Graph.nodes gives them."""
import types

import torch

from graph_opt.eager_regions import Region, regions, repeated_blocks


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(),
                                       torch.nn.Linear(8, 4))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 4)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))


class Step(torch.nn.Module):
    """A training-step wrapper: the whole network is one child of it."""

    def __init__(self):
        super().__init__()
        self.model = Net()


def node(op, outputs, operands, module, types_=None):
    attrs = {"module": f'"{module}"'} if module else {}
    return {"op": op, "phase": "forward", "outputs": outputs, "operands": operands,
            "types": types_ or ["f32[16, 8]"] * len(outputs), "attributes": attrs}


def graph_of(*nodes):
    return types.SimpleNamespace(nodes=list(nodes))


def report(kept=(), recomputed=()):
    return {"activations": [{"name": n, "bytes": 512, "decision": "kept"} for n in kept]
            + [{"name": n, "bytes": 512, "decision": "recomputed"} for n in recomputed]}


def block_nodes(b, x):
    """Block b's forward: norm, then its mlp Sequential (0: Linear, 1: GELU, 2: Linear)."""
    p = f"model.blocks.{b}"
    return [node("aten::layer_norm", [f"n{b}"], [x], f"{p}.norm"),
            node("aten::addmm", [f"u{b}"], [f"n{b}"], f"{p}.mlp.0"),
            node("aten::gelu", [f"g{b}"], [f"u{b}"], f"{p}.mlp.1"),
            node("aten::addmm", [f"d{b}"], [f"g{b}"], f"{p}.mlp.2")]


def keys(found):
    return [r.key for r in found]


def test_the_smallest_module_not_the_wrapper_holding_the_network():
    """GELU's output is recomputed: made in mlp.1, read by mlp.2, so the region is that run
    of the mlp Sequential; its input, the first Linear's output, is one the plan keeps."""
    g = graph_of(node("aten::addmm", ["e"], ["x"], "model.embed"), *block_nodes(0, "e"),
                 *block_nodes(1, "d0"))
    step = Step()
    found = regions(g, report(kept=["e", "n0", "u0", "d0", "n1", "u1", "g1"],
                              recomputed=["g0"]), step)
    assert keys(found) == ["model.blocks.0.mlp[1:3]"]
    assert found[0].nodes == [("aten::gelu", True), ("aten::addmm", False)]


def test_a_region_grows_back_over_an_input_the_plan_does_not_keep():
    """The first Linear's output is not kept (neither the plan's nor read by backward):
    the run starts at the first Linear, whose input (the norm's output) is kept."""
    g = graph_of(node("aten::addmm", ["e"], ["x"], "model.embed"), *block_nodes(0, "e"),
                 *block_nodes(1, "d0"))
    found = regions(g, report(kept=["e", "n0", "d0"], recomputed=["g0"]), Step())
    assert keys(found) == ["model.blocks.0.mlp"]  # the whole run of three: the Sequential
    assert keys(regions(g, report(kept=["e", "d0"], recomputed=["g0"]), Step())) == \
        ["model.blocks.0"]  # the norm's output not kept either: the block


def test_a_module_list_is_passed_up_to_the_module_that_calls_its_modules():
    """A value made in block 0 and read in block 1: the blocks' ModuleList only holds them,
    so the region is the module that calls them (the network, below the step wrapper),
    where that runs at most half the step's operators (here the wrapper's loss has more)."""
    net = [node("aten::addmm", ["e"], ["x"], "model.embed"), *block_nodes(0, "e"),
           *block_nodes(1, "d0")]
    loss = [node("aten::mul", [f"l{i}"], [f"l{i - 1}" if i else "d1"], "") for i in range(9)]
    plan = report(kept=["e", "n0", "u0", "g0", "n1", "u1", "g1"], recomputed=["d0"])
    assert keys(regions(graph_of(*net, *loss), plan, Step())) == ["model"]
    assert regions(graph_of(*net, *loss[:8]), plan, Step()) == []  # 9 of 17: stays saved


def test_the_whole_model_is_never_a_region():
    """Values the wrapper's own forward makes and reads stay saved (no region), and so do
    those only a region of more than half the step's operators would hold."""
    g = graph_of(node("aten::relu", ["r"], ["x"], ""), node("aten::sum", ["s"], ["r"], ""))
    assert regions(g, report(recomputed=["r"]), Step()) == []
    seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    g = graph_of(node("aten::addmm", ["a"], ["x"], "0"), node("aten::relu", ["r"], ["a"], "1"),
                 node("aten::addmm", ["b"], ["r"], "2"))
    # all three layers would be the whole model, two of three more than half
    assert regions(g, report(recomputed=["r"]), seq) == []
    g = graph_of(node("aten::addmm", ["a"], ["x"], "0"), node("aten::relu", ["r"], ["a"], "1"),
                 node("aten::addmm", ["b"], ["r"], "2"), node("aten::relu", ["c"], ["b"], "3"),
                 node("aten::addmm", ["d"], ["c"], "4"))
    seq = torch.nn.Sequential(*seq, torch.nn.ReLU(), torch.nn.Linear(4, 4))
    assert keys(regions(g, report(kept=["a", "c"], recomputed=["r"]), seq)) == ["[1:3]"]


def test_regions_inside_another_are_merged():
    g = graph_of(node("aten::addmm", ["e"], ["x"], "model.embed"), *block_nodes(0, "e"),
                 *block_nodes(1, "d0"))
    found = regions(g, report(kept=["e", "n0", "d0"], recomputed=["u0", "g0"]), Step())
    assert keys(found) == ["model.blocks.0.mlp"]
    r = Region("model.blocks.0.mlp", (1, 2))
    modules = dict(Step().named_modules())
    assert r.within(Region("model.blocks.0"), modules)
    assert not Region("model.blocks.0").within(r, modules)
    assert r.holds("model.blocks.0.mlp.2", modules) and not r.holds("model.blocks.0.mlp.0",
                                                                      modules)


def test_a_call_keeping_a_sliver_of_its_bytes_is_recomputed():
    """Batch norm's statistics are kept, its output (the bulk) is not read by backward."""
    g = graph_of(node("aten::addmm", ["e"], ["x"], "model.embed"),
                 node("aten::native_batch_norm", ["bn", "mean", "rstd"], ["e"],
                      "model.blocks.0.norm", ["f32[16, 64]", "f32[8]", "f32[8]"]),
                 node("aten::gelu", ["g"], ["bn"], "model.blocks.0.norm"),
                 node("aten::addmm", ["d"], ["g"], "model.blocks.0.norm"),
                 *block_nodes(1, "d"))
    found = regions(g, report(kept=["e", "mean", "rstd"], recomputed=["g"]), Step())
    assert keys(found) == ["model.blocks.0.norm"]
    assert found[0].nodes == [("aten::native_batch_norm", True), ("aten::gelu", True),
                              ("aten::addmm", True)]


def test_repeated_blocks_are_the_children_of_a_list_or_sequential_of_one_class():
    """The blocks per-block checkpointing wraps (auto_checkpoint's last candidate): the
    ModuleList's Blocks, not their submodules; a Sequential of distinct leaf layers (the
    Blocks' own mlp) holds no block, and neither does a lone child of its class."""
    net = Net()
    assert [name for name, _ in repeated_blocks(net)] == ["blocks.0", "blocks.1"]
    assert repeated_blocks(net.blocks[0]) == []
    lone = torch.nn.Sequential(Block(), torch.nn.Linear(4, 4))
    assert repeated_blocks(torch.nn.ModuleDict({"body": lone})) == []
