"""graph-opt inside torch.compile (docs/TorchCompile.md): training through
graph_opt.partitioner / graph_opt.backend against eager and torch's own
partitioner, the saved bytes against the plan, and the fallback.

`make test` trains the tiny MLP (Inductor) and the tiny GPT-2 (eager kernels,
bitwise against torch's partition under the same kernels); `make
test-compile` (GRAPHOPT_COMPILE_ALL=1) trains all seven tiny zoo models both
ways, under Inductor with cold compiles of 15-60 s each, and runs the tests
too slow for make test (predict="inductor" end to end)."""
import os
import re
import sys
import warnings

import pytest
import torch

import graph_opt
from graph_opt import compile as goc
from graph_opt.testing import saved_activation_bytes
from models import MaskedWithAConstant, ResidualMLP, TinyTransformer, measured_whole_peak

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import zoo  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)

STEPS = 50
STEP_SEED = 1234
PIPELINE = "repeat{cse,canonicalize,dce},checkpoint{activations=30%}"
ALL_MODELS = ("mlp", "cnn", "resnet18", "bert", "gpt2", "llama", "t5")
COMPILE_ALL = bool(os.environ.get("GRAPHOPT_COMPILE_ALL"))
INDUCTOR_MODELS = ALL_MODELS if COMPILE_ALL else ("mlp",)
EAGER_KERNEL_MODELS = ALL_MODELS if COMPILE_ALL else ("gpt2",)
# Loss curves of a compiled run against eager: Inductor's kernels round differently, and
# 50 AdamW steps carry it along; measured on the seven tiny models (docs/TorchCompile.md).
LOSS_RTOL = 2e-3


# The tiny ResNet-18 at its zoo batch of 2 reaches its last BatchNorms at 1x1: they normalize
# over two values per channel, float32 training is chaotic there, and torch.compile's own
# curve ends 144% off eager's. At batch 8 it is well conditioned.
BATCH = {"resnet18": 8}


def tiny(name):
    """The tiny zoo model NAME (dropout on) and its training-step module, as
    the zoo (tools/zoo) builds it for export_model.py --tiny (batch as BATCH says)."""
    args = type("Args", (), {"tiny": True, "batch": BATCH.get(name), "image_size": None,
                             "seq_len": None})
    built = zoo.build_model(name, zoo.resolve_sizes(name, zoo.MODELS[name], args), 0,
                            dropout=True)
    step, _ = zoo.train_step_module(built)
    return step, built.train_args


def train(name, wrap=lambda m: m, steps=STEPS, measure_saved=False):
    """`steps` AdamW steps on fixed data; the losses, and with measure_saved the
    activation bytes the first forward keeps for backward."""
    step, args = tiny(name)
    fn = wrap(step)
    opt = torch.optim.AdamW(step.parameters(), lr=1e-3)
    torch.manual_seed(STEP_SEED)
    losses, saved = [], None
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        if measure_saved and i == 0:
            state = list(step.parameters()) + list(step.buffers())
            saved, out = saved_activation_bytes(fn, args, exclude=state)
        else:
            out = fn(*args)
        out[0].backward()
        opt.step()
        losses.append(out[0].item())
    return losses, saved


def worst_rel(got, want):
    return max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got, want))


def assert_close_curves(got, want, what):
    worst = worst_rel(got, want)
    assert worst <= LOSS_RTOL, f"{what}: loss curve off by {worst:.2e} (relative) of eager's"


@pytest.fixture(autouse=True)
def fresh_compile_state():
    """Each test compiles afresh: a compile served from torch's caches (a run
    before this one) does not call the partitioner, and stats() would count
    nothing. Inductor's layout optimization is off: on convolution models it
    saves channels-last copies of the weights and inputs backward reads, which
    no partitioner chose (docs/TorchCompile.md), and the saved bytes are
    compared with the plan's."""
    torch._dynamo.reset()
    goc.reset_stats()
    with torch._functorch.config.patch(enable_autograd_cache=False), \
            torch._inductor.config.patch(fx_graph_cache=False, layout_optimization=False):
        yield
    torch._dynamo.reset()


def expect_plans(count=1):
    s = graph_opt.compile.stats()
    assert s["fallbacks"] == 0, s["reasons"]
    assert s["graphs"] == count, s
    return s["plans"]


@pytest.mark.parametrize("name", INDUCTOR_MODELS)
def test_trains_under_inductor_like_eager(name):
    """Eager, torch.compile, and torch.compile with graph-opt's partitioner at
    activations=30%: the loss curves agree, dropout included (fallback_random:
    Inductor's own RNG is not aten's), and the saved bytes are the plan's."""
    eager, _ = train(name)
    with torch._inductor.config.patch(fallback_random=True):
        default, _ = train(name, torch.compile)
        torch._dynamo.reset()
        with torch._inductor.config.patch(custom_partitioner_fn=graph_opt.partitioner(PIPELINE)):
            mine, saved = train(name, torch.compile, measure_saved=True)
    print(f"{name}: loss curves off eager's by {worst_rel(default, eager):.2e} (torch.compile), "
          f"{worst_rel(mine, eager):.2e} (graph-opt's partitioner)")
    assert_close_curves(default, eager, f"{name}: torch.compile")
    assert_close_curves(mine, eager, f"{name}: graph-opt's partitioner")
    (plan,) = expect_plans()
    assert plan["recomputed"], f"{name}: the plan at activations=30% recomputes nothing"
    s = graph_opt.compile.stats()
    # torch's min-cut on the tagged graph is timed as a part of graph-opt's planning time
    assert 0 < s["partition_seconds"] < s["planning_seconds"], s
    assert saved == plan["saved_bytes"], (saved, plan)


@pytest.mark.parametrize("name", EAGER_KERNEL_MODELS)
def test_bitwise_against_torchs_partition_on_eager_kernels(name):
    """Dropout on: graph-opt's backend with inner="eager" against aot_eager
    (torch's partitioner, the same kernels) is bitwise equal step for step,
    recomputed dropout included (torch replays it from the RNG state it
    saves); both agree with eager, and the saved bytes are the plan's."""
    eager, _ = train(name)
    torchs, _ = train(name, lambda m: torch.compile(m, backend="aot_eager"))
    torch._dynamo.reset()
    # unmet=closest: on the ATen-level graphs of aot_eager (no Inductor decompositions) the
    # tiny CNN and ResNet-18 cannot reach 30% (the least is 43%); the test is about the
    # partition being torch's, bit for bit, whatever the plan.
    pipeline = PIPELINE.replace("activations=30%", "activations=30%,unmet=closest")
    mine, saved = train(name, lambda m: torch.compile(
        m, backend=graph_opt.backend(pipeline, inner="eager")), measure_saved=True)
    assert mine == torchs
    assert_close_curves(mine, eager, f"{name}: graph-opt's backend (eager kernels)")
    (plan,) = expect_plans()
    if name == "gpt2":
        assert plan["rng_states"] > 0, "dropout after a recomputed value is replayed"
    assert saved == plan["saved_bytes"], (saved, plan)


