"""The text models, transformers models built from configs (nothing is downloaded): BERT
(sequence classification and masked LM), GPT-2, Llama and T5, with eager attention.

Dropout is each config's default (0.1) unless the build settings turn it off
(``--no-dropout``: zoo.common.dropout_enabled() is False): then every dropout probability
of the config is 0 (BERT's ``hidden_dropout_prob``, ``attention_probs_dropout_prob`` and
``classifier_dropout``; GPT-2's ``resid_pdrop``, ``embd_pdrop``, ``attn_pdrop`` and
``summary_first_dropout``; T5's ``dropout_rate``; Llama has none), so the training graph
draws no random numbers."""

from __future__ import annotations

from .common import Built, Sizes, UsageError, _torch, data_generator, dropout_enabled


def _logits_wrap(model):
    """Eval wrapper for transformers models: forward(*inputs) -> logits."""
    torch = _torch()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, *args):
            return self.model(*args).logits

    return Logits(model)


def _bert_config(sizes: Sizes, **extra):
    from transformers import BertConfig

    if sizes.tiny:
        cfg = dict(
            vocab_size=128,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=max(64, sizes.seq_len),
            pad_token_id=0,
        )
    else:  # bert-base-uncased
        cfg = dict(
            vocab_size=30522,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            max_position_embeddings=512,
        )
    if sizes.seq_len > cfg["max_position_embeddings"]:
        raise UsageError(
            f"--seq-len {sizes.seq_len} exceeds BERT's max_position_embeddings "
            f"({cfg['max_position_embeddings']})"
        )
    # Dropout stays at BERT's 0.1 (active in train mode); --no-dropout sets every dropout
    # probability to 0. Eager attention: plain matmul/softmax/dropout ATen ops rather than a
    # fused SDPA kernel.
    if dropout_enabled():
        cfg.update(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    else:
        cfg.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                   classifier_dropout=0.0)
    cfg.update(**extra)
    config = BertConfig(**cfg)
    config._attn_implementation = "eager"
    return config, cfg


def _text_inputs(sizes: Sizes, vocab: int):
    torch = _torch()
    g = data_generator()
    ids = torch.randint(0, vocab, (sizes.batch, sizes.seq_len), generator=g)
    mask = torch.ones(sizes.batch, sizes.seq_len, dtype=torch.int64)
    return g, ids, mask


def build_bert(sizes: Sizes) -> Built:
    torch = _torch()
    from transformers import BertForSequenceClassification

    num_labels = 2
    config, cfg = _bert_config(sizes, num_labels=num_labels)
    model = BertForSequenceClassification(config)
    g, ids, mask = _text_inputs(sizes, config.vocab_size)
    labels = torch.randint(0, num_labels, (sizes.batch,), generator=g)

    class BertClassifierTrainStep(torch.nn.Module):
        """forward(input_ids, attention_mask, labels) -> (cross_entropy(logits, labels),)"""

        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, attention_mask, labels):
            logits = self.model(input_ids, attention_mask).logits
            return (torch.nn.functional.cross_entropy(logits, labels),)

    return Built(
        model,
        (ids, mask),
        (ids, mask, labels),
        _logits_wrap,
        BertClassifierTrainStep,
        {"transformers": "BertForSequenceClassification", "attn": "eager", **cfg},
    )


def build_bert_mlm(sizes: Sizes) -> Built:
    torch = _torch()
    from transformers import BertForMaskedLM

    config, cfg = _bert_config(sizes)
    model = BertForMaskedLM(config)
    g, ids, mask = _text_inputs(sizes, config.vocab_size)
    # About 15% of the positions carry a target token; the others are ignored (-100).
    chosen = torch.rand(sizes.batch, sizes.seq_len, generator=g) < 0.15
    chosen[:, 0] = True  # at least one target per sequence
    targets = torch.randint(0, config.vocab_size, (sizes.batch, sizes.seq_len), generator=g)
    labels = torch.where(chosen, targets, torch.full_like(targets, -100))

    class BertMLMTrainStep(torch.nn.Module):
        """forward(input_ids, attention_mask, labels) -> (masked-LM cross-entropy,)"""

        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, attention_mask, labels):
            logits = self.model(input_ids, attention_mask).logits
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100
            )
            return (loss,)

    return Built(
        model,
        (ids, mask),
        (ids, mask, labels),
        _logits_wrap,
        BertMLMTrainStep,
        {"transformers": "BertForMaskedLM", "attn": "eager", **cfg},
    )


def build_gpt2(sizes: Sizes) -> Built:
    torch = _torch()
    from transformers import GPT2Config, GPT2LMHeadModel

    if sizes.tiny:
        cfg = dict(
            vocab_size=128,
            n_positions=max(64, sizes.seq_len),
            n_embd=32,
            n_layer=2,
            n_head=2,
            bos_token_id=0,
            eos_token_id=0,
        )
    else:  # gpt2 (small)
        cfg = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    if sizes.seq_len > cfg["n_positions"]:
        raise UsageError(
            f"--seq-len {sizes.seq_len} exceeds GPT-2's n_positions ({cfg['n_positions']})"
        )
    if dropout_enabled():
        cfg.update(resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1, use_cache=False)
    else:  # --no-dropout: every dropout probability of the config is 0
        cfg.update(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                   summary_first_dropout=0.0, use_cache=False)
    config = GPT2Config(**cfg)
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config)
    g = data_generator()
    ids = torch.randint(0, config.vocab_size, (sizes.batch, sizes.seq_len), generator=g)

    class GPT2Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).logits

    class GPT2TrainStep(torch.nn.Module):
        """forward(input_ids, labels) -> (next-token cross-entropy,)

        The causal-LM loss: logits at position t predict labels at t+1.
        """

        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, labels):
            logits = self.model(input_ids=input_ids, use_cache=False).logits
            shift_logits = logits[:, :-1, :].reshape(-1, logits.size(-1))
            shift_labels = labels[:, 1:].reshape(-1)
            return (torch.nn.functional.cross_entropy(shift_logits, shift_labels),)

    return Built(
        model,
        (ids,),
        (ids, ids.clone()),
        GPT2Logits,
        GPT2TrainStep,
        {"transformers": "GPT2LMHeadModel", "attn": "eager", **cfg},
    )


