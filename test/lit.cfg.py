# lit configuration for graph-opt's pass and IR tests.
#   RUN: graph-opt %s -S | FileCheck %s
# graph-opt comes from this build; FileCheck, not and split-file from LLVM 14.
import os
import shutil

import lit.formats

config.name = "graph-opt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".gir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.graphopt_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.graphopt_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%examples", os.path.join(config.graphopt_src_root, "examples")))
# The tiny model zoo and the broken inputs made from it (ctest fixtures export them).
config.substitutions.append(("%zoo", config.graphopt_zoo_dir))
config.substitutions.append(("%bad", config.graphopt_bad_inputs_dir))
# Archives with higher-order ops (test/Inputs/make_hop_inputs.py).
config.substitutions.append(("%hop", config.graphopt_hop_inputs_dir))

# The project's Python (tools/report needs its matplotlib) and the tools' sources.
config.substitutions.append(("%python", config.graphopt_python))
config.substitutions.append(("%tools", os.path.join(config.graphopt_src_root, "tools")))
config.substitutions.append(("%srcroot", config.graphopt_src_root))
# The batch-size sweep (tools/sweep) with this build's graph-opt, which may not be the
# checkout's build/bin/graph-opt that it uses by default. A later --graph-opt overrides it.
config.substitutions.append(
    ("%sweep", " ".join([config.graphopt_python,
                         os.path.join(config.graphopt_src_root, "tools", "sweep",
                                      "graph_opt_sweep.py"),
                         "--graph-opt", os.path.join(config.graphopt_tools_dir, "graph-opt")])))

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
