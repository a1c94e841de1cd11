"""Shared fixtures: the bundled demo checkpoint, tiny random checkpoints, a separate-vocab twin."""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO_DIR = REPO / "models" / "demo-en-zh"


def cached_venv(folder: Path, *requirements: str) -> Path:
    """The interpreter of a venv holding ``requirements``, built on first use and kept.

    A marker file says the venv is whole, so an interrupted build is redone, not reused.
    """
    python = folder / "bin" / "python"
    marker = folder / ".complete"
    if not marker.is_file():
        venv.create(folder, with_pip=True, clear=True)
        command = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements]
        subprocess.run(command, check=True)
        marker.touch()
    return python


NO_TORCH_VENV = REPO / ".venv-notorch"


def no_torch_python() -> Path:
    """A venv with graphgen[export-safetensors] and no torch."""
    return cached_venv(NO_TORCH_VENV, "-e", f"{REPO}[export-safetensors]")


def file_session(path: Path, threads: int | None = None):
    """A plain ONNX Runtime session for an exported file, the extensions library registered only when
    the file needs it (``--tokenizer extensions``), as a host that reads the file's metadata does."""
    import onnxruntime as ort

    from graphgen.contract import read_file_info
    from graphgen.runtime.translator import session_options

    options = session_options(threads, extensions=read_file_info(path).needs_extensions)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def text_feeds(session, texts: list[str]) -> dict[str, np.ndarray]:
    """The text input of a text-level file's session: UTF-8 bytes (portable tokenizer) or strings."""
    from graphgen.contract import TEXT, TEXT_UTF8
    from graphgen.runtime.translator import utf8_batch

    names = {value.name for value in session.get_inputs()}
    return {TEXT_UTF8: utf8_batch(texts)} if TEXT_UTF8 in names else {TEXT: np.array(texts, dtype=object)}


def demo_test_pairs() -> list[tuple[str, str]]:
    lines = (DEMO_DIR / "test.tsv").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines]  # type: ignore[misc]


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return DEMO_DIR


@pytest.fixture(scope="session")
def demo_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model exported text-level with the defaults; shared, so tests must not change it."""
    from graphgen import export

    path = tmp_path_factory.mktemp("demo") / "demo.onnx"
    export(str(DEMO_DIR), str(path))
    return path


def random_marian(directory: Path, seed: int = 0, **overrides: object) -> Path:
    """A tiny MarianMT with random weights (non-zero logits bias) saved as a checkpoint."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    settings: dict[str, object] = {
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
    model = MarianMTModel(config).eval()
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


LANGUAGE_TOKENIZERS = ("NllbTokenizer", "MBart50Tokenizer", "M2M100Tokenizer")


