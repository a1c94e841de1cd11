"""Both sides of a parity check: an ONNX Runtime session on an exported file, and HF ``generate`` on the
same inputs, with the feeds and the token comparison they share.

One session helper, so that every test opens a file as a host that reads the file's metadata does
(the extensions library registered only when the file asks for it) instead of each test choosing its
own options; and one way to call HF, so that the reference is the same everywhere (``no_grad``,
padding, ``batch_decode(skip_special_tokens=True)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort
    from onnx import ModelProto, ValueInfoProto

    from graphgen.custom_ops import GraphBuilder


def open_session(
    model: str | Path | bytes | ModelProto,
    threads: int | None = None,
    *,
    extensions: bool | None = None,
    providers: Sequence[str] = ("CPUExecutionProvider",),
) -> ort.InferenceSession:
    """A plain ONNX Runtime session on an exported file (a path, its bytes or a ``ModelProto``);
    a single file's weights are mapped from it where ONNX Runtime allows, as ``Translator`` does.

    The onnxruntime-extensions library is registered only when the file's metadata says it needs it
    (``--tokenizer extensions``), as a host does; ``extensions`` decides instead for graphs built in a
    test, which carry no metadata. The session config entries the file asks for are set, and ORT's
    load-time notices silenced (``session_options``).
    """
    import onnxruntime as ort

    from graphgen.contract import read_file_info
    from graphgen.runtime.mapped_weights import session_source
    from graphgen.runtime.translator import session_options

    source: str | bytes
    mapping: dict[str, str] = {}
    if isinstance(model, bytes):
        source = model
    elif isinstance(model, (str, Path)):
        mapped = session_source(model)  # a single file's weights mapped from it, as Translator does
        source, mapping = mapped.model, mapped.config
    else:
        source = model.SerializeToString()
    declared = read_file_info(Path(model) if isinstance(model, (str, Path)) else source)
    if extensions is None:
        extensions = declared.needs_extensions
    options = session_options(threads, extensions=extensions, config=declared.session_config | mapping)
    return ort.InferenceSession(source, options, providers=list(providers))


def builder_model(
    b: GraphBuilder,
    inputs: Sequence[ValueInfoProto],
    outputs: Sequence[ValueInfoProto] | None = None,
    *,
    domains: Sequence[tuple[str, int]] = (),
) -> ModelProto:
    """A model of what ``b`` built (its constants and derived tables as initializers), with the given
    inputs and ``b``'s outputs unless ``outputs`` says: a graph building block on its own, to run
    against its reference. ``domains``: opsets beyond ONNX's and ``com.microsoft``."""
    from onnx import helper, numpy_helper

    from graphgen._assemble import make_model
    from graphgen.custom_ops.builder import derived_array

    tables = [numpy_helper.from_array(derived_array(value), name) for name, value in b.derived_weights.items()]
    graph = helper.make_graph(
        b.nodes,
        b.name,
        list(inputs),
        list(b.outputs if outputs is None else outputs),
        initializer=[*b.constants, *tables],
    )
    return make_model(graph, {}, domains=domains)


def text_feeds(session: ort.InferenceSession, texts: list[str]) -> dict[str, np.ndarray]:
    """The text input of a text-level file's session: UTF-8 bytes (portable tokenizer) or strings."""
    from graphgen.contract import TEXT, TEXT_UTF8
    from graphgen.runtime.translator import utf8_batch

    names = {value.name for value in session.get_inputs()}
    return {TEXT_UTF8: utf8_batch(texts)} if TEXT_UTF8 in names else {TEXT: np.array(texts, dtype=object)}


