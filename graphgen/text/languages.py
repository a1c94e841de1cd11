"""Tokenizer graphs for the SentencePiece tokenizers that mark languages with tokens: NLLB-200,
mBART-50 and M2M100; and T5's, which marks none (its task is a text prefix).

They encode a source as ``[source language] + pieces + [</s>]`` and translate into the
language whose token is forced as the first generated token (``contract.FORCED_BOS_TOKEN_ID``);
mBART-25's MBartTokenizer (and NLLB's with ``legacy_behaviour``) writes the source language last,
``pieces + [</s>, source language]``, and its checkpoints start the decoder with the target's token
(``contract.DECODER_START_TOKEN_ID``). The graph takes both languages as string inputs, spelled as
the HF tokenizer spells them (``eng_Latn``, ``en_XX``, ``en``). What differs between the tokenizers is a
``text.rules.TokenizerRule``, registered by its family: where the HF tokenizer keeps its language
codes, and whose whitespace rules apply. HF builds the NLLB and mBART-50 tokenizers with the
``tokenizers`` library from the SentencePiece model (a ``Metaspace`` pipeline); M2M100's runs
SentencePiece itself, as Marian's does.

Encoding (the extensions-based graph here; the portable one is ``text/portable.py``): the special
tokens typed in the text (``<s>``, ``</s>``, ``<unk>``, ``<pad>``) are split off and each remaining
chunk is tokenised on its own by the checkpoint's SentencePiece model (its normaliser included);
pieces map to model ids through the HF vocabulary. Where
SentencePiece drops trailing whitespace, the Metaspace pipeline keeps one ``▁`` for it: a second
copy of the SentencePiece model, with whitespace removal off, tells which chunks end in
whitespace. Decoding joins each id's text, ``▁`` as a space, special tokens skipped; the
Metaspace decoder drops the ``▁`` of the first token, M2M100's strips the result (as Marian's).

Not reproduced by this graph: HF also splits language codes and ``<mask>`` out of the text when a
user types them inside it (``"say eng_Latn"``); the extensions-based graph tokenises them as text
(its string ops would need one literal split per code). The portable graph splits them all
(``added_tokens``, ``custom_ops/added_tokens.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphgen._errors import CheckpointError, UnsupportedModelError
from graphgen.contract import SOURCE_LANGUAGE, TARGET_LANGUAGE
from graphgen.custom_ops import (
    GraphBuilder,
    append_where,
    drop_marked,
    fail_when,
    follows_marked,
    join_strings,
    lookup_tokens,
    merge_rows,
    metaspace_index,
    metaspace_tables,
    padded_to_ragged,
    ragged_to_padded,
    remap,
    split_on_literals,
    split_whole_tokens,
    strip_index,
    strip_tables,
)
from graphgen.custom_ops.builder import BOOL, INT32, INT64, i64
from graphgen.custom_ops.flat import counts
from graphgen.custom_ops.trie import CodepointTrie, lookup
from graphgen.custom_ops.utf8 import decode_utf8
from graphgen.model.spec import ModelSpec
from graphgen.text.marian import check_spm, sentencepiece_op
from graphgen.text.portable import AddedToken, PipelineShape, PortableSpec, spec_for_sentencepiece, spec_for_tokenizers
from graphgen.text.rules import TokenizerRule, tokenizer_rules
from graphgen.text.sentencepiece import parse_model
from graphgen.text.vocabulary import Vocabulary

NO_LANGUAGE = ""  # a target_language that forces nothing (HF generate without forced_bos_token_id)
METASPACE = "\u2581"


SPLIT_TOKENS = ("<s>", "</s>", "<unk>", "<pad>")


@dataclass(frozen=True)
class LanguageVocabulary:
    """What the graphs need from a language-coded tokenizer's files."""

    tokenizer_class: str
    spm: bytes
    piece_ids: dict[str, int]  # every piece and token → model id
    languages: dict[str, int]  # code as HF spells it → its token's id; empty: no language inputs (T5)
    default_source: str
    unk_id: int
    eos_id: int
    pad_id: int
    special_ids: frozenset[int]  # skipped when decoding
    metaspace: bool
    unknown_text: str  # what an id outside ``piece_ids`` decodes to
    max_length: int
    pipeline: str | None = None  # the tokenizers pipeline (JSON) HF runs; None: SentencePiece itself (M2M100)
    # the added tokens HF finds in a text as typed, and (``tokenizers``' ``normalized=True``) after normalizing it
    added_tokens: tuple[AddedToken, ...] = ()
    normalized_tokens: tuple[AddedToken, ...] = ()
    source_last: bool = False  # text + [</s>, source language] (MBartTokenizer, NLLB's legacy_behaviour)
    target_starts_decoder: bool = False  # the target language is the decoder start (MBartTokenizer)
    target_tags: tuple[str, ...] = ()  # pieces typed first in the text that choose the target (MADLAD's <2de>)

    def portable_spec(self) -> PortableSpec:
        """What the portable tokenizer graph needs to reproduce this tokenizer."""
        name = f"the {self.tokenizer_class}"
        if self.pipeline is None:
            return spec_for_sentencepiece(
                self.spm,
                self.piece_ids,
                self.unk_id,
                self.eos_id,
                self.pad_id,
                self.added_tokens,
                marian=False,
                name=name,
            )
        return spec_for_tokenizers(
            json.loads(self.pipeline), self.added_tokens, self.normalized_tokens, self.eos_id, self.pad_id, name
        )

    # The text.vocabulary.Vocabulary interface.
    def portable_tokenizer(self, spec: ModelSpec) -> PortableSpec:
        return self.portable_spec()

    def detokenizer_table(self, b: GraphBuilder, sequences: str, spec: ModelSpec) -> tuple[str, np.ndarray]:
        return language_detokenizer_index(b, sequences, self, spec.target_vocab_size)

    def add_extensions_tokenizer(
        self, b: GraphBuilder, text: str, source_language: str | None, spec: ModelSpec, max_length: int | str
    ) -> tuple[str, str]:
        return add_language_tokenizer(b, text, source_language, self, max_length=max_length)

    def add_extensions_detokenizer(self, b: GraphBuilder, sequences: str, spec: ModelSpec) -> str:
        return add_language_detokenizer(b, sequences, self, spec.target_vocab_size)

    @property
    def split_tokens(self) -> dict[str, int]:
        """The special tokens the extensions-based graph splits off (not the language codes)."""
        return {token: self.piece_ids[token] for token in SPLIT_TOKENS if token in self.piece_ids}


