"""The tests' inputs made by ctest's fixtures (the tiny zoo, the broken archives).

Under `make test` (ctest sets GRAPHOPT_ZOO_DIR and GRAPHOPT_BAD_INPUTS_DIR) a missing input
is a failure: a test that skips there checks nothing while the suite stays green. Run by
hand without those variables, the tests that need them are skipped, and pytest's -rs lists
each skip with its reason."""
import os

import pytest


def _missing(path, variable, made_by):
    if os.environ.get(variable):
        pytest.fail(f"{path} is missing: {made_by} makes it before this test ({variable} is "
                    "set, so this is a broken fixture, not an optional input)")
    pytest.skip(f"{path}: {made_by} makes it ({variable} is not set)")


def zoo_archive(name):
    """The path of the tiny zoo's archive `name` (gpt2-train.pt2, ...)."""
    path = os.path.join(os.environ.get("GRAPHOPT_ZOO_DIR", ""), name)
    if not os.path.isfile(path):
        _missing(path, "GRAPHOPT_ZOO_DIR", "ctest's export_zoo fixture")
    return path


def bad_inputs_dir():
    """The folder of broken archives (test/Inputs/make_bad_inputs.py)."""
    path = os.environ.get("GRAPHOPT_BAD_INPUTS_DIR", "")
    if not os.path.isdir(path):
        _missing(path, "GRAPHOPT_BAD_INPUTS_DIR", "ctest's make_bad_inputs fixture")
    return path