# Every pass the partitioner accepts, alone and in the default pipelines (each pass declares it
# in its C++ class, PassTraits.h; test_each_accepted_pass_is_covered keeps this list whole).
PASS_PIPELINES = ("cse", "canonicalize", "dce", "liveness", "checkpoint{activations=30%}",
                  "repeat{cse,canonicalize,dce}", PIPELINE)
GRADIENT_MODELS = ("mlp", "bert", "gpt2", "llama", "t5") if COMPILE_ALL else ("mlp",)


def test_each_accepted_pass_is_covered():
    from graph_opt.joint import passes_inside_compile
    shipped = {name for name, hidden in passes_inside_compile()[0].items() if not hidden}
    named = {p.split("{")[0] for p in PASS_PIPELINES} | {"repeat"}
    assert shipped == {"cse", "canonicalize", "dce", "repeat", "checkpoint", "liveness"}
    assert shipped <= named, shipped - named


def one_step_gradients(name, wrap):
    """The loss and every parameter's gradient after one step of the tiny zoo model NAME."""
    step, args = tiny(name)
    fn = wrap(step)
    torch.manual_seed(STEP_SEED)
    out = fn(*args)
    out[0].backward()
    return out[0].detach(), {n: p.grad for n, p in step.named_parameters()
                             if p.grad is not None}


@pytest.mark.parametrize("pipeline", PASS_PIPELINES)
@pytest.mark.parametrize("name", GRADIENT_MODELS)
def test_every_accepted_pass_keeps_torchs_gradients(name, pipeline):
    """Dropout on: after one step through graph-opt's partition (eager kernels) every
    parameter's gradient is bitwise the one torch's own partition gives under the same
    kernels (aot_eager). make test runs the MLP; make test-compile the transformers too."""
    loss, want = one_step_gradients(name, lambda m: torch.compile(m, backend="aot_eager"))
    torch._dynamo.reset()
    got_loss, got = one_step_gradients(name, lambda m: torch.compile(m, backend=graph_opt.backend(
        pipeline, inner="eager", strict=True, verify=True)))
    expect_plans()
    assert torch.equal(got_loss, loss), (got_loss, loss)
    assert got.keys() == want.keys()
    differ = [n for n in want if not torch.equal(got[n], want[n])]
    assert not differ, f"{len(differ)} of {len(want)} gradients differ, first {differ[0]}: max " \
        f"{(got[differ[0]] - want[differ[0]]).abs().max().item():.3g}"


def test_verify_names_the_gradient_a_wrong_partition_changes(monkeypatch):
    """verify=True runs graph-opt's halves and torch's on the same made-up inputs when a
    joint graph is compiled: a partition that reads a value in place of another (what
    carrying reinplace over as a replacement did) raises PartitionMismatch naming the first
    gradient that differs, strict or not."""
    real = goc.apply_replacements

    def wrong(gm, found):
        real(gm, found)
        # backward reads tanh's operand in place of its result, as if tanh had run in place
        tanh = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.tanh.default)
        for user in list(tanh.users):
            if user.target is torch.ops.aten.tanh_backward.default:
                user.replace_input_with(tanh, tanh.args[0])
    monkeypatch.setattr(goc, "apply_replacements", wrong)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    fn = torch.compile(model, backend=graph_opt.backend(PIPELINE, inner="eager", verify=True))
    with pytest.raises(Exception, match="PartitionMismatch: the gradient of input"):
        fn(torch.randn(4, 8)).sum().backward()


def test_verify_draws_embedding_indices_over_the_table():
    """verify_partition's made-up inputs: an integer input read only as indices (embedding,
    through a view; the index_put of its backward; a padding check) is drawn over the table's
    rows (all zeros would sum every token's gradient into row 0, where two
    correct partitions round differently); one read by anything else stays zeros."""
    from graph_opt.verify_partition import make_inputs

    def step(table, ids, labels):
        grad = torch.ops.aten.index_put(torch.zeros_like(table), [ids], table[:64], True)
        return (torch.nn.functional.embedding(ids.view(8, 8), table).sum() + grad.sum()
                + (ids == -1).sum()
                + torch.nn.functional.embedding(labels, table).sum() + labels.sum())

    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(step, tracing_mode="fake")(torch.randn(50, 4), torch.zeros(64, dtype=torch.long),
                                            torch.zeros(8, dtype=torch.long))
    made = make_inputs(gm)
    ids, labels = (made[n.name] for n in gm.graph.nodes if n.op == "placeholder"
                   and n.meta["val"].dtype == torch.long)
    assert 0 <= int(ids.min()) and int(ids.max()) < 50 and len(set(ids.tolist())) > 10
    assert not labels.any()


def _partition_summing(scale, extra=0.0):
    """A (forward, backward) pair for a joint graph of `p` and `tangents_1`: forward saves p,
    backward returns ((p * scale + p * 3) - p * scale + extra) * tangents_1 as the gradient
    of p: 3p where extra is 0, rounded at the precision of p * scale (exact at scale 0)."""
    class Fw(torch.nn.Module):
        def forward(self, p):
            return (p.sum(), p)

    class Bw(torch.nn.Module):
        def forward(self, p, tangents_1):
            return (((p * scale + p * 3) - p * scale + extra) * tangents_1,)
    return torch.fx.symbolic_trace(Fw()), torch.fx.symbolic_trace(Bw())


def _partition_with_a_log(factor):
    """A (forward, backward) pair for a joint graph of `p` and `tangents_1`: forward gives
    log(p).sum() and saves p; backward `factor` / p * tangents_1, times log(p).sum() * 0 + 1:
    where any p is negative every value is NaN, whatever the factor."""
    class Fw(torch.nn.Module):
        def forward(self, p):
            return (p.log().sum(), p)

    class Bw(torch.nn.Module):
        def forward(self, p, tangents_1):
            return ((p.log().sum() * 0 + 1) * factor / p * tangents_1,)
    return torch.fx.symbolic_trace(Fw()), torch.fx.symbolic_trace(Bw())


