"""Every generation_config.json key is honoured by the graph or refused at export, never silently ignored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from transformers import GenerationConfig, MarianMTModel, MarianTokenizer

from graphgen import Translator, UnsupportedModelError, export
from graphgen.checkpoint.generation import HONOURED, NO_EFFECT, SAMPLING_ONLY, refused_keys
from graphgen.testing import demo_sources, demo_texts, family_checkpoint, hf_translate, open_session
from graphgen.verify.parity import compare, graph_generate, hf_generate

SENTENCES = demo_sources()[:40]

REFUSED = {
    "forced_decoder_ids": [[1, 5]],
    "suppress_tokens": [5],
    "begin_suppress_tokens": [5],
    "do_sample": True,
    "num_beam_groups": 2,
    "diversity_penalty": 0.5,
    "encoder_no_repeat_ngram_size": 2,
    "encoder_repetition_penalty": 1.2,
    "exponential_decay_length_penalty": [5, 1.1],
    "sequence_bias": [[[5], -1.0]],
    "penalty_alpha": 0.6,
    "guidance_scale": 1.5,
    "max_time": 2.0,
    "remove_invalid_values": True,
    "bad_words_ids": [[458], [5, 6]],
    "eos_token_id": [0, 5],
    "forced_eos_token_id": 5,
    "an_unknown_future_key": 1,
}


def checkpoint_with(demo_dir: Path, folder: Path, **settings: object) -> Path:
    directory = folder / "checkpoint"
    shutil.copytree(demo_dir, directory)
    path = directory / "generation_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(settings)
    path.write_text(json.dumps(config), encoding="utf-8")
    return directory


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_key_the_graph_would_not_honour_stops_the_export(demo_dir: Path, tmp_path: Path, key: str) -> None:
    directory = checkpoint_with(demo_dir, tmp_path, **{key: REFUSED[key]})
    with pytest.raises(UnsupportedModelError, match=rf"generation_config\.json sets .*{key}="):
        export(directory, tmp_path / "model.onnx", tokenizer=False)
    assert not (tmp_path / "model.onnx").exists()


def test_sampling_keys_without_sampling_are_ignored_as_hf_ignores_them(demo_dir: Path, tmp_path: Path) -> None:
    directory = checkpoint_with(demo_dir, tmp_path, temperature=0.3, top_k=5, top_p=0.5)
    export(directory, tmp_path / "model.onnx", tokenizer=False)
    session = open_session(tmp_path / "model.onnx")
    model = MarianMTModel.from_pretrained(directory).eval()
    tokenizer = MarianTokenizer.from_pretrained(directory)
    expected = hf_generate(model, tokenizer, SENTENCES, 8)
    actual = graph_generate(session, tokenizer, SENTENCES, 8, 0, model.config.pad_token_id)
    assert compare("sampling keys", SENTENCES, expected, actual).rate == 1.0


def _equal_to_hf(directory: Path, tmp_path: Path) -> list[list]:
    """Export ``directory`` id-level and check it equals HF, default search and greedy; HF's tokens."""
    export(directory, tmp_path / "model.onnx", tokenizer=False)
    session = open_session(tmp_path / "model.onnx")
    model = MarianMTModel.from_pretrained(directory).eval()
    tokenizer = MarianTokenizer.from_pretrained(directory)
    results = []
    for search in ({}, {"num_beams": 1}):
        expected = hf_generate(model, tokenizer, SENTENCES, 8, **search)
        actual = graph_generate(session, tokenizer, SENTENCES, 8, 0, model.config.pad_token_id, **search)
        result = compare(f"{directory.name} {search}", SENTENCES, expected, actual)
        assert result.rate == 1.0, result.differences[:3]
        results.append(expected)
    return results


def test_forced_first_token_is_honoured(demo_dir: Path, tmp_path: Path) -> None:
    """A Marian checkpoint whose generation config forces a first token: HF starts every output with
    it, and so does the file (issue 13 measured 0 of 24 equal before); the op search refuses it."""
    forced = 100
    directory = checkpoint_with(demo_dir, tmp_path, forced_bos_token_id=forced)
    for expected in _equal_to_hf(directory, tmp_path):
        assert all(row[0][0] == forced for row in expected)
    with pytest.raises(UnsupportedModelError, match="forced_bos_token_id"):
        export(directory, tmp_path / "op.onnx", tokenizer=False, search="op")
    assert not (tmp_path / "op.onnx").exists()


@pytest.mark.parametrize("settings", [{"max_new_tokens": 6}, {"min_new_tokens": 9}], ids=["max_new", "min_new"])
def test_new_token_limits_are_honoured(demo_dir: Path, tmp_path: Path, settings: dict[str, int]) -> None:
    directory = checkpoint_with(demo_dir, tmp_path, **settings)
    for expected in _equal_to_hf(directory, tmp_path):
        lengths = {len(row[0]) for row in expected}
        if "max_new_tokens" in settings:
            assert max(lengths) <= 5 and 5 in lengths  # 6 new tokens, the last a forced EOS: reached
        else:
            assert min(lengths) >= 9


def test_generation_config_target_is_the_default(tmp_path: Path) -> None:
    """A checkpoint whose generation config forces a language exports it as the default target."""
    model, tokenizer = family_checkpoint(tmp_path, "mbart50", seed=3)
    model.generation_config.forced_bos_token_id = tokenizer.lang_code_to_id["ro_RO"]
    model.generation_config.save_pretrained(tmp_path)
    export(tmp_path, tmp_path / "m.onnx", progress=lambda _: None)
    translator = Translator(tmp_path / "m.onnx")
    assert translator.target_language == "ro_RO"
    tokenizer.src_lang = "en_XX"
    expected = hf_translate(model, tokenizer, demo_texts()[:8])
    assert translator.translate(demo_texts()[:8]) == expected


def test_every_key_of_this_transformers_is_classified() -> None:
    """A key not sorted here is refused when set; this lists the ones that exist today."""
    keys = set(GenerationConfig().to_dict())
    classified = HONOURED | NO_EFFECT | SAMPLING_ONLY
    refused_when_set = keys - classified
    assert {"suppress_tokens", "do_sample", "num_beam_groups"} <= refused_when_set
    assert refused_keys(GenerationConfig()) == {}  # HF's defaults need nothing refused
