"""The console commands a pip-installed graph-opt puts on PATH (pyproject.toml's
[project.scripts]):

    graph-opt IN [options]          the driver, in this process: python -m graph_opt
    graph-opt-costdb SUBCOMMAND     the operator cost database's program, bundled in the
                                    package's bin/ (docs/CostDB.md)

Both take the same options and give the same exit codes as the programs of a build tree.
"""
import os
import sys


def graph_opt():
    from . import driver
    sys.exit(driver.main(sys.argv[1:]))


def _torch_library_dir():
    """torch's lib/: a bundled program linked against LibTorch finds its libraries there (the
    wheel carries none of them; torch's libc10_cuda finds the CUDA runtime itself)."""
    import torch
    return os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "lib")


def bundled_program(name):
    """The path of graph_opt/bin/NAME, or a clear error (a build tree has its programs in
    <build>/bin instead: run those)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"{name}: {path} is missing: this graph_opt is not an installed wheel "
                         f"(a build tree's {name} is <build>/bin/{name})\n")
        sys.exit(2)
    return path


def graph_opt_costdb():
    path = bundled_program("graph-opt-costdb")
    env = dict(os.environ)
    dirs = [_torch_library_dir()] + [d for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
    os.execve(path, [path] + sys.argv[1:], env)