def _joint_of_p(shape=(64,)):
    """A joint graph of `p` (shape `shape`) and `tangents_1` that returns p."""
    class Joint(torch.nn.Module):
        def forward(self, p, tangents_1):
            return p
    joint = torch.fx.symbolic_trace(Joint())
    for n in joint.graph.nodes:
        if n.op == "placeholder":
            n.meta["val"] = torch.empty(shape) if n.name == "p" else torch.empty(())
    return joint


def test_verify_does_not_pass_two_nans():
    """Values that are NaN in both partitions are no match: verify draws inputs again until
    torch's partition computes finite values (normal, then positive: log(p) is finite there)
    and then finds the wrong gradient (2/p for 1/p) the NaNs had hidden; where no draw gives
    finite values it says the check could not run, naming the value."""
    from graph_opt.verify_partition import PartitionMismatch, VerifyCannotRun, verify_partition
    joint = _joint_of_p()
    assert verify_partition(joint, _partition_with_a_log(1.0), _partition_with_a_log(1.0), 1) == 2
    with pytest.raises(PartitionMismatch, match="the gradient of input 0"):
        verify_partition(joint, _partition_with_a_log(2.0), _partition_with_a_log(1.0), 1)

    class Fw(torch.nn.Module):
        def forward(self, p):
            return ((-p.exp()).log().sum(), p)
    nan = (torch.fx.symbolic_trace(Fw()), _partition_with_a_log(1.0)[1])
    with pytest.raises(VerifyCannotRun, match="forward output 0 is not finite in torch's own "
                                              "partition on each draw"):
        verify_partition(joint, nan, nan, 1)


class NotFinite(torch.nn.Module):
    """A step whose loss is NaN on any input: log of a negative number."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        return (-self.a(x).exp()).log().sum()


def test_a_verify_that_cannot_run_raises_where_asked_for_and_is_never_a_count():
    """verify=True asked for: a graph verify cannot check raises. Verify on by default
    (GRAPHOPT_VERIFY=1): a warning, and the plan's "verified" is absent (a count or
    nothing), "verify_error" saying why."""
    torch.manual_seed(0)
    model, x = NotFinite(), torch.randn(4, 8)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="VerifyCannotRun"):
        torch.compile(model, backend=graph_opt.backend(PIPELINE, inner="eager",
                                                        verify=True))(x).backward()
    torch._dynamo.reset()
    goc.reset_stats()
    partitioner = graph_opt.partitioner(PIPELINE)
    partitioner.verify = True  # as GRAPHOPT_VERIFY=1 sets it: on, not asked for
    with pytest.warns(RuntimeWarning, match="verify could not run this graph"):
        backend = graph_opt.backend(PIPELINE, inner="eager")
        backend.partitioner = partitioner
        partitioner.kernels = "eager"
        torch.compile(model, backend=backend)(x).backward()
    (plan,) = expect_plans()
    assert "verified" not in plan and "not finite" in plan["verify_error"], plan


def test_verify_widens_only_where_torchs_own_partitions_differ():
    """A gradient two of torch's partitions round differently (torch's sums at a precision
    of 1e7, the other exactly) passes where graph-opt's (at 1e6) is within SPREAD_FACTOR of
    their difference, named in `widened`; without another partition to learn from it stays
    a mismatch; a gradient off by far more fails, naming torch's spread."""
    from graph_opt.verify_partition import PartitionMismatch, verify_partition
    joint = _joint_of_p()
    theirs, other, mine = (_partition_summing(s) for s in (1e7, 0.0, 1e6))
    with pytest.raises(PartitionMismatch, match="the gradient of input 0"):
        verify_partition(joint, mine, theirs, 1)
    widened = {}
    assert verify_partition(joint, mine, theirs, 1, other=lambda: other, widened=widened) == 2
    ((name, (difference, spread)),) = widened.items()
    assert "input 0 ('p'" in name and 0 < difference <= 4 * spread
    with pytest.raises(PartitionMismatch, match="torch's own partitions differ there"):
        verify_partition(joint, _partition_summing(1e6, extra=100.0), theirs, 1,
                         other=lambda: other)


def test_memory_budget_is_torchs_reference():
    """memory_budget=B bounds the saved activations to B of what torch's own partition
    saves (measured here with saved_tensors_hooks under aot_eager), the reference of
    torch's activation_memory_budget; the plan keeps to it."""
    _, torchs = train("gpt2", lambda m: torch.compile(m, backend="aot_eager"), steps=1,
                      measure_saved=True)
    torch._dynamo.reset()
    _, saved = train("gpt2", lambda m: torch.compile(m, backend=graph_opt.backend(
        "repeat{cse,canonicalize,dce},checkpoint{activations=100%}", inner="eager",
        memory_budget=0.3)), steps=1, measure_saved=True)
    (plan,) = expect_plans()
    assert plan["activations_bound"] == int(0.3 * torchs)
    assert plan["activation_bytes"] <= plan["activations_bound"]
    assert saved == plan["saved_bytes"] < torchs


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).square().mean()


def test_falls_back_with_one_warning_and_strict_raises():
    """A plan that fails (a budget no plan meets) goes to torch's default partitioner: one
    warning naming why, counted, training unharmed. strict=True raises instead."""
    pipeline = "checkpoint{budget=1}"
    torch.manual_seed(0)
    model, x = Small(), torch.randn(4, 8)
    want = model(x)
    with pytest.warns(RuntimeWarning, match="torch's default partitioner") as caught:
        got = torch.compile(model, backend=graph_opt.backend(pipeline, inner="eager"))(x)
        got.backward()
    assert torch.equal(got, want)
    s = graph_opt.compile.stats()
    assert (s["graphs"], s["fallbacks"]) == (0, 1), s
    assert "budget=1" in s["reasons"][0] and len([w for w in caught if "graph-opt" in str(
        w.message)]) == 1
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="budget=1"):
        torch.compile(model, backend=graph_opt.backend(pipeline, inner="eager", strict=True))(x)


