"""graph-opt's model zoo: the models the exporter exports, the benchmarks and tests rebuild.

Ten models by name (``MODELS``): ``mlp``, ``cnn``, ``resnet18``, ``resnet50``,
``resnet152`` (zoo.vision), ``bert``, ``bert-mlm``, ``gpt2``, ``llama``, ``t5``
(zoo.text), each at a full and a ``--tiny`` size (the ``ModelSpec``'s presets). Nothing is
downloaded: torchvision models use ``weights=None`` and transformers models are built from
configs; all weights are random with a fixed seed, and inputs and labels come from a
separate seeded generator, so two builds give the same module and inputs.

    import zoo                                    # with tools/ on sys.path
    sizes = zoo.resolve_sizes("gpt2", zoo.MODELS["gpt2"], args)   # args: tiny, batch, ...
    built = zoo.build_model("gpt2", sizes, seed=0, dropout=False)
    step, untied = zoo.train_step_module(built)   # step(*built.train_args) -> (loss,)
    module, built = zoo.build_for_facts(facts)    # the module of a .pt2's facts file

The zoo does not depend on the exporter (tools/export/export_model.py, which imports it);
it uses graph_opt.export (python/graph_opt/export.py) to untie shared parameters, as the
exporter does. Modules: zoo.common (Sizes, Built, ModelSpec, UsageError, the seed and
dropout settings), zoo.vision, zoo.text, zoo.registry (MODELS and the functions above).
"""

import glob as _glob
import os as _os

from .common import (Built, ModelSpec, Sizes, UsageError, configure, current_seed,
                     dropout_enabled, graph_opt_export)
from .registry import MODELS, build_for_facts, build_model, resolve_sizes, train_step_module

# The package's source files: what a cached export or reference built from the zoo is
# older than when it must be made again.
SOURCES = sorted(_glob.glob(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "*.py")))

__all__ = [
    "MODELS", "SOURCES", "Built", "ModelSpec", "Sizes", "UsageError", "build_for_facts",
    "build_model", "configure", "current_seed", "dropout_enabled", "graph_opt_export",
    "resolve_sizes", "train_step_module",
]