def added_tokens(tokenizer: Any, runs_pipeline: bool) -> tuple[tuple[AddedToken, ...], tuple[AddedToken, ...]]:
    """The tokens a loaded HF tokenizer splits out of a text before tokenizing the rest: (found in the
    text as typed, found in the normalized text). ``tokenizers`` pipelines look for a token flagged
    ``normalized`` after normalizing; transformers' SentencePiece-based tokenizers look for every
    token as typed. Flags the graph does not reproduce stop the export, naming the token."""
    name = type(tokenizer).__name__
    typed: list[AddedToken] = []
    normalized: list[AddedToken] = []
    skip_special = bool(getattr(tokenizer, "split_special_tokens", False))  # special tokens are then text
    for index, token in sorted(tokenizer.added_tokens_decoder.items()):
        if skip_special and token.special:
            continue
        if token.single_word:
            raise UnsupportedModelError(
                f"the {name}'s added token {token.content!r} is single_word, which graphgen does not reproduce"
            )
        if not runs_pipeline and (token.lstrip or token.rstrip):
            raise UnsupportedModelError(
                f"the {name}'s added token {token.content!r} strips whitespace in a SentencePiece-based tokenizer, "
                "which graphgen does not reproduce"
            )
        found = AddedToken(str(token.content), int(index), lstrip=bool(token.lstrip), rstrip=bool(token.rstrip))
        (normalized if runs_pipeline and token.normalized else typed).append(found)
    return tuple(typed), tuple(normalized)


