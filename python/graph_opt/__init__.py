"""graph-opt from Python: the same C++ library as the graph-opt driver.

    import graph_opt
    g = graph_opt.Graph.load("model.pt2")
    result = graph_opt.run_pipeline(g, "repeat{cse,canonicalize,dce}")
    outputs = graph_opt.execute(g)

Errors are graph_opt.Error, with the message the driver prints and its exit
code (`exit_code`: 2 for bad input or a failed pass, 1 for a failed
verification). See docs/Python.md.
"""
import json
import os
import sys
import tempfile

import torch  # noqa: F401  (loads LibTorch and torch's Python bindings first)

# An installed package carries checkpoint{planner=milp}'s solver program beside it (the path
# compiled into the passes is the build tree's, gone after pip install).
_bundled_solver = os.path.join(os.path.dirname(__file__), "bin", "graph-opt-milp")
if os.path.isfile(_bundled_solver):
    os.environ.setdefault("GRAPHOPT_MILP_SOLVER", _bundled_solver)
# And the HTML report's script, which it draws with this interpreter (matplotlib: the wheel's
# `report` extra).
_bundled_report = os.path.join(os.path.dirname(__file__), "make_report.py")
if os.path.isfile(_bundled_report):
    os.environ.setdefault("GRAPHOPT_REPORT_SCRIPT", _bundled_report)
    os.environ.setdefault("GRAPHOPT_REPORT_PYTHON", sys.executable)
# checkpoint{planner=torch} runs torch's partitioner in `python -m graph_opt.knapsack`: from
# Python, in this interpreter's program with this package (the driver uses the build's).
os.environ.setdefault("GRAPHOPT_PYTHON", sys.executable)
os.environ.setdefault("GRAPHOPT_PYTHONPATH", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

__version__ = "0.1.0"  # pyproject.toml's

# torch.export.load three times faster: its deserializer's type hints, remembered
# (_serde_cache.py says why).
from . import _serde_cache
_serde_cache.install()

from . import _C
from ._C import Error, Graph, execute, verify_rewrite
# Imported eagerly, though they cost 1.2 s of `import graph_opt` (torch.export's serializer
# and torch._dynamo with it): loaded lazily, a torchrun script using graph_opt.execute
# aborted at exit in 1-2 of 6-12 runs ("terminate called without an active exception": a
# gloo run-loop thread taking the GIL while the interpreter finalized;
# test_collectives_compute_across_ranks), never in 28 runs with them imported here.
from .export import export_inference, export_training_step
from .fx import from_fx, to_exported_program, to_fx

# Loaded on first use (__getattr__ below).
_LAZY = {"auto_checkpoint": "eager", "profile": "model_profile", "ProfileReport": "model_profile"}

__all__ = ["Error", "Graph", "auto_checkpoint", "backend", "compile", "execute", "export_inference",
           "export_training_step", "from_fx",
           "partitioner", "profile", "ProfileReport", "profiler", "run_pipeline", "to_exported_program", "to_fx",
           "verify_rewrite"]

# Reports a pass writes beside its JSON that are not data to load (a Chrome trace; on a rank
# of a process group, trace_rank_R.json).
_NOT_REPORT_DATA = {"trace.json"}


def run_pipeline(graph, pipeline, verify_each=False, seed=0, report_dir=None, max_memory=None):
    """Runs a textual pipeline (graph-opt's -passes=) on `graph`, in place.

    Returns {"changed", "pipeline", "statistics": [{"pass", "statistics":
    {name: value}, "nested": [...]}, one per pipeline entry, in order],
    "remarks": [...], "replaced": {a value cse merged or canonicalize folded:
    the equal value read in its place, chains followed}, "reports": {"liveness": {...}, "checkpoint": {...},
    "profile": {...}}}: each JSON report the passes wrote (docs/Liveness.md,
    Checkpointing.md, Profiling.md), loaded. With `report_dir`, every report
    file (CSV, trace, HTML data) stays there; without, they are read from a
    temporary directory and removed. `max_memory` bounds what the passes that
    run the graph may take, as graph-opt's --max-memory (None: half of
    physical memory; bytes; or "8GiB", "50%")."""
    with tempfile.TemporaryDirectory(prefix="graph-opt-reports-") as scratch:
        where = os.fspath(report_dir) if report_dir is not None else scratch
        result = _C.run_pipeline(graph, pipeline, verify_each=verify_each, seed=seed,
                                 report_dir=where, max_memory=max_memory)
        # The passes hand over what they can as values (checkpoint's plan); the
        # rest is read from the files they wrote.
        reports = {name: json.loads(text) for name, text in result.pop("report_values").items()}
        if os.path.isdir(where):
            for name in sorted(os.listdir(where)):
                if (name.endswith(".json") and name not in _NOT_REPORT_DATA
                        and not name.startswith("trace_rank_")
                        and name[: -len(".json")] not in reports):
                    with open(os.path.join(where, name), encoding="utf-8") as f:
                        reports[name[: -len(".json")]] = json.load(f)
        result["reports"] = reports
        return result


def __getattr__(name):
    """graph_opt.compile, graph_opt.partitioner and graph_opt.backend load on first use:
    they import torch's Inductor and partitioner modules, which would add a second and a half
    to every `import graph_opt` (docs/TorchCompile.md)."""
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module("." + _LAZY[name], __name__), name)
    if name in ("compile", "partitioner", "backend"):
        import importlib
        module = importlib.import_module(".compile", __name__)
        return module if name == "compile" else getattr(module, name)
    if name in ("profiler", "ProfilerSession"):
        # graph_opt.profiler(...): a profiler session (session.py); its module is not named
        # profiler, so that importing it never hides the function.
        from . import session
        return getattr(session, name)
    raise AttributeError(f"module 'graph_opt' has no attribute {name!r}")
