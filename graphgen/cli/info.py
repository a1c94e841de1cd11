"""``graphgen info``: what an exported file is, and which hosts run it how (no session, no weights read)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphgen._errors import GraphgenError

if TYPE_CHECKING:
    from graphgen.contract import FileInfo


def add_parser(commands: Any) -> None:
    info = commands.add_parser(
        "info",
        help="show what an exported file is and which platforms run it how",
        description="Print MODEL's metadata (what it was exported from and how, its defaults, languages and "
        "baked settings), the inputs a caller must feed, and a verdict per host (Python, the C API, Java, "
        "JavaScript, WebGPU, CUDA, mobile) from the rules docs/platforms.md measures. Reads the file's "
        "metadata and input names only: fast for files of any size.",
    )
    info.add_argument("model", help="an .onnx file written by graphgen export or graphgen bake")
    info.add_argument("--json", action="store_true", help="one JSON object: metadata, inputs, hosts")
    info.add_argument(
        "--languages",
        action="store_true",
        help="list every language code (NLLB, M2M100, mBART) and target tag (opus-mt's >>fra<<, MADLAD-400's <2de>)",
    )
    info.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from graphgen.contract import Key, read_file_info, read_file_inputs
    from graphgen.deploy.hosts import hosts

    path = Path(args.model)
    if not path.is_file():
        raise GraphgenError(f"{path} does not exist")
    try:
        info = read_file_info(path)
        inputs = read_file_inputs(path)
    except ValueError as error:
        raise GraphgenError(f"cannot read {path}: {error}") from error
    if Key.VERSION not in info.metadata:
        raise GraphgenError(f"{path} was not written by graphgen export (no graphgen metadata)")
    verdicts = hosts(info, inputs)
    if args.json:
        report = {
            "file": str(path),
            "bytes": path.stat().st_size,
            "metadata": info.metadata,
            "inputs": {"required": inputs.required, "optional": inputs.optional},
            "external_data": inputs.external_data,
            "hosts": [{"name": host.name, "runs": host.runs, "note": host.note} for host in verdicts],
        }
        json.dump(report, sys.stdout, indent=1, ensure_ascii=False)
        print()
        return 0
    meta = info.metadata
    size = path.stat().st_size
    data = [path.with_name(name) for name in inputs.external_data]
    weights = f"weights in {', '.join(d.name for d in data)}" if data else "one file"
    data_bytes = sum(d.stat().st_size for d in data if d.is_file())
    rows = [
        ("file", f"{path} ({(size + data_bytes) / 1e6:.1f} MB, {weights})"),
        ("made by", f"graphgen {meta.get(Key.VERSION)} from {meta.get(Key.SOURCE)} ({meta.get(Key.ARCHITECTURE)})"),
        ("interface", _interface(info)),
        ("search", f"{meta.get(Key.SEARCH)}, {_precision(info)}"),
        ("positions", str(info.max_positions)),
        ("defaults", ", ".join(f"{k} {v}" for k, v in sorted(info.generation_defaults.items()))),
    ]
    if info.baked:
        rows.append(("baked", ", ".join(f"{k} {v}" for k, v in sorted(info.baked.items()))))
    rows.append(("inputs", f"{', '.join(inputs.required)}; optional: {', '.join(inputs.optional) or 'none'}"))
    if info.languages:
        rows.append(("languages", _listed(info.languages, args.languages)))
        target = info.target_language or "none forced"
        rows.append(("default", f"{info.source_language} → {target}"))
    if info.target_tags:
        rows.append(("target tags", f"{_listed(info.target_tags, args.languages)}, typed first in the text"))
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("\nhosts:")
    for host in verdicts:
        print(f"  {'yes' if host.runs else 'NO '}  {host.name}: {host.note}")
    return 0


def _listed(names: list[str], every: bool) -> str:
    """``count: a, b, ...``, the first six unless ``every`` (``--languages``)."""
    shown = ", ".join(names if every or len(names) <= 6 else names[:6])
    return f"{len(names)}: {shown}" + ("" if every or len(names) <= 6 else ", ... (--languages)")


def _interface(info: FileInfo) -> str:
    from graphgen.contract import ID_LEVEL, PORTABLE, Key

    if info.interface == ID_LEVEL:
        return "token ids in and out (export --no-tokenizer)"
    tokenizer = "standard ONNX ops over UTF-8 bytes" if info.tokenizer == PORTABLE else "onnxruntime-extensions' op"
    strings = ", no string tensors (--no-strings)" if info.metadata.get(Key.STRINGS) == "none" else ""
    return f"text in and out; tokenizer: {tokenizer}{strings}"


def _precision(info: FileInfo) -> str:
    if info.precision == "int4":
        return f"int4 in blocks of {info.int4_block_size or 'an unrecorded size'}"
    if info.int8_activations == "tensor":
        return "int8, activations quantized per tensor (an input's result can depend on its batch: export again)"
    if info.int8_activations is not None:
        return f"int8, activations quantized per {info.int8_activations}"
    return str(info.precision)