def test_a_share_no_plan_reaches_is_planned_as_close_as_it_can():
    """memory_budget= on a graph where no plan reaches the share (the small bucket and shard
    graphs DDP and FSDP2 hand the partitioner): graph-opt's closest plan, counted in
    stats()["unmet"] with a warning, strict or not; not torch's knapsack instead."""
    class ReturnsWhatBackwardReads(torch.nn.Module):
        """Its forward returns the tanh backward reads: that value is kept whatever the
        plan, and it is most of what torch's partition saves."""

        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 64)

        def forward(self, x):
            h = torch.tanh(self.a(x))
            return h.sum(), h

    torch.manual_seed(0)
    model, x = ReturnsWhatBackwardReads(), torch.randn(4, 8)
    want = model(x)[0]
    torch._dynamo.reset()
    goc.reset_stats()
    with pytest.warns(RuntimeWarning, match="memory_budget=0.01 cannot be met"):
        got = torch.compile(model, backend=graph_opt.backend(
            PIPELINE, inner="eager", memory_budget=0.01, strict=True, verify=True))(x)[0]
        got.backward()
    assert torch.equal(got, want)
    (plan,) = expect_plans()
    assert plan["partition"] == "graph-opt" and plan["memory_budget_met"] is False, plan
    assert plan["activation_bytes"] > plan["activations_bound"]
    (message,) = graph_opt.compile.stats()["unmet"]
    assert "closest partition (graph-opt)" in message


def hf_causal_lm():
    import transformers
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(config), lambda m, ids: m(ids, labels=ids).loss


def hf_classifier():
    import transformers
    config = transformers.DistilBertConfig(vocab_size=128, dim=32, hidden_dim=64, n_layers=2,
                                           n_heads=4, max_position_embeddings=128,
                                           num_labels=3, dropout=0.0, attention_dropout=0.0,
                                           seq_classif_dropout=0.0)
    labels = torch.tensor([0, 2, 1, 1])
    return (transformers.DistilBertForSequenceClassification(config),
            lambda m, ids: m(ids, labels=labels).loss)


def hf_bert_classifier():
    import transformers
    config = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=128, num_labels=2,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    labels = torch.tensor([0, 1, 1, 0])
    return (transformers.BertForSequenceClassification(config),
            lambda m, ids: m(ids, labels=labels).loss)


def varying_length_losses(make, backend, lengths=(24, 32, 40)):
    """AdamW steps of a fresh model `make()` gives, compiled with `backend` (None: eager),
    one step per sequence length (dynamo recompiles with a symbolic length at the second,
    and runs the third on that graph)."""
    torch.manual_seed(0)
    model, loss_fn = make()
    step = lambda ids: loss_fn(model, ids)  # noqa: E731
    step = torch.compile(step, backend=backend) if backend else step
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1)
    losses = []
    for length in lengths:
        opt.zero_grad(set_to_none=True)
        loss = step(torch.randint(0, 128, (4, length), generator=data))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make", [hf_causal_lm, hf_classifier])
def test_varying_sequence_lengths_are_planned(make):
    """A Hugging Face causal LM and classifier trained with the sequence length changing
    from step to step: the graph dynamo recompiles with a symbolic length is planned at the
    length torch traced it with (no fallback, strict=True), verified there, and trains as
    eager does."""
    want = varying_length_losses(make, None)
    torch._dynamo.reset()
    goc.reset_stats()
    got = varying_length_losses(make, graph_opt.backend(
        inner="eager", memory_budget=0.3, strict=True, verify=True))
    s = graph_opt.compile.stats()
    assert s["fallbacks"] == 0, s["reasons"]
    symbolic = [p for p in s["plans"] if "symbolic" in p]
    assert symbolic, "no graph with a symbolic length was planned"
    for plan in symbolic:
        ((name, sizes),) = plan["symbolic"].items()
        assert sizes["planned_at"] == sizes["hint"], plan["symbolic"]  # memory_budget=
        assert plan["verified"] > 0
    assert got == pytest.approx(want, rel=1e-5), (got, want)


@pytest.mark.parametrize("make", [hf_causal_lm, hf_classifier, hf_bert_classifier])
def test_a_model_that_checkpoints_itself_is_planned(make):
    """Hugging Face's gradient_checkpointing_enable() (non-reentrant, as training scripts set
    it): the joint graph carries the user's checkpoint regions. graph-opt's plan replaces
    them (their region ids no longer make torch save region boundaries graph-opt
    recomputes: the causal LM's partition failed on that, DistilBERT's saved set differed);
    strict=True, verify=True, no fallback, the record says whether the user's regions were
    replaced or kept, and the step gives eager's loss and gradients."""
    torch.manual_seed(0)
    model, loss_fn = make()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, 128, (4, 24), generator=torch.Generator().manual_seed(1))
    want = loss_fn(model, ids)
    want_grads = torch.autograd.grad(want, list(model.parameters()))
    torch._dynamo.reset()
    goc.reset_stats()
    # (unmet=closest: the causal LM's loss, after a graph break, is a graph of 28 nodes whose
    # 30% no plan reaches)
    step = torch.compile(lambda ids: loss_fn(model, ids), backend=graph_opt.backend(
        PIPELINE.replace("30%", "30%,unmet=closest"), inner="eager", strict=True,
        verify=True))
    got = step(ids)
    got_grads = torch.autograd.grad(got, list(model.parameters()))
    s = graph_opt.compile.stats()
    assert s["fallbacks"] == 0, s["reasons"]
    tagged = [p for p in s["plans"] if p.get("user_checkpoint_nodes")]
    assert tagged and all(p["user_checkpoint"] == "replaced" for p in tagged), s["plans"]
    assert torch.allclose(got, want, rtol=1e-5), (got, want)
    for g, w in zip(got_grads, want_grads):
        assert torch.allclose(g, w, rtol=1e-4, atol=1e-6)


