"""``graphgen translate``: texts or a file through an exported model (onnxruntime and numpy only)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphgen._errors import GraphgenError
from graphgen.cli._options import generation_options, overrides
from graphgen.contract import LANGUAGE_PARAMETERS, MAX_LENGTH

if TYPE_CHECKING:
    from graphgen.runtime.translator import Translator


def add_parser(commands: Any) -> None:
    translate = commands.add_parser(
        "translate",
        help="translate text or a file with an exported model (no torch needed)",
        description="Translate each TEXT argument, or each line of --input (standard input when neither is "
        "given), writing one line per input line to --output (standard output by default); tab-separated "
        "hypotheses when --num-return-sequences > 1. Files are read in windows whose lines are batched by "
        "length and written back in input order, so an interrupted run can be continued with --resume.",
    )
    translate.add_argument("model", help="a text-level .onnx file written by graphgen export")
    translate.add_argument("text", nargs="*", help="texts to translate; read from --input or stdin when omitted")
    files = translate.add_argument_group("files")
    files.add_argument(
        "-i", "--input", help="file (or pipe) to translate, one sentence or JSON object per line ('-': stdin)"
    )
    files.add_argument("-o", "--output", help="file to write, written as the run goes ('-': stdout, the default)")
    files.add_argument(
        "--format",
        choices=["text", "jsonl"],
        help="text: one sentence per line; jsonl: one JSON object per line (default: jsonl for .jsonl/.ndjson "
        "inputs, else text)",
    )
    files.add_argument("--field", default="text", help="JSON Lines: the field to translate (default: text)")
    files.add_argument(
        "--target-field",
        default="translation",
        help="JSON Lines: the field the translation is written to, other fields kept (default: translation)",
    )
    files.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run: keep the output's complete lines and translate the input from there",
    )
    files.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    files.add_argument(
        "--on-error",
        choices=["fail", "skip"],
        default="fail",
        help="a line that cannot be translated (not UTF-8, not JSON, too long): stop there (fail, the default) "
        "or report it and write a placeholder (skip: an empty line; in JSON Lines the record with a null "
        "translation and a graphgen_error field)",
    )
    files.add_argument(
        "--window", type=int, default=256, help="lines read, sorted by length and batched together (default 256)"
    )
    files.add_argument("-q", "--quiet", action="store_true", help="no progress line on stderr")
    translate.add_argument("--batch-size", type=int, default=16, help="texts per session.run (default 16)")
    translate.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads (default: all cores)")
    translate.add_argument(
        "--providers",
        default="cpu",
        help="ONNX Runtime execution providers in order of preference, comma-separated: cpu (the default), "
        "cuda (needs the onnxruntime-gpu package), tensorrt, rocm, dml, coreml, openvino, or ONNX Runtime's "
        "own names; a provider that cannot start is an error, not a CPU run (ONNX Runtime 1.25 and later "
        "keep the tokenizer and detokenizer on the CPU)",
    )
    translate.add_argument(
        "--truncate",
        action="store_true",
        help="cut a source longer than the model's limit to that limit (as HF truncation=True) instead of "
        "failing on it",
    )
    languages = translate.add_argument_group(
        "languages (files exported from NLLB, M2M100, mBART-50 and mBART-25 checkpoints; codes as their HF "
        "tokenizer spells them, e.g. eng_Latn, en, en_XX)"
    )
    languages.add_argument("--source-language", help="the language of the input (default: the file's)")
    languages.add_argument(
        "--target-language",
        help="the language to translate into (default: the file's; '' forces none, or in an mBART-25 file "
        "starts the decoder as the checkpoint does)",
    )
    generation_options(translate)
    translate.set_defaults(run=run)


def _check_utf8(texts: list[str]) -> None:
    """Refuse a text argument that is not UTF-8, as a line of --input is refused: Python passes its
    bytes on as lone surrogates, which would be translated as U+FFFD (a different text)."""
    for number, text in enumerate(texts, start=1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(text)  # the argument's bytes, as the shell gave them
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as error:
                where = f"byte {raw[error.start]:#04x} at offset {error.start}"
                raise GraphgenError(f"text argument {number} is not valid UTF-8 ({where})") from None
            raise GraphgenError(f"text argument {number} is not valid UTF-8") from None


def run(args: argparse.Namespace) -> int:
    from graphgen.runtime.translator import Translator, resolve_providers, translations

    _check_utf8(args.text)
    providers = resolve_providers(args.providers.split(","))
    translator = Translator(args.model, threads=args.threads, providers=providers)
    settings = overrides(args)
    settings |= {name: getattr(args, name) for name in LANGUAGE_PARAMETERS if getattr(args, name) is not None}
    try:
        translator.settings(settings)
    except ValueError as error:
        raise GraphgenError(str(error)) from error
    if args.text:
        if args.input is not None:
            raise GraphgenError("give texts as arguments or --input, not both")
        max_length = translator.settings(settings)[MAX_LENGTH]
        full: list[int] = []
        for start in range(0, len(args.text), args.batch_size):
            batch = args.text[start : start + args.batch_size]
            results = translator.run(batch, truncate=True if args.truncate else None, **settings)
            for result in translations(results):
                line = result if isinstance(result, str) else "\t".join(result)
                print(line.replace("\n", " "), flush=True)
            reached = translator.used_max_length(results, max_length)
            full += [start + 1 + index for index, used in enumerate(reached) if used]
        _warn_used_max_length(full, "text", max_length, translator.max_positions)
        return 0
    return _translate_file(args, translator, settings)


def _warn_used_max_length(numbers: list[int], what: str, max_length: int, positions: int | None) -> None:
    """Say which translations used every position up to ``max_length``: HF's ``generate`` stops
    there too, so they are what HF gives, but may be cut short (or a model repeating itself)."""
    if not numbers:
        return
    listed = ", ".join(map(str, numbers[:20])) + ("" if len(numbers) <= 20 else f" and {len(numbers) - 20} more")
    if positions is not None and max_length >= positions:
        remedy = "that is the model's limit"
    else:
        remedy = "a larger --max-length lets them finish" + (f" (up to {positions})" if positions else "")
    print(
        f"graphgen: {len(numbers)} translation(s) used all {max_length} tokens of max_length and may be cut "
        f"short: {what}(s) {listed}; {remedy}",
        file=sys.stderr,
    )


def _translate_file(args: argparse.Namespace, translator: Translator, settings: dict[str, Any]) -> int:
    from graphgen.runtime.bulk import BulkError, line_format_for, translate_file

    source = None if args.input in (None, "-") else Path(args.input)
    target = None if args.output in (None, "-") else Path(args.output)
    interactive = source is None and sys.stdin.isatty()
    window = 1 if interactive else args.window  # answer each typed line at once
    max_length = translator.settings(settings)[MAX_LENGTH]
    try:
        result = translate_file(
            translator,
            source,
            target,
            line_format_for(source, args.format, args.field, args.target_field),
            resume=args.resume,
            overwrite=args.overwrite,
            on_error=args.on_error,
            batch_size=min(args.batch_size, window),
            window=window,
            truncate=True if args.truncate else None,
            settings=settings,
            progress=not args.quiet and not interactive,
        )
    except BulkError as error:  # the lines written before the failing one may be cut short too
        _warn_used_max_length(error.used_max_length, "line", max_length, translator.max_positions)
        raise
    if result.resumed_after and not args.quiet:
        print(f"[graphgen] resumed after line {result.resumed_after:,}", file=sys.stderr)
    _warn_used_max_length(result.used_max_length, "line", max_length, translator.max_positions)
    if result.skipped:
        lines = ", ".join(str(error.line) for error in result.skipped[:20])
        more = "" if len(result.skipped) <= 20 else f" and {len(result.skipped) - 20} more"
        print(
            f"graphgen: {len(result.skipped)} line(s) could not be translated and were written as placeholders: "
            f"line(s) {lines}{more}",
            file=sys.stderr,
        )
    return 0
