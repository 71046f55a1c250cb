"""torch's knapsack run on graph-opt training graphs (graph_opt.knapsack; issue 30's
checkpoint{planner=torch} baseline). Run by ctest (PythonTests)."""

import pytest

import graph_opt
from inputs import zoo_archive
from graph_opt.knapsack import torch_saved_values



def zoo(name):
    return graph_opt.Graph.load(zoo_archive(name))


def test_the_budget_reaches_torchs_knapsack():
    """A graph whose backward starts at full_like(loss, 1): without the tangent input the
    rewrite gives it, torch would find no backward and ignore the budget."""
    g = zoo("gpt2-train.pt2")
    full = torch_saved_values(g, 1.0)
    tight = torch_saved_values(g, 0.3)
    assert 0 < tight["activation_bytes"] < 0.5 * full["activation_bytes"]
    values = {s["name"] for s in g.inputs} | {v for n in g.nodes for v in n["outputs"]}
    for chosen in (full, tight):
        assert chosen["saved"] and set(chosen["saved"]) <= values


def test_refuses_a_graph_without_backward():
    with pytest.raises(graph_opt.Error, match="'.*' has no gradient output"):
        torch_saved_values(zoo("mlp-eval.pt2"), 0.5)
    with pytest.raises(graph_opt.Error, match=r"memory_budget=1.5: a share in \[0, 1\]"):
        torch_saved_values(zoo("mlp-train.pt2"), 1.5)


def test_checkpoint_planner_torch_applies_torchs_choice(tmp_path):
    """checkpoint{planner=torch} (its helper started from this interpreter) keeps what torch
    saves and recomputes the rest: no recomputed activation is one torch saved, every held
    one is, and a .gir graph (no weights) gives torch the same choice as the archive."""
    g = zoo("gpt2-train.pt2")
    saved = set(torch_saved_values(g, 0.3)["saved"])
    parsed = graph_opt.Graph.parse(g.print(), g.name)
    assert set(torch_saved_values(parsed, 0.3)["saved"]) == saved
    out = graph_opt.run_pipeline(g.clone(), "checkpoint{planner=torch,activations=30%,cost=flops}",
                                 report_dir=str(tmp_path))
    report = out["reports"]["checkpoint"]
    assert report["planner"] == "torch"
    decided = {}
    for a in report["activations"]:
        decided.setdefault(a["decision"], set()).add(a["name"])
    assert decided["recomputed"] and not decided["recomputed"] & saved
    assert decided["held"] and decided["held"] <= saved