def test_peak_plans_a_symbolic_length_at_its_largest_or_says_it_could_not():
    """Under peak= a symbolic size the user bounded (mark_dynamic's max) is planned at that
    largest size; an unbounded one at the size traced, with a warning saying so."""
    torch.manual_seed(0)
    model = TinyTransformer(blocks=1, dim=32, heads=2)
    for bounded in (True, False):
        torch._dynamo.reset()
        goc.reset_stats()
        step = torch.compile(model, backend=graph_opt.backend(inner="eager", peak="64MiB",
                                                              strict=True))
        x = torch.randn(2, 40, 32)
        torch._dynamo.mark_dynamic(x, 1, **({"min": 8, "max": 96} if bounded else {}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step(x).backward()
        s = graph_opt.compile.stats()
        (plan,) = [p for p in s["plans"] if "symbolic" in p]
        ((_, length),) = plan["symbolic"].items()
        assert length["hint"] == 40
        told = [w for w in caught if "checked at the sizes torch traced with only" in
                str(w.message)]
        if bounded:
            assert (length["max"], length["planned_at"]) == (96, 96), plan["symbolic"]
            assert not told and "unbounded_sizes" not in plan
        else:
            assert length["max"] is None and length["planned_at"] == 40, plan["symbolic"]
            assert told and plan["unbounded_sizes"]


def test_a_tensor_constant_in_a_forward_is_planned():
    """A forward that builds a tensor as it runs (a masking where's torch.tensor(-1e4):
    get_attr _tensor_constant0 in the joint graph, as Inductor's joint graph of GPT-2 on
    CUDA and Hugging Face's T5 and BART on CPU hold one) is planned under strict=True,
    verified against torch's partition, and gives eager's loss and gradients."""
    torch.manual_seed(0)
    model, x = MaskedWithAConstant(), torch.randn(6, 8)
    torch._dynamo.reset()
    want = model(x).square().mean()
    want_grads = torch.autograd.grad(want, list(model.parameters()))
    compiled = torch.compile(model, backend=graph_opt.backend(
        PIPELINE, inner="eager", strict=True, verify=True))
    got = compiled(x).square().mean()
    got_grads = torch.autograd.grad(got, list(model.parameters()))
    (plan,) = expect_plans()
    assert plan["partition"] == "graph-opt" and plan["verified"] > 0, plan
    # The constant is held all step, as the parameters are (halves.py counts it with them).
    held = sum(p.nbytes for p in model.parameters()) + x.nbytes + torch.tensor(-1e4).nbytes
    assert plan["halves"]["input_bytes"] == held, plan["halves"]
    assert torch.equal(got, want)
    for g, w in zip(got_grads, want_grads):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-6)


class AddAfterABreak(torch.nn.Module):
    """h = tanh(W x), a graph break, then h + x: the second frame's joint graph is one add
    whose backward computes nothing (its tangent is both gradients), as the `x + block(x)`
    frames between FSDP2's sharded blocks are."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        torch._dynamo.graph_break()
        return h + x


def test_a_graph_whose_backward_computes_nothing_is_planned():
    """Such a graph has nothing to save or recompute: torch's default partition is its
    plan, not a fallback (before: "@joint has no backward nodes", a fallback, an error
    under strict=True)."""
    torch.manual_seed(0)
    model, x = AddAfterABreak(), torch.randn(6, 8, requires_grad=True)
    torch._dynamo.reset()
    goc.reset_stats()
    want = model(x).square().mean()
    want_grads = torch.autograd.grad(want, [x, *model.parameters()])
    compiled = torch.compile(model, backend=graph_opt.backend(
        "checkpoint{activations=100%}", inner="eager", strict=True, verify=True))
    got = compiled(x).square().mean()
    got_grads = torch.autograd.grad(got, [x, *model.parameters()])
    stats = goc.stats()
    assert stats["fallbacks"] == 0 and stats["graphs"] == 2, stats
    through = [p for p in stats["plans"] if p["partition"] == "torch"]
    assert len(through) == 1 and through[0]["saved_bytes"] == 0, stats["plans"]
    assert torch.equal(got, want)
    for g, w in zip(got_grads, want_grads):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-6)


def compiled_plan(model, x, **options):
    """One compiled training step with graph_opt.backend(inner="eager", **options): its
    plan record, and the loss and gradients, against eager's."""
    torch._dynamo.reset()
    goc.reset_stats()
    want = model(x)
    want_grads = torch.autograd.grad(want, list(model.parameters()))
    got = torch.compile(model, backend=graph_opt.backend(inner="eager", **options))(x)
    got_grads = torch.autograd.grad(got, list(model.parameters()))
    assert torch.equal(got, want)
    for g, w in zip(got_grads, want_grads):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-6)
    (plan,) = expect_plans()
    return plan


def test_peak_bounds_the_whole_step_of_the_halves():
    """peak= (bytes, or a string with a unit) bounds the whole step, its inputs (parameters
    and the batch) included, of the halves torch builds from graph-opt's tags (here run node
    by node, inner="eager"): a loose peak recomputes nothing, one between the unoptimised and
    the least reachable is met with a plan made again until the halves are within it (the
    plans' rounds in the record), the gradients are eager's either way."""
    torch.manual_seed(0)
    model, x = ResidualMLP(4, torch.nn.functional.gelu), torch.randn(256, 32)
    loose = compiled_plan(model, x, pipeline="checkpoint{activations=100%}", peak="1GiB")
    assert loose["peak_bound_bytes"] == 2**30
    assert not loose["recomputed"]
    whole = loose["halves_peak_bytes"]
    inputs = loose["halves"]["input_bytes"]
    bound = inputs + int(0.7 * (whole - inputs))
    tight = compiled_plan(model, x, pipeline="checkpoint{budget=90%}", peak=bound)
    assert tight["peak_bound_bytes"] == bound < whole
    assert tight["halves_peak_bytes"] <= bound
    assert tight["recomputed"] and tight["peak_rounds"] >= 1
    assert len(tight["peak_rounds_halves_bytes"]) == tight["peak_rounds"]
    # the least the halves reach, named when asked for less
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed,
                       match=r"cannot be met: the least peak of the step torch.compile runs"):
        torch.compile(model, backend=graph_opt.backend(inner="eager", strict=True,
                                                       peak=inputs + 1024))(x)


