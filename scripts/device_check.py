#!/usr/bin/env python3
"""graph-opt's CUDA checks: `pack` here, `run` on a lent GPU machine.

Called by scripts/device-check.sh (which builds first for `pack`, and says "no GPU" before any
import for `run`). docs/Building.md, "The device check", says what each check measures.

pack: the stripped programs and the shared libraries they load that neither glibc/GCC's runtime
      nor torch's wheel provides, with a manifest, into $DEVICE_PACK (default .device-pack), made
      in a temporary folder and renamed into place; refused over 60 MiB.
run:  with the image's torch (LD_LIBRARY_PATH: the pack's lib/, then torch's lib/), exports the
      three models, runs the checks in order of importance, each with its own time limit, and
      rewrites $OUT/device-check.json after every check, so a run cut short still reports what it
      did. Exit 0 when every check that ran passed, 1 otherwise, 2 when it could not start.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACK = Path(os.environ.get("DEVICE_PACK") or ROOT / ".device-pack")
PROGRAMS = ("graph-opt", "graph-opt-costdb", "graph-opt-milp")
# The image's python3 (KINDS.md of the device tool): the graph_opt extension is built for it too.
DEVICE_PYTHON_VERSION = "3.12"
PACK_LIMIT_BYTES = 60 * 1024 * 1024
# Every Linux with glibc and GCC's runtime has these; the image's torch was built against them.
SYSTEM_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so",
               "librt.so", "libutil.so", "libgcc_s.so", "libstdc++.so")
# The whole run must end within 8 minutes on an H200: no check starts past this, and each
# command's own limit is cut to what is left.
RUN_DEADLINE = 7.5 * 60
EXPORT_SECONDS = 180  # the three exports, side by side, on the machine's CPU cores
MODELS = ("resnet50", "bert", "gpt2")
# unmet=closest: a budget the planner cannot reach still gives a rewrite to verify.
VERIFY_PIPELINES = ("repeat{cse,canonicalize,dce}", "checkpoint{budget=50%,unmet=closest}",
                    "reinplace")
NOT_DETERMINISTIC = "does not have a deterministic implementation"
# `run --rehearse`: every check on this machine's CPU with the tiny models, to try the script
# before spending device time (its verdicts say nothing about CUDA).
DEVICE = "cuda"
TINY = False


def fail(message: str, code: int = 2) -> None:
    print(f"device-check: {message}", file=sys.stderr)
    sys.exit(code)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---------------------------------------------------------------------------------------- pack

def shared_libraries(program: Path) -> dict[str, Path]:
    """What `program` loads (ldd's closure), by file name; a library not found is an error."""
    out = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=True).stdout
    libs = {}
    for line in out.splitlines():
        line = line.strip()
        if "=> not found" in line:
            fail(f"{program}: {line.split()[0]} is not found (ldd)")
        m = re.match(r"(\S+) => (/\S+) \(", line)
        if m:
            libs[m.group(1)] = Path(m.group(2))
    return libs


def needs_packing(name: str, path: Path, torch_site: Path) -> bool:
    if name.startswith(SYSTEM_LIBS):
        return False
    # torch's wheel and the nvidia-* wheels beside it: the image has its own, the same version.
    return torch_site not in path.resolve().parents


def device_python() -> str:
    """An interpreter of the device's CPython version, for its headers: $DEVICE_PYTHON, else
    pyenv's, else python3.12 on PATH; the first that runs."""
    name = f"python{DEVICE_PYTHON_VERSION}"
    candidates = [os.environ["DEVICE_PYTHON"]] if os.environ.get("DEVICE_PYTHON") else []
    candidates += [str(p) for p in sorted(Path.home().glob(
        f".pyenv/versions/{DEVICE_PYTHON_VERSION}.*/bin/{name}"), reverse=True)]
    candidates += [p for p in [shutil.which(name)] if p]  # a pyenv shim may not run
    for python in candidates:
        try:
            subprocess.run([python, "-c", "import sysconfig"], check=True, capture_output=True)
            return python
        except (OSError, subprocess.CalledProcessError):
            continue
    fail(f"no CPython {DEVICE_PYTHON_VERSION} here for the device's graph_opt extension "
         f"(tried {', '.join(candidates) or 'none'}; DEVICE_PYTHON names one; only its headers "
         "are read)")


