"""Shared pytest hooks. With GRAPHOPT_TEST_TIMES_DIR set (scripts/test-times.py, `make
test-times`), each session writes every test's seconds to pytest-<pid>.json there."""
import json
import os

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
