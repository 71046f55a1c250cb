"""Models outside the zoo, built from configs (random init, nothing downloaded): the models
issue 82 measures graph-opt's peak prediction and peak= on, as a new user's would be.

    peers.build("hf-causal-lm:default", None, dropout=False)  # or any name below

Each builder returns (training-step module, its arguments, a JSON-able configuration): the
step module takes the arguments and returns (loss,), as the zoo's training steps do
(tools/zoo), so peers.py, halves_accuracy.py and peak_bound.py run them
like the zoo's. With dropout=False every dropout probability is 0 (compiled steps are then
deterministic to compare). Only the default size exists. The decoders are built with
use_cache=False, as training scripts set it (a training step decodes nothing; Hugging Face's
gradient_checkpointing_enable() sets it itself, so per-block checkpointing and graph-opt
compare on the same model: with the cache on, eager holds every layer's keys and values to
the step's end, 7.9 MiB on hf-causal-lm).

| name | model | step |
|---|---|---|
| hf-causal-lm | transformers LlamaForCausalLM, 4 layers, hidden 256, 4 heads, MLP 688, a 32,000-token vocabulary | batch 16 x 64; the model's own loss from labels (the large-vocabulary cross-entropy) |
| hf-distilbert | transformers DistilBertForSequenceClassification, its default config (6 layers, hidden 768), 2 labels | batch 32 x 64 |
| hf-bart | transformers BartForConditionalGeneration, 3 + 3 layers, d_model 256, 4 heads, FFN 1024, 8,192-token vocabulary | batch 8 x 64 source and target; the model's own loss |
| hf-roberta | transformers RobertaForSequenceClassification, its default config (12 layers, hidden 768, a 50,265-token vocabulary), 2 labels | batch 16 x 128 |
| hf-vit | transformers ViTForImageClassification, ViT-B/16's config, 10 labels | batch 4, 224 x 224 |
| mobilenet_v2 | torchvision mobilenet_v2, weights=None, 1000 classes | batch 16, 224 x 224, cross-entropy |
| deep-mlp | 8 pre-norm residual blocks x + down(gelu(up(layer_norm(x)))), 256 -> 1024 -> 256 | 512 rows, mean square |
| example-convnet | examples/user_model.py's SmallConvNet (two convolutions with batch norm) | batch 32, 3 x 32 x 32, as examples/compile_train.py trains it; cross-entropy |
"""
import torch

SEED = 0


class _Step(torch.nn.Module):
    """model(*args) -> (loss,), from a function of the model and the arguments."""

    def __init__(self, model, loss):
        super().__init__()
        self.model = model
        self._loss = loss

    def forward(self, *args):
        return (self._loss(self.model, *args),)


def _hf_loss(model, *args):
    return model(*args[:-1], labels=args[-1]).loss


def _causal_lm(dropout):
    import transformers
    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
        attention_dropout=0.1 if dropout else 0.0, use_cache=False)
    model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (16, 64))
    return model, (ids, ids), config


def _distilbert(dropout):
    import transformers
    p = 0.1 if dropout else 0.0
    config = transformers.DistilBertConfig(num_labels=2, dropout=p, attention_dropout=p,
                                           seq_classif_dropout=0.2 if dropout else 0.0)
    model = transformers.DistilBertForSequenceClassification(config)
    ids = torch.randint(0, config.vocab_size, (32, 64))
    return model, (ids, torch.randint(0, 2, (32,))), config


def _bart(dropout):
    import transformers
    p = 0.1 if dropout else 0.0
    config = transformers.BartConfig(
        vocab_size=8192, d_model=256, encoder_layers=3, decoder_layers=3,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
        decoder_ffn_dim=1024, max_position_embeddings=128, dropout=p, attention_dropout=p,
        activation_dropout=p, classifier_dropout=p, use_cache=False)
    model = transformers.BartForConditionalGeneration(config)
    ids = torch.randint(4, config.vocab_size, (8, 64))
    labels = torch.randint(4, config.vocab_size, (8, 64))
    return model, (ids, labels), config


def _roberta(dropout):
    import transformers
    p = 0.1 if dropout else 0.0
    config = transformers.RobertaConfig(num_labels=2, hidden_dropout_prob=p,
                                        attention_probs_dropout_prob=p, classifier_dropout=p)
    model = transformers.RobertaForSequenceClassification(config)
    # Token ids from 3: RoBERTa numbers positions after its padding id (1), so a padded
    # position would change what the step computes.
    ids = torch.randint(3, config.vocab_size, (16, 128))
    return model, (ids, torch.randint(0, 2, (16,))), config


def _vit(dropout):
    import transformers
    p = 0.1 if dropout else 0.0
    config = transformers.ViTConfig(num_labels=10, hidden_dropout_prob=p,
                                    attention_probs_dropout_prob=p)
    model = transformers.ViTForImageClassification(config)
    return model, (torch.randn(4, 3, 224, 224), torch.randint(0, 10, (4,))), config


def _mobilenet(dropout):
    import torchvision
    model = torchvision.models.mobilenet_v2(weights=None, dropout=0.2 if dropout else 0.0)
    args = (torch.randn(16, 3, 224, 224), torch.randint(0, 1000, (16,)))
    return model, args, {"torchvision": "mobilenet_v2", "num_classes": 1000}


def _module_at(name, *path):
    """The module at `path` (from the repository root), imported once as `name`: torch.compile
    imports the module a forward lives in, so it must be in sys.modules."""
    import importlib.util
    import os
    import sys
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", *path))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def _deep_mlp(dropout):
    """The Python tests' PreNormResidualMLP (python/tests/models.py), larger: its forward is
    the loss (the mean square)."""
    models = _module_at("graph_opt_test_models", "python", "tests", "models.py")
    model = models.PreNormResidualMLP(blocks=8, dim=256, hidden=1024)
    return model, (torch.randn(512, 256),), {"blocks": 8, "dim": 256, "hidden": 1024}


def _example_convnet(dropout):
    """examples/user_model.py's model at the batch examples/compile_train.py trains it on (it
    has no dropout)."""
    user_model = _module_at("graph_opt_example_user_model", "examples", "user_model.py")
    model = user_model.SmallConvNet()
    args = (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)))
    return model, args, {"example": "examples/user_model.py", "classes": 10}


def _classify(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def _own_loss(model, x):
    return model(x)


MODELS = {
    "hf-causal-lm": (_causal_lm, _hf_loss),
    "hf-distilbert": (_distilbert, _hf_loss),
    "hf-bart": (_bart, _hf_loss),
    "hf-roberta": (_roberta, _hf_loss),
    "hf-vit": (_vit, _hf_loss),
    "mobilenet_v2": (_mobilenet, _classify),
    "deep-mlp": (_deep_mlp, _own_loss),
    "example-convnet": (_example_convnet, _classify),
}


def build(name, size, dropout):
    """(training-step module in train mode, its arguments, its configuration as JSON-able
    values) for MODELS[name] at `size` ("default" or empty)."""
    if size not in ("", "default"):
        raise ValueError(f"model '{name}' has only the default size, not '{size}'")
    make, loss = MODELS[name]
    torch.manual_seed(SEED)
    model, args, config = make(dropout)
    if hasattr(config, "to_dict"):
        config = {k: v for k, v in config.to_dict().items()
                  if isinstance(v, (int, float, str, bool)) or v is None}
    return _Step(model, loss).train(), args, config