def test_peak_search_bisects_towards_what_the_plan_over_saved_not_the_unbounded_ask():
    """The search's first round asks for no bound; where the second lands far under the aim,
    the next asks halfway between it and what the first plan saved. It once halved towards
    the unbounded ask itself, got the first plan again and stopped 12.5% under the bound
    (Llama under cost=inductor). A stand-in step: every plan saves 0.8x the bytes asked
    (all 1000 bytes without a bound), its halves' peak is 500 bytes more."""
    import dataclasses

    from graph_opt.candidates import Candidate

    @dataclasses.dataclass
    class FakePlan:
        recomputed: set

    everything = 1000

    def attempt(gm, joint_inputs, kwargs, imported, activations=None, closest=False,
                known=None):
        saved = everything if activations >= everything else int(0.8 * activations)
        if saved in known:
            return known[saved]
        plan = FakePlan(recomputed=set() if saved == everything else {"x"})
        known[saved] = Candidate("graph-opt", None, None, {"peak_bytes": 500 + saved,
                                                            "saved_bytes": saved}, plan=plan)
        return known[saved]

    partitioner = goc.GraphOptPartitioner(peak=1325)
    partitioner._attempt = attempt
    best, rounds, seen = partitioner._attempts_for_peak(None, None, {}, None)
    aim = int(1325 * (1 - goc._PEAK_MARGIN))
    got = best.peak
    assert got <= aim, seen
    # within the search's slack of the aim (the old search stopped at 1128, 157 under)
    assert aim - got <= goc._PEAK_SLACK * 1325, seen
    assert rounds == len(seen) >= 3
    # and so within 5% under the bound, exactly predicted (issue 82: with a slack of 3% it
    # stopped at 1256, 5.2% under)
    assert got >= 0.95 * 1325, seen


def test_peak_with_inductors_costs():
    """checkpoint{cost=inductor} under torch.compile: a plan within peak= priced as Inductor
    runs the kernels (fusing operators by the bytes they read), gradients eager's."""
    torch.manual_seed(0)
    model, x = ResidualMLP(4, torch.nn.functional.gelu), torch.randn(256, 32)
    loose = compiled_plan(model, x, pipeline="checkpoint{activations=100%}", peak="1GiB")
    inputs = loose["halves"]["input_bytes"]
    bound = inputs + int(0.7 * (loose["halves_peak_bytes"] - inputs))
    plan = compiled_plan(model, x, pipeline="checkpoint{budget=90%,cost=inductor}", peak=bound)
    assert plan["recomputed"] and plan["halves_peak_bytes"] <= bound
    assert plan["checkpoint"]["cost"].startswith("inductor: fusing operators by the bytes")


@pytest.mark.parametrize("name", ["residual-mlp", "transformer"])
def test_peak_holds_under_inductor(name):
    """The bound holds where the step runs: under Inductor's kernels, the allocator's own
    peak of a compiled step with peak= is within the bound (here 60% of the way from the
    inputs to eager's peak, which plain torch.compile's is over), and halves.py's prediction,
    which the plan was checked against, is what the allocator measured within the margin
    the search leaves under the bound."""
    torch.manual_seed(0)
    if name == "residual-mlp":
        model, x = ResidualMLP(6, torch.tanh), torch.randn(1024, 32)
    else:
        model, x = TinyTransformer(), torch.randn(8, 128, 64)
    eager = measured_whole_peak(model, model, x)
    inputs = sum(t.untyped_storage().nbytes() for t in [*model.parameters(), x])
    bound = inputs + int(0.6 * (eager - inputs))
    compiled = torch.compile(model, backend=graph_opt.backend(strict=True, peak=bound))
    for _ in range(2):  # compiled, then a warm step
        measured_whole_peak(compiled, model, x)
    got = measured_whole_peak(compiled, model, x)
    (plan,) = expect_plans()
    assert plan["recomputed"]
    assert got <= bound, (got, bound, plan["peak_rounds_halves_bytes"])
    assert abs(plan["halves_peak_bytes"] - got) <= goc._PEAK_MARGIN * got, (plan["halves"], got)


def test_a_stated_bound_replaces_every_bound_of_every_checkpoint_entry():
    """peak= (and the search's saved-bytes bound) replaces budget=, peak= and activations= in
    every checkpoint entry, nested ones too; other options stay; with closest, unmet= is
    unmet=closest."""
    from graph_opt.joint import with_bound, with_peak
    pipeline = ("repeat{cse,checkpoint{activations=30%,planner=structured}},"
                "checkpoint{budget=50%,unmet=error},dce")
    assert with_peak(pipeline, "1GiB") == (
        "repeat{cse,checkpoint{planner=structured,peak=1GiB}},"
        "checkpoint{unmet=error,peak=1GiB},dce")
    assert with_bound(pipeline, "activations=4096", closest=True) == (
        "repeat{cse,checkpoint{planner=structured,activations=4096,unmet=closest}},"
        "checkpoint{activations=4096,unmet=closest},dce")


def test_peak_that_is_not_bytes_or_goes_with_the_torch_planner_is_refused():
    for bad in (0, -5, True, "lots", "6 parsecs", "80%", 1.5):
        with pytest.raises(graph_opt.Error, match="peak="):
            graph_opt.partitioner(peak=bad)
    with pytest.raises(graph_opt.Error, match="planner=torch has no peak bound"):
        graph_opt.backend("checkpoint{activations=30%,planner=torch}", peak="6GiB")
    assert graph_opt.partitioner(peak="700 MiB").peak == "700MiB"


@pytest.mark.parametrize("bound", [{"memory_budget": 0.3}, {"peak": "1GiB"}, {"peak": 1024}])
def test_a_fallback_is_torchs_partition_chosen_by_predicted_peak(bound, monkeypatch):
    """A graph graph-opt cannot take (an import that fails) under a budget goes to torch's
    partitions chosen by halves.py's predicted peak, never one above
    torch's default: at memory_budget=B the knapsack at B where it is no higher; under peak=
    the one within the bound that recomputes least (a loose bound: torch's default), or, for
    a bound none meets, the least, named in the warning."""
    torch.manual_seed(0)
    model, x = Small(), torch.randn(4, 8)
    expected = {0.3: "activation_memory_budget=0.3", "1GiB": "torch's default partition",
                1024: "cannot be met"}[bound.get("memory_budget", bound.get("peak"))]

    def cannot_import(*args, **kwargs):
        raise graph_opt.Error("from_fx: node 'x': not taken (the test's)")
    monkeypatch.setattr(goc, "import_joint", cannot_import)
    with pytest.warns(RuntimeWarning, match=re.escape(expected)):
        got = torch.compile(model, backend=graph_opt.backend(inner="eager", **bound))(x)
        got.backward()
    assert torch.equal(got, model(x))
    s = graph_opt.compile.stats()
    assert s["fallbacks"] == 1 and "predicted peak" in s["reasons"][0]


