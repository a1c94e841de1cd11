"""Reusable ONNX graph building blocks: the glue around the model that turns text into ids and back.

Each function appends nodes to a :class:`GraphBuilder` and returns value names, so blocks compose
into a graph and can be tested one by one (see ``tests/test_custom_ops.py``).
"""

from .builder import EXTENSIONS_DOMAIN, GraphBuilder
from .checks import fail_when
from .ids import (
    append_where,
    collapse_marked_runs,
    drop_marked,
    follows_marked,
    merge_rows,
    padded_to_ragged,
    ragged_to_padded,
    remap,
)
from .text import (
    join_and_strip,
    join_metaspace,
    join_strings,
    lookup_tokens,
    metaspace_index,
    metaspace_tables,
    split_language_token,
    split_on_literals,
    split_whole_tokens,
    strip_index,
    strip_tables,
)

__all__ = [
    "EXTENSIONS_DOMAIN",
    "GraphBuilder",
    "append_where",
    "collapse_marked_runs",
    "drop_marked",
    "fail_when",
    "follows_marked",
    "join_and_strip",
    "join_metaspace",
    "join_strings",
    "lookup_tokens",
    "merge_rows",
    "metaspace_index",
    "metaspace_tables",
    "padded_to_ragged",
    "ragged_to_padded",
    "remap",
    "split_language_token",
    "split_on_literals",
    "split_whole_tokens",
    "strip_index",
    "strip_tables",
]
