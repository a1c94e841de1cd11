"""Each custom_ops building block on its own, against a plain-Python statement of what it does."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from graphgen.custom_ops import (
    GraphBuilder,
    collapse_marked_runs,
    join_and_strip,
    lookup_tokens,
    merge_rows,
    padded_to_ragged,
    ragged_to_padded,
    remap,
    split_language_token,
    split_on_literals,
    strip_tables,
)
from graphgen.custom_ops.added_tokens import AddedToken, find_added_tokens
from graphgen.custom_ops.builder import BOOL, EXTENSIONS_DOMAIN, INT32, INT64, ML_DOMAIN, ML_OPSET, STRING
from graphgen.custom_ops.flat import from_splits
from graphgen.custom_ops.text import JOIN_LEVELS, join_strings
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from graphgen.testing import builder_model, open_session


def run(b: GraphBuilder, inputs: dict[str, tuple[int, np.ndarray]], outputs: list[str]) -> list[np.ndarray]:
    """Build a model from ``b`` with the given typed inputs and run it."""
    infos = [helper.make_tensor_value_info(name, kind, None) for name, (kind, _) in inputs.items()]
    for name in outputs:
        b.op("Identity", [name], outputs=[f"out_{name}"])
    outs = [helper.make_empty_tensor_value_info(f"out_{name}") for name in outputs]
    session = open_session(builder_model(b, infos, outs, domains=[(EXTENSIONS_DOMAIN, 1)]), extensions=True)
    return session.run(None, {name: value for name, (_, value) in inputs.items()})


def strings(*values: str) -> tuple[int, np.ndarray]:
    return STRING, np.array(values, dtype=object)


def test_split_language_token() -> None:
    texts = [">>cmn_Hans<< Hi", "Hi", ">>a<<", ">>x", "<<x>>", " >>a<< b", ">>a<<<<b<<", ">>\n<<x", ""]
    b = GraphBuilder("t")
    code, rest, found = split_language_token(b, "text")
    got_code, got_rest, got_found = run(b, {"text": strings(*texts)}, [code, rest, found])
    for text, c, r, f in zip(texts, got_code, got_rest, got_found, strict=True):
        end = text.find("<<")
        has = text.startswith(">>") and end != -1
        expected = (text[: end + 2], text[end + 2 :], True) if has else ("", text, False)
        assert (c, r, f) == expected, text


def test_split_language_token_with_whole_tokens() -> None:
    texts = ["</s>", ">>a<< x", "</s> ", "<pad>", "x</s>", ""]
    b = GraphBuilder("t")
    code, rest, found = split_language_token(b, "text", whole=("</s>", "<pad>"))
    got_code, got_rest, got_found = run(b, {"text": strings(*texts)}, [code, rest, found])
    assert got_code.tolist() == ["</s>", ">>a<<", "", "<pad>", "", ""]
    assert got_rest.tolist() == ["", " x", "</s> ", "", "x</s>", ""]
    assert got_found.tolist() == [True, True, False, True, False, False]


def test_split_on_literals() -> None:
    b = GraphBuilder("t")
    pieces, splits = split_on_literals(b, "text", ("</s>", "<unk>"))
    got, got_splits = run(b, {"text": strings("a </s> b", "", "</s></s>", "x<unk>", "none")}, [pieces, splits])
    assert got.tolist() == ["a ", "</s>", " b", "</s>", "</s>", "x", "<unk>", "none"]
    assert got_splits.tolist() == [0, 3, 3, 5, 7, 8]


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.text(alphabet="ab <>/suk", max_size=14), max_size=5))
def test_split_on_literals_matches_a_python_split(texts: list[str]) -> None:
    """Against re.split with the literals as alternatives (leftmost match), empty pieces dropped."""
    literals = ("</s>", "<unk>", "<pad>")
    b = GraphBuilder("t")
    pieces, splits = split_on_literals(b, "text", literals)
    got, got_splits = run(b, {"text": strings(*texts)}, [pieces, splits])
    pattern = "(" + "|".join(re.escape(x) for x in literals) + ")"
    expected = [[p for p in re.split(pattern, text) if p] for text in texts]
    assert got.tolist() == [p for row in expected for p in row]
    assert got_splits.tolist() == np.cumsum([0] + [len(row) for row in expected]).tolist()


def test_split_on_literals_refuses_overlapping_literals() -> None:
    with pytest.raises(ValueError, match="overlap"):
        split_on_literals(GraphBuilder("t"), "text", ("<a>", ">b"))
    with pytest.raises(ValueError, match="overlap"):
        split_on_literals(GraphBuilder("t"), "text", ("ab", "xaby"))


def test_padded_to_ragged_and_merge_rows() -> None:
    b = GraphBuilder("t")
    values, splits = padded_to_ragged(b, "ids", "mask")
    merged = merge_rows(b, splits, "outer")
    ids = np.array([[1, 2, 0], [3, 0, 0], [0, 0, 0], [4, 5, 6]], dtype=np.int32)
    mask = (np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]])).astype(np.int32)
    got, got_splits, got_merged = run(
        b, {"ids": (INT32, ids), "mask": (INT32, mask), "outer": (INT64, np.array([0, 2, 4]))}, [values, splits, merged]
    )
    assert got.tolist() == [1, 2, 3, 4, 5, 6]
    assert got_splits.tolist() == [0, 2, 3, 3, 6]
    assert got_merged.tolist() == [0, 3, 6]  # rows 0-1 and rows 2-3 joined


def test_lookup_tokens() -> None:
    b = GraphBuilder("t")
    ids = lookup_tokens(b, "text", {">>a<<": 5, ">>b<<": 7}, unknown_id=1)
    (got_ids,) = run(b, {"text": strings(">>b<<", ">>a<<", ">>c<<", "")}, [ids])
    assert got_ids.tolist() == [7, 5, 1, 1]


def test_remap() -> None:
    b = GraphBuilder("t")
    out = remap(b, "ids", np.array([10, 11, 12], dtype=np.int32), "table")
    (got,) = run(b, {"ids": (INT32, np.array([2, 0, 2, 1], dtype=np.int32))}, [out])
    assert got.tolist() == [12, 10, 12, 11]


def _ragged(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    values = np.array([v for row in rows for v in row], dtype=np.int32)
    splits = np.cumsum([0] + [len(row) for row in rows]).astype(np.int64)
    return values, splits


ROWS = st.lists(st.lists(st.integers(2, 40), max_size=9), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(rows=ROWS, data=st.data())
def test_ragged_to_padded(rows: list[list[int]], data: st.DataObject) -> None:
    prefixes = data.draw(st.lists(st.integers(41, 50), min_size=len(rows), max_size=len(rows)))
    present = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    limit = data.draw(st.integers(2, 12))
    b = GraphBuilder("t")
    ids, mask = ragged_to_padded(
        b, "values", "splits", prefix="prefix", has_prefix="present", suffix_id=0, pad_id=99, max_length=limit
    )
    values, splits = _ragged(rows)
    got_ids, got_mask = run(
        b,
        {
            "values": (INT32, values),
            "splits": (INT64, splits),
            "prefix": (INT64, np.array(prefixes, dtype=np.int64)),
            "present": (BOOL, np.array(present)),
        },
        [ids, mask],
    )
    expected = [([p] if has else []) + row for row, p, has in zip(rows, prefixes, present, strict=True)]
    expected = [[*row[: limit - 1], 0] for row in expected]
    width = max(len(row) for row in expected)
    assert got_ids.tolist() == [row + [99] * (width - len(row)) for row in expected]
    assert got_mask.tolist() == [[1] * len(row) + [0] * (width - len(row)) for row in expected]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.integers(0, 5), max_size=10), min_size=1, max_size=5))
def test_collapse_marked_runs(rows: list[list[int]]) -> None:
    """Values ≥ 3 are marked; runs of ≥ 2 marked neighbours in a row become one 77."""
    values, splits = _ragged(rows)
    b = GraphBuilder("t")
    marked = b.op("GreaterOrEqual", ["values", b.const(np.int32(3))])
    out, out_splits = collapse_marked_runs(b, "values", "splits", marked, 77)
    got, got_splits = run(b, {"values": (INT32, values), "splits": (INT64, splits)}, [out, out_splits])
    expected_rows = []
    for row in rows:
        result: list[int] = []
        index = 0
        while index < len(row):
            end = index
            while end < len(row) and row[end] >= 3:
                end += 1
            if end - index >= 2:
                result.append(77)
                index = end
            else:
                result.append(row[index])
                index += 1
        expected_rows.append(result)
    flat, expected_splits = _ragged(expected_rows)
    assert got.tolist() == flat.tolist()
    assert got_splits.tolist() == expected_splits.tolist()


PIECES = ["", " I", " have", " 3", "猫", " \u3000 x\u00a0", " ", "y ", "\x1c", "a\u2028b", "\u00e9"]


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(st.lists(st.lists(st.integers(0, len(PIECES) - 1), max_size=7), min_size=2, max_size=2), max_size=3)
)
def test_join_and_strip(rows: list[list[list[int]]]) -> None:
    """Each [B, R, L] row of ids → "".join(pieces).strip(), with Python's notion of whitespace."""
    width = max((len(hyp) for row in rows for hyp in row), default=0)
    ids = np.array([[hyp + [0] * (width - len(hyp)) for hyp in row] for row in rows], dtype=np.int32)
    ids = ids.reshape(len(rows), 2, width)
    b = GraphBuilder("t")
    text = join_and_strip(b, "ids", strip_tables(PIECES), "table")
    (got,) = run(b, {"ids": (INT32, ids)}, [text])
    assert got.shape == (len(rows), 2)
    assert got.tolist() == [["".join(PIECES[i] for i in hyp).strip() for hyp in row] for row in ids.tolist()]


