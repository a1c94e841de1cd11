"""A family's checkpoint built and exported once, with its HF model beside the file: what the family
tests compare, in one object per interface (id-level, text-level).

The tests share these across modules (a session-scoped fixture builds each once), so that the
parity module, the bake, runtime and loading tests check the same files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphgen.testing.checkpoints import family_checkpoint, family_model
from graphgen.testing.demo import demo_texts
from graphgen.testing.families import Family
from graphgen.testing.sessions import hf_sequences, hf_tokens, open_session, random_sources, run_id_file

if TYPE_CHECKING:
    import onnxruntime as ort

    from graphgen import Translator

ID_VOCAB = 120  # the id-level models' vocabulary: small, so random sources hit every id
SENTENCES = 104  # the text parity's sentences per setting: ≥ 100, and divisible by 8


def _quiet(_: str) -> None:
    """Export progress, not printed."""


@dataclass
class IdFiles:
    """A family's tiny random model (no tokenizer, ``ID_VOCAB`` ids, 4 beams by default) and its
    id-level file with the default (loop) search."""

    family: Family
    directory: Path
    model: Any  # the HF model
    session: ort.InferenceSession

    @classmethod
    def build(cls, family: Family, directory: Path) -> IdFiles:
        from graphgen import export

        model = family_model(directory, family.name, ID_VOCAB, num_beams=4)
        export(str(directory), str(directory / "ids.onnx"), tokenizer=False, progress=_quiet)
        return cls(family, directory, model, open_session(directory / "ids.onnx"))

    def sources(self, count: int, size: int, *, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
        """Random sources; up to 30 tokens for T5, past its bucket range (fairseq's: 12)."""
        longest = 30 if self.family.relative_positions else 12
        f = self.family
        return random_sources(count, size, vocab=ID_VOCAB, pad=f.pad, eos=f.eos, longest=longest, seed=seed)

    def run(
        self, ids: np.ndarray, mask: np.ndarray, session: ort.InferenceSession | None = None, **settings: Any
    ) -> list[tuple[int, ...]]:
        """The file's (or ``session``'s) generated tokens per hypothesis."""
        return run_id_file(session or self.session, ids, mask, self.family.eos, self.family.pad, **settings)

    def hf(self, ids: np.ndarray, mask: np.ndarray, **settings: Any) -> list[tuple[int, ...]]:
        """HF ``generate``'s generated tokens per hypothesis."""
        return hf_tokens(self.model, ids, mask, self.family.eos, self.family.pad, **settings)


@dataclass
class TextFiles:
    """A family's checkpoint in the hub's layout (random weights, a SentencePiece model trained on the
    demo corpus, 4 beams by default) and its text-level file (the default portable tokenizer)."""

    family: Family
    directory: Path
    model: Any  # the HF model
    tokenizer: Any  # the HF tokenizer
    onnx: Path
    translator: Translator

    @classmethod
    def build(cls, family: Family, directory: Path) -> TextFiles:
        from graphgen import Translator, export

        model, tokenizer = family_checkpoint(directory, family.name, num_beams=4)
        onnx = directory / "model.onnx"
        export(str(directory), str(onnx), progress=_quiet)
        return cls(family, directory, model, tokenizer, onnx, Translator(onnx))

    def sentences(self) -> list[str]:
        """``SENTENCES`` demo sentences without their language token, as this family takes them."""
        return self.family.texts(demo_texts()[:SENTENCES])

    def code_id(self, code: str) -> int:
        """The token id of a language code (the forced first token of that target)."""
        if hasattr(self.tokenizer, "lang_code_to_id"):
            return int(self.tokenizer.lang_code_to_id[code])
        return int(self.tokenizer.convert_tokens_to_ids(code))

    def hf(
        self, texts: list[str], source: str | None = None, target: str | None = None, **settings: Any
    ) -> tuple[list[str], list[tuple[int, ...]]]:
        """HF ``generate`` + ``batch_decode`` from ``source`` into ``target`` (``None``: the tokenizer's
        source, no forced target): the texts and the generated tokens."""
        from graphgen.verify.parity import generated_tokens

        if source is not None:
            self.tokenizer.src_lang = source
        forced: dict[str, Any] = {} if target is None else {"forced_bos_token_id": self.code_id(target)}
        rows = hf_sequences(self.model, self.tokenizer, texts, **forced, **settings)
        decoded = self.tokenizer.batch_decode(rows, skip_special_tokens=True)
        return decoded, [generated_tokens(row, self.family.eos, self.family.pad) for row in rows]

    def graph(self, texts: list[str], **arguments: Any) -> tuple[list[str], list[tuple[int, ...]]]:
        """The file's translations and generated tokens (``Translator.run``; languages and settings in
        ``arguments``)."""
        from graphgen.verify.parity import generated_tokens

        result = self.translator.run(texts, **arguments)
        tokens = [generated_tokens(row[0], self.family.eos, self.family.pad) for row in result["sequences"].tolist()]
        return [str(row[0]) for row in result["translation"]], tokens
