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
    print(f"check-install: graph_opt from {here}")
    print(f"check-install: {g.name}: {len(g.nodes)} nodes; planner {plan['planner']} "
          f"({plan['solver_status']}); verified {len(report['outputs'])} outputs; "
          f"{len(outputs)} outputs from execute")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
