"""Run HF ``generate`` and an exported graph on the same sentences and compare token for token.

Used by ``graphgen verify`` and by the parity tests. Both sides are reduced to the generated
tokens only: HF's sequences carry the decoder start token and a final EOS, ORT's carry the start
token and omit the EOS (see docs/io-contract.md), and both are right-padded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphgen.contract import GENERATION_PARAMETERS, ID_INPUTS, NUM_RETURN_SEQUENCES, SEQUENCES


def generated_tokens(row: Iterable[int], eos: int, pad: int) -> tuple[int, ...]:
    """Tokens after the decoder start, up to (not including) the first EOS or pad."""
    tokens: list[int] = []
    for token in list(row)[1:]:
        if token in (eos, pad):
            break
        tokens.append(int(token))
    return tuple(tokens)


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def hf_generate(
    model: Any, tokenizer: Any, sentences: Sequence[str], batch_size: int, **settings: Any
) -> list[list[tuple[int, ...]]]:
    import torch

    config = model.generation_config
    returns = settings.get(NUM_RETURN_SEQUENCES, config.num_return_sequences or 1)  # HF's name too
    results: list[list[tuple[int, ...]]] = []
    for chunk in _batches(sentences, batch_size):
        inputs = tokenizer(list(chunk), return_tensors="pt", padding=True, truncation=True)
        with torch.no_grad():
            output = model.generate(**inputs, **settings).numpy()
        rows = [generated_tokens(row, config.eos_token_id, config.pad_token_id) for row in output]
        results += [rows[i * returns : (i + 1) * returns] for i in range(len(chunk))]
    return results


def graph_generate(
    session: Any, tokenizer: Any, sentences: Sequence[str], batch_size: int, eos: int, pad: int, **settings: Any
) -> list[list[tuple[int, ...]]]:
    results: list[list[tuple[int, ...]]] = []
    for chunk in _batches(sentences, batch_size):
        inputs = tokenizer(list(chunk), return_tensors="np", padding=True, truncation=True)
        feeds = {name: inputs[name].astype(np.int32) for name in ID_INPUTS}  # the HF tokenizer's names too
        parameters = {p.name: p for p in GENERATION_PARAMETERS}
        for name, value in settings.items():
            feeds[name] = parameters[name].array(value) if name in parameters else np.array([value], dtype=np.int32)
        sequences = session.run([SEQUENCES], feeds)[0]
        results += [[generated_tokens(hyp, eos, pad) for hyp in row] for row in sequences]
    return results


@dataclass
class Row:
    sentence: str
    expected: list[tuple[int, ...]]
    actual: list[tuple[int, ...]]


@dataclass
class ParityResult:
    name: str
    total: int
    matches: int
    differences: list[tuple[str, list, list]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.matches / self.total if self.total else 1.0


def compare(
    name: str,
    sentences: Sequence[str],
    expected: Sequence[list[Any]],
    actual: Sequence[list[Any]],
) -> ParityResult:
    result = ParityResult(name=name, total=len(sentences), matches=0)
    for sentence, want, got in zip(sentences, expected, actual, strict=True):
        result.rows.append(Row(sentence, list(want), list(got)))
        if list(want) == list(got):
            result.matches += 1
        else:
            result.differences.append((sentence, list(want), list(got)))
    return result
