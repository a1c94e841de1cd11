"""The ``graphgen`` command line: ``export``, ``translate``, ``triton``, ``bake``, ``verify`` and ``info``.

One module per command, each with its arguments (``add_parser``) and its handler (``run``); the
handlers import what they need when they run, so ``graphgen translate`` loads neither onnx nor torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from graphgen._errors import GraphgenError
from graphgen.cli import bake, export, info, translate, triton, verify

COMMANDS = (export, translate, triton, bake, verify, info)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphgen", description="The graphgen command line: export, translate, triton, bake, verify and info."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    # Texts may follow options (`translate m.onnx --num-beams 1 "text"`), which argparse's
    # nargs="*" positional does not pick up; collect those leftovers as texts.
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "translate" or any(item.startswith("-") for item in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.text = [*args.text, *extra]
    try:
        return args.run(args)
    except GraphgenError as error:
        print(f"graphgen: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("graphgen: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `graphgen translate ... | head`: the reader has gone, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
