"""What a text-level file needs from the checkpoint's tokenizer, whichever tokenizer it is.

Each tokenizer kind (MarianTokenizer's two SentencePiece files in ``marian.py``; the language-coded
SentencePiece tokenizers of NLLB, M2M100, mBART-50 and T5 in ``languages.py``) loads into an object
with this interface, so the assembly of a text file never asks which kind it has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from graphgen.custom_ops.builder import GraphBuilder
from graphgen.model.spec import ModelSpec
from graphgen.text.portable import PortableSpec


class Vocabulary(Protocol):
    """A checkpoint's tokenizer, as the tokenizer and detokenizer graphs need it."""

    @property
    def max_length(self) -> int:
        """The tokenizer's ``model_max_length``: the longest encoding it produces when truncating."""
        ...

    @property
    def languages(self) -> dict[str, int]:
        """Language code as HF spells it → its token's id; empty for tokenizers without codes."""
        ...

    @property
    def default_source(self) -> str:
        """The source code the tokenizer starts with (its ``src_lang``); ``""`` without codes."""
        ...

    @property
    def source_last(self) -> bool:
        """Whether the source language's token comes after the ``</s>`` (``text </s> en_XX``:
        MBartTokenizer, NLLB's ``legacy_behaviour``) rather than first (``en_XX text </s>``)."""
        ...

    @property
    def target_starts_decoder(self) -> bool:
        """Whether the target language's token is the decoder start (MBartTokenizer's checkpoints,
        ``generate(decoder_start_token_id=...)``) rather than the forced first token."""
        ...

    @property
    def target_tags(self) -> tuple[str, ...]:
        """The tokens that, typed at the start of a text, choose the target language (opus-mt's
        ``>>fra<<``, HF's ``MarianTokenizer.supported_language_codes``; MADLAD-400's ``<2de>``), in
        id order; empty where the model has none. Recorded in the file for hosts to list."""
        ...

    def portable_tokenizer(self, spec: ModelSpec) -> PortableSpec:
        """What the tokenizer in standard ops (``text.portable``) needs to encode as HF does."""
        ...

    def detokenizer_table(self, b: GraphBuilder, sequences: str, spec: ModelSpec) -> tuple[str, np.ndarray]:
        """Nodes mapping ``sequences`` to indices into a table of texts, and the table: joined per
        hypothesis, the texts are HF's ``batch_decode(skip_special_tokens=True)``."""
        ...

    def add_extensions_tokenizer(
        self, b: GraphBuilder, text: str, source_language: str | None, spec: ModelSpec, max_length: int | str
    ) -> tuple[str, str]:
        """The encoding on onnxruntime-extensions' SentencePiece op: ``input_ids``, ``attention_mask``."""
        ...

    def add_extensions_detokenizer(self, b: GraphBuilder, sequences: str, spec: ModelSpec) -> str:
        """The decoding of a ``--tokenizer extensions`` file: the string ``translation``."""
        ...


def load_vocabulary(directory: Path) -> Vocabulary:
    """The checkpoint's tokenizer, by its ``tokenizer_config.json``: one of the language-coded rules
    (``text.rules``), else MarianTokenizer's files (whose absence is an error naming them)."""
    from graphgen.checkpoint.load import check_tokenizer_files
    from graphgen.text.languages import is_language_tokenizer, load_language_vocabulary
    from graphgen.text.marian import load_vocabulary as load_marian_vocabulary

    if is_language_tokenizer(directory):
        return load_language_vocabulary(directory)
    check_tokenizer_files(directory)
    return load_marian_vocabulary(directory)
