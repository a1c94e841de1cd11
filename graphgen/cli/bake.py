"""``graphgen bake``: a copy of an exported file with its generation settings fixed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graphgen.cli._options import generation_options, overrides


def add_parser(commands: Any) -> None:
    bake = commands.add_parser(
        "bake",
        help="write a copy of an exported file with its generation settings fixed",
        description="Write a copy of MODEL in which the optional inputs (generation settings, truncate) are "
        "constants: the file's defaults, or the values given below. For hosts that cannot set optional "
        "inputs, such as the Java binding (its OrtSession.run accepts only inputs without a default) and "
        "JavaScript (onnxruntime-node and onnxruntime-web drop such feeds). --keep and --keep-languages leave "
        "chosen ones as inputs those hosts can feed.",
    )
    bake.add_argument("model", help="an .onnx file written by graphgen export")
    bake.add_argument(
        "-o",
        "--output",
        required=True,
        help="the .onnx file to write (written atomically); a MODEL with --external-data weights gets its "
        "copy's weights written beside it, as OUTPUT.data",
    )
    bake.add_argument("--truncate", action="store_true", help="fix truncate=true (cut sources at the limit)")
    bake.add_argument(
        "--keep-languages",
        action="store_true",
        help="NLLB, M2M100, mBART-50 files: keep source_language and target_language as inputs, now required "
        "(feed both on every call), so that Java still chooses the languages per call",
    )
    bake.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="INPUTS",
        help="optional inputs to keep, now required (fed on every call), comma-separated or repeated: e.g. "
        "--keep num_beams,max_length, so that Java and JavaScript choose those settings per call",
    )
    generation_options(bake)
    bake.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from graphgen.passes.bake import write_baked

    files = write_baked(
        Path(args.model),
        Path(args.output),
        overrides(args),
        truncate=True if args.truncate else None,
        keep=[name.strip() for names in args.keep for name in names.split(",") if name.strip()],
        keep_languages=args.keep_languages,
    )
    print(f"[graphgen] wrote {', '.join(str(f) for f in files)}", file=sys.stderr)
    return 0
