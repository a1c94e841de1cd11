"""Tokenizer and detokenizer graphs that reproduce MarianTokenizer inside the ONNX file.

Encoding: language token split off → SentencePiece (``source.spm``, its normaliser included) →
SentencePiece ids remapped to model ids (pieces missing from the vocabulary → ``<unk>``) →
``[token?] + pieces[:max-1] + [</s>]`` right-padded with an attention mask.

Decoding needs no SentencePiece op: every model id is mapped to its piece string with ``▁``
already turned into a space (special tokens to ``""``, which is what ``skip_special_tokens=True``
does), pieces are joined per hypothesis and the result is stripped — what SentencePiece's
``decode_pieces`` followed by MarianTokenizer's clean-up produces for models without byte
fallback or a denormaliser, which the loader checks.

Besides the SentencePiece op, only standard ONNX ops are used (see ``custom_ops.text``), so the
file runs with the extensions builds that mobile packages ship.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphgen._errors import CheckpointError, UnsupportedModelError
from graphgen.custom_ops import (
    GraphBuilder,
    collapse_marked_runs,
    join_strings,
    lookup_tokens,
    merge_rows,
    padded_to_ragged,
    ragged_to_padded,
    remap,
    split_language_token,
    split_on_literals,
    strip_index,
    strip_tables,
)
from graphgen.custom_ops.builder import EXTENSIONS_DOMAIN, i64
from graphgen.model.spec import ModelSpec
from graphgen.text.portable import AddedToken, PortableSpec, spec_for_sentencepiece
from graphgen.text.sentencepiece import parse_model

SPECIAL_TOKENS = ("</s>", "<unk>", "<pad>")
_TAG = re.compile(">>.+<<")  # a target-language token, as HF's MarianTokenizer.language_code_re


@dataclass(frozen=True)
class MarianVocabulary:
    """What the graphs need from a MarianTokenizer checkpoint's files."""

    source_spm: bytes
    source_vocab: dict[str, int]  # piece → id fed to the encoder
    decode_spm: bytes  # the spm HF decodes with: source when shared, target when separate
    target_vocab: dict[str, int]  # piece → id produced by the decoder
    max_length: int
    separate: bool

    @property
    def unk_id(self) -> int:
        return self.source_vocab["<unk>"]

    def portable_spec(self, eos_id: int, pad_id: int) -> PortableSpec:
        """What the portable tokenizer graph needs to reproduce MarianTokenizer's encoding."""
        specials = [
            AddedToken(token, self.source_vocab[token]) for token in SPECIAL_TOKENS if token in self.source_vocab
        ]
        return spec_for_sentencepiece(
            self.source_spm, self.source_vocab, self.unk_id, eos_id, pad_id, specials, marian=True, name="source.spm"
        )

    # The text.vocabulary.Vocabulary interface. Marian models take the target as a >>xx<< token in the text.
    @property
    def languages(self) -> dict[str, int]:
        return {}

    @property
    def default_source(self) -> str:
        return ""

    @property
    def source_last(self) -> bool:
        return False

    @property
    def target_starts_decoder(self) -> bool:
        return False

    @property
    def target_tags(self) -> tuple[str, ...]:
        # HF's MarianTokenizer.supported_language_codes: the source pieces its language_code_re
        # matches, in vocab.json's order
        return tuple(piece for piece in self.source_vocab if _TAG.match(piece))

    def portable_tokenizer(self, spec: ModelSpec) -> PortableSpec:
        return self.portable_spec(spec.eos_token_id, spec.pad_token_id)

    def detokenizer_table(self, b: GraphBuilder, sequences: str, spec: ModelSpec) -> tuple[str, np.ndarray]:
        return detokenizer_index(b, sequences, self)

    def add_extensions_tokenizer(
        self, b: GraphBuilder, text: str, source_language: str | None, spec: ModelSpec, max_length: int | str
    ) -> tuple[str, str]:
        return add_tokenizer(b, text, self, spec.eos_token_id, spec.pad_token_id, max_length=max_length)

    def add_extensions_detokenizer(self, b: GraphBuilder, sequences: str, spec: ModelSpec) -> str:
        return add_detokenizer(b, sequences, self)


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"cannot read {path}: {error}") from error


