"""A byte budget never worse than no budget (docs/TorchCompile.md, "Never worse than no
budget"): under peak= and memory_budget= the partitioner chooses among graph-opt's plans and
torch's own partitions by halves.py's predicted peak, never one above torch's unbudgeted
partition's; a bound no candidate meets gets the least reachable peak, the same whatever
bound was asked (python/graph_opt/candidates.py)."""
import re
import warnings

import pytest
import torch

import graph_opt
from graph_opt import candidates
from graph_opt import compile as goc
from models import PreNormResidualMLP, measured_whole_peak

warnings.filterwarnings("ignore", category=FutureWarning)


@pytest.fixture(autouse=True)
def fresh_compile_state():
    """Each test compiles afresh: a compile served from torch's caches (a run before this
    one) does not call the partitioner, and stats() would count nothing."""
    torch._dynamo.reset()
    goc.reset_stats()
    with torch._functorch.config.patch(enable_autograd_cache=False), \
            torch._inductor.config.patch(fx_graph_cache=False):
        yield
    torch._dynamo.reset()


def compiled_peak(model, x, backend):
    """(the measured whole-step peak of a compiled step, the stats of its compile)."""
    torch._dynamo.reset()
    goc.reset_stats()
    step = torch.compile(model, backend=backend)
    measured_whole_peak(step, model, x)  # compiles
    return measured_whole_peak(step, model, x), goc.stats()


def deep_mlp():
    torch.manual_seed(0)
    return PreNormResidualMLP(blocks=8, dim=64, hidden=256), torch.randn(256, 64)


def least_in(message):
    return int(re.search(r"reach is [\d.]+ MiB \((\d+) bytes\)", message).group(1))


def test_a_bound_no_candidate_meets_gets_the_least_peak_the_same_at_every_bound():
    """The deep pre-norm residual MLP at bounds 20% and 10% of the way from its inputs to
    torch's unbudgeted peak, which no partition reaches: both get the least-peak candidate
    (measured within the prediction's margin of it, and under the unbudgeted step), with a
    warning naming it, the same least at both bounds; strict=True raises with that least.
    Before: torch's knapsack at budget 0 measured the unbudgeted peak (no less) while
    graph-opt's plans reach 46% of it, and the least named depended on the bound."""
    model, x = deep_mlp()
    unbudgeted, _ = compiled_peak(model, x, "aot_eager")
    inputs = sum(t.untyped_storage().nbytes() for t in [*model.parameters(), x])
    leasts = []
    for share in (0.2, 0.1):
        bound = inputs + int(share * (unbudgeted - inputs))
        with pytest.warns(RuntimeWarning, match="cannot be met") as caught:
            got, s = compiled_peak(model, x, graph_opt.backend(inner="eager", peak=bound))
        assert s["fallbacks"] == 0 and len(s["unmet"]) == 1, s["reasons"]
        (plan,) = s["plans"]
        assert plan["peak_met"] is False
        assert plan["halves_peak_bytes"] <= plan["unbudgeted_halves_peak_bytes"]
        assert got <= unbudgeted
        assert got <= plan["halves_peak_bytes"] * (1 + goc._PEAK_MARGIN), (got, plan["halves"])
        least = least_in(s["unmet"][0])
        assert least == plan["halves_peak_bytes"]
        assert any(str(least) in str(w.message) for w in caught)
        leasts.append(least)
    assert leasts[0] == leasts[1]
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="cannot be met") as e:
        torch.compile(model, backend=graph_opt.backend(inner="eager", strict=True,
                                                       peak=bound))(x)
    assert least_in(str(e.value)) == leasts[0]