def test_inference_graph_goes_through_the_pipeline():
    """No backward: the pipeline's merges and folds reach the graph (here a
    duplicate relu), checkpoint is left out, the result is unchanged."""
    class Twice(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + torch.relu(x) * 1

    x = torch.randn(3, 5)
    backend = graph_opt.backend(PIPELINE, inner="eager", strict=True)
    with torch.no_grad():
        got = torch.compile(Twice(), backend=backend)(x)
    assert torch.equal(got, Twice()(x))
    s = graph_opt.compile.stats()
    assert s["inference_graphs"] == 1 and s["graphs"] == 0
    # the second relu (cse) and the * 1 (canonicalize) are gone: relu, add
    assert (s["inference"][0]["nodes"], s["inference"][0]["nodes_after"]) == (4, 2), s


def test_pipeline_inside_compile():
    """Planning from FLOPs on fake tensors; what would run the graph is refused."""
    assert goc.compile_pipeline("repeat{cse,dce},checkpoint{activations=30%}") == \
        "repeat{cse,dce},checkpoint{activations=30%,cost=flops,measure=false}"
    assert goc.compile_pipeline("checkpoint{budget=60%},cse", inference=True) == "cse"
    # priced as Inductor runs the kernels: no run of the graph either
    assert goc.compile_pipeline("checkpoint{budget=60%,cost=inductor}") == \
        "checkpoint{budget=60%,cost=inductor,measure=false}"
    for bad, why in (("profile", "cannot run inside torch.compile"),
                     ("checkpoint{cost=profile}", "cost=profile runs the graph"),
                     ("checkpoint{measure=true}", "measure=true runs the graph"),
                     ("liveness{scratch=measured}", "scratch=measured runs the graph"),
                     ("add-optimizer{kind=sgd}", "cannot run inside torch.compile"),
                     # carried to the joint graph as a replacement it computed wrong gradients
                     ("checkpoint{activations=30%},reinplace", "not run inside torch.compile"),
                     ("repeat{cse", "unbalanced")):
        with pytest.raises(graph_opt.Error, match=why):
            graph_opt.partitioner(bad)


def test_a_pass_that_declares_it_runs_inside_compile_is_accepted():
    """What the partitioner accepts is what each pass declares in its C++ class (PassTraits.h),
    with no list in Python: the test pass test-count says it runs inside torch.compile and is
    accepted (not listed among the shipped ones), reinplace says why it does not, and a pass
    that declares nothing is refused."""
    from graph_opt.joint import passes_inside_compile
    allowed, refused = passes_inside_compile()
    assert allowed["test-count"] is True  # hidden: a test pass
    assert "Inductor reuses dying buffers" in refused["reinplace"]
    assert goc.compile_pipeline("test-count{phase=forward}") == "test-count{phase=forward}"
    with pytest.raises(graph_opt.Error, match="allowed: canonicalize, checkpoint, cse, dce, "
                                              "liveness, repeat$"):
        goc.compile_pipeline("profile")
    names = {p["name"]: p for p in graph_opt._C.registered_passes()}
    assert names["repeat"]["fuzz"] == ["repeat{cse,canonicalize,dce}"]
    assert names["profile"]["fuzz"] == [] and not names["profile"]["inside_compile"]


def test_uuid_covers_pipeline_and_version():
    a, b = graph_opt.partitioner("checkpoint{activations=30%}"), \
        graph_opt.partitioner("checkpoint{activations=50%}")
    assert a.uuid() != b.uuid()
    assert a.uuid() == graph_opt.partitioner("checkpoint{activations=30%}").uuid()
    assert graph_opt.__version__ in a.uuid()


def test_saved_check_expects_torch_to_recompute_what_it_is_told_to():
    """A value graph-opt both recomputes and keeps (a recomputed chain clones a free iota
    that another backward reader takes from the forward: BERT's position ids at
    activations=10% under Inductor) is tagged MUST_RECOMPUTE, which torch never saves; any
    other difference is still a PlanMismatch."""
    from torch.utils.checkpoint import CheckpointPolicy
    from graph_opt.joint import Plan, PlanMismatch, check_saved

    g = torch.fx.Graph()
    x = g.placeholder("primals_1")
    iota = g.create_node("call_function", torch.ops.prims.iota.default, (4,), dict(
        start=0, step=1, dtype=torch.int64, device=torch.device("cpu"), requires_grad=False),
        name="iota")
    mul = g.create_node("call_function", torch.ops.aten.mul.Tensor, (x, 2), name="mul")
    for node, val, tag in ((x, torch.empty(8), None),
                           (iota, torch.empty(4, dtype=torch.int64), "MUST_RECOMPUTE"),
                           (mul, torch.empty(8), "MUST_SAVE")):
        node.meta["val"] = val
        if tag:
            node.meta["recompute"] = getattr(CheckpointPolicy, tag)
    joint = {n.name: n for n in g.nodes}
    plan = Plan(saved={"iota", "mul"}, recomputed={"iota"}, backward=set(), replaced={},
                report={})
    check_saved(plan, ["mul"], joint)
    with pytest.raises(PlanMismatch, match="torch does not save mul"):
        check_saved(plan, [], joint)
    with pytest.raises(PlanMismatch, match="torch also saves iota"):
        check_saved(Plan(saved={"mul"}, recomputed=set(), backward=set(), replaced={},
                         report={}), ["mul", "iota"], joint)


def test_a_saved_value_the_joint_graph_lacks_is_a_plan_mismatch():
    """A value only graph-opt's graph has (a pass made it) named in the plan's saved set is
    a PlanMismatch naming it, not a KeyError; the generator states of replayed random
    operators are apart from the saved set (plan_joint), as torch's are."""
    from graph_opt.joint import Plan, PlanMismatch, check_saved

    g = torch.fx.Graph()
    x = g.placeholder("primals_1")
    x.meta["val"] = torch.empty(8)
    joint = {n.name: n for n in g.nodes}
    with pytest.raises(PlanMismatch, match="saves getitem_4_rng, which the joint graph"):
        check_saved(Plan(saved={"getitem_4_rng"}, recomputed=set(), backward=set(),
                         replaced={}, report={}), [], joint)
    check_saved(Plan(saved=set(), recomputed=set(), backward=set(), replaced={}, report={},
                     rng_states={"getitem_4_rng"}), [], joint)


class TwoDropouts(torch.nn.Module):
    """An MLP with two dropouts whose masks are larger than the generator's state, so
    graph-opt replays them from a saved state rather than keep them."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(128, 256), torch.nn.LayerNorm(256), torch.nn.GELU(),
            torch.nn.Dropout(0.1), torch.nn.Linear(256, 256), torch.nn.Tanh(),
            torch.nn.Dropout(0.1), torch.nn.Linear(256, 8))

    def forward(self, x):
        return self.net(x).square().mean()


DROPOUT_CONFIGS = [("eager", PIPELINE), ("eager", "checkpoint{activations=50%}")] + (
    [("inductor", PIPELINE), ("inductor", "checkpoint{activations=50%}")] if COMPILE_ALL
    else [])


@pytest.mark.parametrize("inner,pipeline", DROPOUT_CONFIGS)
def test_replayed_dropout_is_planned_under_compile(inner, pipeline):
    """Dropout replayed from the generator's state: no fallback (strict), the partition
    verified against torch's, and three steps' losses as eager's (fallback_random: aten's
    RNG under Inductor too). Before, the plan named the state graph-opt made
    ('getitem_4_rng') among the saved values and the saved-set check raised KeyError.
    make test runs the eager kernels; make test-compile adds Inductor."""
    def losses(wrap):
        torch.manual_seed(0)
        model, x = TwoDropouts(), torch.randn(64, 128)
        fn, opt = wrap(model), torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(STEP_SEED)
        out = []
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss = fn(x)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    eager = losses(lambda m: m)
    with torch._inductor.config.patch(fallback_random=True):
        mine = losses(lambda m: torch.compile(m, backend=graph_opt.backend(
            pipeline, inner=inner, strict=True, verify=True)))
    (plan,) = expect_plans()
    # The configurations that failed before replay a dropout (at 50% on the eager
    # kernels' graph the plan keeps both masks instead).
    if inner == "inductor" or pipeline == PIPELINE:
        assert plan["planned_rng_states"] > 0, plan
    assert plan["verified"] > 0, plan
    assert_close_curves(mine, eager, f"{inner} {pipeline}")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return x + self.b(torch.relu(self.a(x)))


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x.square().mean()


def test_nested_compile_regions():
    """A nested compile region's joint graph arrives with empty joint_inputs and is
    planned like any other; the outer graph, which calls the partitioned regions through
    invoke_subgraph, is one graph-opt cannot import yet: it falls back, counted, and the
    step still equals eager's."""
    torch.manual_seed(0)
    model, x = Nested(), torch.randn(8, 16)
    want = model(x)
    want.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with pytest.warns(RuntimeWarning, match="invoke_subgraph"):
        got = torch.compile(model, backend=graph_opt.backend(PIPELINE, inner="eager"))(x)
        got.backward()
    assert torch.allclose(got, want)
    assert all(torch.allclose(p.grad, g, atol=1e-6) for p, g in zip(model.parameters(), grads))
    s = graph_opt.compile.stats()
    assert s["graphs"] >= 1 and s["fallbacks"] == 1, s