def check_spm(model: bytes, name: str, *, runs_sentencepiece: bool = True) -> None:
    """Refuse what the graphs do not reproduce of a SentencePiece model. ``runs_sentencepiece``: HF
    runs SentencePiece itself (Marian, M2M100), so its byte fallback would apply; a ``tokenizers``
    pipeline (NLLB, mBART-50, T5) decides for itself (its JSON's ``byte_fallback``, checked where
    the pipeline is read), and transformers 5 converts such a model without it."""
    proto = parse_model(model)
    if runs_sentencepiece and proto.trainer_spec.byte_fallback:
        raise UnsupportedModelError(f"{name} uses byte fallback, which the detokenizer graph does not reproduce")
    if proto.denormalizer_spec.precompiled_charsmap:
        raise UnsupportedModelError(f"{name} has a denormaliser, which the detokenizer graph does not reproduce")


def load_vocabulary(directory: Path) -> MarianVocabulary:
    config = _json(directory / "tokenizer_config.json") if (directory / "tokenizer_config.json").is_file() else {}
    separate = bool(config.get("separate_vocabs", False))
    source_vocab = _json(directory / "vocab.json")
    target_vocab = _json(directory / "target_vocab.json") if separate else source_vocab
    if "<unk>" not in source_vocab:
        raise CheckpointError(f"{directory / 'vocab.json'} has no <unk> entry")
    source_spm = (directory / "source.spm").read_bytes()
    decode_spm = (directory / "target.spm").read_bytes() if separate else source_spm
    check_spm(source_spm, "source.spm")
    check_spm(decode_spm, "target.spm" if separate else "source.spm")
    max_length = int(config.get("model_max_length", 512))
    return MarianVocabulary(source_spm, source_vocab, decode_spm, target_vocab, max_length, separate)


@dataclass(frozen=True)
class SourceSentencepiece:
    """The source spm as the graph embeds it, with pieces for unknown-character runs added.

    SentencePiece turns each maximal run of characters it does not know into one unknown piece
    whose *text* is the run; MarianTokenizer then looks that text up in ``vocab.json``, where a
    shared vocabulary often has it (a Chinese character from the target side, say). The
    SentencePiece op only returns ids, so such vocabulary entries are added to the embedded
    model as user-defined pieces: a run equal to one of them comes out as that piece, and a run
    that comes out as several pieces is collapsed to one ``<unk>`` in the graph
    (``collapse_marked_runs``), which is what MarianTokenizer yields for it.
    """

    model: bytes
    unk_id: int
    first_added_id: int
    to_model_ids: np.ndarray  # spm id (added pieces included) → model id


def source_sentencepiece(vocabulary: MarianVocabulary) -> SourceSentencepiece:
    import sentencepiece as spm

    proto = parse_model(vocabulary.source_spm)
    kinds = type(proto).SentencePiece
    known = {char for piece in proto.pieces if piece.type == kinds.NORMAL for char in piece.piece}
    first_added = len(proto.pieces)
    existing = {piece.piece for piece in proto.pieces}
    for text in vocabulary.source_vocab:
        if text in SPECIAL_TOKENS or text.startswith(">>") or text in existing or any(c in known for c in text):
            continue
        added = proto.pieces.add()
        added.piece, added.score, added.type = text, 0.0, kinds.USER_DEFINED
    model = proto.SerializeToString()
    processor = spm.SentencePieceProcessor(model_proto=model)
    table = np.array(
        [vocabulary.source_vocab.get(processor.id_to_piece(i), vocabulary.unk_id) for i in range(len(proto.pieces))],
        dtype=np.int32,
    )
    return SourceSentencepiece(model, processor.unk_id(), first_added, table)


