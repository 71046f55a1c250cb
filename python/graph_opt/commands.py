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


def torch_library_path():
    """The directories of the shared libraries `import torch` loaded from its installation
    (torch/lib, and its nvidia packages' CUDA runtime on a CUDA build), in load order: what a
    bundled program linked against LibTorch needs on the loader's path, since the wheel
    carries none of them (scripts/wheel.sh excludes them)."""
    import torch
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    dirs = [os.path.join(site, "torch", "lib")]
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if path.startswith(site + os.sep) and ".so" in os.path.basename(path):
                folder = os.path.dirname(path)
                if folder not in dirs:
                    dirs.append(folder)
    return dirs


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
    dirs = torch_library_path() + [d for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
    os.execve(path, [path] + sys.argv[1:], env)
