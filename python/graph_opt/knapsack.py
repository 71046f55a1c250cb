"""torch's own choice of the activations to save, made on a graph-opt training graph.

torch.compile's partitioner (`min_cut_rematerialization_partition`, with its knapsack under
`torch._functorch.config.activation_memory_budget`) chooses what the forward keeps for
backward. `torch_saved_values(graph, memory_budget)` runs that very function on a graph-opt
training graph, so its choice can be applied to graph-opt's graph and compared with
graph-opt's planners on the same executor.

`checkpoint{planner=torch}` runs it in a helper process (so that the C++ driver needs no
Python inside it, and a crash in torch cannot take graph-opt down):

    python -m graph_opt.knapsack GRAPH.gir MEMORY_BUDGET OUT.json

writes torch_saved_values' answer as JSON to OUT.json (through a temporary file), or
prints the error to stderr and exits 2.

torch's function expects what AOTAutograd hands it, so the graph is given that shape on a
copy (graph_opt.fx.to_fx):
- placeholders named `primals_1..N` (torch recognizes the inputs by that name);
- the loss gradient's seed (`full_like(loss, 1)` or `ones_like(loss)` in backward) replaced
  by a `tangents_1` input: without a tangent torch finds no backward and silently returns
  its default partition, with no budget applied;
- the outputs ordered forward first (the loss), then the gradients;
- runtime assertions without a value (`_assert_tensor_metadata`) erased: torch sizes every
  node it may save and has no size for them.
"""
import torch

from . import _C
from ._C import Error
from .fx import to_fx
from .joint import check_memory_budget, output_nodes, torch_saved

_SEEDS = (torch.ops.aten.full_like.default, torch.ops.aten.ones_like.default)


def _phase(node):
    return node.meta.get("custom", {}).get(_C.PT2_CUSTOM_KEY, {}).get("phase")


def aot_joint(graph):
    """The graph as AOTAutograd's joint graph: (GraphModule, num_fwd_outputs). Raises
    Error naming the graph where it has no backward or no loss-gradient seed."""
    roles = [s.get("role") for s in graph.outputs]
    if "gradient" not in roles:
        raise Error(f"graph '{graph.name}' has no gradient output: torch's partitioner "
                    "needs a training graph (forward and backward)")
    gm = to_fx(graph, stand_in_weights=True)  # torch's partitioner reads shapes, not values
    fx_graph = gm.graph
    for i, n in enumerate(fx_graph.find_nodes(op="placeholder")):
        n.target = n.name = f"primals_{i + 1}"
    outputs = output_nodes(gm)
    loss = [o for o, r in zip(outputs, roles) if r == "loss"]
    seeds = [n for n in fx_graph.nodes
             if n.op == "call_function" and n.target in _SEEDS and _phase(n) == "backward"
             and n.args and n.args[0] in loss]
    if len(seeds) != 1:
        raise Error(f"graph '{graph.name}': {len(seeds)} loss-gradient seeds (full_like or "
                    "ones_like of the loss, in backward) where torch's partitioner needs "
                    "exactly one to stand for its tangent input")
    seed = seeds[0]
    first = next(n for n in fx_graph.nodes if n.op != "placeholder")
    with fx_graph.inserting_before(first):
        tangent = fx_graph.placeholder("tangents_1")
    tangent.meta["val"] = seed.meta["val"]
    seed.replace_all_uses_with(tangent)
    fx_graph.erase_node(seed)
    forward = [o for o, r in zip(outputs, roles) if r != "gradient"]
    backward = [o for o, r in zip(outputs, roles) if r == "gradient"]
    fx_graph.output_node().args = (tuple(forward + backward),)
    for n in list(fx_graph.nodes):
        if n.op == "call_function" and "val" not in n.meta and not n.users:
            fx_graph.erase_node(n)
    gm.recompile()
    return gm, len(forward)


def torch_saved_values(graph, memory_budget):
    """What torch's partitioner saves for backward on `graph` with
    activation_memory_budget = `memory_budget` (0 to 1): {"saved": the saved
    values' names (graph inputs included, as graph-opt names them),
    "activation_bytes": their distinct storages' bytes, graph inputs apart}."""
    check_memory_budget(memory_budget)
    gm, num_fwd_outputs = aot_joint(graph)
    saved, activation_bytes = torch_saved(gm, memory_budget, num_fwd_outputs=num_fwd_outputs,
                                          static_lifetime_input_indices=[])
    inputs = [s["name"] for s in graph.inputs]
    return {
        "saved": sorted(inputs[int(n[len("primals_"):]) - 1] if n.startswith("primals_") else n
                        for n in saved),
        "activation_bytes": activation_bytes,
    }


def main(argv=None):
    import argparse
    import json
    import os
    import sys
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m graph_opt.knapsack",
                                     description="torch's saved values on a graph-opt graph")
    parser.add_argument("graph", help="a training graph graph-opt reads (.gir, .pt2)")
    parser.add_argument("memory_budget", type=float, help="activation_memory_budget, 0 to 1")
    parser.add_argument("out", help="where the JSON answer goes")
    args = parser.parse_args(argv)
    try:
        answer = torch_saved_values(_C.Graph.load(args.graph), args.memory_budget)
    except Error as e:
        print(f"{args.graph}: {e}", file=sys.stderr)
        return 2
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.out)), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({**answer, "memory_budget": args.memory_budget}, f)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
