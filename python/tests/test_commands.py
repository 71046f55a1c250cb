"""graph_opt.commands: the console commands a wheel installs (make check-wheel runs them
installed; here, what a build tree's package says and finds)."""
import os

import pytest
import torch

from graph_opt import commands


def test_torch_library_path_starts_with_torchs_lib_and_holds_what_import_torch_loaded():
    dirs = commands.torch_library_path()
    assert dirs[0] == os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "lib")
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    assert all(d.startswith(site + os.sep) for d in dirs) and len(set(dirs)) == len(dirs)
    assert any(f.startswith("libtorch_cpu") for f in os.listdir(dirs[0]))


def test_a_program_the_package_does_not_bundle_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        commands.bundled_program("no-such-program")
    assert exit_.value.code == 2
    assert "no-such-program" in capsys.readouterr().err