def id_to_text(vocabulary: MarianVocabulary) -> list[str]:
    """Model id → the text it decodes to before stripping (``▁`` → space); special tokens → ``""``."""
    texts = [""] * (max(vocabulary.target_vocab.values()) + 1)
    for piece, index in vocabulary.target_vocab.items():
        texts[index] = "" if piece in SPECIAL_TOKENS else piece.replace("\u2581", " ")
    return texts


def sentencepiece_op(b: GraphBuilder, text: str, model: bytes) -> tuple[str, str]:
    """The extensions' SentencePiece op on string ``[N]`` → flat ids and int64 row splits ``[N + 1]``:
    deterministic (no sampling), no BOS/EOS added (the graphs add their own specials)."""
    return b.op_multi(
        "SentencepieceTokenizer",
        [
            text,
            b.const(np.int64(0), "nbest_size"),
            b.const(np.float32(0.0), "alpha"),
            b.const(np.bool_(False), "add_bos"),
            b.const(np.bool_(False), "add_eos"),
            b.const(np.bool_(False), "reverse"),
        ],
        2,
        domain=EXTENSIONS_DOMAIN,
        model=model,
    )


def add_tokenizer(
    b: GraphBuilder, text: str, vocabulary: MarianVocabulary, eos_id: int, pad_id: int, max_length: int | str
) -> tuple[str, str]:
    """Append the encoding nodes; returns int32 ``input_ids`` and ``attention_mask`` value names.

    As MarianTokenizer does, special tokens typed into the text (``</s>``, ``<unk>``, ``<pad>``)
    are split off first and each remaining chunk is tokenised on its own (its own language
    token, its own SentencePiece call); the chunks of a row are then joined, cut to the
    model's limit and given ``</s>``.
    """
    source = source_sentencepiece(vocabulary)
    specials = tuple(token for token in SPECIAL_TOKENS if token in vocabulary.source_vocab)
    chunks, chunk_rows = split_on_literals(b, text, specials)
    lead, rest, has_lead = split_language_token(b, chunks, whole=specials)
    lead_ids = {
        token: index
        for token, index in vocabulary.source_vocab.items()
        if (token.startswith(">>") and token.endswith("<<")) or token in specials
    }
    lead_id = lookup_tokens(b, lead, lead_ids, vocabulary.unk_id)
    spm_ids, splits = sentencepiece_op(b, rest, source.model)
    unknown_run = b.op(
        "Or",
        [
            b.op("Equal", [spm_ids, b.const(np.int32(source.unk_id))]),
            b.op("GreaterOrEqual", [spm_ids, b.const(np.int32(source.first_added_id))]),
        ],
    )
    model_ids = remap(b, spm_ids, source.to_model_ids, "spm_to_model_ids")
    model_ids, splits = collapse_marked_runs(b, model_ids, splits, unknown_run, vocabulary.unk_id)
    chunk_ids, chunk_mask = ragged_to_padded(b, model_ids, splits, pad_id=pad_id, prefix=lead_id, has_prefix=has_lead)
    tokens, token_splits = padded_to_ragged(b, chunk_ids, chunk_mask)
    return ragged_to_padded(
        b,
        tokens,
        merge_rows(b, token_splits, chunk_rows),
        suffix_id=eos_id,
        pad_id=pad_id,
        max_length=max_length,
    )


def add_detokenizer(b: GraphBuilder, sequences: str, vocabulary: MarianVocabulary) -> str:
    """Append the decoding nodes: int32 ``[batch, beams, length]`` ids → string ``[batch, beams]``."""
    index, texts = detokenizer_index(b, sequences, vocabulary)
    return join_strings(b, index, texts, "id_to_text")


def detokenizer_index(b: GraphBuilder, sequences: str, vocabulary: MarianVocabulary) -> tuple[str, np.ndarray]:
    """The decoding as indices into a text table: (int64 ``[batch, beams, length + 1]`` indices, the
    table) — joined, the texts of a row are MarianTokenizer's decode."""
    tables = strip_tables(id_to_text(vocabulary))
    return strip_index(b, sequences, tables, "id_to_text"), tables


__all__ = ["MarianVocabulary", "add_detokenizer", "add_tokenizer", "i64", "load_vocabulary"]
