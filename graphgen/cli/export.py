"""``graphgen export``: a checkpoint to one ONNX file."""

from __future__ import annotations

import argparse
from typing import Any

from graphgen._errors import GraphgenError
from graphgen.cli._options import printer
from graphgen.contract import TOKENIZERS
from graphgen.deploy import ORT_PLATFORMS
from graphgen.search import CHOICES as SEARCH_CHOICES


def add_parser(commands: Any) -> None:
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
        help="store weights as int8 (per-column scales; activations quantized per row as it runs, so an input "
        "translates the same in any batch): about 4x smaller and faster on CPU, with a small accuracy cost "
        "measured in docs/performance.md",
    )
    export.add_argument(
        "--int4",
        action="store_true",
        help="store weights as 4 bits (a scale per block of 64, ONNX Runtime's MatMulNBits): about 7x smaller "
        "than float32, for machines short of memory; the accuracy cost is measured in docs/performance.md",
    )
    export.add_argument(
        "--int4-block-size",
        type=int,
        metavar="N",
        help="inputs per int4 scale, a power of two (default 64); 32 for onnxruntime-web's WebGPU provider, whose "
        "MatMulNBits kernel computes 64 and 128 wrongly (docs/platforms.md); smaller is closer to float32 and "
        "takes more memory",
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
        choices=list(SEARCH_CHOICES),
        default="auto",
        help="loop: graphgen's beam search in standard ONNX ops, a whole batch at once, every returned "
        "hypothesis as HF's; op: ONNX Runtime's com.microsoft.BeamSearch op (exact beam search then runs "
        "one input at a time); auto (default): loop",
    )
    export.add_argument(
        "--ort",
        nargs="?",
        const="arm",
        choices=list(ORT_PLATFORMS),
        metavar="PLATFORM",
        help="also write the .ort file that mobile apps load and its required_operators.config for a "
        "reduced-operator ONNX Runtime build, optimized for PLATFORM: arm (phones; the default) or amd64",
    )
    export.add_argument(
        "--external-data",
        action="store_true",
        help="write the weights to OUTPUT.data beside the .onnx file (always done past 2 GB): ONNX Runtime "
        "then maps them from the file, for a lower peak memory and a faster load (see docs/performance.md); "
        "the two files travel together",
    )
    export.add_argument("-q", "--quiet", action="store_true", help="print no progress messages")
    export.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from graphgen._export import export

    progress = printer(args.quiet)
    if args.no_tokenizer and args.tokenizer is not None:
        raise GraphgenError("--tokenizer and --no-tokenizer exclude each other")
    export(
        args.model,
        args.output,
        tokenizer=False if args.no_tokenizer else (args.tokenizer or True),
        strings=not args.no_strings,
        int8=args.int8,
        int4=args.int4,
        int4_block_size=args.int4_block_size,
        fp16=args.fp16,
        early_stopping=True if args.early_stopping else None,
        search=args.search,
        ort=args.ort,
        external_data=args.external_data,
        progress=progress,
    )
    return 0
