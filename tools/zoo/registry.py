"""The zoo's table (``MODELS``: name -> ModelSpec, with the full and --tiny size presets)
and what builds from it: ``resolve_sizes`` (an export_model.py command line's sizes),
``build_model``, ``train_step_module`` and ``build_for_facts`` (the module of a facts file)."""

from __future__ import annotations

import json

from . import common, text, vision
from .common import Built, ModelSpec, Sizes, UsageError


_IMG_DEFAULT = {"batch": 8, "image_size": 224}
_IMG_TINY = {"batch": 2, "image_size": 32}
_TXT_DEFAULT = {"batch": 8, "seq_len": 128}
_TXT_TINY = {"batch": 2, "seq_len": 16}

MODELS: dict[str, ModelSpec] = {
    "mlp": ModelSpec(
        "3-layer MLP (Linear+ReLU) on flattened SxS inputs, 10 classes",
        "image",
        {"batch": 32, "image_size": 28},
        {"batch": 4, "image_size": 8},
        vision.build_mlp,
    ),
    "cnn": ModelSpec(
        "small conv net: 2x (conv, BatchNorm, ReLU), max-pool, avg-pool, linear; 10 classes",
        "image",
        {"batch": 32, "image_size": 32},
        {"batch": 2, "image_size": 8},
        vision.build_cnn,
    ),
    "resnet18": ModelSpec(
        "torchvision ResNet-18, weights=None, 1000 classes (--tiny: width 8, 10 classes)",
        "image",
        _IMG_DEFAULT,
        _IMG_TINY,
        vision.resnet_builder("resnet18"),
    ),
    "resnet50": ModelSpec(
        "torchvision ResNet-50, weights=None, 1000 classes (--tiny: width 8, 10 classes)",
        "image",
        _IMG_DEFAULT,
        _IMG_TINY,
        vision.resnet_builder("resnet50"),
    ),
    "resnet152": ModelSpec(
        "torchvision ResNet-152, weights=None, 1000 classes (--tiny: width 8, 10 classes)",
        "image",
        _IMG_DEFAULT,
        _IMG_TINY,
        vision.resnet_builder("resnet152"),
    ),
    "bert": ModelSpec(
        "transformers BertForSequenceClassification, BERT-base config, 2 labels, dropout 0.1",
        "text",
        _TXT_DEFAULT,
        _TXT_TINY,
        text.build_bert,
    ),
    "bert-mlm": ModelSpec(
        "transformers BertForMaskedLM, BERT-base config, dropout 0.1 (tied decoder untied in train)",
        "text",
        _TXT_DEFAULT,
        _TXT_TINY,
        text.build_bert_mlm,
    ),
    "gpt2": ModelSpec(
        "transformers GPT2LMHeadModel, GPT-2 small config, dropout 0.1 (tied lm_head untied in train)",
        "text",
        _TXT_DEFAULT,
        _TXT_TINY,
        text.build_gpt2,
    ),
    "llama": ModelSpec(
        "transformers LlamaForCausalLM, ~100M config, rotary embeddings (eval graph: "
        "wrap_with_set_grad_enabled), tied lm_head untied in train",
        "text",
        _TXT_DEFAULT,
        {"batch": 2, "seq_len": 8},
        text.build_llama,
    ),
    "t5": ModelSpec(
        "transformers T5ForConditionalGeneration, t5-small config, dropout 0.1 (shared "
        "embedding tied 4 ways, untied in train)",
        "text",
        _TXT_DEFAULT,
        {"batch": 2, "seq_len": 8},
        text.build_t5,
    ),
}


def resolve_sizes(name: str, spec: ModelSpec, args) -> Sizes:
    """The sizes of ``args`` (``tiny``, ``batch``, ``image_size``, ``seq_len``: an
    export_model.py command line, or a Namespace with those fields), each one not given
    (None) taken from the model's preset; UsageError names the option that does not apply
    or is out of range."""
    base = spec.tiny if args.tiny else spec.defaults
    if spec.kind in ("image", "vector"):
        if args.seq_len is not None:
            raise UsageError(f"--seq-len does not apply to {name} (an image model)")
    else:
        if args.image_size is not None:
            raise UsageError(f"--image-size does not apply to {name} (a text model)")
    sizes = Sizes(
        batch=args.batch if args.batch is not None else base["batch"],
        image_size=(args.image_size if args.image_size is not None else base.get("image_size")),
        seq_len=args.seq_len if args.seq_len is not None else base.get("seq_len"),
        tiny=args.tiny,
    )
    for opt, value in (("--batch", sizes.batch), ("--image-size", sizes.image_size),
                       ("--seq-len", sizes.seq_len)):
        if value is not None and value < 1:
            raise UsageError(f"{opt} must be a positive integer, got {value}")
    if spec.kind == "text" and sizes.seq_len < 2:
        raise UsageError("--seq-len must be at least 2 for the language-model losses")
    return sizes


def build_model(name: str, sizes: Sizes, seed: int, dropout: bool = True) -> Built:
    """Seeds the global RNG with ``seed`` and runs the model's builder (fresh random init)."""
    common.configure(seed, dropout)
    common._torch().manual_seed(seed)
    return MODELS[name].build(sizes)


def train_step_module(built: Built):
    """The training-step wrapper of ``built.model`` (train mode, shared Parameters untied).

    Returns ``(step, untied)``; ``step(*built.train_args)`` returns ``(loss,)``.
    """
    model = built.model
    model.train()
    untied = common.graph_opt_export().untie_shared_parameters(model)
    return built.loss_wrap(model).train(), untied


def build_for_facts(facts: dict):
    """Rebuild the very module a ``.pt2`` export of these facts exported.

    Same builder, sizes, seed, dropout setting and (train) untied / dropped parameters as
    recorded in ``facts`` (a ``FILE.facts.json`` of a ``.pt2``). Returns ``(module, built)``:
    for ``mode == "eval"`` the eval wrapper in eval mode (called with ``built.eval_args``),
    for ``"train"`` the training-step wrapper in train mode (``built.train_args``, returns
    ``(loss,)``). The module's parameter and buffer FQNs are the archive's signature
    targets. Its weights are the seeded random init, which equals the archive's only when
    torch's RNG streams are unchanged: load the archive's state dict to be sure.
    """
    if facts.get("format") == "torchscript":
        raise ValueError("build_for_facts takes the facts of a .pt2 export, not TorchScript")
    name = facts["model"]
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' in facts")
    built = build_model(name, Sizes(**facts["sizes"]), facts["seed"], facts.get("dropout", True))
    config = json.loads(json.dumps(built.config))
    if config != facts["config"]:
        raise RuntimeError(f"{name}: rebuilt config {config} differs from the facts' "
                           f"{facts['config']}")
    if facts["mode"] == "eval":
        return built.eval_wrap(built.model.eval()).eval(), built
    step, untied = train_step_module(built)
    recorded = facts.get("untied", [])
    if [e[:2] for e in untied] != [e[:2] for e in recorded]:
        raise RuntimeError(f"{name}: untied {untied}, the facts record {recorded}")
    dropped: set[str] = set()
    for entry in recorded:
        for note in entry[2:]:
            param = note[len("dropped "):].split(":")[0]
            if note.startswith("dropped ") and param not in dropped:
                common.graph_opt_export().drop_parameter(built.model, param)
                dropped.add(param)
    return step, built
