"""graph_opt.export_training_step and `python -m graph_opt export` (docs/Importing.md)."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import graph_opt

# Python subprocesses: the fork server's client under ctest (conftest.py), else this interpreter.
PYTHON = os.environ.get("GRAPHOPT_TEST_PYTHON", sys.executable)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore", category=FutureWarning)


class Tied(torch.nn.Module):
    """A language-model head tied to its embedding, as GPT-2's."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 8)
        self.block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
        self.head = torch.nn.Linear(8, 20, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.block(self.embed(ids)))


def lm_loss(model, ids, labels):
    return torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), labels.flatten())


def test_export_training_step_keeps_ties(tmp_path):
    torch.manual_seed(0)
    model = Tied()
    ids = torch.randint(0, 20, (2, 5))
    path = tmp_path / "tied.pt2"
    graph_opt.export_training_step(model, lm_loss, (ids, ids), str(path))
    g = graph_opt.Graph.load(str(path))
    # Two parameter inputs on one storage, tied in the IR; one gradient, the whole tied one.
    assert 'parameter "model.head.weight" tied %p_model_embed_weight' in g.print()
    gradients = {o["target"]: i for i, o in enumerate(g.outputs) if o["role"] == "gradient"}
    assert sorted(gradients) == ["model.block.0.bias", "model.block.0.weight", "model.head.weight"]
    lm_loss(model, ids, ids).backward()
    ours = graph_opt.execute(g)[gradients["model.head.weight"]]
    assert torch.allclose(ours, model.embed.weight.grad, rtol=1e-5, atol=1e-6)


