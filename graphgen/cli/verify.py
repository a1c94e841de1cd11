"""``graphgen verify``: an exported file against HF ``generate`` on the same sentences."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(commands: Any) -> None:
    verify = commands.add_parser(
        "verify",
        help="compare an exported model with HF generate on the same sentences",
        description="Run HF generate + batch_decode and the exported graph on the same sentences, greedy and "
        "with the checkpoint's default beam search, and print exact-match counts and the first differences.",
    )
    verify.add_argument("checkpoint", help="the checkpoint directory or hub id the model was exported from")
    verify.add_argument("model", help="the exported .onnx file")
    verify.add_argument("--sentences", help="file with one sentence per line (a TSV's first column is used)")
    verify.add_argument("--batch-size", type=int, default=8, help="sentences per batch (default 8)")
    verify.add_argument("--limit", type=int, help="use only the first N sentences")
    verify.add_argument("--source-language", help="NLLB, M2M100, mBART-50: the source code (default: the file's)")
    verify.add_argument("--target-language", help="NLLB, M2M100, mBART-50: the target code (default: the file's)")
    verify.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from graphgen.verify.against_hf import verify

    ok = verify(
        args.checkpoint,
        args.model,
        sentences_file=args.sentences,
        batch_size=args.batch_size,
        limit=args.limit,
        source_language=args.source_language,
        target_language=args.target_language,
        out=sys.stdout,
    )
    return 0 if ok else 1
