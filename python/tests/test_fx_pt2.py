"""fx <-> IR in memory and the .pt2 writer (docs/Python.md, docs/Pt2ArchiveFormat.md).

The whole zoo, every pipeline, is python/tools/roundtrip_zoo.py (make bench);
these check one graph of each kind, and the errors."""
import os
import warnings

import pytest
import torch

import graph_opt
from inputs import zoo_archive
from models import MaskedWithAConstant
from graph_opt.testing import bitwise_equal, flat_inputs, outputs_by_signature, run_flat

warnings.filterwarnings("ignore", message=".*not writable.*")


def zoo(name):
    return zoo_archive(name)


def test_save_pt2_after_add_optimizer_loads_in_torch(tmp_path):
    g = graph_opt.Graph.load(zoo("cnn-train.pt2"))
    graph_opt.run_pipeline(g, "add-optimizer{kind=adamw}")
    path = tmp_path / "step.pt2"
    g.save_pt2(str(path))
    ep = torch.export.load(str(path))
    # In-place optimizer updates: the dialect torch's verifier takes them in.
    assert [v.dialect for v in ep.verifiers] == ["TRAINING"]
    # Optimizer state is a persistent buffer, marked for graph-opt.
    state = [i["target"] for i in g.inputs if i["role"] == "optimizer_state"]
    assert state and all(t in ep.state_dict for t in state)
    assert ep.graph_module.meta["custom"]["graph_opt"]["optimizer_state"] == state
    # The graph module run flat gives graph-opt's outputs, bit for bit.
    theirs = run_flat(ep.graph_module, flat_inputs(ep))
    ours = outputs_by_signature(g, graph_opt.execute(g.clone()), ep)
    assert bitwise_equal(theirs, ours)
    # .pt2 -> IR -> .pt2 -> IR is the identity.
    back = graph_opt.Graph.load(str(path))
    assert back.print() == g.print()
    back.save_pt2(str(tmp_path / "again.pt2"))
    assert graph_opt.Graph.load(str(tmp_path / "again.pt2")).print() == g.print()


def test_save_pt2_refuses_its_input_and_a_graph_without_weights(tmp_path):
    g = graph_opt.Graph.load(zoo("mlp-train.pt2"))
    with pytest.raises(graph_opt.Error, match="never overwrites its input") as e:
        g.save_pt2(zoo("mlp-train.pt2"))
    assert e.value.exit_code == 2
    text = graph_opt.Graph.parse(g.print())  # .gir: no weights
    with pytest.raises(graph_opt.Error, match="parameter 'model.1.weight' .* has no weight"):
        text.save_pt2(str(tmp_path / "none.pt2"))
    assert not os.listdir(tmp_path)


def test_fx_round_trip_of_an_exported_training_graph():
    ep = torch.export.load(zoo("cnn-train.pt2"))
    g1 = graph_opt.from_fx(ep, name="cnn_train")
    assert g1.print() == graph_opt.Graph.load(zoo("cnn-train.pt2")).print()
    gm2 = graph_opt.to_fx(g1)
    # Every placeholder and operator call carries the fake tensor of its
    # declared type (torch's deserializer gives a None result a getitem of None).
    assert all(isinstance(n.meta.get("val"), (torch.Tensor, tuple, list)) for n in gm2.graph.nodes
               if n.op == "placeholder" or isinstance(n.target, torch._ops.OpOverload))
    g2 = graph_opt.from_fx(gm2)
    assert g2.print() == g1.print()
    flat = flat_inputs(ep)
    assert bitwise_equal(run_flat(ep.graph_module, [t.clone() for t in flat]),
                         run_flat(gm2, [t.clone() for t in flat]))


