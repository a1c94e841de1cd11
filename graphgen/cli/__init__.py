"""The ``graphgen`` command line: ``export``, ``translate`` and ``verify``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphgen._errors import GraphgenError
from graphgen.contract import TOKENIZERS

# Where `graphgen triton` says the extensions library is inside the server, unless told otherwise.
TRITON_EXTENSIONS_LIBRARY = "/opt/tritonserver/ortextensions/libortextensions.so"


def _export(args: argparse.Namespace) -> int:
    from graphgen._export import export

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[graphgen] {message}", file=sys.stderr, flush=True)

    if args.no_tokenizer and args.tokenizer is not None:
        raise GraphgenError("--tokenizer and --no-tokenizer exclude each other")
    export(
        args.model,
        args.output,
        tokenizer=False if args.no_tokenizer else (args.tokenizer or True),
        strings=not args.no_strings,
        int8=args.int8,
        int4=args.int4,
        fp16=args.fp16,
        early_stopping=True if args.early_stopping else None,
        search=args.search,
        ort=args.ort,
        progress=progress,
    )
    return 0


def _generation_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("generation (defaults: the checkpoint's generation_config.json)")
    group.add_argument("--num-beams", type=int, help="beam width; 1 is greedy search")
    group.add_argument("--num-return-sequences", type=int, help="hypotheses per input (at most --num-beams)")
    group.add_argument("--max-length", type=int, help="longest output in tokens, decoder start token included")
    group.add_argument("--min-length", type=int, help="shortest output in tokens, decoder start token included")
    group.add_argument("--length-penalty", type=float, help="exponent of the length normalisation of beam scores")
    group.add_argument("--repetition-penalty", type=float, help="penalty on tokens already generated (1.0 is off)")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = ("num_beams", "num_return_sequences", "max_length", "min_length", "length_penalty", "repetition_penalty")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _translate(args: argparse.Namespace) -> int:
    from graphgen.runtime.translator import Translator

    translator = Translator(args.model, threads=args.threads)
    overrides = _overrides(args)
    overrides |= {
        name: getattr(args, name) for name in ("source_language", "target_language") if getattr(args, name) is not None
    }
    try:
        translator.settings(overrides)
    except ValueError as error:
        raise GraphgenError(str(error)) from error
    if args.text:
        if args.input is not None:
            raise GraphgenError("give texts as arguments or --input, not both")
        for start in range(0, len(args.text), args.batch_size):
            batch = args.text[start : start + args.batch_size]
            for result in translator.translate(batch, truncate=True if args.truncate else None, **overrides):
                line = result if isinstance(result, str) else "\t".join(result)
                print(line.replace("\n", " "), flush=True)
        return 0
    return _translate_file(args, translator, overrides)


def _translate_file(args: argparse.Namespace, translator: object, overrides: dict[str, object]) -> int:
    from graphgen.runtime.bulk import line_format_for, translate_file

    source = None if args.input in (None, "-") else Path(args.input)
    target = None if args.output in (None, "-") else Path(args.output)
    interactive = source is None and sys.stdin.isatty()
    window = 1 if interactive else args.window  # answer each typed line at once
    result = translate_file(
        translator,  # type: ignore[arg-type]
        source,
        target,
        line_format_for(source, args.format, args.field, args.target_field),
        resume=args.resume,
        overwrite=args.overwrite,
        on_error=args.on_error,
        batch_size=min(args.batch_size, window),
        window=window,
        truncate=True if args.truncate else None,
        settings=overrides,
        progress=not args.quiet and not interactive,
    )
    if result.resumed_after and not args.quiet:
        print(f"[graphgen] resumed after line {result.resumed_after:,}", file=sys.stderr)
    if result.skipped:
        lines = ", ".join(str(error.line) for error in result.skipped[:20])
        more = "" if len(result.skipped) <= 20 else f" and {len(result.skipped) - 20} more"
        print(
            f"graphgen: {len(result.skipped)} line(s) could not be translated and were written as placeholders: "
            f"line(s) {lines}{more}",
            file=sys.stderr,
        )
    return 0


def _triton(args: argparse.Namespace) -> int:
    from graphgen.deploy.triton import TritonOptions, write_repository

    source = Path(args.model)
    options = TritonOptions(
        name=args.name or source.stem,
        max_batch_size=args.max_batch_size,
        max_queue_delay_microseconds=args.max_queue_delay_us,
        instances=args.instances,
        extensions_library=args.extensions_library,
    )

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[graphgen] {message}", file=sys.stderr, flush=True)

    files = write_repository(
        source,
        Path(args.output),
        options,
        settings=_overrides(args),
        truncate=True if args.truncate else None,
        overwrite=args.overwrite,
        progress=progress,
    )
    progress(f"wrote {', '.join(str(f) for f in files)}")
    return 0


def _bake(args: argparse.Namespace) -> int:
    from graphgen.passes.bake import write_baked

    files = write_baked(
        Path(args.model),
        Path(args.output),
        _overrides(args),
        truncate=True if args.truncate else None,
        keep_languages=args.keep_languages,
    )
    print(f"[graphgen] wrote {', '.join(str(f) for f in files)}", file=sys.stderr)
    return 0


def _verify(args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphgen", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    export = commands.add_parser(
        "export",
        help="export a translation checkpoint to one ONNX file",
        description="Export a HuggingFace translation checkpoint to one ONNX file that runs the encoder, a "
        "KV-cached decoder and the beam search in one session.run. Generation defaults come from the "
        "checkpoint's generation_config.json and can be overridden per call through the graph's "
        "optional inputs (max_length, min_length, num_beams, num_return_sequences, length_penalty, "
        "repetition_penalty).",
    )
    export.add_argument("model", help="checkpoint directory, or a hub id such as Helsinki-NLP/opus-mt-en-zh")
    export.add_argument("-o", "--output", required=True, help="path of the .onnx file to write (written atomically)")
    export.add_argument(
        "--tokenizer",
        choices=list(TOKENIZERS),
        help="how the file tokenizes: onnx (default) builds the tokenizer in standard ONNX ops, so the file "
        "runs with nothing but ONNX Runtime in every binding (Node, the browser, Android, Java, Rust, Go, "
        "Python; input: UTF-8 bytes as text_utf8); extensions uses onnxruntime-extensions' SentencePiece op "
        "(input: strings as text; the extensions library must be registered where the file runs)",
    )
    export.add_argument(
        "--no-strings",
        action="store_true",
        help="leave every string tensor out of the file (no translation output; translation_utf8 and, for "
        "language-coded models, source_language_utf8/target_language_utf8 as UTF-8 bytes), for ONNX Runtime "
        "builds without the string type such as onnxruntime-web's WebGPU builds",
    )
    export.add_argument(
        "--no-tokenizer",
        action="store_true",
        help="write the id-level graph (int32 input_ids/attention_mask in, sequences out) without the "
        "tokenizer and detokenizer",
    )
    export.add_argument(
        "--int8",
        action="store_true",
        help="store weights as int8 (per-column scales, dynamic activation quantization): about 4x smaller "
        "and faster on CPU, with a small accuracy cost measured in docs/performance.md",
    )
    export.add_argument(
        "--int4",
        action="store_true",
        help="store weights as 4 bits (a scale per block of 32, ONNX Runtime's MatMulNBits): about 7x smaller "
        "than float32, for machines short of memory; the accuracy cost is measured in docs/performance.md",
    )
    export.add_argument(
        "--fp16",
        action="store_true",
        help="encoder and decoder in float16 (weights, activations, KV caches; the search stays float32), for "
        "GPU execution providers (CUDA); the file runs on the CPU too, except with --search op",
    )
    export.add_argument(
        "--early-stopping",
        action="store_true",
        help="finish an input once num_beams hypotheses have ended, as HF generate(early_stopping=True): "
        "fewer decoding steps, but some outputs differ from the checkpoint's default (early_stopping=False)",
    )
    export.add_argument(
        "--search",
        choices=["auto", "loop", "op"],
        default="auto",
        help="loop: graphgen's beam search in standard ONNX ops, a whole batch at once, every returned "
        "hypothesis as HF's; op: ONNX Runtime's com.microsoft.BeamSearch op (exact beam search then runs "
        "one input at a time); auto (default): loop",
    )
    export.add_argument(
        "--ort",
        nargs="?",
        const="arm",
        choices=["arm", "amd64"],
        metavar="PLATFORM",
        help="also write the .ort file that mobile apps load and its required_operators.config for a "
        "reduced-operator ONNX Runtime build, optimized for PLATFORM: arm (phones; the default) or amd64",
    )
    export.add_argument("-q", "--quiet", action="store_true", help="print no progress messages")
    export.set_defaults(run=_export)

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
    files.add_argument("-i", "--input", help="file to translate, one sentence or JSON object per line ('-': stdin)")
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
        "--truncate",
        action="store_true",
        help="cut a source longer than the model's limit to that limit (as HF truncation=True) instead of "
        "failing on it",
    )
    languages = translate.add_argument_group(
        "languages (files exported from NLLB, M2M100 and mBART-50 checkpoints; codes as their HF tokenizer "
        "spells them, e.g. eng_Latn, en, en_XX)"
    )
    languages.add_argument("--source-language", help="the language of the input (default: the file's)")
    languages.add_argument(
        "--target-language", help="the language to translate into (default: the file's; '' forces none)"
    )
    _generation_options(translate)
    translate.set_defaults(run=_translate)

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
    _generation_options(triton)
    triton.set_defaults(run=_triton)

    bake = commands.add_parser(
        "bake",
        help="write a copy of an exported file with its generation settings fixed",
        description="Write a copy of MODEL in which the optional inputs (generation settings, truncate) are "
        "constants: the file's defaults, or the values given below. For hosts that cannot set optional "
        "inputs, such as the Java binding (its OrtSession.run accepts only inputs without a default).",
    )
    bake.add_argument("model", help="an .onnx file written by graphgen export")
    bake.add_argument("-o", "--output", required=True, help="the .onnx file to write (written atomically)")
    bake.add_argument("--truncate", action="store_true", help="fix truncate=true (cut sources at the limit)")
    bake.add_argument(
        "--keep-languages",
        action="store_true",
        help="NLLB, M2M100, mBART-50 files: keep source_language and target_language as inputs, now required "
        "(feed both on every call), so that Java still chooses the languages per call",
    )
    _generation_options(bake)
    bake.set_defaults(run=_bake)

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
    verify.set_defaults(run=_verify)
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