class MadeInForward(torch.nn.Module):
    """A tensor made while tracing (Hugging Face Llama makes such constants): AOTAutograd
    leaves it an attribute of the joint module, which torch.export's verifier refused."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x) * torch.tensor([1.5, -2.0])


def test_a_tensor_made_in_forward_becomes_a_lifted_constant(tmp_path):
    torch.manual_seed(0)
    model, x = MadeInForward(), torch.randn(3, 4)
    path = tmp_path / "made.pt2"
    graph_opt.export_training_step(model, lambda m, x: m(x).sum(), (x,), str(path))
    g = graph_opt.Graph.load(str(path))
    constants = [line for line in g.print().splitlines() if " constant " in line]
    assert len(constants) == 1 and "f32[2]" in constants[0], g.print()
    gradients = {o["target"]: i for i, o in enumerate(g.outputs) if o["role"] == "gradient"}
    model(x).sum().backward()
    ours = graph_opt.execute(g, inputs=[x])[gradients["model.lin.weight"]]
    assert torch.allclose(ours, model.lin.weight.grad, rtol=1e-5, atol=1e-6)


def test_export_training_step_gives_module_paths_and_unties(tmp_path):
    torch.manual_seed(0)
    model = Tied()
    ids = torch.randint(0, 20, (2, 5))
    path = tmp_path / "step.pt2"
    graph_opt.export_training_step(model, lm_loss, (ids, ids), str(path), untie=True)
    g = graph_opt.Graph.load(str(path))
    gradients = sorted(o["target"] for o in g.outputs if o["role"] == "gradient")
    # Untied: the head has a weight and a gradient of its own.
    assert gradients == ["model.block.0.bias", "model.block.0.weight", "model.embed.weight",
                         "model.head.weight"]
    modules = [n["attributes"].get("module") for n in g.nodes]
    # Forward and backward nodes carry the model's own paths (no "model." wrapper prefix);
    # the backward of the GELU is the GELU's.
    assert {'"embed"', '"block.0"', '"block.1"', '"head"'} <= set(modules)
    gelu_backward = [n for n in g.nodes if n["op"] == "aten::gelu_backward"]
    assert gelu_backward and gelu_backward[0]["attributes"]["module"] == '"block.1"'
    assert gelu_backward[0]["phase"] == "backward"


class ReadThroughAliases(torch.nn.Module):
    """T5's shape of tying: one embedding (`shared`) that forward reads only through two
    aliases of its weight (the encoder's and the decoder's embed_tokens)."""

    def __init__(self):
        super().__init__()
        self.shared = torch.nn.Embedding(20, 4)
        self.enc, self.dec = torch.nn.Embedding(20, 4), torch.nn.Embedding(20, 4)
        self.enc.weight = self.shared.weight
        self.dec.weight = self.shared.weight

    def forward(self, ids):
        return (self.enc(ids) * self.dec(ids)).sum()


def test_an_alias_forward_never_reads_once_untied_is_dropped():
    """What the exporter exports and what the benchmark harness measures hold the same
    parameters: drop_unread_aliases (both call it) drops the untied name forward never
    reads, and only that one."""
    from graph_opt.export import TrainingStep, drop_unread_aliases, untie_shared_parameters
    torch.manual_seed(0)
    model = ReadThroughAliases()
    step = TrainingStep(model, lambda m, ids: m(ids))
    args = (torch.randint(0, 20, (2, 5)),)
    untied = untie_shared_parameters(model)
    assert [e[:2] for e in untied] == [["enc.weight", "shared.weight"],
                                        ["dec.weight", "shared.weight"]]
    assert drop_unread_aliases(step, model, untied, args)
    assert sorted(n for n, _ in model.named_parameters()) == ["dec.weight", "enc.weight"]
    assert untied[0][2:] == ["dropped shared.weight: unused by forward once untied"]
    assert not drop_unread_aliases(step, model, [], args)  # nothing untied: nothing to drop
    step(*args)[0].backward()  # the step still runs, each alias with its own gradient
    assert model.enc.weight.grad is not None and model.dec.weight.grad is not None


def test_export_training_step_errors_are_graph_opt_errors(tmp_path):
    def broken(model, x):
        return model(x).item()  # a Python number: not a traceable loss
    with pytest.raises(graph_opt.Error, match="export_training_step: exporting Linear failed"):
        graph_opt.export_training_step(torch.nn.Linear(2, 2), broken, (torch.randn(1, 2),),
                                       str(tmp_path / "x.pt2"))
    assert not os.listdir(tmp_path)


def test_command_line_exports_a_users_factory(tmp_path):
    out = tmp_path / "user.pt2"
    env = dict(os.environ)
    run = subprocess.run([PYTHON, "-m", "graph_opt", "export",
                          "examples.user_model:training_step", "-o", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    g = graph_opt.Graph.load(str(out))
    assert {'"features.0"', '"features.1"', '"head"'} <= \
        {n["attributes"].get("module") for n in g.nodes}
    bad = subprocess.run([PYTHON, "-m", "graph_opt", "export", "examples.user_model:nope",
                          "-o", str(tmp_path / "x.pt2")], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert bad.returncode == 2
    assert "examples.user_model has no callable 'nope'" in bad.stderr


class ClassificationHead(torch.nn.Module):
    """A Hugging Face RoBERTa classification head: the first token's features, dropout,
    dense, tanh, dropout, out. In eval mode aten::dropout returns its input, here a strided
    slice, while torch.export declares its result contiguous."""

    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(64, 64)
        self.dropout = torch.nn.Dropout(0.1)
        self.out_proj = torch.nn.Linear(64, 2)

    def forward(self, features):
        x = self.dropout(features[:, 0, :])
        x = self.dropout(torch.tanh(self.dense(x)))
        return self.out_proj(x)


def test_a_layout_torch_declares_wrongly_is_corrected_and_verifies(tmp_path):
    """The import takes the kernel's strides where only the layout differs (and says so):
    no conflict, passes run, and the unmodified and the rewritten graph verify. Before,
    every pass was refused and --verify failed with every output passing."""
    torch.manual_seed(0)
    path = str(tmp_path / "head.pt2")
    graph_opt.export_inference(ClassificationHead(), (torch.randn(4, 16, 64),), path)
    g = graph_opt.Graph.load(path)
    assert not g.type_conflicts, g.type_conflicts
    assert any("aten::dropout" in r and "only the layout differs" in r for r in g.remarks), \
        g.remarks
    graph_opt.verify_rewrite(g, g.clone(), bitwise=True, check=True)
    optimized = g.clone()
    graph_opt.run_pipeline(optimized, "repeat{cse,canonicalize,dce},reinplace")
    graph_opt.verify_rewrite(g, optimized, bitwise=True, check=True)


def test_a_hugging_face_t5_exports_and_its_gradients_match_eager(tmp_path):
    """transformers' T5ForConditionalGeneration (from its config) makes tensors while tracing
    (its relative position buckets): export_training_step lifts them to the program's
    constants, which torch.export's verifier had refused ("Invalid get_attr type ... on target
    _tensor_constant0"); the step's gradients are eager's."""
    from transformers import T5Config, T5ForConditionalGeneration
    torch.manual_seed(0)
    config = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1,
                      num_decoder_layers=1, num_heads=2, dropout_rate=0.0,
                      decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(config)
    ids, labels = torch.randint(1, 64, (2, 6)), torch.randint(1, 64, (2, 4))

    def loss_fn(m, ids, labels):
        return m(input_ids=ids, labels=labels).loss

    path = tmp_path / "t5.pt2"
    graph_opt.export_training_step(model, loss_fn, (ids, labels), str(path))
    g = graph_opt.Graph.load(str(path))
    assert " constant " in g.print(), "T5's traced tensors are lifted constants"
    gradients = {o["target"]: i for i, o in enumerate(g.outputs) if o["role"] == "gradient"}
    loss_fn(model, ids, labels).backward()
    ours = graph_opt.execute(g, inputs=[ids, labels])
    # A gradient per parameter storage, named by one of its tied names (`shared` is read
    # through the encoder's and the decoder's embeddings).
    assert len(gradients) == len(list(model.parameters()))
    for target, i in gradients.items():
        p = model.get_parameter(target[len("model."):])
        assert torch.allclose(ours[i], p.grad, rtol=1e-4, atol=1e-5), target
