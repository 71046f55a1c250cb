"""graph-opt from Python: the same C++ library as the graph-opt driver.

    import graph_opt
    g = graph_opt.Graph.load("model.pt2")
    stats = graph_opt.run_pipeline(g, "repeat{cse,canonicalize,dce}")
    outputs = graph_opt.execute(g)

Errors are graph_opt.Error, with the message the driver prints and its exit
code (`exit_code`: 2 for bad input or a failed pass). See docs/Python.md.
"""
import torch  # noqa: F401  (loads LibTorch and torch's Python bindings first)

from ._C import Error, Graph, execute, run_pipeline, verify_rewrite

__all__ = ["Error", "Graph", "execute", "run_pipeline", "verify_rewrite"]
