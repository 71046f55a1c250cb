"""What every builder of the zoo shares: the size and result types, the build settings
(seed and dropout), the seeded data generator, and the way to graph_opt.export.

The build settings live here and only here: ``build_model`` (zoo.registry) sets them with
``configure`` before a builder runs, the builders read them, and the exporter
(tools/export/export_model.py) reads them back for the facts (``current_seed``,
``dropout_enabled``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable


class UsageError(Exception):
    """A bad combination of options (sizes a model cannot take); the exporter reports it
    with exit code 2."""


@dataclasses.dataclass
class Sizes:
    """The resolved size options for one export."""

    batch: int
    image_size: int | None
    seq_len: int | None
    tiny: bool


@dataclasses.dataclass
class Built:
    """What a model builder returns.

    ``model``: the nn.Module (random init). ``eval_args``: example inputs of the inference
    graph. ``train_args``: example inputs of the training step (inputs plus labels).
    ``eval_wrap`` / ``loss_wrap``: turn ``model`` into the module that is exported.
    ``config``: a JSON-able description of the configuration, recorded in the facts.
    """

    model: Any
    eval_args: tuple
    train_args: tuple
    eval_wrap: Callable[[Any], Any]
    loss_wrap: Callable[[Any], Any]
    config: dict


@dataclasses.dataclass
class ModelSpec:
    description: str
    kind: str  # "image", "vector" or "text": which size options apply
    defaults: dict  # batch / image_size / seq_len at full size
    tiny: dict  # the same at --tiny
    build: Callable[[Sizes], Built]


# The build settings: seed of the inputs' generator (the global RNG is seeded by
# build_model) and whether the text models keep their dropout (False with --no-dropout:
# every dropout probability of their configs is 0). Set with configure().
_SEED = 0
_DROPOUT = True


def configure(seed: int, dropout: bool) -> None:
    """Sets the seed and dropout setting the next builder reads."""
    global _SEED, _DROPOUT
    _SEED, _DROPOUT = seed, dropout


def current_seed() -> int:
    return _SEED


def dropout_enabled() -> bool:
    return _DROPOUT


def graph_opt_export():
    """graph_opt.export, the package's exporter (python/graph_opt/export.py): from the
    environment, else the build tree's package (build/python), which make builds."""
    try:
        from graph_opt import export
    except ImportError:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.insert(0, os.path.join(os.environ.get("GRAPHOPT_BUILD_DIR",
                                                       os.path.join(root, "build")), "python"))
        from graph_opt import export
    return export


def _torch():
    import torch

    return torch


def data_generator():
    """Generator for inputs and labels (seeded from the current seed), independent of the
    global RNG used for init."""
    torch = _torch()
    g = torch.Generator()
    g.manual_seed(_SEED + 1)
    return g