def build_device_module(build: Path) -> Path:
    """The graph_opt extension for the device's CPython (python/CMakeLists.txt,
    GRAPHOPT_DEVICE_PYTHON): configured into `build` and built there."""
    python = device_python()
    for argv in (["cmake", "-S", str(ROOT), "-B", str(build), f"-DGRAPHOPT_DEVICE_PYTHON={python}"],
                 ["cmake", "--build", str(build), "--target", "graphopt_python_device"]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"{' '.join(argv)} failed:\n{tail(done.stdout + done.stderr, 20)}")
    modules = sorted((build / "python-device" / "graph_opt").glob(
        f"_C.cpython-{DEVICE_PYTHON_VERSION.replace('.', '')}-*.so"))
    if not modules:
        fail(f"{build}/python-device/graph_opt has no _C for CPython {DEVICE_PYTHON_VERSION}")
    return modules[-1]


def pack(build: Path, with_python: bool = True) -> None:
    import torch  # the venv's: the CUDA wheel graph-opt is built against

    torch_site = Path(torch.__file__).resolve().parent.parent
    staging = PACK.with_name(PACK.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    (staging / "lib").mkdir()
    libs: dict[str, Path] = {}
    for name in PROGRAMS:
        src = build / "bin" / name
        if not src.is_file():
            fail(f"{src} is not built (make build)")
        dst = staging / "bin" / name
        shutil.copy2(src, dst)
        subprocess.run(["strip", "--strip-all", str(dst)], check=True)
        for lib, path in shared_libraries(src).items():
            if needs_packing(lib, path, torch_site):
                libs[lib] = path
    if with_python:
        package = staging / "python" / "graph_opt"
        package.mkdir(parents=True)
        module = build_device_module(build)
        shutil.copy2(module, package / module.name)
        subprocess.run(["strip", "--strip-unneeded", str(package / module.name)], check=True)
        for source in sorted((ROOT / "python" / "graph_opt").glob("*.py")):
            shutil.copy2(source, package / source.name)
    for lib, path in sorted(libs.items()):
        dst = staging / "lib" / lib
        shutil.copy2(path.resolve(), dst)
        subprocess.run(["strip", "--strip-unneeded", str(dst)], check=True)
    files = {str(p.relative_to(staging)): p.stat().st_size
             for p in sorted(staging.rglob("*")) if p.is_file()}
    total = sum(files.values())
    manifest = {"format": "graph-opt-device-pack/1", "commit": git_commit(),
                "torch": torch.__version__, "cuda": torch.version.cuda,
                "python_module_for": DEVICE_PYTHON_VERSION,
                "total_bytes": total, "files": files}
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if total > PACK_LIMIT_BYTES:
        shutil.rmtree(staging)
        fail(f"the pack is {total / 2**20:.1f} MiB, over the {PACK_LIMIT_BYTES // 2**20} MiB "
             "the device's working tree allows beside the sources")
    shutil.rmtree(PACK, ignore_errors=True)
    staging.rename(PACK)
    print(f"device-check: packed {len(files)} files, {total / 2**20:.1f} MiB, in {PACK} "
          f"(torch {torch.__version__}, commit {manifest['commit'][:12]})")
    for rel, size in files.items():
        if not rel.endswith(".py"):
            print(f"  {size / 2**20:7.2f} MiB  {rel}")
    print(f"  and {sum(rel.endswith('.py') for rel in files)} Python files of graph_opt")


# ----------------------------------------------------------------------------------------- run

class Run:
    """The results so far, written after every check; the log of every command."""

    def __init__(self, out: Path):
        self.out = out
        self.start = time.monotonic()
        self.log = open(out / "device-check.log", "w", buffering=1)
        self.results = {"format": "graph-opt-device-check/1", "commit": git_commit(),
                        "started_utc": datetime.datetime.now(datetime.timezone.utc)
                        .strftime("%Y-%m-%dT%H:%M:%SZ"), "checks": []}

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return RUN_DEADLINE - self.elapsed()

    def write(self) -> None:
        self.results["seconds"] = round(self.elapsed(), 1)
        checks = self.results["checks"]
        self.results["passed"] = sum(1 for c in checks if c["pass"] is True)
        self.results["failed"] = sum(1 for c in checks if c["pass"] is False)
        self.results["not_run"] = sum(1 for c in checks if c["pass"] is None)
        tmp = self.out / "device-check.json.tmp"
        tmp.write_text(json.dumps(self.results, indent=1) + "\n")
        tmp.replace(self.out / "device-check.json")

    def record(self, name: str, passed: bool | None, **detail) -> None:
        self.results["checks"].append({"name": name, "pass": passed, **detail})
        verdict = {True: "PASS", False: "FAIL", None: "NOT RUN"}[passed]
        print(f"device-check: {verdict:7} {name}", flush=True)
        self.log.write(f"== {verdict} {name}: {json.dumps(detail)}\n")
        self.write()

    def command(self, argv: list[str], timeout: float, env=None) -> tuple[int, str]:
        """Runs `argv`, logs it and its output; rc 124 on a timeout."""
        self.log.write(f"$ {' '.join(argv)}\n")
        began = time.monotonic()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=max(timeout, 1),
                               env=env, cwd=ROOT)
            rc, output = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc = 124
            output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "")
            output += f"\n(timed out after {timeout:.0f} s)"
        self.log.write(output)
        self.log.write(f"[rc {rc}, {time.monotonic() - began:.1f} s]\n")
        return rc, output


