"""``graphgen triton``: a Triton Inference Server model repository entry for an exported file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graphgen.cli._options import generation_options, overrides, printer

# Where the extensions library is inside the server, unless told otherwise.
TRITON_EXTENSIONS_LIBRARY = "/opt/tritonserver/ortextensions/libortextensions.so"


def add_parser(commands: Any) -> None:
    triton = commands.add_parser(
        "triton",
        help="write a Triton Inference Server model repository entry for an exported file",
        description="Write REPO/NAME/config.pbtxt and REPO/NAME/1/model.onnx for Triton's onnxruntime backend, "
        "with dynamic batching. Triton does not accept optional inputs on a batching model, so the "
        "generation settings (the file's defaults, or the options below) are baked into the copy.",
    )
    triton.add_argument("model", help="an .onnx file written by graphgen export")
    triton.add_argument("-o", "--output", required=True, help="the model repository directory (must exist)")
    triton.add_argument("--name", help="model name in the repository (default: the file name without .onnx)")
    triton.add_argument("--max-batch-size", type=int, default=16, help="Triton's max_batch_size (default 16)")
    triton.add_argument(
        "--max-queue-delay-us", type=int, default=5000, help="dynamic batching queue delay in µs (default 5000)"
    )
    triton.add_argument("--instances", type=int, default=1, help="model instances on the CPU (default 1)")
    triton.add_argument(
        "--extensions-library",
        default=TRITON_EXTENSIONS_LIBRARY,
        help="path of the onnxruntime-extensions library inside the server, for text-level files "
        f"(default {TRITON_EXTENSIONS_LIBRARY}; see docs/corpus.md for where to get one)",
    )
    triton.add_argument("--truncate", action="store_true", help="bake truncate=true (cut sources at the limit)")
    triton.add_argument("--overwrite", action="store_true", help="replace REPO/NAME if it exists")
    triton.add_argument("-q", "--quiet", action="store_true", help="print no progress messages")
    generation_options(triton)
    triton.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from graphgen.deploy.triton import TritonOptions, write_repository

    source = Path(args.model)
    options = TritonOptions(
        name=args.name or source.stem,
        max_batch_size=args.max_batch_size,
        max_queue_delay_microseconds=args.max_queue_delay_us,
        instances=args.instances,
        extensions_library=args.extensions_library,
    )

    progress = printer(args.quiet)
    files = write_repository(
        source,
        Path(args.output),
        options,
        settings=overrides(args),
        truncate=True if args.truncate else None,
        overwrite=args.overwrite,
        progress=progress,
    )
    progress(f"wrote {', '.join(str(f) for f in files)}")
    return 0