def test_a_least_peak_under_the_bound_but_not_its_margin_meets_it():
    """A bound between the least reachable peak and that least plus the 3% margin plans
    are held under: the least-peak candidate is predicted under the bound itself, so the
    bound is met (peak_met, peak_margin_met false), with no "cannot be met" warning or
    unmet entry (before: both, for a bound the step then measured under: deep-mlp's 18
    unmet DDP bucket graphs in a step 5.5% under its bound)."""
    model, x = deep_mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, s = compiled_peak(model, x, graph_opt.backend(inner="eager", peak=1))
    least = least_in(s["unmet"][0])
    bound = int(least / (1 - goc._PEAK_MARGIN / 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got, s = compiled_peak(model, x, graph_opt.backend(inner="eager", peak=bound))
    (plan,) = s["plans"]
    assert not s["unmet"] and plan["peak_met"] and not plan["peak_margin_met"], plan
    assert plan["halves_peak_bytes"] == least
    assert got <= bound


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + 1e-6))


def test_a_plan_at_the_defaults_peak_that_saves_more_is_not_chosen():
    """An RMSNorm alone (a Llama's final norm is a frame of its own under FSDP2): graph-opt's
    plan saves the normalized product (1 MiB) that torch's default recomputes, at the same
    predicted peak. It is not chosen: the step's graphs after it would hold that 1 MiB (the
    Hugging Face Llama's FSDP2 step measured 1 MiB over plain torch.compile's for it)."""
    torch.manual_seed(0)
    model, x = RMSNorm(256), torch.randn(16, 64, 256, requires_grad=True)
    step = torch.compile(model, backend=graph_opt.backend(inner="eager", peak="1GiB"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step(x).sum().backward()
    (plan,) = goc.stats()["plans"]
    assert plan["partition"] == "torch", plan["saved"]
    assert plan["halves_peak_bytes"] == plan["unbudgeted_halves_peak_bytes"]


def test_no_bound_makes_the_step_peak_higher_than_no_budget():
    """A loose bound where graph-opt's plan without recomputation is predicted to peak above
    torch's own unbudgeted partition (torch's default recomputes cheap operators in
    backward): torch's partition is chosen, and the step measures no more than the
    unbudgeted step. A binding bound gets graph-opt's plan, within the bound."""
    model, x = deep_mlp()
    unbudgeted, _ = compiled_peak(model, x, "aot_eager")
    got, s = compiled_peak(model, x, graph_opt.backend(inner="eager", peak="1GiB"))
    assert got <= unbudgeted
    (plan,) = s["plans"]
    assert plan["peak_met"] and plan["halves_peak_bytes"] <= plan["unbudgeted_halves_peak_bytes"]
    inputs = plan["halves"]["input_bytes"]
    bound = inputs + int(0.7 * (unbudgeted - inputs))
    got, s = compiled_peak(model, x, graph_opt.backend(inner="eager", peak=bound))
    (plan,) = s["plans"]
    assert plan["partition"] == "graph-opt" and plan["peak_met"] and plan["recomputed"]
    assert got <= bound


def test_a_memory_budget_never_peaks_above_no_budget():
    """memory_budget=1.0 on the deep MLP: graph-opt's plan (saving everything torch's
    partition saves) is predicted above torch's own unbudgeted partition, which is chosen
    instead: the step measures no more than without a budget."""
    model, x = deep_mlp()
    unbudgeted, _ = compiled_peak(model, x, "aot_eager")
    got, s = compiled_peak(model, x, graph_opt.backend(
        "checkpoint{activations=100%}", inner="eager", memory_budget=1.0))
    assert got <= unbudgeted
    (plan,) = s["plans"]
    assert plan["halves_peak_bytes"] <= plan["unbudgeted_halves_peak_bytes"]


def fake(source, peak, saved=0):
    return candidates.Candidate(source, None, None, {"peak_bytes": peak, "saved_bytes": saved})


def test_choose_prefers_graph_opts_plan_then_torchs_then_the_least():
    default = fake("torch", 100, saved=60)
    knapsack = fake("knapsack@0.5", 75)
    planned = fake("graph-opt", 80)
    fixed = lambda: [default, fake("knapsack@0", 90), fake("graph-opt", 50)]  # noqa: E731
    # graph-opt's plan within the aim and under the default
    assert candidates.choose(85, default, planned, lambda: [default, knapsack], fixed) == (
        planned, True)
    # no plan of graph-opt's within: torch's within the aim that peaks highest
    assert candidates.choose(85, default, None, lambda: [default, knapsack], fixed) == (
        knapsack, True)
    # a loose aim, graph-opt's plan above torch's default: the default
    assert candidates.choose(500, default, fake("graph-opt", 101), lambda: [default],
                             fixed) == (default, True)
    # nothing within but the fixed set's: its highest within
    got, met = candidates.choose(60, default, None, lambda: [default, knapsack], fixed)
    assert (got.peak, met) == (50, True)
    # none within at all: the least, not met
    got, met = candidates.choose(10, default, None, lambda: [default, knapsack], fixed)
    assert (got.peak, met) == (50, False)
    # memory_budget (no byte aim): graph-opt's plan only where no higher than the default
    assert candidates.choose(None, default, fake("graph-opt", 120), lambda: [knapsack],
                             lambda: [default]) == (knapsack, True)
    assert candidates.choose(None, default, fake("graph-opt", 120), lambda: [fake("k", 130)],
                             lambda: [default]) == (default, True)


def test_of_equal_peaks_the_candidate_saving_most_is_chosen():
    """Where a peak is set by what no plan changes (the end of BERT-base's backward), plans
    saving very different bytes peak alike; the one saving most recomputes least. Within the
    aim and as the least reachable alike (the first of equals was taken before, whichever
    the fixed set listed first)."""
    default = fake("torch", 100, saved=60)
    heavy, light = fake("graph-opt", 50, saved=5), fake("graph-opt", 50, saved=40)
    fixed = lambda: [default, heavy, light]  # noqa: E731
    assert candidates.choose(60, default, None, lambda: [default], fixed) == (light, True)
    assert candidates.choose(10, default, None, lambda: [default], fixed) == (light, False)
    assert candidates.least_reachable([heavy, light]) is light


def test_the_equivalent_budget_moves_the_saved_bytes_one_for_one():
    default = fake("torch", 100, saved=60)  # 40 bytes with nothing saved
    assert candidates.equivalent_budget(70, default) == 0.5
    assert candidates.equivalent_budget(30, default) == 0.0
    assert candidates.equivalent_budget(200, default) == 1.0
    assert candidates.equivalent_budget(70, fake("torch", 100)) is None


def test_the_least_reachable_peak_weighs_memory_budgets_plans(monkeypatch):
    """Under a bound no candidate meets, graph-opt's plans at memory_budget=0.5, 0.3 and 0.1
    (those shares of what torch's default partition saves) are among the candidates the
    least reachable peak is chosen from: the peak is not monotone in the bytes saved, and on
    a 4-layer Hugging Face Llama with a 32k vocabulary the plan at memory_budget=0.1
    measured 250.22 MiB where the least of the others was 262.28 MiB (issue 82; that model
    is a benchmark's, not a test's: here the plans asked for are checked, and the least
    against theirs)."""
    asked, references = [], []
    attempt, reference = goc.GraphOptPartitioner._attempt, goc._activation_bytes

    def spying_attempt(self, *args, activations=None, **kwargs):
        candidate = attempt(self, *args, activations=activations, **kwargs)
        asked.append((activations, candidate.peak))
        return candidate

    def spying_reference(*args):
        references.append(reference(*args))
        return references[-1]
    monkeypatch.setattr(goc.GraphOptPartitioner, "_attempt", spying_attempt)
    monkeypatch.setattr(goc, "_activation_bytes", spying_reference)
    model, x = deep_mlp()
    inputs = sum(t.untyped_storage().nbytes() for t in [*model.parameters(), x])
    with pytest.warns(RuntimeWarning, match="cannot be met"):
        _, s = compiled_peak(model, x, graph_opt.backend(inner="eager", peak=inputs + 1))
    (reference_bytes,) = set(references)
    peaks = dict(asked)
    for share in goc._FIXED_BUDGET_SHARES:
        assert int(share * reference_bytes) in peaks, (share, sorted(peaks))
    least = least_in(s["unmet"][0])
    assert least <= min(peaks[int(share * reference_bytes)] for share in goc._FIXED_BUDGET_SHARES)
