"""Mobile packaging: the exported file as ONNX Runtime's ``.ort`` format plus its operator list.

Mobile apps load ``.ort`` files (smaller to parse, no protobuf needed at run time), and a
reduced-operator ONNX Runtime build takes the ``required_operators.config`` written beside it
(``build.sh --include_ops_by_config FILE``). ONNX Runtime's own converter does the work; this
stage only runs it with the extensions library registered and moves its output into place
atomically, so that a failed conversion leaves nothing behind.

The ops the file may use are pinned too: the prebuilt onnxruntime-extensions packages for
Android and iOS (``tools/android/package_ops.config`` and ``tools/ios/package_ops.config`` in the
extensions repository) carry only their tokenizer and image ops.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import GraphProto, ModelProto

from graphgen._errors import GraphgenError
from graphgen._graphs import all_nodes
from graphgen.contract import read_file_info
from graphgen.deploy import ORT_PLATFORMS
from graphgen.deploy.save import staging_directory
from graphgen.deploy.shared_data import merge_shared_data

# The extension ops the prebuilt Android/iOS extensions packages register (the SentencePiece
# group brings the decoder with the tokenizer).
MOBILE_EXTENSION_OPS = frozenset(
    {
        "BertTokenizer",
        "BpeDecoder",
        "CLIPTokenizer",
        "DecodeImage",
        "DrawBoundingBoxes",
        "EncodeImage",
        "SentencepieceTokenizer",
        "SentencepieceDecoder",
    }
)


def ops_used(graph: GraphProto) -> Iterator[tuple[str, str]]:
    """``(domain, op_type)`` of every node, subgraphs included (``""`` is the ONNX domain)."""
    for node in all_nodes(graph):
        yield node.domain or "", node.op_type


def ops_outside_mobile_packages(model: ModelProto) -> set[tuple[str, str]]:
    """Ops that the stock mobile packages (full ORT, selected-ops extensions) do not provide."""
    allowed_domains = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft"}
    return {
        (domain, op)
        for domain, op in ops_used(model.graph)
        if domain not in allowed_domains and not (domain == "ai.onnx.contrib" and op in MOBILE_EXTENSION_OPS)
    }


def write_ort(onnx_path: Path, platform: str = "arm", extensions_library: str | None = None) -> list[Path]:
    """Convert ``onnx_path`` to ``<stem>.ort`` and ``<stem>.required_operators.config`` beside it.

    ``platform`` is the processor the optimizations in the file are fixed for: ``arm`` for
    phones, ``amd64`` for x86-64. Returns the two files. Files that use the extensions' ops are
    converted with that library registered (``extensions_library``, found when not given).
    """
    if platform not in ORT_PLATFORMS:
        raise GraphgenError(f"unknown .ort platform {platform!r}; choose one of {', '.join(ORT_PLATFORMS)}")
    custom_ops: list[str] = []
    if read_file_info(onnx_path).needs_extensions:
        if extensions_library is None:
            from graphgen.runtime.translator import extensions_library as find

            extensions_library = find()
        custom_ops = ["--custom_op_library", extensions_library]
    folder = onnx_path.parent
    targets = [folder / f"{onnx_path.stem}.ort", folder / f"{onnx_path.stem}.required_operators.config"]
    with staging_directory(folder, f"{onnx_path.stem}.ort") as staging:
        staged_model = Path(staging) / onnx_path.name
        for name in (onnx_path.name, f"{onnx_path.name}.data"):  # same directory: hard links, no copies
            if (folder / name).is_file():
                os.link(folder / name, Path(staging) / name)
        model = onnx.load(str(onnx_path), load_external_data=False)
        if merge_shared_data(model):  # the .ort file would store a twin's bytes twice
            staged_model.unlink()
            staged_model.write_bytes(model.SerializeToString())
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "onnxruntime.tools.convert_onnx_models_to_ort",
                "--optimization_style",
                "Fixed",
                "--target_platform",
                platform,
                *custom_ops,
                "--",
                str(staged_model),
            ],
            capture_output=True,
            text=True,
        )
        produced = [Path(staging) / target.name for target in targets]
        if done.returncode != 0 or not all(p.is_file() for p in produced):
            raise GraphgenError(f"converting {onnx_path} to .ort failed:\n{(done.stdout + done.stderr)[-3000:]}")
        for source, target in zip(produced, targets, strict=True):
            os.replace(source, target)
    return targets


__all__ = ["MOBILE_EXTENSION_OPS", "ORT_PLATFORMS", "ops_outside_mobile_packages", "ops_used", "write_ort"]