def tail(output: str, lines: int = 6) -> str:
    return "\n".join(output.strip().splitlines()[-lines:])


def device_facts(run: Run) -> dict:
    import torch

    if DEVICE != "cuda":
        return {"name": "cpu (rehearsal)", "torch": torch.__version__, "uuid_nvidia_smi": []}
    rc, smi = run.command(["nvidia-smi", "-L"], 30)
    uuids = re.findall(r"UUID: (GPU-[0-9a-f-]+)", smi)
    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "memory_bytes": props.total_memory,
            "uuid_nvidia_smi": uuids, "uuid_torch": f"GPU-{props.uuid}" if hasattr(props, "uuid")
            else None, "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": sys.version.split()[0]}


def export_models(run: Run, work: Path, env) -> dict[str, Path]:
    """The three models' training steps at their default size, exported in parallel."""
    procs = {}
    for model in MODELS:
        path = work / f"{model}-train.pt2"
        argv = [sys.executable, "tools/export/export_model.py", "--model", model, "--mode",
                "train", "-q", "-o", str(path)] + (["--tiny"] if TINY else [])
        run.log.write(f"$ {' '.join(argv)}\n")
        procs[model] = (path, subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, env=env,
                                               stderr=subprocess.STDOUT, text=True))
    exported = {}
    deadline = time.monotonic() + EXPORT_SECONDS
    for model, (path, proc) in procs.items():
        try:
            output, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        run.log.write(output)
        if proc.returncode == 0 and path.is_file():
            exported[model] = path
        else:
            run.record(f"export {model}", False, rc=proc.returncode, output=tail(output))
    return exported