@pytest.mark.parametrize("width", [0, 1, 2, 3, 5, 8, 33, 1000])
def test_join_strings_keeps_the_order_at_every_width(width: int) -> None:
    """The pairwise tree of ``StringConcat`` (no ``Loop``: see test_cuda_placement) for odd and even
    widths at every level, and no pieces at all."""
    rng = np.random.default_rng(width)
    texts = np.array([f"<{i}>" for i in range(50)], dtype=object)
    index = rng.integers(0, 50, size=(2, 3, width)).astype(np.int64)
    b = GraphBuilder("t")
    (got,) = run(b, {"index": (INT64, index)}, [join_strings(b, "index", texts, "table")])
    assert got.tolist() == [["".join(texts[i] for i in row) for row in item] for item in index.tolist()]


def test_join_strings_names_the_limit() -> None:
    b = GraphBuilder("t")
    text = join_strings(b, "index", np.array(["a", "b"], dtype=object), "table")
    with pytest.raises(Exception, match=f"more than {2**JOIN_LEVELS} tokens"):
        run(b, {"index": (INT64, np.zeros((1, 1, 2**JOIN_LEVELS + 1), np.int64))}, [text])


def test_builder_output_renames_at_the_source() -> None:
    """A computed value becomes an output by renaming its producer (an Identity would copy it per call);
    later readers follow the rename. A graph input still needs an Identity."""
    b = GraphBuilder("t")
    doubled = b.op("Add", ["x", "x"])
    tripled = b.op("Add", [doubled, "x"])
    b.output(doubled, "doubled", INT64, [None])
    b.output("x", "same", INT64, [None])
    b.output(tripled, "tripled", INT64, [None])
    assert [n.op_type for n in b.nodes] == ["Add", "Add", "Identity"]
    assert list(b.nodes[1].input) == ["doubled", "x"]
    session = open_session(builder_model(b, [helper.make_tensor_value_info("x", INT64, [None])]))
    got = session.run(None, {"x": np.array([1, 2], np.int64)})
    assert [g.tolist() for g in got] == [[2, 4], [1, 2], [3, 6]]


