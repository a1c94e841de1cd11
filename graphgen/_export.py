"""The export pipeline: load → build subgraphs → search node → assemble → save.

Each stage lives in its own module; this one only runs them in order and reports progress.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graphgen._assemble import build_id_model, build_text_model
from graphgen._errors import GraphgenError
from graphgen.checkpoint.load import load_checkpoint
from graphgen.contract import ID_LEVEL, PORTABLE, TEXT_LEVEL, TOKENIZERS
from graphgen.deploy import ORT_PLATFORMS
from graphgen.deploy.mobile import write_ort
from graphgen.deploy.save import check_output_path, past_protobuf_limit, save_model, streamed_weights
from graphgen.model.weights import INT4_BLOCK, checked_int4_block
from graphgen.passes import export_passes
from graphgen.passes.fp16 import Float16Error
from graphgen.search import choose_search
from graphgen.text.vocabulary import load_vocabulary

log = logging.getLogger(__name__)


def tokenizer_kind(tokenizer: bool | str) -> str | None:
    """``"onnx"``, ``"extensions"`` or ``None`` (an id-level file) for ``export``'s ``tokenizer``."""
    if tokenizer is True:
        return PORTABLE
    if tokenizer is False or tokenizer is None:
        return None
    if tokenizer not in TOKENIZERS:
        raise GraphgenError(f"unknown tokenizer {tokenizer!r}; choose one of {', '.join(TOKENIZERS)}")
    return str(tokenizer)


@dataclass
class ExportResult:
    files: list[Path]
    seconds: float
    interface: str


def export(
    model: str | Path,
    output: str | Path,
    *,
    tokenizer: bool | str = True,
    strings: bool = True,
    int8: bool = False,
    int4: bool = False,
    int4_block_size: int | None = None,
    fp16: bool = False,
    early_stopping: bool | None = None,
    search: str = "auto",
    ort: str | None = None,
    external_data: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Export ``model`` (checkpoint directory or hub id) to one ONNX file at ``output``.

    By default the graph takes and returns text (tokenizer and detokenizer inside), with the
    tokenizer in standard ONNX ops (``tokenizer="onnx"``, the same as ``True``): texts go in as
    zero-padded UTF-8 bytes and come out as strings and as bytes, and no custom-op library is
    needed. ``tokenizer="extensions"`` builds the tokenizer on onnxruntime-extensions' SentencePiece
    op instead (string input; the library must be registered at run time). With
    ``tokenizer=False`` the graph takes and returns token ids. ``strings=False`` leaves every string
    tensor out of a portable text file (the languages as UTF-8 bytes too, no ``translation``
    output), for ONNX Runtime builds without the string type. ``int8=True`` stores every matrix
    (embedding tables and output projection included) as int8 with per-column scales; ``int4=True``
    as 4 bits with a scale per block of 64 inputs (ONNX Runtime's ``MatMulNBits``; loop search only), or
    of ``int4_block_size`` inputs (a power of two from 16; 32 for onnxruntime-web's WebGPU provider,
    whose ``MatMulNBits`` computes 64 and 128 wrongly: docs/platforms.md).
    ``fp16=True`` builds the encoder and decoder in float16 (the search itself stays float32), for
    GPU execution providers.
    ``early_stopping`` overrides the checkpoint's setting. ``True`` finishes an input once
    ``num_beams`` hypotheses have ended (HF ``generate(early_stopping=True)``, which the graph then
    equals), and lets beam search run batched instead of one input at a time: faster for batches,
    but for some inputs a different result than the checkpoint's default ``False``.
    ``search`` picks how the search runs: ``"loop"`` is graphgen's beam search in standard ONNX
    ops (``search.loop``: a whole batch at once, HF's result for every returned hypothesis),
    ``"op"`` ORT's ``com.microsoft.BeamSearch`` op (one input at a time unless early stopping is
    on), ``"auto"`` the loop.
    ``ort`` (``"arm"`` or ``"amd64"``) also writes the ``.ort`` file for mobile apps and its
    ``required_operators.config`` for a reduced-operator ONNX Runtime build, optimized for that
    processor. ``external_data=True`` writes the weights to ``<output>.data`` beside the file (as
    every model past 2 GB is written): ONNX Runtime then maps them from the file instead of reading
    them into memory, which lowers the peak memory of a session and loads it faster.
    """
    report = progress or log.info
    if (int8 or int4) and fp16:
        raise Float16Error(f"--fp16 and --{'int8' if int8 else 'int4'} cannot be combined")
    if int8 and int4:
        raise GraphgenError("--int8 and --int4 cannot be combined")
    if int4_block_size is not None and not int4:
        raise GraphgenError("--int4-block-size applies to --int4 files only")
    int4_block = INT4_BLOCK if int4_block_size is None else checked_int4_block(int4_block_size)
    if ort is not None and ort not in ORT_PLATFORMS:
        raise GraphgenError(f"unknown .ort platform {ort!r}; choose one of {', '.join(ORT_PLATFORMS)}")
    kind = tokenizer_kind(tokenizer)
    if not strings and kind != PORTABLE:
        raise GraphgenError("a file without strings is a text file with the portable tokenizer (--tokenizer onnx)")
    started = time.perf_counter()
    path = check_output_path(Path(output))
    report(f"loading {model}")
    checkpoint = load_checkpoint(model)
    vocabulary = load_vocabulary(checkpoint.directory) if kind else None
    spec = checkpoint.spec
    if early_stopping is not None:
        spec.generation = dataclasses.replace(spec.generation, early_stopping=early_stopping)
    chosen = choose_search(search)
    search = chosen.name
    report(
        f"building graphs ({search} search): {spec.architecture}, {spec.encoder_layers}+{spec.decoder_layers} layers, "
        f"d_model {spec.d_model}, vocab {spec.target_vocab_size}"
    )
    # The weights go to a data file as the model is assembled, so that they are never all in memory:
    # it becomes the model's external data (with external_data, or past protobuf's 2 GB limit), or
    # save_model copies them into the one .onnx file (float16 as they are written: the op's float16
    # pass converts only the finished model's types and constants).
    share = 0.25 if int8 else 0.14 if int4 else 0.5 if fp16 else 1.0
    weight_bytes = share * sum(array.nbytes for array in spec.weights.values())
    external = external_data or past_protobuf_limit(weight_bytes)
    float16_conversion = fp16 and not chosen.float16_layers
    with streamed_weights(path, mapped=external) as streamed:
        if vocabulary is None or kind is None:
            onnx_model = build_id_model(
                spec,
                int8=int8,
                int4=int4,
                int4_block=int4_block,
                search=search,
                float16=fp16,
                streamed=streamed,
            )
        else:
            report(f"building the tokenizer graph ({kind})")
            onnx_model = build_text_model(
                spec,
                vocabulary,
                int8=int8,
                int4=int4,
                int4_block=int4_block,
                search=search,
                tokenizer=kind,
                strings=strings,
                float16=fp16,
                streamed=streamed,
            )
        for model_pass in export_passes(float16_conversion=float16_conversion):
            report(model_pass.description)
            model_pass.run(onnx_model)
        report(f"saving {path}")
        files = save_model(onnx_model, path, streamed, external=external_data)
    if ort is not None:
        report(f"converting to .ort for {ort}")
        files += write_ort(path, ort)
    seconds = time.perf_counter() - started
    report(f"wrote {', '.join(str(f) for f in files)} in {seconds:.1f}s")
    return ExportResult(files=files, seconds=seconds, interface=ID_LEVEL if vocabulary is None else TEXT_LEVEL)