def check_verifier(run: Run, graph_opt: Path, models: dict[str, Path], env) -> None:
    """Each model after each pipeline against the unmodified graph, on CUDA."""
    for model in MODELS:
        for pipeline in VERIFY_PIPELINES:
            name = f"verify {model} -passes='{pipeline}'"
            if model not in models or run.left() < 60:
                run.record(name, None, why="model not exported" if model not in models
                           else "out of time")
                continue
            began = time.monotonic()
            base = [str(graph_opt), str(models[model]), f"-passes={pipeline}",
                    f"--device={DEVICE}", "--verify"]
            rc, output = run.command(base + ["--bitwise"], min(120, run.left()), env)
            rule = "bitwise (torch's deterministic algorithms)"
            if rc != 0 and NOT_DETERMINISTIC in output:
                why = next(l for l in output.splitlines() if NOT_DETERMINISTIC in l)
                rule = f"tolerance (torch.testing's): {why.strip()}"
                rc, output = run.command(base, min(120, run.left()), env)
            run.record(name, rc == 0, rule=rule, rc=rc, seconds=round(time.monotonic() - began, 1),
                       summary=tail(output, 3))


def host_device_bandwidth() -> dict:
    """Pinned host <-> device copies of 256 MiB, median of 5 each way, bytes per second."""
    import torch

    n = 256 * 2**20
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    rates = {}
    for way, (dst, src) in {"to_device": (dev, host), "to_host": (host, dev)}.items():
        times = []
        for _ in range(6):
            torch.cuda.synchronize()
            t = time.perf_counter()
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        times = sorted(times[1:])
        rates[way] = n / times[len(times) // 2]
    del host, dev  # the checks after this one run in other processes: leave them the memory
    torch.cuda.empty_cache()
    return rates


def benchmark(run: Run, graph_opt: Path, model: Path, pipeline: str, env, tag: str):
    path = run.out / f"bench-{tag}.json"
    rc, output = run.command([str(graph_opt), str(model), f"-passes={pipeline}",
                              f"--device={DEVICE}", "--benchmark=10", f"--benchmark-json={path}"],
                             min(150, run.left()), env)
    data = json.loads(path.read_text()) if rc == 0 and path.is_file() else None
    return rc, output, data


def check_offload(run: Run, graph_opt: Path, models: dict[str, Path], env) -> None:
    name = "offload: checkpoint with offload on gpt2 against recomputation alone"
    if "gpt2" not in models or run.left() < 120:
        run.record(name, None, why="gpt2 not exported" if "gpt2" not in models else "out of time")
        return
    rates = host_device_bandwidth() if DEVICE == "cuda" else {"rehearsal": 12e9}
    each_way = min(rates.values())
    budget = "activations=30%"
    offload = f"checkpoint{{{budget},offload-bandwidth={each_way / 1e9:.2f}GB/s}}"
    recompute = f"checkpoint{{{budget}}}"
    rc_o, out_o, with_offload = benchmark(run, graph_opt, models["gpt2"], offload, env, "offload")
    rc_r, out_r, alone = benchmark(run, graph_opt, models["gpt2"], recompute, env, "recompute")
    said = [l.strip() for l in out_o.splitlines() if "offload" in l]
    detail = {"bandwidth_bytes_per_s": rates, "pipeline": offload, "said": said[:4]}
    for tag, data in (("offload", with_offload), ("recompute_only", alone)):
        if data:
            detail[tag] = {"peak_bytes_above_inputs": data["optimized"]["peak_bytes_above_inputs"],
                           "step_seconds_median": data["optimized"]["step_seconds_median"],
                           "verification": data["verification"]}
    if with_offload and alone:
        detail["peak_ratio_offload_to_recompute"] = (
            with_offload["optimized"]["peak_bytes_above_inputs"]
            / max(alone["optimized"]["peak_bytes_above_inputs"], 1))
        detail["step_ratio_offload_to_recompute"] = (
            with_offload["optimized"]["step_seconds_median"]
            / alone["optimized"]["step_seconds_median"])
    passed = rc_o == 0 and rc_r == 0 and bool(with_offload) and bool(alone) and all(
        d["verification"].startswith("passed") for d in (with_offload, alone))
    run.record(name, passed, rc=[rc_o, rc_r], **detail)


def check_profile(run: Run, graph_opt: Path, models: dict[str, Path], env) -> None:
    """Node sums against the measured step (goal within 5%), breakdown against the peak."""
    for model in ("gpt2", "resnet50"):
        name = f"profile fidelity {model}"
        if model not in models or run.left() < 60:
            run.record(name, None, why="model not exported" if model not in models
                       else "out of time")
            continue
        report = run.out / f"profile-{model}"
        rc, output = run.command([str(graph_opt), str(models[model]), "-passes=profile",
                                  f"--device={DEVICE}", f"--report-dir={report}", "--html=false"],
                                 min(150, run.left()), env)
        path = report / "profile.json"
        if rc != 0 or not path.is_file():
            run.record(name, False, rc=rc, output=tail(output))
            continue
        p = json.loads(path.read_text())
        run_sum = p["run_node_time_s"] / p["step_time_s"]
        median_sum = p["sum_node_time_s"] / p["step_time_s"]
        unattributed = p["unattributed_at_peak_bytes"] / max(p["peak_bytes"], 1)
        shutil.rmtree(report, ignore_errors=True)  # only the JSON's figures come back
        run.record(name, abs(run_sum - 1) <= 0.05 and abs(unattributed) <= 0.05,
                   device=p["device"], time_source=p["time_source"],
                   step_time_s=p["step_time_s"], run_node_sum_ratio=run_sum,
                   median_node_sum_ratio=median_sum, peak_bytes=p["peak_bytes"],
                   unattributed_at_peak_ratio=unattributed)


def check_energy(run: Run, costdb: Path, env, facts: dict, work: Path) -> None:
    name = "energy: graph-opt-costdb measure of the matmul sweep, NVML's joules"
    if run.left() < 60:
        run.record(name, None, why="out of time")
        return
    db = work / "costs.sqlite"
    rc, output = run.command([str(costdb), "measure", f"--db={db}", f"--device={DEVICE}",
                              "tools/costdb/sweeps/matmul.json"], min(150, run.left()), env)
    rows = with_joules = 0
    sources = []
    if db.is_file():
        con = sqlite3.connect(db)
        rows, with_joules = con.execute(
            "SELECT COUNT(*), COUNT(joules) FROM measurements").fetchone()
        sources = [s for (s,) in con.execute(
            "SELECT DISTINCT energy_source FROM measurements WHERE energy_source IS NOT NULL")]
        con.close()
    uuid_ok = any(u in s for s in sources for u in facts.get("uuid_nvidia_smi", []))
    run.record(name, rc == 0 and rows > 0 and with_joules == rows and uuid_ok, rc=rc,
               measurements=rows, with_joules=with_joules, energy_sources=sources,
               device_found_by_uuid=uuid_ok, said=tail(output, 4))


COMPILE_NAME = "torch.compile: gpt2 through graph-opt's partitioner and torch's knapsack"
COMPILE_BUDGETS = (0.5, 0.3)
COMPILE_STEPS = 20


def check_torch_compile(run: Run, env) -> None:
    """GPT-2 trained through torch.compile, in a process of its own (compile_training)."""
    if run.left() < 150:
        run.record(COMPILE_NAME, None, why="out of time")
        return
    path = run.out / "torch-compile.json"
    rc, output = run.command([sys.executable, str(Path(__file__).resolve()), "compile-training",
                              f"--json={path}"] + (["--rehearse"] if TINY else []),
                             run.left(), env)
    if rc != 0 or not path.is_file():
        run.record(COMPILE_NAME, False, rc=rc, output=tail(output, 12))
        return
    result = json.loads(path.read_text())
    run.record(COMPILE_NAME, result.pop("pass"), **result)


def compile_training(json_path: Path) -> None:
    """GPT-2 (its default size, dropout off so the two partitions draw nothing) trained
    COMPILE_STEPS AdamW steps under torch.compile with torch's knapsack and with graph-opt's
    partitioner (verify=True: its first step is compared with torch's partition), each at
    every COMPILE_BUDGETS share of the activation memory, from the same initial weights.
    Losses compared (the first within 1e-4, every step within 1e-2, relative: Inductor's
    kernels differ between partitions), measured peak (torch.cuda.max_memory_allocated over
    the steps after the first), median step time over the last 10 steps."""
    import copy
    import statistics

    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    sys.path.insert(0, str(ROOT / "tools"))
    import graph_opt
    import zoo

    spec = zoo.MODELS["gpt2"]
    sizes = zoo.Sizes(tiny=TINY, **{"batch": None, "image_size": None, "seq_len": None,
                                    **(spec.tiny if TINY else spec.defaults)})
    built = zoo.build_model("gpt2", sizes, seed=0, dropout=False)
    step, _ = zoo.train_step_module(built)
    device = torch.device(DEVICE)
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in built.train_args)
    step = step.to(device)

    def train(partitioner, budget):
        model = copy.deepcopy(step)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        compiled = torch.compile(model)
        losses, times = [], []
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        with functorch_config.patch(activation_memory_budget=budget), \
                inductor_config.patch(custom_partitioner_fn=partitioner):
            for i in range(COMPILE_STEPS):
                if i == 1 and device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                sync()
                began = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                (loss,) = compiled(*args)
                loss.backward()
                optimizer.step()
                sync()
                times.append(time.perf_counter() - began)
                losses.append(float(loss))
        peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
        torch._dynamo.reset()
        return {"losses": losses, "peak_bytes": peak,
                "median_step_s": statistics.median(times[-10:])}

    result = {"model": "gpt2", "sizes": dataclasses.asdict(sizes), "steps": COMPILE_STEPS,
              "device": DEVICE, "runs": {}}
    passed = True
    for budget in COMPILE_BUDGETS:
        knapsack = train(None, budget)
        ours = train(graph_opt.partitioner(memory_budget=budget, strict=True, verify=True),
                     budget)
        first = abs(ours["losses"][0] - knapsack["losses"][0]) / abs(knapsack["losses"][0])
        worst = max(abs(a - b) / abs(b) for a, b in zip(ours["losses"], knapsack["losses"]))
        ok = first <= 1e-4 and worst <= 1e-2
        passed &= ok
        result["runs"][f"budget={budget}"] = {
            "knapsack": knapsack, "graph_opt": ours, "first_loss_rel_diff": first,
            "worst_loss_rel_diff": worst, "losses_agree": ok,
            "peak_ratio": (ours["peak_bytes"] / knapsack["peak_bytes"]
                           if knapsack["peak_bytes"] else None),
            "step_ratio": ours["median_step_s"] / knapsack["median_step_s"]}
    result["pass"] = passed
    json_path.write_text(json.dumps(result, indent=1) + "\n")


