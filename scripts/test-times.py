#!/usr/bin/env python3
"""Where the test suite's time goes (issue 52): runs `make test`'s ctest in a build tree with
every runner told to write its per-test times (lit's -o JSON, gtest's lines in ctest's JUnit
file, kept whole, a pytest hook in python/tests/conftest.py), then prints the slowest tests across lit, gtest and
pytest with their seconds, each ctest entry's wall time, and the suite's total wall and CPU
time (the CPU of every process ctest started, from the kernel's accounting).

    scripts/test-times.py [--build build] [--top 30] [--ctest-args '-R lit']

Run from the repository root (`make test-times` does). Exit status: ctest's."""
import argparse
import glob
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET


def lit_times(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        data = json.load(f)
    return [("lit", t["name"].split(" :: ", 1)[-1], t.get("elapsed") or 0.0)
            for t in data.get("tests", [])]


def gtest_times(ctest_xml):
    """Each GoogleTest case's time, from its ctest entry's output in ctest's JUnit file
    ("[       OK ] Suite.Name (12 ms)"). Not GTEST_OUTPUT's JSON files: three ctest entries
    run the PassTests binary, two at once, and both would write PassTests.json."""
    if not os.path.exists(ctest_xml):
        return []
    out = []
    line = re.compile(r"^\[ +(?:OK|FAILED|SKIPPED) +\] (\S+) \((\d+) ms\)$", re.M)
    for case in ET.parse(ctest_xml).getroot().iter("testcase"):
        text = case.findtext("system-out") or ""
        for name, ms in line.findall(text):
            out.append(("gtest", f"{case.get('name')}: {name}", int(ms) / 1000))
    return out


def pytest_times(directory):
    out = []
    for path in glob.glob(os.path.join(directory, "pytest-*.json")):
        with open(path) as f:
            for nodeid, seconds in json.load(f).items():
                out.append(("pytest", nodeid, seconds))
    return out


def ctest_times(path):
    if not os.path.exists(path):
        return []
    root = ET.parse(path).getroot()
    return [(case.get("name"), float(case.get("time", 0)), case.get("status", ""))
            for case in root.iter("testcase")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--jobs", default=os.environ.get("JOBS", "2"))
    parser.add_argument("--ctest-args", default="", help="more ctest arguments, e.g. '-R lit'")
    args = parser.parse_args(argv)
    build = os.path.abspath(args.build)
    out = tempfile.mkdtemp(prefix="test-times-", dir=build)
    env = dict(os.environ)
    env["LIT_OPTS"] = (env.get("LIT_OPTS", "") + f" -o {out}/lit.json").strip()
    env["GRAPHOPT_TEST_TIMES_DIR"] = out
    cmd = ["ctest", "-j", args.jobs, "--output-on-failure", "--output-junit", f"{out}/ctest.xml",
           "--test-output-size-passed", "100000000",
           *shlex.split(args.ctest_args)]
    start = time.monotonic()
    rc = subprocess.call(cmd, cwd=build, env=env)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime

    tests = lit_times(f"{out}/lit.json") + gtest_times(f"{out}/ctest.xml") + pytest_times(out)
    tests.sort(key=lambda t: -t[2])
    print(f"\nslowest {min(args.top, len(tests))} of {len(tests)} tests (lit files, gtest "
          f"tests, pytest tests):")
    for kind, name, seconds in tests[:args.top]:
        print(f"  {seconds:8.1f} s  {kind:6}  {name}")
    by_kind = {}
    for kind, _, seconds in tests:
        n, s = by_kind.get(kind, (0, 0.0))
        by_kind[kind] = (n + 1, s + seconds)
    print("\nby runner (tests, seconds summed):")
    for kind, (n, s) in sorted(by_kind.items()):
        print(f"  {kind:6}  {n:5} tests  {s:8.1f} s")
    entries = ctest_times(f"{out}/ctest.xml")
    print("\nctest entries (wall):")
    for name, seconds, status in sorted(entries, key=lambda e: -e[1]):
        print(f"  {seconds:8.1f} s  {name}  {status}")
    print(f"\nsuite: {wall:.1f} s wall, {cpu:.1f} s CPU (every process ctest started), "
          f"ctest exit {rc}; per-test files in {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
