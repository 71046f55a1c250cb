"""`make check-wheel`: the graph_opt wheel as a user installs it, checked from outside the
checkout (`scripts/wheel.sh check` makes the venv and installs the wheel with --no-index).

    venv/bin/python check_wheel.py WORKDIR
    venv/bin/python check_wheel.py --libraries-only     (1 alone)

1. Every ELF file the wheel installed resolves its shared libraries inside the wheel, inside
   torch (its lib/ and its nvidia packages) or in the C/C++ runtime and zlib, and nowhere
   else (ldd,
   with torch's lib/ on the loader's path as `import torch` leaves it).
2. The console commands: `graph-opt --version`; a model exported with the installed
   package, then `graph-opt model.pt2 -passes=... --verify`; `graph-opt-costdb` measuring and
   attributing it.
3. The three-line profile (graph_opt.profile), with its HTML report.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import torch

import graph_opt

# The C and C++ runtime, and zlib: what the manylinux policy counts on every Linux system
# (auditwheel does not bundle them; CBC links zlib).
RUNTIME = re.compile(r"^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libutil|"
                     r"libstdc\+\+|libgcc_s|libz)\.so")


def fail(message):
    print(f"check-wheel: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def run(argv, **kw):
    """What the command printed, stdout then stderr; a non-zero exit fails the check."""
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def check_libraries():
    site = sysconfig.get_paths()["purelib"]
    package = os.path.dirname(os.path.abspath(graph_opt.__file__))
    assert package.startswith(site), f"graph_opt imported from {package}, not {site}"
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    wheel_dirs = (package + os.sep, os.path.join(site, "graph_opt.libs") + os.sep)
    # torch's own libraries: its lib/ and its nvidia packages, in the site-packages torch is
    # in (through the .pth the check's venv has, the project venv's).
    torch_dirs = (torch_dir + os.sep, os.path.join(os.path.dirname(torch_dir), "nvidia") + os.sep)
    from graph_opt.commands import torch_library_path
    # The loader's path as the graph-opt-costdb command sets it (and as `import torch` has
    # loaded those libraries before graph_opt._C).
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(torch_library_path()))
    elves, outside, external = [], [], {}
    for top in wheel_dirs:
        for folder, _, files in os.walk(top):
            for name in files:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    if f.read(4) != b"\x7fELF":
                        continue
                elves.append(path)
                for line in run(["ldd", path], env=env).splitlines():
                    parts = line.strip().split()
                    if not parts:
                        continue
                    soname = parts[0]
                    resolved = parts[2] if len(parts) > 2 and parts[1] == "=>" else parts[0]
                    where = os.path.relpath(path, site)
                    if "not found" in line:
                        outside.append(f"{where}: {soname} not found")
                        continue
                    real = os.path.realpath(resolved)
                    if real.startswith(wheel_dirs):
                        continue
                    if real.startswith(torch_dirs):
                        owner = "torch"
                    elif RUNTIME.match(os.path.basename(soname)):
                        owner = "system"
                    else:
                        outside.append(f"{where}: {soname} => {resolved}")
                        continue
                    external.setdefault(owner, set()).add(soname)
    if len(elves) < 3:
        fail(f"only {len(elves)} ELF files in the installed wheel: {elves}")
    if outside:
        fail("libraries resolved outside the wheel, torch, the C/C++ runtime and zlib:\n  " +
             "\n  ".join(sorted(set(outside))))
    print(f"check-wheel: {len(elves)} ELF files; every library they load is the wheel's, "
          f"torch's, or the C/C++ runtime and zlib; outside the wheel (ldd):")
    for owner in sorted(external):
        print(f"  {owner}: {' '.join(sorted(external[owner]))}")


def check_commands(work):
    bindir = os.path.dirname(sys.executable)
    graph_opt_cmd = shutil.which("graph-opt", path=bindir)
    costdb_cmd = shutil.which("graph-opt-costdb", path=bindir)
    if not graph_opt_cmd or not costdb_cmd:
        fail(f"the console commands are not in {bindir}")
    version = run([graph_opt_cmd, "--version"])
    if not version.startswith(f"graph-opt {graph_opt.__version__}"):
        fail(f"graph-opt --version said {version!r}")
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.Linear(12, 3))
    step = os.path.join(work, "model.pt2")
    graph_opt.export_training_step(
        model, lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y),
        (torch.randn(4, 6), torch.tensor([0, 2, 1, 0])), step)
    out = run([graph_opt_cmd, step, "-passes=repeat{cse,canonicalize,dce},checkpoint{activations=50%}",
               "--verify", "--bitwise", "-o", os.path.join(work, "out.gir")])
    if "verification PASSED" not in out:
        fail(f"graph-opt --verify said:\n{out}")
    db = os.path.join(work, "costs.sqlite")
    run([costdb_cmd, "measure", "--db", db, "--min-time", "0.001", "--min-runs", "2", step])
    attributed = run([costdb_cmd, "attribute", "--db", db, "--no-profile", "--calibrate", "0", step])
    if "predicted step" not in attributed:
        fail(f"graph-opt-costdb attribute said:\n{attributed}")
    print(f"check-wheel: {version.splitlines()[0]}; graph-opt {os.path.basename(step)} "
          f"verified; graph-opt-costdb measured and attributed it")


def check_profile(work):
    import torch.nn.functional as F
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 4))
    html = os.path.join(work, "report", "report.html")
    report = graph_opt.profile(model, (torch.randn(2, 3, 8, 8), torch.tensor([0, 3])),
                               loss_fn=lambda m, x, y: F.cross_entropy(m(x), y),
                               html=html, runs=2)
    if not os.path.isfile(html) or not report.modules:
        fail(f"graph_opt.profile gave {report!r} and no {html}")
    print(f"check-wheel: graph_opt.profile: {report!r}, {os.path.relpath(html, work)}")


if __name__ == "__main__":
    if sys.argv[1] == "--libraries-only":
        # The negative control (scripts/wheel.sh check): on the wheel before auditwheel
        # repaired it, this must fail, naming the system's libraries.
        check_libraries()
        sys.exit(0)
    work = os.path.abspath(sys.argv[1])
    check_libraries()
    check_commands(work)
    check_profile(work)
    print("check-wheel: passed")
