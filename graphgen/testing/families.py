"""The model families beside Marian, one row each: what the tests build for a family and check it with.

One table, so that the parity tests, the compatibility matrix, the mobile, int4, no-strings and CUDA
placement checks and the tokenizer tests agree on a family's tokenizer, its languages and its special
ids instead of each keeping a copy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """A family as the tests lay out its checkpoints (random weights, a SentencePiece model trained on
    the demo corpus, the hub's tokenizer files)."""

    name: str  # the tests' id
    # ``random_family_model``'s config prefix ("M2M100", "MBart") or a key of ``T5_VARIANTS`` (the
    # original T5: ReLU, tied head scaled by d_model ** -0.5; v1.1 and mT5: gated GELU, untied head)
    architecture: str
    tokenizer_class: str
    source_language: str = ""  # "" where the family has no language codes (T5: the task is in the text)
    target_languages: tuple[str, ...] = ()  # three, where it has language codes
    text_prefix: str = ""  # what a text starts with (T5's task prefix)
    # Which files the parity tests compare with HF ``generate``: the id-level file once per
    # architecture (the tokenizer does not reach it: NLLB's is M2M100's), the text file of every
    # family but the original T5 (v1.1 and mT5 have its tokenizer; the compatibility matrix runs it).
    id_parity: bool = True
    text_parity: bool = True

    @property
    def relative_positions(self) -> bool:
        """T5's relative position bias (buckets, no position table) instead of fairseq's positions."""
        return self.tokenizer_class == "T5Tokenizer"

    @property
    def pad(self) -> int:
        """The pad id: T5's is 0 (also its decoder start); the fairseq families' 1."""
        return 0 if self.relative_positions else 1

    @property
    def eos(self) -> int:
        """The EOS id: T5's is 1; the fairseq families' 2 (also their decoder start)."""
        return 1 if self.relative_positions else 2

    @property
    def has_languages(self) -> bool:
        """Whether the files take ``source_language`` / ``target_language`` (the first generated token
        is then the target's code, ``forced_bos_token_id``)."""
        return bool(self.target_languages)

    def texts(self, texts: list[str]) -> list[str]:
        """``texts`` as this family's inputs (T5's task prefix in front)."""
        return [self.text_prefix + text for text in texts]


T5_TASK = "translate English to German: "  # T5 takes its task (and languages) in the text

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "nllb",
            "M2M100",
            "NllbTokenizer",
            "eng_Latn",
            ("zho_Hans", "fra_Latn", "deu_Latn"),
            id_parity=False,  # M2M100's architecture: its id-level file is m2m100's
        ),
        Family("m2m100", "M2M100", "M2M100Tokenizer", "en", ("zh", "fr", "de")),
        Family("mbart50", "MBart", "MBart50Tokenizer", "en_XX", ("zh_CN", "fr_XX", "de_DE")),
        Family("t5", "t5", "T5Tokenizer", text_prefix=T5_TASK, text_parity=False),
        Family("t5-v1.1", "t5-v1.1", "T5Tokenizer", text_prefix=T5_TASK),
        Family("mt5", "mt5", "T5Tokenizer", text_prefix=T5_TASK),
    )
}

# The tokenizer classes with language codes, in the table's order.
LANGUAGE_TOKENIZERS = tuple(dict.fromkeys(f.tokenizer_class for f in FAMILIES.values() if f.has_languages))


def family_of_tokenizer(tokenizer_class: str) -> Family:
    """The first family whose checkpoints carry ``tokenizer_class``."""
    for family in FAMILIES.values():
        if family.tokenizer_class == tokenizer_class:
            return family
    raise KeyError(f"no family has {tokenizer_class}")