CHECKS = ("verify", "profile", "offload", "energy", "compile")


def python_package_dir(build: Path) -> Path:
    """Where graph_opt is for this interpreter: the pack's (built for the device's CPython),
    else, rehearsing here, the build tree's."""
    import sysconfig

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if (PACK / "python" / "graph_opt" / f"_C{suffix}").is_file():
        return PACK / "python"
    if TINY and (build / "python" / "graph_opt" / f"_C{suffix}").is_file():
        return build / "python"
    fail(f"the pack has no graph_opt extension for this CPython ({suffix}): it was built for "
         f"{DEVICE_PYTHON_VERSION} (DEVICE_PYTHON when packing)")


def run_checks(only: tuple[str, ...], build: Path) -> int:
    import torch

    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("device-check: no CUDA device torch can use here; nothing to check")
        return 0
    out = Path(os.environ.get("OUT") or ROOT / "build" / "device-check")
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out)
    manifest_path = PACK / "manifest.json"
    if not manifest_path.is_file():
        run.results["error"] = f"no pack at {PACK} (scripts/device-check.sh pack, then carry it)"
        run.write()
        fail(run.results["error"])
    manifest = json.loads(manifest_path.read_text())
    run.results["pack"] = {k: manifest[k] for k in ("commit", "torch", "total_bytes")}
    if manifest["torch"].split("+")[0] != torch.__version__.split("+")[0]:
        run.results["warning"] = (f"packed against torch {manifest['torch']}, running with "
                                  f"{torch.__version__}")
    env = dict(os.environ)
    torch_lib = Path(torch.__file__).resolve().parent / "lib"
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(PACK / "lib"), str(torch_lib)] + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
    # The exporter and the torch.compile check import graph_opt; its programs from the pack.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(python_package_dir(build))] + [p for p in [env.get("PYTHONPATH")] if p])
    env["GRAPHOPT_MILP_SOLVER"] = str(PACK / "bin" / "graph-opt-milp")
    # cuBLAS is deterministic only with a fixed workspace (torch's reproducibility notes);
    # --bitwise runs with torch's deterministic algorithms in warn-only mode, so without it
    # matrix products would only warn and could differ.
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    graph_opt, costdb = PACK / "bin" / "graph-opt", PACK / "bin" / "graph-opt-costdb"
    rc, output = run.command([str(graph_opt), "--version"], 60, env)
    if rc != 0:
        run.results["error"] = f"the packed graph-opt does not start: {tail(output)}"
        run.write()
        fail(run.results["error"])
    run.results["device"] = facts = device_facts(run)
    run.write()
    with tempfile.TemporaryDirectory(prefix="device-check-") as work:
        models = (export_models(run, Path(work), env)
                  if {"verify", "profile", "offload"} & set(only) else {})
        if "verify" in only:
            check_verifier(run, graph_opt, models, env)
        if "profile" in only:
            check_profile(run, graph_opt, models, env)
        if "offload" in only:
            check_offload(run, graph_opt, models, env)
        if "energy" in only:
            check_energy(run, costdb, env, facts, Path(work))
        if "compile" in only:
            check_torch_compile(run, env)
    run.write()
    r = run.results
    print(f"device-check: {r['passed']} passed, {r['failed']} failed, {r['not_run']} not run, "
          f"in {r['seconds']:.0f} s; {out / 'device-check.json'}")
    return 1 if r["failed"] else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("verb", choices=("pack", "run", "compile-training"))
    parser.add_argument("--only", default=",".join(CHECKS),
                        help=f"run: these checks, comma-separated (default all: "
                             f"{','.join(CHECKS)}); a second call can finish what a first left")
    parser.add_argument("--json", help="compile-training: where its result goes")
    parser.add_argument("--without-python", action="store_true",
                        help="pack: leave out the graph_opt package (its extension is built "
                             "for the device's CPython, a build of its own; the tests use this)")
    parser.add_argument("--rehearse", action="store_true",
                        help="run: every check on the CPU with the tiny models (tries the "
                             "script here; says nothing about CUDA)")
    parser.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"),
                        help="the build tree whose programs are packed (default build)")
    args = parser.parse_args()
    if args.verb == "pack":
        pack(ROOT / args.build, with_python=not args.without_python)
        return
    global DEVICE, TINY
    if args.rehearse:
        DEVICE, TINY = "cpu", True
    if args.verb == "compile-training":
        compile_training(Path(args.json))
        return
    only = tuple(c for c in args.only.split(",") if c)
    if unknown := [c for c in only if c not in CHECKS]:
        fail(f"--only: no check {', '.join(unknown)} (the checks: {', '.join(CHECKS)})")
    sys.exit(run_checks(only, ROOT / args.build))


if __name__ == "__main__":
    main()