def random_sources(
    count: int, size: int, *, vocab: int, pad: int, eos: int, longest: int = 12, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` batches of ``size`` random sources of 2-``longest`` tokens ending in EOS, right-padded;
    one row in four left-padded (fairseq's positions skip pad tokens wherever they are). Ids and
    masks as int64, what HF takes; ``run_id_file`` casts them for the file."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        lengths = rng.integers(2, longest + 1, size=size)
        ids = np.full((size, lengths.max()), pad, dtype=np.int64)
        for row, n in enumerate(lengths):
            tokens = np.append(rng.integers(max(pad, eos) + 1, vocab, size=n - 1), eos)
            if row % 4 == 3:
                ids[row, -n:] = tokens
            else:
                ids[row, :n] = tokens
        batches.append((ids, (ids != pad).astype(np.int64)))
    return batches


def run_id_file(
    session: ort.InferenceSession, ids: np.ndarray, mask: np.ndarray, eos: int, pad: int, **settings: Any
) -> list[tuple[int, ...]]:
    """An id-level file's generated tokens per hypothesis (settings as int32 inputs)."""
    from graphgen.verify.parity import generated_tokens

    feeds = {"input_ids": ids.astype(np.int32), "attention_mask": mask.astype(np.int32)}
    feeds |= {name: np.atleast_1d(np.asarray(value, dtype=np.int32)) for name, value in settings.items()}
    sequences = session.run(["sequences"], feeds)[0]
    return [generated_tokens(row, eos, pad) for row in sequences.reshape(-1, sequences.shape[-1])]


def generate_both(
    session: ort.InferenceSession, model: Any, ids: np.ndarray, mask: np.ndarray, **settings: Any
) -> tuple[Any, np.ndarray, np.ndarray]:
    """HF ``generate``'s output (its per-step and sequence scores kept) and an id-level file's
    ``sequences`` and ``sequence_scores`` for the same int64 ``ids``, ``mask`` and settings (the
    penalties fed as float32, every other setting as int32)."""
    import torch

    with torch.no_grad():
        out = model.generate(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            output_scores=True,
            return_dict_in_generate=True,
            **settings,
        )
    feeds = {"input_ids": ids.astype(np.int32), "attention_mask": mask.astype(np.int32)}
    for name, value in settings.items():
        feeds[name] = np.array([value], dtype=np.float32 if "penalty" in name else np.int32)
    sequences, scores = session.run(["sequences", "sequence_scores"], feeds)
    return out, sequences, scores


def hf_tokens(
    model: Any, ids: np.ndarray, mask: np.ndarray, eos: int, pad: int, **settings: Any
) -> list[tuple[int, ...]]:
    """HF ``generate``'s generated tokens per hypothesis, for the same ids as ``run_id_file``."""
    import torch

    from graphgen.verify.parity import generated_tokens

    with torch.no_grad():
        out = model.generate(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), **settings)
    return [generated_tokens(row, eos, pad) for row in out.numpy()]


def hf_sequences(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    truncation: bool = False,
    source_limit: int | None = None,
    **settings: Any,
) -> list[list[int]]:
    """HF ``generate``'s output rows for one padded batch of ``texts`` (on the model's device).

    ``truncation`` cuts sources to the tokenizer's limit, or to ``source_limit`` tokens when given
    (what a file's ``truncate`` input must equal); ``settings`` go to ``generate``.
    """
    import torch

    limit = {} if source_limit is None else {"max_length": source_limit}
    cut = truncation or source_limit is not None
    inputs = tokenizer(list(texts), return_tensors="pt", padding=True, truncation=cut, **limit)
    with torch.no_grad():
        output = model.generate(**inputs.to(model.device), **settings)
    rows: list[list[int]] = output.cpu().tolist()
    return rows


def hf_translate(model: Any, tokenizer: Any, texts: Sequence[str], **options: Any) -> list[str]:
    """HF ``generate`` + ``batch_decode(skip_special_tokens=True)``: what a text-level file's
    ``translation`` must equal. ``options`` as for ``hf_sequences``."""
    decoded: list[str] = tokenizer.batch_decode(
        hf_sequences(model, tokenizer, texts, **options), skip_special_tokens=True
    )
    return decoded
