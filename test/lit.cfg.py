# lit configuration for graph-opt's pass and IR tests.
#   RUN: graph-opt %s -S | FileCheck %s
# graph-opt comes from this build; FileCheck, not and split-file from LLVM 14.
import os
import shutil
import subprocess

import lit.formats

config.name = "graph-opt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".gir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.graphopt_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.graphopt_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# ctest's OMP_WAIT_POLICY (the root CMakeLists.txt's GRAPHOPT_TEST_ENVIRONMENT: OpenMP threads
# that wait passively, on a machine every test shares), which lit would otherwise drop.
for name in ("OMP_WAIT_POLICY",):
    if name in os.environ:
        config.environment[name] = os.environ[name]

# One LibTorch load per lit run instead of one per graph-opt command (issue 52): a
# `graph-opt --fork-server` started here forks a ready copy of itself for each command, and
# the graph-opt first on PATH is its client (tools/graph-opt/ForkProtocol.h). A command runs
# as it would alone: its own process, arguments, environment, directory, streams, exit code
# or signal; one whose environment or limits differ from the server's (`env X=1 graph-opt`)
# runs the real program. `lit --param fork-server=0` runs every command the plain way (make
# check does both); `--param fork-server-log=FILE` logs each command, forked or not.
# The same for `%python`: tools/graph-opt/python_fork_server.py imports torch once and forks
# a copy per command (`python SCRIPT`, `-m MODULE`, `-c CODE`; other options run the real one).
fork_client_dir = os.path.join(config.graphopt_tools_dir, "fork-client")
graph_opt_real = os.path.join(config.graphopt_tools_dir, "graph-opt")
has_fork_client = os.path.isfile(os.path.join(fork_client_dir, "graph-opt"))


python_client = os.path.join(config.graphopt_tools_dir, "python-fork-client", "python")
python_fork_server = os.path.join(config.graphopt_src_root, "tools", "graph-opt",
                                  "python_fork_server.py")
python_command = config.graphopt_python  # what %python runs


def start_fork_servers():
    """Starts graph-opt's server and the Python one (python_fork_server.py: torch imported
    once, `%python` its client) side by side; each runs its commands in forks of itself."""
    import atexit
    import subprocess
    import uuid

    global python_command
    tag = "%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
    servers = [("graph-opt", "GRAPHOPT_FORK_SERVER", [graph_opt_real, "--fork-server"])]
    if os.path.isfile(python_client):
        servers.append(("python", "GRAPHOPT_PYTHON_FORK_SERVER",
                        [config.graphopt_python, python_fork_server]))
    # Every variable first: a server compares each command's environment with its own.
    for program, variable, _ in servers:
        config.environment[variable] = "%s-fork-%s" % (program, tag)
    log = lit_config.params.get("fork-server-log")
    if log:  # one line a command: forked or not, and why (ForkServer.cpp)
        config.environment["GRAPHOPT_FORK_SERVER_LOG"] = os.path.abspath(log)
    config.environment["PATH"] = fork_client_dir + os.pathsep + config.environment["PATH"]
    started = []
    for program, variable, command in servers:
        server = subprocess.Popen(command + [config.environment[variable]],
                                  env=dict(config.environment),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        atexit.register(server.terminate)
        started.append((program, server))
    for program, server in started:
        if server.stdout.readline() != b"ready\n":
            # Every client then runs the real program: slower, never wrong.
            lit_config.warning("the %s fork server did not start; each command starts afresh"
                               % program)
        elif program == "python":
            python_command = python_client
        server.stdout.close()


# The fork server's own test (test/graph-opt/fork-server.test) starts a server of its own.
if has_fork_client:
    config.available_features.add("fork-server")
    config.substitutions.append(("%fork-client-dir", fork_client_dir))
    config.substitutions.append(("%graph-opt-real", graph_opt_real))
if os.path.isfile(python_client):  # and test/graph-opt/python-fork-server.test, the Python one
    config.available_features.add("python-fork-server")
    config.substitutions.append(("%python-client-dir", os.path.dirname(python_client)))
    config.substitutions.append(("%python-real", config.graphopt_python))
    config.substitutions.append(("%python-fork-server", python_fork_server))

if has_fork_client and lit_config.params.get("fork-server", "1") not in ("0", "", "off", "false"):
    start_fork_servers()

config.substitutions.append(("%examples", os.path.join(config.graphopt_src_root, "examples")))
# The tiny model zoo and the broken inputs made from it (ctest fixtures export them).
config.substitutions.append(("%zoo", config.graphopt_zoo_dir))
config.substitutions.append(("%bad", config.graphopt_bad_inputs_dir))
# Archives with higher-order ops (test/Inputs/make_hop_inputs.py).
config.substitutions.append(("%hop", config.graphopt_hop_inputs_dir))
# The tiny MLP's sweep exports at batches 2, 4 and 8 (test/Sweep/Inputs/make_sweep_exports.py).
config.substitutions.append(("%sweep-exports", config.graphopt_sweep_exports_dir))

# The project's Python (tools/report needs its matplotlib) and the tools' sources.
config.substitutions.append(("%python", python_command))
config.substitutions.append(("%tools", os.path.join(config.graphopt_src_root, "tools")))
config.substitutions.append(("%srcroot", config.graphopt_src_root))
# The build's Python package directory (graph_opt and its extension): PYTHONPATH for
# `python -m graph_opt`.
config.substitutions.append(("%pypackage", os.path.join(config.graphopt_obj_root, "python")))
# The batch-size sweep (tools/sweep) with this build's graph-opt (the fork server's client
# where there is one), which may not be the
# checkout's build/bin/graph-opt that it uses by default. A later --graph-opt overrides it.
config.substitutions.append(
    ("%sweep", " ".join([python_command,
                         os.path.join(config.graphopt_src_root, "tools", "sweep",
                                      "graph_opt_sweep.py"),
                         "--graph-opt", shutil.which("graph-opt", path=config.environment["PATH"])])))

# Headless Chromium renders the HTML report (REQUIRES: chromium; UNSUPPORTED without it):
# the one CMake found, else one on PATH now. `lit --param chromium=PATH` picks another, and
# `--param chromium=` runs as if there were none.
chromium = lit_config.params.get("chromium")
if chromium is None:
    chromium = config.graphopt_chromium
    if not os.path.isfile(chromium):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser") or ""
if chromium:
    config.available_features.add("chromium")
    config.substitutions.append(("%chromium", chromium))

# The lizard package (pinned in requirements-test.txt) in the Python that %python runs: the
# function length check needs it (test/Robustness/function-length.test, REQUIRES: lizard;
# UNSUPPORTED without it).
try:
    if subprocess.run([config.graphopt_python, "-c", "import lizard"], capture_output=True,
                      timeout=60).returncode == 0:
        config.available_features.add("lizard")
except (OSError, subprocess.SubprocessError):
    pass

# A machine with an NVIDIA GPU (nvidia-smi lists one): scripts/device-check.sh run checks it
# there instead of saying there is nothing to check (test/DeviceCheck).
try:
    if shutil.which("nvidia-smi") and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0:
        config.available_features.add("nvidia-gpu")
except (OSError, subprocess.SubprocessError):
    pass

# The full tier (REQUIRES: full-tier): end-to-end runs of the benchmark harness, the batch-size
# sweep and the peers, tens of seconds each, that test the tools around the optimizer rather
# than its passes. make check's lit-plain step runs them (`--param tier=full`); make test leaves
# them out (UNSUPPORTED) to stay under five minutes on two cores. Their quick error-path tests
# stay in make test.
if lit_config.params.get("tier", "") == "full":
    config.available_features.add("full-tier")
