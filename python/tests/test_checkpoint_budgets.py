"""checkpoint across budgets on the zoo (issue 30's guarantees): each plan meets its share
of the saved activations, and a tighter budget never comes out predicted cheaper than a looser
one (its plan would meet the looser budget too). Run by ctest (PythonTests)."""

import pytest

import graph_opt
from inputs import zoo_archive

BUDGETS = (80, 50, 30, 10)


@pytest.mark.parametrize("model", ["gpt2-train", "bert-train", "resnet18-train", "t5-train"])
def test_tighter_budgets_cost_no_less(model):
    path = zoo_archive(f"{model}.pt2")
    g = graph_opt.Graph.load(path)
    graph_opt.run_pipeline(g, "repeat{cse,canonicalize,dce}")
    extra = []
    for b in BUDGETS:
        report = graph_opt.run_pipeline(g.clone(), f"checkpoint{{activations={b}%,cost=flops}}")[
            "reports"]["checkpoint"]
        assert report["budget_unmet"] is None
        assert report["predicted_saved_activation_bytes"] <= report["budget_bytes"]
        extra.append(report["predicted_extra_seconds"])
    assert extra == sorted(extra), f"{model}: predicted extra seconds at {BUDGETS}%: {extra}"