def _rule_of(tokenizer: Any) -> TokenizerRule | None:
    """The registered rule (``text/rules.py``) of a loaded HF tokenizer's class, slow or fast."""
    return tokenizer_rules().get(type(tokenizer).__name__.removesuffix("Fast"))


def language_codes(tokenizer: Any) -> dict[str, int] | None:
    """A loaded HF tokenizer's language codes → token ids; ``None`` for tokenizers without a
    registered rule (``text/rules.py``), ``{}`` for T5's, which has none."""
    rule = _rule_of(tokenizer)
    if rule is None:
        return None
    return rule.languages(tokenizer) if rule.languages is not None else {}


def starts_decoder_with_target(tokenizer: Any) -> bool:
    """Whether a loaded HF tokenizer's checkpoints take the target language as the decoder start
    (``generate(decoder_start_token_id=...)``, MBartTokenizer) rather than as the forced first token."""
    rule = _rule_of(tokenizer)
    return rule is not None and rule.target_starts_decoder


def is_language_tokenizer(directory: Path) -> bool:
    """Whether the checkpoint's tokenizer (by its ``tokenizer_config.json``) has a registered rule."""
    config = directory / "tokenizer_config.json"
    if not config.is_file():
        return False
    try:
        name = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class", "")
    except (OSError, ValueError):
        return False
    return str(name).removesuffix("Fast") in tokenizer_rules()


def _extensions_trailing_space(vocabulary: LanguageVocabulary) -> bool:
    """Whether the extensions graph turns a chunk's trailing whitespace into a ``▁``, as the
    tokenizer's pipeline does: Metaspace after runs of spaces collapsed keeps it unless a right strip
    comes first (NLLB keeps a ``▁``, mBART-50 drops it); a WhitespaceSplit drops all whitespace; a
    tokenizer running SentencePiece itself (M2M100) drops it too. Of :class:`PipelineShape`'s shapes the
    extensions graph (SentencePiece's own op, which collapses runs of spaces itself) builds Metaspace
    after a collapse, T5's split alone, and MBartTokenizer's strip + collapse into ``▁`` + split (equal
    on the tests' sentences, not on every string: custom_ops/pretokenize.py); others are refused."""
    if vocabulary.pipeline is None:
        return False
    name = f"the {vocabulary.tokenizer_class}"
    shape = PipelineShape.of(json.loads(vocabulary.pipeline), name)
    if not (shape.strip_right == shape.collapse if shape.word_split else shape.collapse):
        raise UnsupportedModelError(
            f"{name} runs {shape.describe()}; the extensions tokenizer graph builds Precompiled "
            "[+ Strip(right)] + Replace(' {2,}', ' ') with Metaspace, and Precompiled [+ Strip(right) + "
            "Replace(' {2,}', '▁')] with WhitespaceSplit + Metaspace: export with the portable tokenizer "
            "(--tokenizer onnx, the default)"
        )
    return not shape.word_split and not shape.strip_right


def check_decoder(pipeline: dict[str, Any], directory: Path) -> None:
    """The detokenizer graph joins each piece's text with ``▁`` as a space and the first one dropped:
    the ``Metaspace`` decoder transformers' converters write. Any other (a ``ByteFallback`` sequence,
    which turns ``<0xE2>`` pieces into bytes) stops the export, naming it."""
    decoder = pipeline.get("decoder") or {}
    expected = {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "always"}
    if any(decoder.get(key) != value for key, value in expected.items()):
        raise UnsupportedModelError(
            f"the tokenizer of {directory} decodes with {json.dumps(decoder)}; graphgen's detokenizer "
            "reproduces the Metaspace('▁', prepend_scheme='always') decoder"
        )


