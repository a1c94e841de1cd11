"""M2M100 / NLLB and mBART checkpoints: the id-level file equals HF ``generate``, forced first token included.

Tiny random-weight models of each family (``conftest.random_family_model``) cover what differs from
Marian: pre-norm layers, final and embedding norms, fairseq's padding-aware sinusoidal positions,
learned positions with an offset, EOS as decoder start, and the target language forced as the
first token (``forced_bos_token_id``), one per call or one per input row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from conftest import FAMILY_CONFIGS, hf_tokens, random_family_model, random_sources, run_id_file

from graphgen._export import export

VOCAB = 120
PAD, EOS = 1, 2


def _session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=FAMILY_CONFIGS)
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp(request.param) / "checkpoint"
    model = random_family_model(directory, request.param, VOCAB, num_beams=4)
    export(directory, directory / "ids.onnx", tokenizer=False, progress=lambda _: None)
    return _session(directory / "ids.onnx"), model, directory


def _batches(count: int, size: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    return random_sources(count, size, vocab=VOCAB, pad=PAD, eos=EOS, seed=seed)


def _run(session, ids, mask, **settings) -> list[tuple[int, ...]]:
    return run_id_file(session, ids, mask, EOS, PAD, **settings)


def _hf(model, ids, mask, **settings) -> list[tuple[int, ...]]:
    return hf_tokens(model, ids, mask, EOS, PAD, **settings)


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_equals_hf_with_three_forced_first_tokens(family, batch_size: int, num_beams: int) -> None:
    """≥ 100 sources per setting; three different forced first tokens (target languages) and none."""
    session, model, _ = family
    for forced in (None, 7, 50, 119):
        settings = {"num_beams": num_beams} | ({} if forced is None else {"forced_bos_token_id": forced})
        expected, actual = [], []
        for ids, mask in _batches(104 // batch_size, batch_size):
            expected += _hf(model, ids, mask, **settings)
            actual += _run(session, ids, mask, **settings)
        assert len(expected) == 104
        if forced is not None:
            assert all(row[0] == forced for row in expected)
        assert len({row[:4] for row in expected}) > 10  # outputs depend on the input
        same = sum(a == e for a, e in zip(actual, expected, strict=True))
        assert same == len(expected), (settings, [(a, e) for a, e in zip(actual, expected, strict=True) if a != e][:2])


def test_a_forced_first_token_per_row(family) -> None:
    """One target per input row: each row as HF gives it for that target alone (same padding)."""
    session, model, _ = family
    targets = np.array([7, 50, 119, 7, 50, 119, 7, 50], dtype=np.int32)
    for ids, mask in _batches(3, 8, seed=1):
        actual = _run(session, ids, mask, forced_bos_token_id=targets)
        for target in set(targets.tolist()):
            rows = np.flatnonzero(targets == target)
            expected = _hf(model, ids[rows], mask[rows], forced_bos_token_id=target)
            assert [actual[r] for r in rows] == expected


def test_bad_forced_first_tokens_stop_the_run(family) -> None:
    session, _, _ = family
    ids, mask = _batches(1, 3)[0]
    with pytest.raises(Exception, match="forced_bos_token_id outside the vocabulary"):
        _run(session, ids, mask, forced_bos_token_id=VOCAB)
    with pytest.raises(Exception, match="forced_bos_token_id must hold one id, or one per input row"):
        _run(session, ids, mask, forced_bos_token_id=[7, 8])


def test_int8_export_runs(family, tmp_path: Path) -> None:
    """int8 cannot equal HF token for token; it must build, run and keep the forced token."""
    _, _, directory = family
    export(directory, tmp_path / "int8.onnx", tokenizer=False, int8=True, progress=lambda _: None)
    ids, mask = _batches(1, 4)[0]
    rows = _run(_session(tmp_path / "int8.onnx"), ids, mask, forced_bos_token_id=50)
    assert len(rows) == 4 and all(row[0] == 50 for row in rows)
