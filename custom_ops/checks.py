"""Run-time checks that stop ``session.run`` with a message a user can act on.

ONNX has no assert op. A check here is a ``Reshape`` that succeeds (a no-op on one zero) while the
condition is false and is asked for an impossible shape when it is true; every ONNX Runtime
binding reports a failing node by its name, so the node is named with the message itself. The
check's zero output is added to the guarded value, which keeps the node on the path to the
outputs: a runtime may drop nodes whose results nobody reads.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from .builder import GraphBuilder, i64


def fail_when(b: GraphBuilder, condition: str, message: str, guarded: str) -> str:
    """``guarded`` unchanged, computed only if ``condition`` (bool [1]) is false; else an error naming ``message``.

    ``guarded`` must be an int32 tensor; the result has its shape and values.
    """
    shape = b.op("Where", [condition, b.const(i64(2)), b.const(i64(1))])
    zero = b.fresh("check_zero")
    b.nodes.append(helper.make_node("Reshape", [b.const(np.zeros(1, np.int32)), shape], [zero], name=message))
    return b.op("Add", [guarded, zero])
