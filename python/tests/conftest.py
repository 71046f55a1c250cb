"""Shared pytest hooks. With GRAPHOPT_TEST_TIMES_DIR set (scripts/test-times.py, `make
test-times`), each session writes every test's seconds to pytest-<pid>.json there."""
import json
import os
import sys

_times = {}


def pytest_runtest_logreport(report):
    if os.environ.get("GRAPHOPT_TEST_TIMES_DIR"):
        _times[report.nodeid] = _times.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("GRAPHOPT_TEST_TIMES_DIR")
    if out and _times:
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, f"pytest-{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(_times, f)
        os.replace(path + ".tmp", path)


# Python subprocesses through a fork server (tools/graph-opt/python_fork_server.py, the one
# lit uses for %python): where ctest names its client (GRAPHOPT_PYTHON_CLIENT), a server
# started here imports torch once and forks a copy for each `python -m graph_opt ...`, each
# torchrun launcher and each checkpoint{planner=torch} helper (GRAPHOPT_PYTHON) the tests
# start, instead of a new interpreter importing torch (2 s of CPU) each time. Tests start
# Python as os.environ["GRAPHOPT_TEST_PYTHON"] (sys.executable where there is no server). A
# command whose environment differs from the server's (a torchrun worker: RANK and the like)
# runs the real interpreter, as it does everywhere without a server.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_server = None


def _start_python_fork_server():
    import importlib.util
    import subprocess
    import uuid

    client = os.environ.get("GRAPHOPT_PYTHON_CLIENT")
    if not client or not os.path.isfile(client):
        return None
    spec = importlib.util.find_spec("graph_opt")  # where the package is, without importing it
    # Everything a command will see, set before the server starts: it compares each
    # command's environment with its own.
    os.environ["GRAPHOPT_PYTHON_FORK_SERVER"] = "python-fork-pytest-%d-%s" % (
        os.getpid(), uuid.uuid4().hex[:8])
    os.environ["GRAPHOPT_TEST_PYTHON"] = client
    os.environ["GRAPHOPT_PYTHON"] = client  # graph_opt's own setdefault then keeps it
    if spec is not None and spec.origin:
        os.environ.setdefault("GRAPHOPT_PYTHONPATH",
                              os.path.dirname(os.path.dirname(spec.origin)))
    # Inductor names its cache directory in os.environ the first time it compiles (for its
    # own subprocesses): name it now, as it will.
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    cache_dir()
    server = subprocess.Popen(
        [sys.executable, os.path.join(_ROOT, "tools", "graph-opt", "python_fork_server.py"),
         os.environ["GRAPHOPT_PYTHON_FORK_SERVER"]],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    if server.stdout.readline() != b"ready\n":
        # The client then runs the real interpreter: slower, never wrong.
        os.environ["GRAPHOPT_PYTHON_FORK_SERVER"] = ""
    server.stdout.close()
    return server


def pytest_configure(config):
    global _server
    _server = _start_python_fork_server()
    os.environ.setdefault("GRAPHOPT_TEST_PYTHON", sys.executable)


def pytest_unconfigure(config):
    if _server is not None:
        _server.terminate()
        _server.wait()