def load_language_vocabulary(directory: Path) -> LanguageVocabulary:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(directory)
    except (OSError, ValueError, TypeError) as error:
        raise CheckpointError(f"cannot load the tokenizer of {directory}: {error}") from error
    name = type(tokenizer).__name__.removesuffix("Fast")
    rule = _rule_of(tokenizer)
    if rule is None:
        supported = ", ".join(tokenizer_rules())
        raise UnsupportedModelError(f"{directory} has a {name}; graphgen's text graphs support {supported}")
    spm_path = Path(getattr(tokenizer, rule.spm_file, "") or directory / "sentencepiece.bpe.model")
    if not spm_path.is_file():
        raise CheckpointError(f"{directory} lacks the SentencePiece model {spm_path.name}")
    spm = spm_path.read_bytes()
    check_spm(spm, spm_path.name, runs_sentencepiece=not rule.metaspace)
    languages = rule.languages(tokenizer) if rule.languages is not None else {}
    if rule.languages is not None and not languages:
        raise CheckpointError(f"the {name} of {directory} lists no language codes")
    source = ""
    if languages:
        source = str(tokenizer.src_lang or next(iter(languages)))
        tokenizer.src_lang = source
    probe = "a b"
    layout = tokenizer(probe).input_ids
    pieces = tokenizer(probe, add_special_tokens=False).input_ids
    code = [languages[source]] if languages else []
    source_last = bool(code) and layout == [*pieces, tokenizer.eos_token_id, *code]
    if layout != [*code, *pieces, tokenizer.eos_token_id] and not source_last:
        wanted = "text + [</s>]"
        if languages:
            wanted = "[source language] + text + [</s>] or text + [</s>, source language]"
        raise UnsupportedModelError(
            f"the {name} of {directory} lays {probe!r} out as {layout}; graphgen builds {wanted}"
        )
    pipeline = None
    if rule.metaspace:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise UnsupportedModelError(f"the tokenizer of {directory} loads without its tokenizers pipeline")
        pipeline = backend.to_str()
        parsed = json.loads(pipeline)
        PipelineShape.of(parsed, f"the tokenizer of {directory}")
        check_decoder(parsed, directory)
    typed, normalized = added_tokens(tokenizer, runs_pipeline=rule.metaspace)
    return LanguageVocabulary(
        tokenizer_class=name,
        spm=spm,
        piece_ids=dict(tokenizer.get_vocab()),
        languages=languages,
        default_source=source,
        unk_id=int(tokenizer.unk_token_id),
        eos_id=int(tokenizer.eos_token_id),
        pad_id=int(tokenizer.pad_token_id),
        special_ids=frozenset(int(i) for i in tokenizer.all_special_ids),
        metaspace=rule.metaspace,
        unknown_text=str(tokenizer.unk_token) if rule.unknown_verbatim else "",
        max_length=int(min(tokenizer.model_max_length, 1 << 30)),
        pipeline=pipeline,
        added_tokens=typed,
        normalized_tokens=normalized,
        source_last=source_last,
        target_starts_decoder=rule.target_starts_decoder,
        target_tags=_target_tags(tokenizer.get_vocab(), rule.target_tag),
    )


def _target_tags(piece_ids: dict[str, int], pattern: str | None) -> tuple[str, ...]:
    """The pieces ``pattern`` matches whole, in id order."""
    if pattern is None:
        return ()
    tag = re.compile(pattern)
    return tuple(piece for piece, _ in sorted(piece_ids.items(), key=lambda item: item[1]) if tag.fullmatch(piece))


def _keeping_whitespace(model: bytes) -> bytes:
    proto = parse_model(model)
    proto.normalizer_spec.remove_extra_whitespaces = False
    return proto.SerializeToString()


def _ends_in_whitespace(b: GraphBuilder, chunks: str, vocabulary: LanguageVocabulary) -> str:
    """bool ``[C]``: whether each chunk, normalised, ends in whitespace (its last piece is all ``▁``
    when SentencePiece keeps whitespace)."""
    import sentencepiece

    model = _keeping_whitespace(vocabulary.spm)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    blank = np.array(
        [bool(p) and not p.strip(METASPACE) for p in map(processor.id_to_piece, range(processor.get_piece_size()))]
        + [False]
    )
    ids, splits = sentencepiece_op(b, chunks, model)
    starts = b.op("Slice", [splits, b.const(i64(0)), b.const(i64(-1))])
    ends = b.op("Slice", [splits, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max))])
    # one spare id (never blank) so that an empty chunk, or an empty batch, has something to gather
    padded = b.op("Concat", [b.op("Cast", [ids], to=INT64), b.const(i64(len(blank) - 1))], axis=0)
    spare = b.op("Sub", [b.op("Shape", [padded]), b.const(i64(1))])
    last = b.op("Where", [b.op("Greater", [ends, starts]), b.op("Sub", [ends, b.const(i64(1))]), spare])
    return b.op("Gather", [b.derived("spm_blank_pieces", blank), b.op("Gather", [padded, last])])