def _train_sentencepiece(kind: str, size: int, **ids: int) -> bytes:
    """A SentencePiece model trained on the demo corpus (English and Chinese); special ids as fairseq's
    (0-2 unk, <s>, </s>) unless ``ids`` says otherwise (``unk_id=2``, ...)."""
    import io

    import sentencepiece as spm

    lines = [source.split(" ", 1)[1] for source, _ in demo_test_pairs()] + [target for _, target in demo_test_pairs()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=size,
        model_type=kind,
        character_coverage=0.9995,
        minloglevel=2,
        **({"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1} | ids),
    )
    return model.getvalue()


def language_tokenizer(directory: Path, tokenizer_class: str) -> object:
    """Tokenizer files in the hub's layout for ``tokenizer_class``, from a freshly trained SentencePiece
    model of the kind the real checkpoints use (BPE for NLLB and M2M100, unigram for mBART-50).
    Returns the HF tokenizer as loaded back from ``directory``."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    if tokenizer_class == "T5Tokenizer":  # unigram; pad 0, </s> 1, <unk> 2, no <s>; 100 sentinels after
        (directory / "spiece.model").write_bytes(
            _train_sentencepiece("unigram", 600, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
        )
        specials = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "extra_ids": 100}
        config = {"tokenizer_class": tokenizer_class, "model_max_length": 512, **specials}
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        return transformers.AutoTokenizer.from_pretrained(directory)
    kind = "unigram" if tokenizer_class == "MBart50Tokenizer" else "bpe"
    (directory / "sentencepiece.bpe.model").write_bytes(_train_sentencepiece(kind, 600))
    cls = getattr(transformers, tokenizer_class)
    if tokenizer_class == "NllbTokenizer":
        from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

        codes = FAIRSEQ_LANGUAGE_CODES
        cls.from_pretrained(directory, additional_special_tokens=codes, src_lang="eng_Latn").save_pretrained(directory)
    elif tokenizer_class == "MBart50Tokenizer":
        cls.from_pretrained(directory, src_lang="en_XX").save_pretrained(directory)
    else:  # M2M100: the hub's files as they are (pieces map to ids through vocab.json, fairseq's specials first)
        import sentencepiece as spm
        from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

        processor = spm.SentencePieceProcessor(model_file=str(directory / "sentencepiece.bpe.model"))
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for index in range(processor.get_piece_size()):
            vocab.setdefault(processor.id_to_piece(index), len(vocab))
        (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        specials = {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "unk_token": "<unk>"}
        specials |= {
            "pad_token": "<pad>",
            "additional_special_tokens": [f"__{c}__" for c in FAIRSEQ_LANGUAGE_CODES["m2m100"]],
        }
        config = {"src_lang": "en", "tgt_lang": None, "language_codes": "m2m100", "num_madeup_words": 8}
        config |= {"model_max_length": 1024, "tokenizer_class": tokenizer_class, **specials}
        (directory / "special_tokens_map.json").write_text(json.dumps(specials), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return getattr(transformers, tokenizer_class).from_pretrained(directory)


def random_sources(
    count: int, size: int, *, vocab: int, pad: int, eos: int, longest: int = 12, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` batches of ``size`` random sources of 2-``longest`` tokens ending in EOS, right-padded;
    one row in four left-padded (fairseq's positions skip pad tokens wherever they are)."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        lengths = rng.integers(2, longest + 1, size=size)
        ids = np.full((size, lengths.max()), pad, dtype=np.int64)
        for row, n in enumerate(lengths):
            tokens = np.append(rng.integers(max(pad, eos) + 1, vocab, size=n - 1), eos)
            if row % 4 == 3:
                ids[row, -n:] = tokens
            else:
                ids[row, :n] = tokens
        batches.append((ids, (ids != pad).astype(np.int64)))
    return batches


def run_id_file(session, ids: np.ndarray, mask: np.ndarray, eos: int, pad: int, **settings) -> list[tuple[int, ...]]:
    """An id-level file's generated tokens per hypothesis (settings as int32 inputs)."""
    from graphgen.verify.parity import generated_tokens

    feeds = {"input_ids": ids.astype(np.int32), "attention_mask": mask.astype(np.int32)}
    feeds |= {name: np.atleast_1d(np.asarray(value, dtype=np.int32)) for name, value in settings.items()}
    sequences = session.run(["sequences"], feeds)[0]
    return [generated_tokens(row, eos, pad) for row in sequences.reshape(-1, sequences.shape[-1])]


def hf_tokens(model, ids: np.ndarray, mask: np.ndarray, eos: int, pad: int, **settings) -> list[tuple[int, ...]]:
    """HF ``generate``'s generated tokens per hypothesis, for the same ids."""
    import torch

    from graphgen.verify.parity import generated_tokens

    with torch.no_grad():
        out = model.generate(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), **settings)
    return [generated_tokens(row, eos, pad) for row in out.numpy()]


FAMILY_CONFIGS = ("M2M100", "MBart")


def random_family_model(directory: Path, family: str, vocab_size: int = 120, seed: int = 0, **generation: object):
    """A tiny M2M100 or mBART with random weights large enough (std 0.5) that outputs depend on
    the input, in the hub's layout (config, generation config, safetensors), as the hub checkpoints
    set their special ids (pad 1, EOS 2 = decoder start, BOS 0)."""
    import torch
    import transformers

    settings: dict[str, object] = {
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
T5_VARIANTS = {
    "t5": ("T5Config", {"feed_forward_proj": "relu", "initializer_factor": 4.0}),  # tied head, output scaled
    "t5-v1.1": ("T5Config", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
    "mt5": ("MT5Config", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
}


def random_t5_model(directory: Path, variant: str, vocab_size: int = 120, seed: int = 0, **generation: object):
    """A tiny T5 / mT5 with random weights in the hub's layout. d_kv × heads differs from d_model,
    and the relative buckets reach their log-spaced and saturated ranges within 30 tokens."""
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


LANGUAGE_FAMILIES = {"NllbTokenizer": "M2M100", "M2M100Tokenizer": "M2M100", "MBart50Tokenizer": "MBart"}


def language_checkpoint(directory: Path, tokenizer_class: str, seed: int = 0, **generation: object):
    """A checkpoint as the hub lays out NLLB (M2M100 architecture, NLLB tokenizer), M2M100 or mBART-50:
    random weights, an output layer 8 rows wider than the tokenizer (M2M100's "made-up words").
    Returns the HF model and tokenizer."""
    tokenizer = language_tokenizer(directory, tokenizer_class)
    size = max(tokenizer.get_vocab().values()) + 1 + 8
    model = random_family_model(directory, LANGUAGE_FAMILIES[tokenizer_class], size, seed, **generation)
    return model, tokenizer


def t5_checkpoint(directory: Path, variant: str, seed: int = 0, **generation: object):
    """A T5 / mT5 checkpoint with T5's tokenizer files (a unigram SentencePiece model trained here),
    an output layer 8 rows wider than the tokenizer, as the hub's. Returns the HF model and tokenizer."""
    tokenizer = language_tokenizer(directory, "T5Tokenizer")
    size = max(tokenizer.get_vocab().values()) + 1 + 8
    return random_t5_model(directory, variant, size, seed, **generation), tokenizer


@pytest.fixture(scope="session")
def separate_vocab_dir(tmp_path_factory: pytest.TempPathFactory, demo_dir: Path) -> Path:
    """The demo model re-laid as a separate-vocabulary checkpoint with three untied tables.

    Source and target get their own ``vocab.json`` / ``target_vocab.json`` in a different id
    order, the embeddings are permuted to match and the output projection is perturbed so it is
    no longer tied. The model therefore still translates like the demo model, which makes its
    parity tests meaningful, while every separate-vocab code path is exercised.
    """
    import torch
    from transformers import MarianMTModel

    out = tmp_path_factory.mktemp("separate_vocab")
    model = MarianMTModel.from_pretrained(demo_dir).eval()
    shared = json.loads((demo_dir / "vocab.json").read_text(encoding="utf-8"))
    import sentencepiece as spm

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
    from transformers import GenerationConfig, MarianConfig

    new = MarianMTModel(MarianConfig(**{k: v for k, v in config.items() if k not in ("architectures",)})).eval()
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
    new.generation_config = GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=pad,
        renormalize_logits=True,
    )
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


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str, atol: float = 2e-4) -> None:
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(actual)), f"{what}: -inf positions differ"
    np.testing.assert_allclose(actual[finite], expected[finite], atol=atol, rtol=1e-4, err_msg=what)
