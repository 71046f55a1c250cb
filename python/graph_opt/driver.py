"""python -m graph_opt IN [graph-opt's options]: the graph-opt driver in this process.

The same driver as the graph-opt program (its options, reports and exit codes: 0 ok, 1 a
rewrite failed verification, 2 bad input), run from Python so that torch.distributed can
make the process groups a graph's collectives run on (docs/Distributed.md). Under torchrun
(WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT set), every rank joins the default group
first:

    torchrun --nproc-per-node 2 -m graph_opt -- model.pt2 -passes=... --run 1 --verify

("--" keeps torchrun's own parser off the driver's options: it would read --run as its
--run-path.)

Options of its own, before or among the driver's:
  --dist-timeout=SECONDS  how long a collective (and joining the group) may wait for the
                          other ranks before it fails (default: torch's, 30 minutes for gloo)
  --dist-backend=NAME     torch.distributed's backend (default: gloo on the CPU, and NCCL for
                          CUDA tensors where there is a GPU)
With more than one rank, `{rank}` in any argument becomes the rank, and every path graph-opt
writes (-o, --report-dir, --benchmark-json) must contain it: ranks never write one file.
"""
import datetime
import json
import os
import sys

OWN_OPTIONS = ("--dist-timeout", "--dist-backend")
# The driver's options that name something it writes.
WRITTEN_PATHS = ("-o", "--report-dir", "--benchmark-json")


def _fail(message):
    print(f"graph-opt: {message}", file=sys.stderr)
    return 2


def _take_option(argv, name):
    """(value, argv without it) for `name=V` or `name V`; (None, argv) when absent."""
    value, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith(name + "="):
            value = arg[len(name) + 1:]
        elif arg == name:
            if i + 1 >= len(argv):
                raise ValueError(f"{name} needs a value")
            value = argv[i + 1]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return value, rest


def _written_paths(argv):
    """(option, path) for each option that names a file or directory graph-opt writes."""
    found = []
    for i, arg in enumerate(argv):
        for option in WRITTEN_PATHS:
            if arg.startswith(option + "=") and len(arg) > len(option) + 1:
                found.append((option, arg[len(option) + 1:]))
            elif arg == option and i + 1 < len(argv):
                found.append((option, argv[i + 1]))
    return found


def main(argv):
    # `python -m graph_opt -- IN ...` as torchrun needs it (its parser reads --run as its
    # --run-path): the separator is graph_opt's, not the driver's.
    if argv[:1] == ["--"]:
        argv = argv[1:]
    try:
        timeout, argv = _take_option(argv, "--dist-timeout")
        backend, argv = _take_option(argv, "--dist-backend")
    except ValueError as e:
        return _fail(str(e))
    if timeout is not None:
        try:
            timeout = float(timeout)
            if not timeout > 0:
                raise ValueError
        except ValueError:
            return _fail(f"--dist-timeout={timeout}: expected a number of seconds above 0")

    import torch
    import torch.distributed as dist
    from . import _C

    world = os.environ.get("WORLD_SIZE")
    joined = False
    rank = 0
    if world is not None and not dist.is_initialized():
        try:
            world = int(world)
            rank = int(os.environ.get("RANK", "0"))
        except ValueError:
            return _fail(f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r}, "
                         f"RANK={os.environ.get('RANK')!r}: expected integers (torchrun sets them)")
        if world > 1:
            for option, path in _written_paths(argv):
                if "{rank}" not in path and path not in ("-", os.devnull):
                    return _fail(f"{option} {path}: with {world} ranks every rank would write it; "
                                 f"name one path per rank with {{rank}} (e.g. "
                                 f"{'out.{rank}.gir' if option == '-o' else path + '.{rank}'})")
        if backend is None:
            backend = ("cpu:gloo,cuda:nccl" if torch.cuda.is_available() and dist.is_nccl_available()
                       else "gloo")
        try:
            dist.init_process_group(
                backend=backend,
                timeout=datetime.timedelta(seconds=timeout) if timeout is not None else None)
        except Exception as e:  # noqa: BLE001: a rendezvous or backend failure, said plainly
            return _fail(f"could not join the process group (backend {backend}, rank {rank} of "
                         f"{world}): {e}")
        joined = True
    elif dist.is_initialized():
        rank = dist.get_rank()
    report_dirs = [path for option, path in _written_paths(argv) if option == "--report-dir"]
    argv = [a.replace("{rank}", str(rank)) for a in argv]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        rc = _C._driver_main(["graph-opt"] + argv)
        if joined and world > 1 and report_dirs:
            _merged_summary(dist, rc, rank, world, report_dirs[-1], _C)
        return rc
    finally:
        if joined:
            dist.destroy_process_group()


def _merged_summary(dist, rc, rank, world, report_dir, _C):
    """Rank 0 prints one table from every rank's profile.json (time in communication, the
    part waited for, per-rank peaks), once all ranks are done writing, and redraws its
    report.html with a section for all ranks; nothing where any rank failed or none
    profiled."""
    codes = [None] * world
    try:
        dist.all_gather_object(codes, rc)
    except Exception as e:  # noqa: BLE001: a rank that died; its own error says why
        print(f"graph-opt: no merged summary: {e}", file=sys.stderr)
        return
    if rank != 0 or any(c != 0 for c in codes):
        return
    rows = []
    for r in range(world):
        path = os.path.join(report_dir.replace("{rank}", str(r)), "profile.json")
        if not os.path.isfile(path):
            return
        with open(path) as f:
            profile = json.load(f)
        comm = profile.get("communication") or {}
        rows.append((r, profile.get("step_time_s", 0.0), comm.get("call_time_s", 0.0),
                     comm.get("wait_time_s", 0.0), comm.get("overlapped_compute_s", 0.0),
                     comm.get("bytes", 0), profile.get("peak_bytes", 0)))
    print(f"\nall {world} ranks (each rank's profile.json; node medians):")
    print(f"  {'rank':>4} {'step ms':>9} {'comm calls ms':>13} {'waiting ms':>10} "
          f"{'overlapped ms':>13} {'comm MiB':>9} {'peak MiB':>9}")
    for r, step, calls, wait, overlapped, nbytes, peak in rows:
        print(f"  {r:>4} {step * 1e3:9.3f} {calls * 1e3:13.3f} {wait * 1e3:10.3f} "
              f"{overlapped * 1e3:13.3f} {nbytes / 2**20:9.2f} {peak / 2**20:9.2f}")
    sys.stdout.flush()
    # Rank 0's report.html (where the driver drew one) with every rank's memory beside it.
    own = report_dir.replace("{rank}", "0")
    if os.path.isfile(os.path.join(own, "report.html")):
        import subprocess
        python, script = _C._report_tools()
        dirs = ",".join(report_dir.replace("{rank}", str(r)) for r in range(world))
        drawn = subprocess.run([python, script, own, "--ranks", dirs], capture_output=True,
                               text=True)
        if drawn.returncode != 0:
            print(f"graph-opt: report.html for all ranks: {drawn.stderr.strip()}",
                  file=sys.stderr)
