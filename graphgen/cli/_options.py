"""What several commands share: the generation options and the progress printer."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from graphgen.contract import GENERATION_PARAMETERS


def generation_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("generation (defaults: the checkpoint's generation_config.json)")
    group.add_argument("--num-beams", type=int, help="beam width; 1 is greedy search")
    group.add_argument("--num-return-sequences", type=int, help="hypotheses per input (at most --num-beams)")
    group.add_argument("--max-length", type=int, help="longest output in tokens, decoder start token included")
    group.add_argument("--min-length", type=int, help="shortest output in tokens, decoder start token included")
    group.add_argument("--length-penalty", type=float, help="exponent of the length normalisation of beam scores")
    group.add_argument("--repetition-penalty", type=float, help="penalty on tokens already generated (1.0 is off)")


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The generation options given on the command line, by parameter name."""
    names = [parameter.name for parameter in GENERATION_PARAMETERS]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def printer(quiet: bool) -> Callable[[str], None]:
    """Progress messages on stderr, unless ``quiet``."""

    def progress(message: str) -> None:
        if not quiet:
            print(f"[graphgen] {message}", file=sys.stderr, flush=True)

    return progress