def language_ids(
    b: GraphBuilder, codes: str, vocabulary: Vocabulary, input_name: str, rows: str, utf8: bool = False
) -> str:
    """Codes ``[1]`` or ``[rows]`` → int32 token ids ``[rows]``; an unknown code stops the run. The
    codes are strings, or with ``utf8`` zero-padded UTF-8 rows (uint8 ``[1 or rows, bytes]``), looked
    up in a trie of the codes (a file without string tensors)."""
    table = dict(vocabulary.languages)
    if input_name == TARGET_LANGUAGE:
        table[NO_LANGUAGE] = -1
    if utf8:
        points, segments = decode_utf8(b, codes)
        trie = CodepointTrie.build(([ord(c) for c in code], index) for code, index in table.items() if code)
        begin = b.op("Slice", [segments.splits, b.const(i64(0)), b.const(i64(-1))])
        length = counts(b, segments)
        found = lookup(b, trie, points, begin, length, f"{input_name}_codes")
        empty = b.op("Equal", [length, b.const(np.int64(0))])
        found = b.op("Where", [b.op("Less", [found, b.const(np.int64(0))]), b.const(np.int64(-2)), found])
        found = b.op("Where", [empty, b.const(np.int64(table.get(NO_LANGUAGE, -2))), found])
    else:
        found = lookup_tokens(b, codes, table, -2)
    unknown = b.op("Cast", [b.op("Equal", [found, b.const(np.int64(-2))])], to=INT32)
    unknown = b.op("Cast", [b.op("ReduceMax", [unknown], keepdims=1)], to=BOOL)
    message = f"graphgen: unknown {input_name} (the file's metadata graphgen.languages lists the codes)"
    ids = fail_when(b, unknown, message, b.op("Cast", [found], to=INT32))
    count = b.op("Shape", [ids])
    wrong = b.op(
        "And",
        [b.op("Not", [b.op("Equal", [count, b.const(i64(1))])]), b.op("Not", [b.op("Equal", [count, rows])])],
    )
    ids = fail_when(b, wrong, f"graphgen: give one {input_name}, or one per text", ids)
    return b.op("Expand", [ids, rows])


def add_language_tokenizer(
    b: GraphBuilder, text: str, source_language: str | None, vocabulary: LanguageVocabulary, max_length: int | str
) -> tuple[str, str]:
    """Append the encoding nodes; returns int32 ``input_ids`` and ``attention_mask`` value names.
    ``source_language`` names the string input of source codes; ``None`` when the tokenizer has none."""
    import sentencepiece

    if parse_model(vocabulary.spm).trainer_spec.byte_fallback:
        raise UnsupportedModelError(
            f"the {vocabulary.tokenizer_class}'s SentencePiece model has byte fallback: the SentencePiece op would "
            "split an unknown character into byte pieces where HF's tokenizer gives the unknown token; "
            "export with the portable tokenizer (--tokenizer onnx, the default)"
        )
    split = vocabulary.split_tokens
    chunks, chunk_rows = split_on_literals(b, text, tuple(split))
    token, rest, is_token = split_whole_tokens(b, chunks, tuple(split))
    token_id = lookup_tokens(b, token, split, vocabulary.unk_id)
    spm_ids, splits = sentencepiece_op(b, rest, vocabulary.spm)
    processor = sentencepiece.SentencePieceProcessor(model_proto=vocabulary.spm)
    table = np.array(
        [
            vocabulary.piece_ids.get(processor.id_to_piece(i), vocabulary.unk_id)
            for i in range(processor.get_piece_size())
        ],
        dtype=np.int32,
    )
    model_ids = remap(b, spm_ids, table, "spm_to_model_ids")
    pad = vocabulary.pad_id
    chunk_ids, chunk_mask = ragged_to_padded(b, model_ids, splits, pad_id=pad, prefix=token_id, has_prefix=is_token)
    if _extensions_trailing_space(vocabulary):
        trailing = b.op("And", [_ends_in_whitespace(b, rest, vocabulary), b.op("Not", [is_token])])
        space = vocabulary.piece_ids.get(METASPACE, vocabulary.unk_id)
        chunk_ids, chunk_mask = append_where(b, chunk_ids, chunk_mask, trailing, space)
    tokens, token_splits = padded_to_ragged(b, chunk_ids, chunk_mask)
    rows = b.op("Shape", [text])
    source = has_source = last = None
    if source_language is not None:
        codes = b.op("Cast", [language_ids(b, source_language, vocabulary, SOURCE_LANGUAGE, rows)], to=INT64)
        if vocabulary.source_last:
            last = codes
        else:
            source, has_source = codes, b.op("Expand", [b.const(np.bool_(True)), rows])
    return ragged_to_padded(
        b,
        tokens,
        merge_rows(b, token_splits, chunk_rows),
        prefix=source,
        has_prefix=has_source,
        suffix_id=vocabulary.eos_id,
        last=last,
        pad_id=pad,
        max_length=max_length,
    )


