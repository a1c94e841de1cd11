"""The tokenizer and detokenizer graphs against MarianTokenizer, on both vocabulary layouts."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from graphgen.custom_ops import GraphBuilder
from graphgen.custom_ops.builder import EXTENSIONS_DOMAIN, INT32, STRING
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper
from transformers import MarianTokenizer

from graphgen.testing import DEMO_DIR, builder_model, open_session, tokenizer_strings
from graphgen.text.marian import add_detokenizer, add_tokenizer, load_vocabulary

STRINGS = tokenizer_strings()

DOMAINS = [(EXTENSIONS_DOMAIN, 1)]  # the tokenizer: the extensions' SentencePiece op


class Tokenizers:
    def __init__(self, directory: Path) -> None:
        self.hf = MarianTokenizer.from_pretrained(directory)
        vocabulary = load_vocabulary(directory)
        b = GraphBuilder("tok")
        ids, mask = add_tokenizer(
            b, "text", vocabulary, self.hf.eos_token_id, self.hf.pad_token_id, max_length=vocabulary.max_length
        )
        b.output(ids, "input_ids", INT32, ["batch", "length"])
        b.output(mask, "attention_mask", INT32, ["batch", "length"])
        text = helper.make_tensor_value_info("text", STRING, ["batch"])
        self.encoder = open_session(builder_model(b, [text], domains=DOMAINS), extensions=True)
        d = GraphBuilder("detok")
        d.output(add_detokenizer(d, "sequences", vocabulary), "translation", STRING, ["batch", "beams"])
        sequences = helper.make_tensor_value_info("sequences", INT32, ["batch", "beams", "n"])
        self.decoder = open_session(builder_model(d, [sequences], domains=DOMAINS), extensions=True)

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids, mask = self.encoder.run(None, {"text": np.array(texts, dtype=object)})
        return ids, mask


@pytest.fixture(scope="module", params=["shared", "separate"])
def tokenizers(request: pytest.FixtureRequest, demo_dir: Path) -> Tokenizers:
    directory = demo_dir if request.param == "shared" else request.getfixturevalue("separate_vocab_dir")
    return Tokenizers(directory)


def test_corpus_is_large_enough() -> None:
    assert len(STRINGS) >= 2000


def test_each_string_alone(tokenizers: Tokenizers) -> None:
    mismatches = []
    for text in STRINGS:
        expected = tokenizers.hf([text], truncation=True)["input_ids"][0]
        ids, mask = tokenizers.encode([text])
        if ids[0].tolist() != expected or mask[0].tolist() != [1] * len(expected):
            mismatches.append((text, expected, ids[0].tolist()))
    assert not mismatches, f"{len(mismatches)}/{len(STRINGS)} differ, e.g. {mismatches[:3]}"


def test_batches(tokenizers: Tokenizers) -> None:
    for start in range(0, len(STRINGS), 64):
        chunk = STRINGS[start : start + 64]
        expected = tokenizers.hf(chunk, padding=True, truncation=True, return_tensors="np")
        ids, mask = tokenizers.encode(chunk)
        np.testing.assert_array_equal(ids, expected["input_ids"], err_msg=f"batch at {start}")
        np.testing.assert_array_equal(mask, expected["attention_mask"], err_msg=f"mask at {start}")


ALPHABET = st.sampled_from(
    [*list("abcXYZ019 .,!?'\t\n"), "猫", "世", "😀", "é", "\u3000", ">>", "<<", "cmn_Hans", "</s>", "<pad>", "<unk>"]
)


@functools.cache
def _shared_tokenizers() -> Tokenizers:
    """Built once: hypothesis calls the test many times and cannot take pytest fixtures."""
    return Tokenizers(DEMO_DIR)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(ALPHABET, max_size=20).map("".join), min_size=1, max_size=6))
def test_random_batches(texts: list[str]) -> None:
    tokenizers = _shared_tokenizers()
    expected = tokenizers.hf(texts, padding=True, truncation=True, return_tensors="np")
    ids, mask = tokenizers.encode(texts)
    np.testing.assert_array_equal(ids, expected["input_ids"], err_msg=repr(texts))
    np.testing.assert_array_equal(mask, expected["attention_mask"])


def test_detokenizer_random_sequences(tokenizers: Tokenizers) -> None:
    rng = np.random.default_rng(5)
    vocab_size = len(tokenizers.hf.decoder)
    pad = tokenizers.hf.pad_token_id
    for batch, beams, length in ((1, 1, 1), (3, 2, 12), (8, 4, 30)):
        sequences = rng.integers(0, vocab_size, size=(batch, beams, length)).astype(np.int32)
        sequences[..., 0] = pad  # decoder start
        sequences[0, 0, length // 2 :] = pad  # right padding, as the search pads
        (texts,) = tokenizers.decoder.run(None, {"sequences": sequences})
        expected = tokenizers.hf.batch_decode(sequences.reshape(batch * beams, length), skip_special_tokens=True)
        assert texts.reshape(-1).tolist() == expected


@pytest.mark.parametrize("side", ["source", "target"])
def test_bundled_sentencepiece_models_carry_no_machine_paths(side: str) -> None:
    """SentencePiece records its corpus file and output prefix in the model; train.py writes plain names."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString((DEMO_DIR / f"{side}.spm").read_bytes())
    assert list(model.trainer_spec.input) == [f"{side}.txt"]
    assert model.trainer_spec.model_prefix == side
