"""Checkpoints built here, in the hub's layout: tiny random models for parity, full-size shapes for benchmarks.

No model hub is reachable where the tests run, so every checkpoint beside the bundled demo model is
made from a config with random weights, scaled so that outputs depend on the input (a flat random
model would emit the same tokens for everything and prove nothing), and saved as the hub saves it
(config, generation config, safetensors, tokenizer files). torch and transformers are imported inside
the functions: importing this module needs neither.
"""

from __future__ import annotations

import gc
import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from graphgen.testing.demo import DEMO_DIR, demo_test_pairs, demo_texts
from graphgen.testing.families import FAMILIES, family_of_tokenizer

# Output rows past the tokenizer's ids, as the hub's M2M100 / NLLB / mBART-50 / T5 checkpoints have
# (M2M100's "made-up words"): ids a detokenizer must handle without a piece.
MADE_UP_WORDS = 8


def random_marian(directory: Path, seed: int = 0, **overrides: object) -> Path:
    """A tiny MarianMT with random weights (non-zero logits bias) saved as a checkpoint; ``overrides``
    change the config (activation, sizes, separate vocabularies)."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    settings: dict[str, Any] = {
        "vocab_size": 97,
        "decoder_vocab_size": 97,
        "d_model": 32,
        "encoder_layers": 2,
        "decoder_layers": 3,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 48,
        "decoder_ffn_dim": 40,
        "max_position_embeddings": 64,
        "activation_function": "swish",
        "scale_embedding": True,
        "pad_token_id": 96,
        "decoder_start_token_id": 96,
        "eos_token_id": 0,
        "forced_eos_token_id": 0,
    }
    settings.update(overrides)
    torch.manual_seed(seed)
    config = MarianConfig(**settings)
    model: Any = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.5)
        for parameter in model.parameters():
            if parameter.dim() == 1:  # biases and norms: make them matter
                parameter.add_(torch.randn_like(parameter) * 0.1)
    pad = config.pad_token_id
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]],
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=20,
        num_beams=3,
        pad_token_id=pad,
        renormalize_logits=True,
    )
    model.save_pretrained(directory)
    return directory


def _train_sentencepiece(kind: str, size: int, **options: Any) -> bytes:
    """A SentencePiece model trained on the demo corpus (English and Chinese); special ids as fairseq's
    (0-2 unk, <s>, </s>) unless ``options`` says otherwise (``unk_id=2``, ...; other trainer options
    too: ``byte_fallback=True``)."""
    import sentencepiece as spm

    lines = demo_texts() + [target for _, target in demo_test_pairs()]
    special_ids: dict[str, Any] = {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1} | options
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=size,
        model_type=kind,
        character_coverage=0.9995,
        minloglevel=2,
        **special_ids,
    )
    return model.getvalue()


def _t5_tokenizer(directory: Path, size: int, extra_ids: int, **trainer: Any) -> Any:
    """T5's tokenizer files: a unigram SentencePiece model (pad 0, </s> 1, <unk> 2, no <s>; other
    trainer options in ``trainer``) and ``extra_ids`` sentinels after its pieces. Returns the HF
    tokenizer as loaded back from ``directory``."""
    import transformers

    ids = {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1}
    (directory / "spiece.model").write_bytes(_train_sentencepiece("unigram", size, **ids, **trainer))
    specials = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "extra_ids": extra_ids}
    config: dict[str, Any] = {"tokenizer_class": "T5Tokenizer", "model_max_length": 512, **specials}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return transformers.AutoTokenizer.from_pretrained(directory)


def language_tokenizer(directory: Path, tokenizer_class: str) -> Any:
    """Tokenizer files in the hub's layout for ``tokenizer_class``, from a freshly trained SentencePiece
    model of the kind the real checkpoints use (BPE for NLLB and M2M100, unigram for mBART-50 and T5).
    Returns the HF tokenizer as loaded back from ``directory``."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    if tokenizer_class == "T5Tokenizer":
        return _t5_tokenizer(directory, 600, extra_ids=100)
    kind = "unigram" if tokenizer_class in ("MBart50Tokenizer", "MBartTokenizer") else "bpe"
    (directory / "sentencepiece.bpe.model").write_bytes(_train_sentencepiece(kind, 600))
    cls = getattr(transformers, tokenizer_class)
    if tokenizer_class == "NllbTokenizer":
        from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

        codes = FAIRSEQ_LANGUAGE_CODES
        cls.from_pretrained(directory, additional_special_tokens=codes, src_lang="eng_Latn").save_pretrained(directory)
    elif tokenizer_class in ("MBart50Tokenizer", "MBartTokenizer"):
        cls.from_pretrained(directory, src_lang="en_XX").save_pretrained(directory)
    else:  # M2M100: the hub's files as they are (pieces map to ids through vocab.json, fairseq's specials first)
        import sentencepiece as spm
        from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES as M2M100_CODES

        processor = spm.SentencePieceProcessor(model_file=str(directory / "sentencepiece.bpe.model"))
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for index in range(processor.get_piece_size()):
            vocab.setdefault(processor.id_to_piece(index), len(vocab))
        (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        tokens: dict[str, Any] = {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "unk_token": "<unk>"}
        tokens |= {
            "pad_token": "<pad>",
            "additional_special_tokens": [f"__{c}__" for c in M2M100_CODES["m2m100"]],
        }
        settings: dict[str, Any] = {"src_lang": "en", "tgt_lang": None, "language_codes": "m2m100"}
        settings |= {"num_madeup_words": MADE_UP_WORDS, "model_max_length": 1024, "tokenizer_class": tokenizer_class}
        settings |= tokens
        (directory / "special_tokens_map.json").write_text(json.dumps(tokens), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return getattr(transformers, tokenizer_class).from_pretrained(directory)


def random_family_model(
    directory: Path, family: str, vocab_size: int = 120, seed: int = 0, **generation: object
) -> Any:
    """A tiny M2M100 or mBART (``family``: the config's prefix, "M2M100" or "MBart") with random
    weights large enough (std 0.5) that outputs depend on the input, in the hub's layout (config,
    generation config, safetensors), as the hub checkpoints set their special ids (pad 1, EOS 2 =
    decoder start, BOS 0). Returns the HF model."""
    import torch
    import transformers

    settings: dict[str, Any] = {
        "vocab_size": vocab_size,
        "d_model": 32,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 48,
        "decoder_ffn_dim": 40,
        "max_position_embeddings": 64,
        "init_std": 0.5,
        "scale_embedding": True,
        "pad_token_id": 1,
        "eos_token_id": 2,
        "bos_token_id": 0,
        "decoder_start_token_id": 2,
    }
    torch.manual_seed(seed)
    config = getattr(transformers, f"{family}Config")(**settings)
    model = getattr(transformers, f"{family}ForConditionalGeneration")(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:  # biases and norms: make them matter
                parameter.add_(torch.randn_like(parameter) * 0.1)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(0, 0.5)
    ids = {"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2, "pad_token_id": 1}
    model.generation_config = transformers.GenerationConfig(**(ids | {"max_length": 20} | generation))
    model.save_pretrained(directory)
    return model


# name → (config class, config settings). The weights' scale is picked so that outputs depend on the
# input (the original T5 scales its output down) without scores so sharp that float32 noise decides.
T5_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "t5": ("T5Config", {"feed_forward_proj": "relu", "initializer_factor": 4.0}),  # tied head, output scaled
    "t5-v1.1": ("T5Config", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
    "mt5": ("MT5Config", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
}


def random_t5_model(directory: Path, variant: str, vocab_size: int = 120, seed: int = 0, **generation: object) -> Any:
    """A tiny T5 / mT5 (``variant``: a key of ``T5_VARIANTS``) with random weights in the hub's layout.
    d_kv × heads differs from d_model, and the relative buckets reach their log-spaced and saturated
    ranges within 30 tokens. Returns the HF model."""
    import torch
    import transformers

    config_class, settings = T5_VARIANTS[variant]
    config = getattr(transformers, config_class)(
        vocab_size=vocab_size,
        d_model=32,
        d_kv=6,
        d_ff=40,
        num_layers=3,  # encoder; HF's cache sizes itself by this, so the decoder has no more
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=10,
        relative_attention_max_distance=14,
        decoder_start_token_id=0,
        **settings,
    )
    torch.manual_seed(seed)
    model = getattr(transformers, config_class.replace("Config", "ForConditionalGeneration"))(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layer_norm" in name:  # RMS norm weights start at 1: make them matter
                parameter.add_(torch.randn_like(parameter) * 0.3)
    ids = {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}
    model.generation_config = transformers.GenerationConfig(**(ids | {"max_length": 40} | generation))
    model.save_pretrained(directory)
    if variant == "t5":
        return model
    # v1.1 and mT5 checkpoints store their own output layer; transformers 5 ties it in memory, so it is
    # written into the file here, and the model read back (it then keeps both, as for the hub's files)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(directory / "model.safetensors")
    rng = np.random.default_rng(seed)
    tensors["lm_head.weight"] = rng.standard_normal(tensors["shared.weight"].shape).astype(np.float32)
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return type(model).from_pretrained(directory).eval()


MADLAD_TAGS = ("<2de>", "<2fr>", "<2zh>")  # MADLAD-400 names the target language with a "<2xx>" piece


def madlad_tokenizer(directory: Path) -> Any:
    """MADLAD-400's tokenizer files, with a model trained here: a unigram SentencePiece model with
    byte fallback and the target languages as user-defined pieces (``MADLAD_TAGS``), T5's special
    ids, and the ``tokenizer.json`` transformers converts from it (without the byte fallback: an
    unknown character is ``<unk>``, a byte piece decodes as its own text). Returns the HF tokenizer."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _t5_tokenizer(directory, 900, extra_ids=0, byte_fallback=True, user_defined_symbols=list(MADLAD_TAGS))
    tokenizer.save_pretrained(directory)
    return tokenizer


def madlad_shaped_checkpoint(directory: Path, seed: int = 0) -> tuple[Any, Any]:
    """A T5 checkpoint laid out as MADLAD-400's (``google/madlad400-*-mt``, as other projects' loaders
    describe them): T5 v1.1 weights whose token table is stored only as ``decoder.embed_tokens.weight``,
    and ``madlad_tokenizer``'s files. Returns the HF model and tokenizer."""
    from safetensors.numpy import load_file, save_file

    tokenizer = madlad_tokenizer(directory)
    size = max(tokenizer.get_vocab().values()) + 1 + MADE_UP_WORDS
    model = random_t5_model(directory, "t5-v1.1", size, seed)
    tensors = load_file(directory / "model.safetensors")
    tensors["decoder.embed_tokens.weight"] = tensors.pop("shared.weight")
    tensors.pop("encoder.embed_tokens.weight", None)
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return type(model).from_pretrained(directory).eval(), tokenizer


def language_checkpoint(directory: Path, tokenizer_class: str, seed: int = 0, **generation: object) -> tuple[Any, Any]:
    """A checkpoint as the hub lays out NLLB (M2M100 architecture, NLLB tokenizer), M2M100 or mBART-50:
    random weights, an output layer ``MADE_UP_WORDS`` rows wider than the tokenizer. Returns the HF
    model and tokenizer."""
    tokenizer = language_tokenizer(directory, tokenizer_class)
    size = max(tokenizer.get_vocab().values()) + 1 + MADE_UP_WORDS
    architecture = family_of_tokenizer(tokenizer_class).architecture
    model = random_family_model(directory, architecture, size, seed, **generation)
    return model, tokenizer


def mbart25_checkpoint(directory: Path, seed: int = 0, **generation: object) -> tuple[Any, Any]:
    """A checkpoint laid out as mBART-25's fine-tunes (facebook/mbart-large-en-ro): MBartTokenizer
    (the source language after ``</s>``, 25 codes) and the decoder started with ``ro_RO``'s token, as
    mbart-large-en-ro's config does; random weights. Returns the HF model and tokenizer."""
    tokenizer = language_tokenizer(directory, "MBartTokenizer")
    size = max(tokenizer.get_vocab().values()) + 1 + MADE_UP_WORDS
    start = {"decoder_start_token_id": tokenizer.lang_code_to_id["ro_RO"]}
    model = random_family_model(directory, "MBart", size, seed, **(start | generation))
    return model, tokenizer


def nllb_legacy_tokenizer(directory: Path) -> Any:
    """NLLB's tokenizer files with ``legacy_behaviour`` set in its config: the source language after
    ``</s>``. Returns the HF tokenizer as loaded back from ``directory``."""
    language_tokenizer(directory, "NllbTokenizer")
    return _legacy_behaviour(directory)


def _legacy_behaviour(directory: Path) -> Any:
    import transformers

    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) | {"legacy_behaviour": True}
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return transformers.AutoTokenizer.from_pretrained(directory)


def nllb_legacy_checkpoint(directory: Path, seed: int = 0, **generation: object) -> tuple[Any, Any]:
    """An NLLB checkpoint whose tokenizer sets ``legacy_behaviour`` (``nllb_legacy_tokenizer``); the
    target is still forced as the first generated token. Returns the HF model and tokenizer."""
    model, _ = language_checkpoint(directory, "NllbTokenizer", seed, **generation)
    return model, _legacy_behaviour(directory)


def t5_checkpoint(directory: Path, variant: str, seed: int = 0, **generation: object) -> tuple[Any, Any]:
    """A T5 / mT5 checkpoint with T5's tokenizer files (a unigram SentencePiece model trained here),
    an output layer ``MADE_UP_WORDS`` rows wider than the tokenizer, as the hub's. Returns the HF model
    and tokenizer."""
    tokenizer = language_tokenizer(directory, "T5Tokenizer")
    size = max(tokenizer.get_vocab().values()) + 1 + MADE_UP_WORDS
    return random_t5_model(directory, variant, size, seed, **generation), tokenizer


def family_checkpoint(directory: Path, family: str, seed: int = 0, **generation: object) -> tuple[Any, Any]:
    """The checkpoint of a ``FAMILIES`` row, tokenizer files included (for text-level files). Returns
    the HF model and tokenizer."""
    row = FAMILIES[family]
    if row.relative_positions:
        return t5_checkpoint(directory, row.architecture, seed, **generation)
    return language_checkpoint(directory, row.tokenizer_class, seed, **generation)


def family_model(directory: Path, family: str, vocab_size: int = 120, seed: int = 0, **generation: object) -> Any:
    """The weights and configs of a ``FAMILIES`` row without tokenizer files, ``vocab_size`` ids (for
    id-level files: random sources need no tokenizer). Returns the HF model."""
    row = FAMILIES[family]
    if row.relative_positions:
        return random_t5_model(directory, row.architecture, vocab_size, seed, **generation)
    return random_family_model(directory, row.architecture, vocab_size, seed, **generation)


def separate_vocab_checkpoint(demo_dir: Path, out: Path) -> Path:
    """The demo model re-laid as a separate-vocabulary checkpoint with three untied tables, in ``out``.

    Source and target get their own ``vocab.json`` / ``target_vocab.json`` in a different id
    order, the embeddings are permuted to match and the output projection is perturbed so it is
    no longer tied. The model therefore still translates like the demo model, which makes its
    parity tests meaningful, while every separate-vocab code path is exercised.
    """
    import sentencepiece as spm
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    out.mkdir(parents=True, exist_ok=True)
    model: Any = MarianMTModel.from_pretrained(demo_dir).eval()
    shared = json.loads((demo_dir / "vocab.json").read_text(encoding="utf-8"))

    def side_pieces(spm_file: str) -> list[str]:
        processor = spm.SentencePieceProcessor(model_file=str(demo_dir / spm_file))
        pieces = ["</s>", "<unk>"]
        pieces += [p for p in shared if p.startswith(">>")] if spm_file == "source.spm" else []
        for index in range(processor.get_piece_size()):
            piece = processor.id_to_piece(index)
            if piece in shared and piece not in pieces and piece != "<pad>":
                pieces.append(piece)
        return pieces

    # MarianMT uses config.pad_token_id for both embeddings, so <pad> takes the same (last) id on
    # both sides; the shorter side is filled with entries the model never produces.
    source_pieces, target_pieces = side_pieces("source.spm"), side_pieces("target.spm")
    size = max(len(source_pieces), len(target_pieces))
    source_pieces += [f"<extra_{i}>" for i in range(size - len(source_pieces))]
    target_pieces += [f"<extra_{i}>" for i in range(size - len(target_pieces))]

    def side_vocab(pieces: list[str]) -> dict[str, int]:
        return {piece: i for i, piece in enumerate([*pieces, "<pad>"])}

    source_vocab, target_vocab = side_vocab(source_pieces), side_vocab(target_pieces)
    table = model.model.shared.weight.detach()
    bias = model.final_logits_bias.detach()[0]
    unk = shared["<unk>"]
    source_rows = torch.stack([table[shared.get(p, unk)] for p in source_vocab])
    target_rows = torch.stack([table[shared.get(p, unk)] for p in target_vocab])
    target_bias = torch.stack(
        [bias[shared[p]] if p in shared else torch.tensor(-30.0) for p in target_vocab]
    ).unsqueeze(0)

    config = model.config.to_dict()
    config.update(
        vocab_size=len(source_vocab),
        decoder_vocab_size=len(target_vocab),
        pad_token_id=len(target_vocab) - 1,
        decoder_start_token_id=len(target_vocab) - 1,
        share_encoder_decoder_embeddings=False,
        tie_word_embeddings=False,
    )
    new: Any = MarianMTModel(MarianConfig(**{k: v for k, v in config.items() if k not in ("architectures",)})).eval()
    state = {k: v for k, v in model.state_dict().items() if "embed_tokens" not in k and "shared" not in k}
    state.pop("lm_head.weight")
    state.pop("final_logits_bias")
    new.load_state_dict(state, strict=False)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        new.model.encoder.embed_tokens.weight.copy_(source_rows)
        new.model.decoder.embed_tokens.weight.copy_(target_rows)
        new.lm_head.weight.copy_(target_rows + 1e-3 * torch.randn(target_rows.shape, generator=generator))
        new.final_logits_bias.copy_(target_bias)
    pad = len(target_vocab) - 1
    new.generation_config = GenerationConfig.from_pretrained(demo_dir)  # the demo's settings, its own pad id
    new.generation_config.update(bad_words_ids=[[pad]], decoder_start_token_id=pad, pad_token_id=pad)
    new.save_pretrained(out)
    (out / "vocab.json").write_text(json.dumps(source_vocab, ensure_ascii=False), encoding="utf-8")
    (out / "target_vocab.json").write_text(json.dumps(target_vocab, ensure_ascii=False), encoding="utf-8")
    for name in ("source.spm", "target.spm"):
        shutil.copy(demo_dir / name, out / name)
    tokenizer_config = {
        "source_lang": "eng",
        "target_lang": "zho",
        "model_max_length": 512,
        "separate_vocabs": True,
        "tokenizer_class": "MarianTokenizer",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    return out


# --- full-size shapes (random weights): the export's size and memory, and the benchmarks' models ---

OPUS_MT_EN_ZH: dict[str, Any] = {
    "vocab_size": 65001,
    "decoder_vocab_size": 65001,
    "d_model": 512,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "encoder_attention_heads": 8,
    "decoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048,
    "max_position_embeddings": 512,
    "activation_function": "swish",
    "scale_embedding": True,
    "pad_token_id": 65000,
    "decoder_start_token_id": 65000,
    "eos_token_id": 0,
    "forced_eos_token_id": 0,
    "share_encoder_decoder_embeddings": True,
}


def opus_mt_shaped_checkpoint(directory: Path, *, placeholder_tokenizer: bool = False) -> Path:
    """The full opus-mt-en-zh shape (vocab 65001, 6+6 layers, d_model 512) with random weights and
    opus-mt's generation config. ``placeholder_tokenizer`` adds tokenizer files with arbitrary pieces
    (the demo model's .spm files, a vocab.json of the model's size): CTranslate2's converter reads the
    vocabulary, while a benchmark that feeds token ids never uses the pieces."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    torch.manual_seed(0)
    model: Any = MarianMTModel(MarianConfig(**OPUS_MT_EN_ZH)).eval()
    model.generation_config = GenerationConfig(
        bad_words_ids=[[65000]],
        decoder_start_token_id=65000,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=65000,
        renormalize_logits=True,
    )
    model.save_pretrained(directory)
    if placeholder_tokenizer:
        size = OPUS_MT_EN_ZH["vocab_size"]
        pieces = ["</s>", "<unk>", *[f"▁w{i}" for i in range(2, size - 1)], "<pad>"]
        vocab = {p: i for i, p in enumerate(pieces)}
        (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        for name in ("source.spm", "target.spm"):
            shutil.copy(DEMO_DIR / name, directory / name)
        (directory / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": False}), encoding="utf-8")
    return directory


# Full-size shapes of the multilingual families (config class, label, config), from the hub configs of
# facebook/nllb-200-distilled-600M and facebook/mbart-large-50-many-to-many-mmt.
FULL_SIZE_PAD, FULL_SIZE_EOS = 1, 2
_FAIRSEQ_SHAPE: dict[str, Any] = {
    "d_model": 1024,
    "encoder_layers": 12,
    "decoder_layers": 12,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "max_position_embeddings": 1024,
    "scale_embedding": True,
    "pad_token_id": FULL_SIZE_PAD,
    "eos_token_id": FULL_SIZE_EOS,
    "bos_token_id": 0,
    "decoder_start_token_id": FULL_SIZE_EOS,
}
FULL_SIZE_SHAPES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "nllb": (
        "M2M100Config",
        "NLLB-200-distilled-600M shape (random weights)",
        _FAIRSEQ_SHAPE | {"vocab_size": 256206, "activation_function": "relu"},
    ),
    "mbart": (
        "MBartConfig",
        "mBART-50 shape (random weights)",
        # the fairseq-era keys the hub's config.json carries (CTranslate2's converter reads them)
        _FAIRSEQ_SHAPE
        | {"vocab_size": 250054, "activation_function": "gelu", "normalize_before": True, "normalize_embedding": True}
        | {"add_final_layer_norm": True, "tokenizer_class": "MBart50Tokenizer"},
    ),
    # google/madlad400-3b-mt's config: T5 v1.1's gated GELU and untied head, 32 + 32 layers
    "madlad": (
        "T5Config",
        "MADLAD-400-3B shape (random weights)",
        {
            "vocab_size": 256000,
            "d_model": 1024,
            "d_kv": 128,
            "d_ff": 8192,
            "num_layers": 32,
            "num_decoder_layers": 32,
            "num_heads": 16,
            "relative_attention_num_buckets": 32,
            "relative_attention_max_distance": 128,
            "feed_forward_proj": "gated-gelu",
            "tie_word_embeddings": False,
            "pad_token_id": FULL_SIZE_PAD,
            "eos_token_id": FULL_SIZE_EOS,
            "decoder_start_token_id": FULL_SIZE_EOS,
        },
    ),
}


def full_size_family_checkpoint(directory: Path, shape: str, *, tiny: bool = False) -> Path:
    """A full-size NLLB, mBART-50 or MADLAD-400 shape (``shape``: a key of ``FULL_SIZE_SHAPES``) with
    random weights (as HF initialises them), in safetensors, plus placeholder tokenizer files:
    CTranslate2's converter reads a vocabulary of the model's size (a word-level ``tokenizer.json``;
    the benchmarks feed token ids, so the pieces are arbitrary; the special ids are fairseq's in
    every shape). ``tiny``: 2+2 layers and 2,000 ids, for smoke tests."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    config_class, _, settings = FULL_SIZE_SHAPES[shape]
    if tiny:
        t5 = config_class == "T5Config"
        layers = ("num_layers", "num_decoder_layers") if t5 else ("encoder_layers", "decoder_layers")
        settings = settings | {"vocab_size": 2000} | dict.fromkeys(layers, 2)
    config = getattr(transformers, config_class)(**settings)
    torch.manual_seed(0)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config).eval()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=0, decoder_start_token_id=FULL_SIZE_EOS, eos_token_id=FULL_SIZE_EOS, pad_token_id=FULL_SIZE_PAD
    )
    model.save_pretrained(directory)
    del model
    gc.collect()  # the full shapes hold GBs: free them before the caller exports
    size = settings["vocab_size"]
    pieces = ["<s>", "<pad>", "</s>", "<unk>", *[f"▁w{i}" for i in range(4, size)]]
    vocab = {piece: index for index, piece in enumerate(pieces)}
    Tokenizer(WordLevel(vocab, unk_token="<unk>")).save(str(directory / "tokenizer.json"))
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    config_file = {"tokenizer_class": "PreTrainedTokenizerFast", **specials}
    (directory / "tokenizer_config.json").write_text(json.dumps(config_file), encoding="utf-8")
    return directory