def capture_joint_graph(model, *args):
    """AOTAutograd's joint forward+backward graph, as torch.compile makes it."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition
    captured = []

    def partition(joint, joint_inputs, **kwargs):
        captured.append(joint)
        return default_partition(joint, joint_inputs, **kwargs)

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=aot_autograd(
        fw_compiler=lambda gm, _: gm, bw_compiler=lambda gm, _: gm, partition_fn=partition))
    compiled(*args).sum().backward()
    return captured[0]


def test_fx_round_trip_of_a_torch_compile_joint_graph():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    joint = capture_joint_graph(model, torch.randn(3, 8))
    g1 = graph_opt.from_fx(joint, name="joint")
    # Module paths from the forward nodes' nn_module_stack; seq_nr kept.
    modules = {n["attributes"].get("module") for n in g1.nodes}
    assert {'"0"', '"1"', '"2"'} <= modules, modules
    assert all("seq_nr" in n["attributes"] for n in g1.nodes if n["op"] == "aten::addmm")
    g2 = graph_opt.from_fx(graph_opt.to_fx(g1))
    assert g2.print() == g1.print()
    inputs = [torch.randn(n.meta["val"].shape) for n in joint.graph.nodes if n.op == "placeholder"]
    gm2 = graph_opt.to_fx(g1)
    # The joint graph takes (primals, tangents) lists; its Interpreter, flat tensors.
    expected = run_flat(torch.fx.Interpreter(joint).run, inputs)
    assert bitwise_equal(expected, run_flat(gm2, inputs))
    assert bitwise_equal(expected, graph_opt.execute(g1, inputs))


def both_program_jsons(gm, signature=None, module_call_graph=(), verifiers=("TRAINING",)):
    """graph_opt's program_json and torch's serializer on `gm`, as dicts; torch's node
    metadata without the keys program_json leaves out (the importer reads none of them)."""
    import json
    from graph_opt import fx, program_json
    signature = signature or fx._signature(gm, None, None)
    with fx._metadata_for_serializer(gm):  # module stacks as from_fx hands them over
        mine = program_json.program_json(gm, signature, list(module_call_graph),
                                         list(verifiers))
        theirs = json.loads(fx._torch_program_json(gm, signature, list(module_call_graph),
                                                   list(verifiers)))
    for node in theirs["graph_module"]["graph"]["nodes"]:
        for key in ("source_fn_stack", "torch_fn", "from_node"):
            node["metadata"].pop(key, None)
    return json.loads(mine), theirs


def test_program_json_writes_what_torchs_serializer_writes():
    """from_fx's own writer gives the JSON torch's serializer gives: an exported training
    step (a CNN's: BatchNorm's results, some unread, and dtypes, devices, layouts and
    memory formats as arguments), and joint graphs from torch.compile (a transformer
    block: split's list of results read through getitem, lists of tensors; a LayerNorm
    and dropout)."""
    from models import TinyTransformer
    ep = torch.export.load(zoo("cnn-train.pt2"))
    mine, theirs = both_program_jsons(ep.graph_module, ep.graph_signature,
                                      ep.module_call_graph, [v.dialect for v in ep.verifiers])
    assert mine == theirs
    torch.manual_seed(0)
    for model, x in ((TinyTransformer(blocks=1), torch.randn(2, 16, 64)),
                     (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16),
                                          torch.nn.Dropout(0.1)), torch.randn(3, 8))):
        joint = capture_joint_graph(model, x)
        ops = {str(n.target) for n in joint.graph.nodes if n.op == "call_function"}
        mine, theirs = both_program_jsons(joint)
        assert mine == theirs, ops
        assert len(mine["graph_module"]["graph"]["nodes"]) > 10


def test_program_json_leaves_what_it_does_not_write_to_torchs_serializer(monkeypatch):
    """An argument the writer does not take (a complex scalar) raises Unsupported; where
    the writer raises it, from_fx imports the graph through torch's serializer, the same."""
    from graph_opt import fx, program_json
    gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    x = gm.graph.placeholder("x")
    x.meta["val"] = torch.empty(2, dtype=torch.complex64)
    y = gm.graph.call_function(torch.ops.aten.mul.Scalar, (x, 2j))
    y.meta["val"] = torch.empty(2, dtype=torch.complex64)
    gm.graph.output((y,))
    with pytest.raises(program_json.Unsupported, match="complex"):
        program_json.program_json(gm, fx._signature(gm, None, None), [], ["TRAINING"])
    # custom metadata JSON cannot hold: torch's serializer names the node in its error
    y.args = (x, 2.0)
    y.meta["custom"] = {"made_by": object()}
    with pytest.raises(program_json.Unsupported, match="custom metadata of 'mul_scalar'"):
        program_json.program_json(gm, fx._signature(gm, None, None), [], ["TRAINING"])
    with pytest.raises(graph_opt.Error, match="torch's serializer refused the graph"):
        graph_opt.from_fx(gm)
    torch.manual_seed(0)
    joint = capture_joint_graph(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()),
                                torch.randn(3, 8))
    written = graph_opt.from_fx(joint, name="joint").print()

    def unsupported(*args):
        raise program_json.Unsupported("everything")
    monkeypatch.setattr(fx, "program_json", unsupported)
    assert graph_opt.from_fx(joint, name="joint").print() == written


def test_from_fx_checks_declared_types_on_meta_kernels_where_asked():
    """type_check="meta" (graph_opt's partitioner) gives a transformer block's joint graph
    the IR the CPU check gives (ImportTests' TypeCorrectionTest: what the meta check mends
    on nodes too large to run); another value is refused, naming the option."""
    from models import TinyTransformer
    torch.manual_seed(0)
    joint = capture_joint_graph(TinyTransformer(blocks=1), torch.randn(2, 16, 64))
    on_cpu = graph_opt.from_fx(joint, name="joint")
    on_meta = graph_opt.from_fx(joint, name="joint", type_check="meta")
    assert on_meta.print() == on_cpu.print()
    with pytest.raises(ValueError, match="type_check='gpu'"):
        graph_opt.from_fx(joint, type_check="gpu")