def _added_reference(text: str, tokens: list[AddedToken]) -> tuple[list[int], list[int], list[int]]:
    """Leftmost-longest occurrences, then each token's whitespace strips: (begins, ids, covered)."""
    begins, ids, covered = [0] * len(text), [-1] * len(text), [0] * len(text)
    at = 0
    while at < len(text):
        matches = [t for t in tokens if text.startswith(t.content, at)]
        if not matches:
            at += 1
            continue
        token = max(matches, key=lambda t: len(t.content))
        begin, end = at, at + len(token.content)
        while token.lstrip and begin > 0 and text[begin - 1].isspace():
            begin -= 1
        while token.rstrip and end < len(text) and text[end].isspace():
            end += 1
        begins[begin], ids[begin] = 1, token.id
        covered[begin:end] = [1] * (end - begin)
        at += len(token.content)
    return begins, ids, covered


def test_find_added_tokens_is_leftmost_longest() -> None:
    """Overlapping tokens (one inside another, one running into the next), strips either side, and
    segments the occurrences may not cross, against a left-to-right scan in Python."""
    tokens = [
        AddedToken("ab", 1),
        AddedToken("bcd", 2),
        AddedToken("abc", 3),
        AddedToken("<m>", 4, lstrip=True),
        AddedToken("cx", 5, rstrip=True),
        AddedToken("d", 6),
    ]
    b = GraphBuilder("added")
    segments = from_splits(b, "splits", b.op("Shape", ["codes"]))
    found = find_added_tokens(b, "codes", segments, tokens, "added")
    b.output(b.op("Cast", [found.begins], to=INT64), "begins", INT64, [None])
    b.output(found.ids, "ids", INT64, [None])
    b.output(b.op("Cast", [found.covered], to=INT64), "covered", INT64, [None])
    inputs = [helper.make_tensor_value_info(name, INT64, [None]) for name in ("codes", "splits")]
    session = open_session(builder_model(b, inputs, domains=[(ML_DOMAIN, ML_OPSET)]))
    rng = random.Random(0)
    alphabet = ["a", "b", "c", "d", "x", " ", "  ", "<m>", "cx", "abcd"]
    for _ in range(300):
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(rng.randint(1, 4))]
        codes = np.array([ord(c) for text in texts for c in text], dtype=np.int64)
        splits = np.cumsum([0] + [len(text) for text in texts]).astype(np.int64)
        got = [values.tolist() for values in session.run(None, {"codes": codes, "splits": splits})]
        expected: list[list[int]] = [[], [], []]
        for text in texts:
            for column, values in zip(expected, _added_reference(text, tokens), strict=True):
                column += values
        assert got == expected, texts
