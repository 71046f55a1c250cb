"""`make check-install`: graph_opt as pip installed it, used from outside the checkout.

    venv/bin/python check_install.py GRAPH.gir
"""
import os
import sys

import graph_opt


def main(path):
    here = os.path.dirname(os.path.abspath(graph_opt.__file__))
    assert "site-packages" in here, f"graph_opt imported from {here}, not the installed package"
    solver = os.environ.get("GRAPHOPT_MILP_SOLVER", "")
    assert solver.startswith(here) and os.access(solver, os.X_OK), f"no bundled solver: {solver!r}"
    g = graph_opt.Graph.load(path)
    fitted = g.clone()
    result = graph_opt.run_pipeline(
        fitted, "repeat{cse,canonicalize,dce},checkpoint{activations=50%,planner=milp}")
    plan = result["reports"]["checkpoint"]
    report = graph_opt.verify_rewrite(g, fitted, check=True)
    outputs = graph_opt.execute(fitted)
    # Back to PyTorch: a model of one's own through export, .pt2 and fx.
    import tempfile
    import torch
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    with tempfile.TemporaryDirectory() as tmp:
        step = os.path.join(tmp, "step.pt2")
        graph_opt.export_training_step(
            model, lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y),
            (torch.randn(3, 4), torch.tensor([0, 1, 0])), step)
        trained = graph_opt.Graph.load(step)
        graph_opt.run_pipeline(trained, "add-optimizer{kind=adamw}")
        trained.save_pt2(os.path.join(tmp, "opt.pt2"))
        ep = torch.export.load(os.path.join(tmp, "opt.pt2"))
        again = graph_opt.from_fx(graph_opt.to_fx(graph_opt.Graph.load(os.path.join(tmp, "opt.pt2"))))
        assert again.print() == trained.print(), "fx round trip of the installed package"
    print(f"check-install: graph_opt from {here}")
    print(f"check-install: {g.name}: {len(g.nodes)} nodes; planner {plan['planner']} "
          f"({plan['solver_status']}); verified {len(report['outputs'])} outputs; "
          f"{len(outputs)} outputs from execute; export_training_step -> add-optimizer -> "
          f".pt2 ({[v.dialect for v in ep.verifiers][0]}) -> fx -> IR identical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
