"""A trie over code points, walked in standard ONNX ops.

Every dictionary lookup of the portable tokenizer (normalization rules, vocabulary pieces, special
and language tokens, unknown-character runs) is the same walk: from a start position, one step per
code point, where a step is a ``LabelEncoder`` from ``node * 2**21 + code point`` (int64 keys) to the
child node, and a ``Gather`` of the value stored at that node. Exact by construction: no hash, no
collision to confirm. All start positions of a batch walk together; the steps are a ``Loop``, so the
table is stored once whatever the depth.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .builder import INT64, ML_DOMAIN, GraphBuilder, i64

STRIDE = 1 << 21  # above every code point
NO_CODE = STRIDE - 1  # a code point no key has: what a walk reads past its end
MISSING = -1


@dataclass
class CodepointTrie:
    """Keys (code point sequences) → values (int ≥ 0), as transition and value tables."""

    transitions: dict[int, int] = field(default_factory=dict)  # node * STRIDE + code point → child
    values: list[int] = field(default_factory=lambda: [MISSING])  # per node; node 0 is the root
    depth: int = 0  # the longest key

    @classmethod
    def build(cls, items: Iterable[tuple[Sequence[int], int]]) -> CodepointTrie:
        trie = cls()
        for key, value in items:
            trie.add(key, value)
        return trie

    def add(self, key: Sequence[int], value: int) -> None:
        if not key or value < 0:
            raise ValueError("trie keys are non-empty and values non-negative")
        node = 0
        for code in key:
            if not 0 <= code < NO_CODE:
                raise ValueError(f"not a code point: {code}")
            step = node * STRIDE + code
            child = self.transitions.get(step)
            if child is None:
                child = len(self.values)
                self.values.append(MISSING)
                self.transitions[step] = child
            node = child
        self.values[node] = value
        self.depth = max(self.depth, len(key))

    def get(self, key: Sequence[int]) -> int:
        node = 0
        for code in key:
            node = self.transitions.get(node * STRIDE + code, -1)
            if node < 0:
                return MISSING
        return self.values[node]

    def value_table(self) -> np.ndarray:
        """Per node its value, plus a last entry for the "no node" index -1 (int32 when it fits)."""
        table = np.array([*self.values, MISSING], dtype=np.int64)
        return table.astype(np.int32) if table.max(initial=0) < 2**31 else table


def _step(b: GraphBuilder, trie: CodepointTrie, node: str, code: str) -> str:
    keys = list(trie.transitions) or [-1]
    children = list(trie.transitions.values()) or [-1]
    key = b.add(b.mul(node, b.const(np.int64(STRIDE))), code)
    return b.op("LabelEncoder", [key], domain=ML_DOMAIN, keys_int64s=keys, values_int64s=children, default_int64=-1)


def walk(b: GraphBuilder, trie: CodepointTrie, codes: str, begin: str, limit: str, name: str) -> str:
    """For walks starting at ``begin`` (int64 ``[R]`` positions in ``codes``, int64 ``[T]``) that may
    read ``limit`` (int64 ``[R]``) code points: int64 ``[R, depth]``, column ``d`` the value of the key
    spelled by the walk's first ``d + 1`` code points, ``-1`` where there is none."""
    if trie.depth == 0:
        return b.op(
            "Expand", [b.const(np.int64(MISSING)), b.op("Concat", [b.op("Shape", [begin]), b.const(i64(0))], axis=0)]
        )
    values = b.derived(f"{name}_values", trie.value_table())
    padded = b.op("Concat", [codes, b.const(np.array([NO_CODE], dtype=np.int64))], axis=0)
    end = b.op("Shape", [codes])

    def body(g: GraphBuilder, d: str, state: list[str]) -> tuple[None, list[str], list[tuple[str, int]]]:
        (node,) = state
        at = g.op("Min", [g.add(begin, d), end])
        code = g.op("Where", [g.op("Less", [d, limit]), g.op("Gather", [padded, at]), g.const(np.int64(NO_CODE))])
        child = _step(g, trie, node, code)
        return None, [child], [(g.op("Cast", [g.op("Gather", [values, child])], to=INT64), INT64)]

    start = b.op("Mul", [begin, b.const(np.int64(0))])
    _, found = b.loop(b.const(np.int64(trie.depth)), [(start, INT64)], body, hint=name)
    return b.op("Transpose", [found], perm=[1, 0])


def lookup(b: GraphBuilder, trie: CodepointTrie, codes: str, begin: str, length: str, name: str) -> str:
    """The value of the key equal to ``codes[begin : begin + length]`` (int64 ``[R]`` each), ``-1``
    where there is none (a run longer than the longest key finds nothing)."""
    if trie.depth == 0:
        return b.op("Expand", [b.const(np.int64(MISSING)), b.op("Shape", [begin])])
    found = walk(b, trie, codes, begin, length, name)
    column = b.op(
        "Unsqueeze", [b.op("Max", [b.op("Sub", [length, b.const(np.int64(1))]), b.const(np.int64(0))]), b.const(i64(1))]
    )
    last = b.op(
        "Squeeze",
        [
            b.op("GatherElements", [found, b.op("Min", [column, b.const(np.int64(trie.depth - 1))])], axis=1),
            b.const(i64(1)),
        ],
    )
    fits = b.op(
        "And",
        [b.op("LessOrEqual", [length, b.const(np.int64(trie.depth))]), b.op("Greater", [length, b.const(np.int64(0))])],
    )
    return b.op("Where", [fits, last, b.const(np.int64(MISSING))])
