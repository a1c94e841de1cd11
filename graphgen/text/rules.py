"""What each language-coded SentencePiece tokenizer does its own way, registered by the family
that uses it (``graphgen/families/``), beside its architecture adapter: the tokenizer graphs in
``languages.py`` read :data:`TOKENIZER_RULES` and never name a tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenizerRule:
    """What one HF tokenizer class does its own way."""

    # The loaded tokenizer's language codes (as HF spells them) → token ids; None: it has none (T5).
    languages: Callable[[Any], dict[str, int]] | None
    metaspace: bool  # HF's tokenizers Metaspace pipeline, else SentencePiece's own whitespace rules
    spm_file: str  # the attribute of the HF tokenizer naming its SentencePiece model's file
    # Whether an id the vocabulary lacks decodes to the unknown token's text, kept verbatim (the
    # Python tokenizers that decode runs of pieces with SentencePiece), rather than to nothing.
    unknown_verbatim: bool = False
    # Whether the target language's token is the decoder start (MBartTokenizer: mBART-25's
    # checkpoints start the decoder with it, ``decoder_start_token_id``) rather than the first
    # generated token (``forced_bos_token_id``).
    target_starts_decoder: bool = False
    # The pieces (a regular expression matching the whole piece) that, typed at the start of the
    # text, choose the target language (MADLAD-400's "<2de>"); None: no such pieces.
    target_tag: str | None = None


# HF tokenizer class name (without "Fast") → its rule. Filled by the family modules on import.
TOKENIZER_RULES: dict[str, TokenizerRule] = {}


def register_tokenizer(name: str, rule: TokenizerRule) -> TokenizerRule:
    TOKENIZER_RULES[name] = rule
    return rule


def tokenizer_rules() -> dict[str, TokenizerRule]:
    """Every registered rule (importing the families registers theirs)."""
    import graphgen.families  # noqa: F401  (each family registers its tokenizers)

    return TOKENIZER_RULES


def lang_code_to_id(tokenizer: Any) -> dict[str, int]:
    """mBART-25 and mBART-50 (``en_XX`` → ``en_XX``) and M2M100 (``en`` → ``__en__``) list their codes in
    ``lang_code_to_id``."""
    return {str(code): int(index) for code, index in tokenizer.lang_code_to_id.items()}
