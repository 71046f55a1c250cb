# lit configuration for graph-opt's pass and IR tests.
#   RUN: graph-opt %s -S | FileCheck %s
# graph-opt comes from this build; FileCheck, not and split-file from LLVM 14.
import os

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