def tiny_causal_lm():
    """A Hugging Face Llama causal LM from its config, tiny but for its 32,000-token
    vocabulary, its loss computed by the model from the labels: the logits (16 MiB here)
    and the cross-entropy's backward dominate the step."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (4, 32))

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, labels=ids).loss
    return Step(), ids


@pytest.mark.skipif(not COMPILE_ALL, reason="a minute of Inductor code reads: make test-compile "
                    "(test_inductor_read.py reads small graphs in make test)")
def test_reading_inductors_code_prices_a_large_vocabulary_causal_lm_as_it_runs():
    """predict="inductor": each partition's peak is read from Inductor's own code for its
    halves (inductor_read.py), not predicted. On a causal LM with a 32k vocabulary under
    memory_budget=0.1, the partition chosen measures what was read, within 1% (halves.py's
    model alone reads some of graph-opt's plans for the 4-layer one 94 MiB high: Inductor
    holds the log-softmax's gradient one row at a time where its fusion order allows);
    and peak= that step's peak over the search's margin is met, the step within it."""
    step, ids = tiny_causal_lm()
    compiled = []
    for options in ({"memory_budget": 0.1}, {"peak": None}):
        torch._dynamo.reset()
        goc.reset_stats()
        if options.get("peak", 0) is None:
            options = {"peak": int(compiled[0][0] / (1 - goc._PEAK_MARGIN)) + 4096}
        # verify=False: what is checked here is the peak; verify_partition has its own tests
        fn = torch.compile(step, backend=graph_opt.backend(predict="inductor", verify=False,
                                                           **options))
        measured_whole_peak(fn, step, ids)  # compiles
        got = measured_whole_peak(fn, step, ids)
        (plan,) = goc.stats()["plans"]
        assert plan["halves"]["priced_by"] == "inductor", plan["halves"]
        read = plan["halves_peak_bytes"]
        assert abs(read - got) <= 0.01 * got, (read, got, plan["halves"])
        assert read <= plan["unbudgeted_halves_peak_bytes"]
        compiled.append((got, plan["unbudgeted_halves_peak_bytes"]))
        if "peak" in options:
            assert plan["peak_met"] and got <= options["peak"], (got, options, plan)


def test_the_default_prediction_prices_a_large_vocabulary_causal_lms_plan_as_it_runs():
    """The default prediction (predict="halves") on graph-opt's own plan for a causal LM
    with a 32k vocabulary, the logits recomputed in backward: the measured peak within 5%.
    Whether Inductor's C++ kernels hold the cross-entropy's gradient of the logits one row
    at a time depends on its fusion order, which halves.py does not follow: it counts that
    value (row_local_values) and the partition is read from Inductor's code instead.
    Before, halves.py allocated it beside the recomputed logits: 20% over on this model,
    34% on a 4-layer one (where Inductor allocates it for some plans, not for others)."""
    step, ids = tiny_causal_lm()
    torch._dynamo.reset()
    goc.reset_stats()
    fn = torch.compile(step, backend=graph_opt.backend(
        "repeat{cse,canonicalize,dce},checkpoint{activations=2MiB,unmet=closest}",
        verify=False))
    measured_whole_peak(fn, step, ids)  # compiles
    got = measured_whole_peak(fn, step, ids)
    (plan,) = goc.stats()["plans"]
    halves = plan["halves"]
    assert plan["partition"] == "graph-opt" and halves["row_local_values"] >= 1, plan
    assert halves["priced_by"] == "inductor", halves
    assert abs(plan["halves_peak_bytes"] - got) <= 0.05 * got, (got, halves)