def _causal_lm_loss(logits, labels):
    """Next-token cross-entropy: logits at position t predict labels at t+1."""
    torch = _torch()
    shift_logits = logits[:, :-1, :].reshape(-1, logits.size(-1))
    shift_labels = labels[:, 1:].reshape(-1)
    return torch.nn.functional.cross_entropy(shift_logits, shift_labels)


def build_llama(sizes: Sizes) -> Built:
    """A Llama decoder: RMSNorm, rotary position embeddings, SwiGLU MLP, and the input
    embedding tied to the LM head (``tie_word_embeddings=True``).

    Its rotary embedding computes cos/sin under ``@torch.no_grad()``, which the eval export
    (training IR) keeps as a ``torch.ops.higher_order.wrap_with_set_grad_enabled`` call
    around a body subgraph: graph-opt's importer inlines it. The joint training export
    decomposes the wrapper away. Llama has no dropout (``attention_dropout`` is 0).
    """
    torch = _torch()
    from transformers import LlamaConfig, LlamaForCausalLM

    if sizes.tiny:
        cfg = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=2, num_key_value_heads=2,
                   max_position_embeddings=max(64, sizes.seq_len))
    else:  # a small Llama (about 100M parameters)
        cfg = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                   num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                   max_position_embeddings=2048)
    if sizes.seq_len > cfg["max_position_embeddings"]:
        raise UsageError(f"--seq-len {sizes.seq_len} exceeds Llama's max_position_embeddings "
                         f"({cfg['max_position_embeddings']})")
    cfg.update(tie_word_embeddings=True, attention_dropout=0.0, use_cache=False,
               bos_token_id=0, eos_token_id=0, pad_token_id=0)
    config = LlamaConfig(**cfg)
    config._attn_implementation = "eager"
    model = LlamaForCausalLM(config)
    if model.lm_head.weight is not model.model.embed_tokens.weight:
        raise RuntimeError("LlamaForCausalLM did not tie lm_head to embed_tokens")
    g = data_generator()
    ids = torch.randint(0, config.vocab_size, (sizes.batch, sizes.seq_len), generator=g)

    class LlamaLogits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).logits

    class LlamaTrainStep(torch.nn.Module):
        """forward(input_ids, labels) -> (next-token cross-entropy,)"""

        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, labels):
            logits = self.model(input_ids=input_ids, use_cache=False).logits
            return (_causal_lm_loss(logits, labels),)

    return Built(model, (ids,), (ids, ids.clone()), LlamaLogits, LlamaTrainStep,
                 {"transformers": "LlamaForCausalLM", "attn": "eager", **cfg})


def build_t5(sizes: Sizes) -> Built:
    """T5 encoder-decoder (``T5ForConditionalGeneration``): relative position buckets,
    cross-attention, and one embedding ``shared.weight`` tied to the encoder's and the
    decoder's ``embed_tokens`` and to ``lm_head`` (four names, one Parameter). Dropout 0.1
    (``dropout_rate``), 0 with --no-dropout. The decoder reads ``labels`` shifted right
    (``decoder_input_ids``); the source and target sequences have the same length."""
    torch = _torch()
    from transformers import T5Config, T5ForConditionalGeneration

    if sizes.tiny:
        cfg = dict(vocab_size=96, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                   num_decoder_layers=2, num_heads=2, relative_attention_num_buckets=8,
                   relative_attention_max_distance=16)
    else:  # t5-small
        cfg = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                   num_decoder_layers=6, num_heads=8, relative_attention_num_buckets=32,
                   relative_attention_max_distance=128)
    cfg.update(dropout_rate=0.1 if dropout_enabled() else 0.0, tie_word_embeddings=True,
               use_cache=False, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    config = T5Config(**cfg)
    config._attn_implementation = "eager"
    model = T5ForConditionalGeneration(config)
    g, ids, mask = _text_inputs(sizes, config.vocab_size)
    labels = torch.randint(2, config.vocab_size, (sizes.batch, sizes.seq_len), generator=g)
    decoder_ids = model._shift_right(labels)

    class T5Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, attention_mask, decoder_input_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              decoder_input_ids=decoder_input_ids, use_cache=False).logits

    class T5TrainStep(torch.nn.Module):
        """forward(input_ids, attention_mask, decoder_input_ids, labels) -> (cross-entropy,)"""

        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, attention_mask, decoder_input_ids, labels):
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                decoder_input_ids=decoder_input_ids, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
            return (loss,)

    return Built(model, (ids, mask, decoder_ids), (ids, mask, decoder_ids, labels), T5Logits,
                 T5TrainStep, {"transformers": "T5ForConditionalGeneration", "attn": "eager",
                               **cfg})
