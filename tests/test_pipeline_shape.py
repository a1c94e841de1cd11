"""``PipelineShape``: the one reader of a converted ``tokenizers`` pipeline's steps. Each language
tokenizer's real pipeline reads as its shape; shapes no graph builds are refused, naming the steps;
the shapes only the portable tokenizer builds (Metaspace with no collapse of runs of spaces) are
refused by the extensions graph when it is built, and tokenize as ``tokenizers`` itself does."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from graphgen.custom_ops import GraphBuilder
from graphgen.custom_ops.builder import INT32, ML_DOMAIN, ML_OPSET
from onnx import TensorProto, helper

from graphgen._errors import UnsupportedModelError
from graphgen.runtime.translator import utf8_batch
from graphgen.testing import builder_model, generated_strings, language_tokenizer, open_session, tokenizer_strings
from graphgen.text.languages import add_language_tokenizer, load_language_vocabulary
from graphgen.text.portable import PipelineShape, add_portable_tokenizer, spec_for_tokenizers

# tokenizer class → (word_split, strip_right, collapse), as transformers 5 converts it
SHAPES = {
    "NllbTokenizer": (False, False, True),
    "MBart50Tokenizer": (False, True, True),
    "T5Tokenizer": (True, False, False),
    "MBartTokenizer": (True, True, True),
}


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    found = {}
    for name in SHAPES:
        directory = tmp_path_factory.mktemp(name)
        tokenizer = language_tokenizer(directory, name)
        found[name] = (directory, json.loads(tokenizer.backend_tokenizer.to_str()))
    return found


@pytest.mark.parametrize("name", SHAPES)
def test_each_tokenizer_reads_as_its_shape(name: str, pipelines: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    shape = PipelineShape.of(pipelines[name][1], name)
    assert (shape.word_split, shape.strip_right, shape.collapse) == SHAPES[name]
    assert shape.charsmap  # the Precompiled step's table (nmt_nfkc)


def _steps(pipeline: dict[str, Any]) -> list[dict[str, Any]]:
    return pipeline["normalizer"]["normalizers"]  # type: ignore[no-any-return]


def _strip_left(p: dict[str, Any]) -> None:
    next(s for s in _steps(p) if s["type"] == "Strip")["strip_left"] = True


def _replace_into_tab(p: dict[str, Any]) -> None:
    next(s for s in _steps(p) if s["type"] == "Replace")["content"] = "\t"


def _lowercase(p: dict[str, Any]) -> None:
    _steps(p).append({"type": "Lowercase"})


def _replace_first(p: dict[str, Any]) -> None:
    _steps(p).reverse()  # Replace, Strip, Precompiled


def _prepend_first(p: dict[str, Any]) -> None:
    p["pre_tokenizer"]["prepend_scheme"] = "first"


REFUSED = {
    "strip-left": _strip_left,
    "replace-into-tab": _replace_into_tab,
    "lowercase": _lowercase,
    "replace-first": _replace_first,
    "prepend-first": _prepend_first,
}


@pytest.mark.parametrize("change", REFUSED)
def test_other_shapes_are_refused_naming_their_steps(
    change: str, pipelines: dict[str, tuple[Path, dict[str, Any]]]
) -> None:
    pipeline = copy.deepcopy(pipelines["MBart50Tokenizer"][1])
    REFUSED[change](pipeline)
    kinds = [s["type"] for s in _steps(pipeline)]
    with pytest.raises(UnsupportedModelError, match=r"the tokenizer runs normalizer=\[") as error:
        PipelineShape.of(pipeline, "the tokenizer")
    assert str(kinds) in str(error.value)


def _assert_portable_equals_tokenizers(pipeline: dict[str, Any], strings: list[str]) -> None:
    """The portable graph built from ``pipeline`` gives ``tokenizers``' own ids for every string
    (added tokens and the post-processor's specials aside; the graph's ``</s>`` last)."""
    from tokenizers import Tokenizer

    pipeline = {**pipeline, "added_tokens": [], "post_processor": None}
    reference = Tokenizer.from_str(json.dumps(pipeline))
    spec = spec_for_tokenizers(pipeline, (), (), eos_id=2, pad_id=1, name="the tokenizer")
    b = GraphBuilder("tok")
    ids, mask, _ = add_portable_tokenizer(b, "text_utf8", spec, max_length=1 << 30)
    b.output(ids, "input_ids", INT32, ["batch", "length"])
    b.output(mask, "attention_mask", INT32, ["batch", "length"])
    text = helper.make_tensor_value_info("text_utf8", TensorProto.UINT8, ["batch", "bytes"])
    session = open_session(builder_model(b, [text], domains=[(ML_DOMAIN, ML_OPSET)]))
    got, got_mask = session.run(None, {"text_utf8": utf8_batch(strings)})
    for row, string in enumerate(strings):
        expected = [*reference.encode(string, add_special_tokens=False).ids, 2]
        assert got[row][got_mask[row] == 1].tolist() == expected, repr(string)


def _without(pipeline: dict[str, Any], kind: str) -> dict[str, Any]:
    changed = copy.deepcopy(pipeline)
    changed["normalizer"]["normalizers"] = [s for s in _steps(changed) if s["type"] != kind]
    return changed


@pytest.mark.parametrize("kept", ["Precompiled", "Strip"])
def test_metaspace_without_collapse_is_portable_only(
    kept: str, pipelines: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    """No converter writes Metaspace without ``Replace(' {2,}')``, but a hand-made ``tokenizer.json``
    can: the portable tokenizer builds it (equal to ``tokenizers`` on 3,000 strings), the extensions
    graph refuses when it is built, pointing at the portable one."""
    directory, pipeline = pipelines["MBart50Tokenizer"]
    changed = _without(pipeline, "Replace")
    if kept == "Precompiled":
        changed = _without(changed, "Strip")
    shape = PipelineShape.of(changed, "the tokenizer")
    assert (shape.word_split, shape.strip_right, shape.collapse) == (False, kept == "Strip", False)

    strings = [s for s in tokenizer_strings() if len(s) < 2_000][:1_500] + generated_strings(1_500, seed=5)
    strings += ["a  b", "a \t b ", "  a", "x   ", " \u3000 y\n"]
    _assert_portable_equals_tokenizers(changed, strings)

    # the extensions graph, from a checkpoint whose tokenizer.json has that pipeline
    vocabulary = load_language_vocabulary(directory)
    assert vocabulary.pipeline is not None
    with pytest.raises(UnsupportedModelError, match=r"extensions tokenizer graph builds .*--tokenizer onnx"):
        changed_vocabulary = dataclasses.replace(vocabulary, pipeline=json.dumps(changed))
        add_language_tokenizer(GraphBuilder("ext"), "text", None, changed_vocabulary, max_length=1 << 30)
    # the converted pipeline itself builds (T5's split and MBartTokenizer's are built by their own tests)
    add_language_tokenizer(GraphBuilder("ext"), "text", None, vocabulary, max_length=1 << 30)


def test_runs_of_spaces_into_metaspace_before_a_split(pipelines: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    """MBartTokenizer's ``Replace(' {2,}', '▁')`` before ``WhitespaceSplit``: with the nmt_nfkc
    table its checkpoints use, a typed ``▁`` becomes a space and the step changes nothing; with
    SentencePiece's plain ``nfkc`` table a typed ``▁`` stays, and a run of spaces before it turns
    into a piece of its own (``"a  ▁b"``: ``▁a ▁ ▁b`` with the step, ``▁a ▁b`` without). The portable
    tokenizer equals ``tokenizers`` both with and without the step, on strings that tell them apart."""
    import random

    from tokenizers import Tokenizer

    from graphgen.testing.checkpoints import _train_sentencepiece
    from graphgen.text.sentencepiece import parse_model

    model = _train_sentencepiece("unigram", 300, normalization_rule_name="nfkc")
    charsmap = parse_model(model).normalizer_spec.precompiled_charsmap
    with_step = copy.deepcopy(pipelines["MBartTokenizer"][1])
    _steps(with_step)[0]["precompiled_charsmap"] = base64.b64encode(charsmap).decode()
    without_step = _without(with_step, "Replace")
    assert PipelineShape.of(with_step, "mBART").collapse and not PipelineShape.of(without_step, "mBART").collapse

    rng = random.Random(5)
    alphabet = [" ", " ", "\t", "\u2581", "a", "b", "\u3000", "\n"]
    strings = ["a  \u2581b", "\u2581  \u2581", "  \u2581"]
    strings += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(3_000)]
    _assert_portable_equals_tokenizers(with_step, strings)
    _assert_portable_equals_tokenizers(without_step, strings)
    # and the step is seen: the two pipelines differ on some of these strings
    tokenizers = [Tokenizer.from_str(json.dumps({**p, "added_tokens": []})) for p in (with_step, without_step)]
    differ = [s for s in strings if len({tuple(t.encode(s).ids) for t in tokenizers}) == 2]
    assert len(differ) > 100, len(differ)
