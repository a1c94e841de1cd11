"""Run-time checks that stop ``session.run`` with a message a user can act on.

ONNX has no assert op. A check here is a ``Reshape`` that succeeds (a no-op on one zero) while the
condition is false and is asked for an impossible shape when it is true; every ONNX Runtime
binding reports a failing node by its name, so the node is named with the message itself. The
check's zero output is added to the guarded value, which keeps the node on the path to the
outputs: a runtime may drop nodes whose results nobody reads.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from .builder import GraphBuilder, i64


def fail_when(b: GraphBuilder, condition: str, message: str, guarded: str, *, host: bool = False) -> str:
    """``guarded`` unchanged, computed only if ``condition`` (bool [1]) is false; else an error naming ``message``.

    ``guarded`` must be an int32 tensor; the result has its shape and values. ``host``: for a
    ``guarded`` that ONNX Runtime's CUDA provider keeps on the host (a count read as a shape or a
    condition, see ``graphgen.testing.cuda_copies``): it runs ``Reshape`` on the GPU, so the zero
    is taken through the ``Shape`` of its output, which that provider returns on the host, and the
    result stays there.
    """
    shape = b.op("Where", [condition, b.const(i64(2)), b.const(i64(1))])
    zero = b.fresh("check_zero")
    b.nodes.append(helper.make_node("Reshape", [b.const(np.zeros(1, np.int32)), shape], [zero], name=message))
    if host:
        zero = b.op("Cast", [b.op("Sub", [b.op("Shape", [zero]), b.const(i64(1))])], to=TensorProto.INT32)
    return b.op("Add", [guarded, zero])