def test_from_fx_names_the_node_it_cannot_take():
    traced = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    with pytest.raises(graph_opt.Error, match=r"node '_0' \(call_module 0\): call_module is not"):
        graph_opt.from_fx(traced)

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x + 1, lambda x: x - 1, (x,))

    ep = torch.export.export(Cond(), (torch.randn(3),))
    with pytest.raises(graph_opt.Error, match=r"node 'cond' .*higher-order operator "
                                              r"torch.ops.higher_order.cond is not supported"):
        graph_opt.from_fx(ep)

    class Flat(torch.nn.Module):
        def forward(self, x):
            return x.reshape(-1) * 2

    dim = torch.export.Dim("n", min=2)
    ep = torch.export.export(Flat(), (torch.randn(4, 3),), dynamic_shapes=({0: dim},))
    with pytest.raises(graph_opt.Error, match=r"node 'x' .*symbolic shape"):
        graph_opt.from_fx(ep)

    gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    x = gm.graph.placeholder("x")
    x.meta["val"] = torch.empty(2)
    y = gm.graph.call_function(torch.sin, (x,))  # a Python function, not an operator
    gm.graph.output((y,))
    with pytest.raises(graph_opt.Error, match=r"node 'sin' .*only operator overloads"):
        graph_opt.from_fx(gm)


def test_random_only_in_python_stays_random():
    """prims::inductor_seeds is tagged nondeterministic_seeded in Python only (its C++
    registration lacks the tag): from_fx declares it, so cse keeps both calls (one seed
    tensor would replace two draws), and from_fx's phases place the backward."""
    import torch._inductor.inductor_prims  # noqa: F401  (registers Inductor's prims)
    from torch.fx.experimental.proxy_tensor import make_fx

    def two_draws(x):
        seeds = torch.ops.prims.inductor_seeds.default
        return x + seeds(2, x.device) + seeds(2, x.device)
    gm = make_fx(two_draws, tracing_mode="fake")(torch.zeros(2, dtype=torch.int64))
    names = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    g = graph_opt.from_fx(gm, phases={names[-1]: "backward"})
    graph_opt.run_pipeline(g, "cse")
    ops = [n["op"] for n in g.nodes]
    assert ops.count("prims::inductor_seeds") == 2, ops
    assert [n["phase"] for n in g.nodes][-1] == "backward"
    with pytest.raises(graph_opt.Error, match="phase"):
        graph_opt.from_fx(gm, phases={names[0]: "backward"})  # forward after backward


def test_a_tensor_constant_of_a_joint_graph_is_a_constant_input(tmp_path):
    """from_fx takes a get_attr tensor as a graph input with the role "constant", named as
    the get_attr node (a plan names it as the joint graph does), its value the weight;
    to_fx, the .pt2 writer and torch's loader carry it, and every form computes what the
    joint graph computes. The GraphModule given is not changed."""
    torch.manual_seed(0)
    joint = capture_joint_graph(MaskedWithAConstant(), torch.randn(3, 8))
    attrs = [n for n in joint.graph.nodes if n.op == "get_attr"]
    assert attrs, "the joint graph holds no tensor constant (torch changed how it traces)"
    before = str(joint.graph)
    g = graph_opt.from_fx(joint, name="joint")
    assert str(joint.graph) == before
    constants = [s for s in g.inputs if s["role"] == "constant"]
    assert [s["name"] for s in constants] == [n.name for n in attrs]
    assert [s["target"] for s in constants] == [n.target for n in attrs]
    # Placed before the user inputs, as torch.export places lifted constants.
    roles = [s["role"] for s in g.inputs]
    assert roles == ["constant"] * len(attrs) + ["user_input"] * (len(roles) - len(attrs))
    inputs = [torch.randn(n.meta["val"].shape) for n in joint.graph.nodes if n.op == "placeholder"]
    expected = run_flat(torch.fx.Interpreter(joint).run, inputs)
    constant_values = [getattr(joint, n.target) for n in attrs]
    assert bitwise_equal(expected, graph_opt.execute(g.clone(), inputs))  # constants: weights
    gm = graph_opt.to_fx(g)
    assert bitwise_equal(expected, run_flat(gm, constant_values + inputs))
    assert graph_opt.from_fx(gm).print() == g.print()
    path = tmp_path / "joint.pt2"
    g.save_pt2(str(path))
    ep = torch.export.load(str(path))
    assert [s.kind for s in ep.graph_signature.input_specs][:len(attrs)] == \
        [torch.export.graph_signature.InputKind.CONSTANT_TENSOR] * len(attrs)
    assert bitwise_equal(expected, run_flat(ep.graph_module, flat_inputs(ep)[:len(attrs)] + inputs))