def add_language_detokenizer(b: GraphBuilder, sequences: str, vocabulary: LanguageVocabulary, size: int) -> str:
    """Append the decoding nodes: int32 ``[batch, beams, length]`` ids below ``size`` → string
    ``[batch, beams]``, as HF's ``batch_decode(skip_special_tokens=True)``."""
    index, texts = language_detokenizer_index(b, sequences, vocabulary, size)
    return join_strings(b, index, texts, "id_to_text")


def language_detokenizer_index(
    b: GraphBuilder, sequences: str, vocabulary: LanguageVocabulary, size: int
) -> tuple[str, np.ndarray]:
    """The decoding as indices into a text table: (int64 ``[batch, beams, length']`` indices, the
    table) — joined, the texts of a row are HF's ``batch_decode``.

    M2M100's tokenizer decodes each run of pieces with SentencePiece and puts a special token's text
    between runs as is; the only such token that survives skipping is the unknown token that an id
    outside the vocabulary (M2M100's "made-up words") turns into. SentencePiece drops the leading
    space of a run's pieces until one decodes to something, so the pieces after such a token lose
    one; the whole is stripped.
    """
    count = max(size, max(vocabulary.piece_ids.values()) + 1)
    pieces = [vocabulary.unknown_text] * count
    for piece, index in vocabulary.piece_ids.items():
        pieces[index] = piece
    skipped = set(vocabulary.special_ids)
    known = set(vocabulary.piece_ids.values())
    if vocabulary.metaspace:  # tokenizers drops the ids it lacks before its decoder sees the first token
        skipped |= set(range(count)) - known
        tables = metaspace_tables(pieces, skipped)
        return metaspace_index(b, sequences, tables, "id_to_text"), tables[0]
    texts = ["" if i in skipped else p.replace(METASPACE, " ") for i, p in enumerate(pieces)] + [""]
    after_verbatim = [text[1:] if text.startswith(" ") else text for text in texts]
    filler = count  # "" in both halves
    kept = drop_marked(b, sequences, np.array([i in skipped for i in range(count)] + [True]), filler, "id_skipped")
    verbatim = np.array([i not in known and i not in skipped for i in range(count)] + [False])
    # SentencePiece keeps dropping one leading space while a run's pieces decode to nothing ("▁")
    silent = np.array([not text for text in after_verbatim[:count]] + [True]) & ~verbatim
    follows = b.op("Cast", [follows_marked(b, kept, verbatim, silent, "id_verbatim")], to=INT64)
    ids = b.op("Add", [kept, b.op("Mul", [follows, b.const(np.int64(count + 1))])])
    tables = strip_tables(texts + after_verbatim)
    return strip_index(b, ids, tables, "id_to_text"), tables
