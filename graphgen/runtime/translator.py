"""Run an exported graph: the torch-free path (onnxruntime, onnxruntime-extensions, numpy only)."""

from __future__ import annotations

import difflib
import importlib.util
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import onnxruntime as ort

from graphgen._errors import SOURCE_TOO_LONG_PREFIX, GraphgenError, SourceTooLongError, TextInputError
from graphgen.contract import (
    FLOAT_PARAMETERS,
    GENERATION_PARAMETERS,
    INT_PARAMETERS,
    LANGUAGE_PARAMETERS,
    LANGUAGE_UTF8_INPUTS,
    MAX_LENGTH,
    MIN_LENGTH,
    NUM_BEAMS,
    NUM_RETURN_SEQUENCES,
    SEQUENCE_SCORES,
    SEQUENCES,
    SOURCE_LANGUAGE,
    TARGET_LANGUAGE,
    TEXT,
    TEXT_LEVEL,
    TEXT_UTF8,
    TRANSLATION,
    TRANSLATION_LENGTHS,
    TRANSLATION_UTF8,
    TRUNCATE,
    FileInfo,
    generation_settings,
    read_file_info,
)
from graphgen.runtime.mapped_weights import SessionSource, session_source

__all__ = [
    "FLOAT_PARAMETERS",
    "INT_PARAMETERS",
    "LANGUAGE_PARAMETERS",
    "PROVIDER_NAMES",
    "Translator",
    "generation_settings",
    "resolve_providers",
]


def extensions_library() -> str:
    """Path of the onnxruntime-extensions custom-op library.

    Found without importing the package: ``import onnxruntime_extensions`` pulls in torch and
    transformers when they are installed (its converters), which the runtime path must not.
    """
    spec = importlib.util.find_spec("onnxruntime_extensions")
    if spec is None or not spec.submodule_search_locations:
        raise GraphgenError("onnxruntime-extensions is not installed (pip install onnxruntime-extensions)")
    for folder in spec.submodule_search_locations:
        libraries = sorted(Path(folder).glob("_extensions_pydll*"))
        libraries = [p for p in libraries if p.suffix in (".so", ".pyd", ".dylib")]
        if libraries:
            return str(libraries[0])
    raise GraphgenError("onnxruntime-extensions is installed but its custom-op library was not found")


def session_options(
    threads: int | None = None, *, extensions: bool = True, config: dict[str, str] | None = None
) -> ort.SessionOptions:
    """Options with ORT's load-time notices silenced, the extensions library registered unless
    ``extensions`` is false (files with the portable tokenizer, id-level files), and the session
    config entries a file asks for (``FileInfo.session_config``)."""
    options = ort.SessionOptions()
    if extensions:
        options.register_custom_ops_library(extensions_library())
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    # Optional graph inputs carry their defaults as initializers; ORT warns about each one, and
    # logs every failed run as an error on top of raising it.
    options.log_severity_level = 4
    # ORT's memory patterns replay a run's allocations as one block on the next run of the same
    # shapes, beside the arena's chunks of the first: the search's working set counted twice
    # (NLLB-600M int8, 8 inputs x 4 beams: 1251 -> 1107 MB peak without them, no slower).
    options.enable_mem_pattern = False
    if threads:
        options.intra_op_num_threads = threads
    return options


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: one U+FFFD each, as JavaScript's TextEncoder does
        return re.sub("[\ud800-\udfff]", "\ufffd", text).encode("utf-8")


def utf8_batch(texts: Sequence[str]) -> np.ndarray:
    """Texts as the portable tokenizer's ``text_utf8`` input: uint8 ``[batch, longest]``, zero-padded."""
    encoded = [_utf8(text) for text in texts]
    batch = np.zeros((len(encoded), max((len(e) for e in encoded), default=0)), dtype=np.uint8)
    for row, data in enumerate(encoded):
        batch[row, : len(data)] = np.frombuffer(data, dtype=np.uint8)
    return batch


# Short names for ONNX Runtime's execution providers (``graphgen translate --providers``).
PROVIDER_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
}
CPU_PROVIDER = PROVIDER_NAMES["cpu"]
_NEEDS_CUDA_LIBRARIES = {PROVIDER_NAMES["cuda"], PROVIDER_NAMES["tensorrt"]}


def resolve_providers(names: Sequence[str], *, here: bool = True) -> list[str]:
    """``names`` (short names such as ``cuda``, or ONNX Runtime's own) as ONNX Runtime's provider
    names, in order, the CPU's last (the string ops and the tokenizer always need it); refused with
    the available ones listed when this onnxruntime package lacks one. For CUDA and TensorRT, the
    CUDA and cuDNN libraries of the ``nvidia-*`` pip packages are loaded first when ONNX Runtime can
    (``onnxruntime.preload_dlls``, 1.21 and later), as ONNX Runtime's install notes ask.
    ``here=False`` only checks that ONNX Runtime knows the names (for providers used on another
    machine, such as a Ray worker's)."""
    resolved = []
    for name in names:
        full = PROVIDER_NAMES.get(name.strip().lower(), name.strip())
        if full not in resolved:
            resolved.append(full)
    available = ort.get_available_providers() if here else ort.get_all_providers()
    missing = [name for name in resolved if name not in available]
    if missing:
        hint = " (pip install onnxruntime-gpu in place of onnxruntime)" if PROVIDER_NAMES["cuda"] in missing else ""
        known = ", ".join(f"{short} ({full})" for short, full in PROVIDER_NAMES.items() if full in available)
        raise GraphgenError(f"this onnxruntime has no {', '.join(missing)}{hint}; available: {known or available}")
    if CPU_PROVIDER in resolved:
        resolved.remove(CPU_PROVIDER)
    if here and _NEEDS_CUDA_LIBRARIES & set(resolved) and hasattr(ort, "preload_dlls"):
        ort.preload_dlls()
    return [*resolved, CPU_PROVIDER]


# ONNX Runtime can fail when two sessions register the extensions library at the same moment
# ("Trying to add a domain to DomainToVersion map, but the domain is already exist").
_SESSION_CREATION = threading.Lock()


class Translator:
    """A loaded text-level graph. ``translate`` is safe to call from several threads at once.

    Translators may also be created from several threads at once.
    """

    def __init__(
        self,
        model: str | Path | bytes,
        *,
        threads: int | None = None,
        providers: Sequence[str] | None = None,
        map_weights: bool = True,
    ):
        """``model`` is a file's path or its contents (e.g. shipped to cluster workers in memory).

        A single file's weights are mapped from the file, as ``--external-data`` files' are, where
        ONNX Runtime allows it (1.21 and later; ``mapped_weights``): less memory and a faster load than
        reading the file whole, the same translations. The file must then not be rewritten in place
        while the translator lives (replace it by a rename, as ``graphgen export`` does);
        ``map_weights=False`` reads it whole.
        """
        path = Path("<bytes>") if isinstance(model, bytes) else Path(model)
        if not isinstance(model, bytes) and not path.is_file():
            raise GraphgenError(f"{path} does not exist")
        config: dict[str, str] = {}
        try:
            declared = read_file_info(model if isinstance(model, bytes) else path)
            extensions, config = declared.needs_extensions, declared.session_config
        except (ValueError, UnicodeDecodeError):
            # Not ONNX's protobuf (an .ort file): its metadata is not read here; the library is
            # registered if it is installed, as a file that needs it would ask.
            extensions = importlib.util.find_spec("onnxruntime_extensions") is not None
        except OSError as error:
            raise GraphgenError(f"cannot read {path}: {error}") from error
        sources = [
            SessionSource(model, {}, 0) if isinstance(model, bytes) else session_source(path, map_weights=map_weights)
        ]
        if sources[0].mapped_weights:  # should ONNX Runtime refuse the mapping, the file is read whole
            sources.append(SessionSource(str(path), {}, 0))
        for source in sources:
            try:
                with _SESSION_CREATION:
                    self._session = ort.InferenceSession(
                        source.model,
                        session_options(threads, extensions=extensions, config=config | source.config),
                        providers=list(providers or [CPU_PROVIDER]),
                    )
                break
            except Exception as error:  # ORT raises several types for unreadable models
                if source is sources[-1]:
                    raise GraphgenError(f"cannot load {path}: {error}") from error
        self.mapped_weights = source.mapped_weights  # how many weights the session maps from the file
        # ONNX Runtime falls back to the CPU when a provider cannot start (its libraries missing),
        # with a warning that the options above silence: a run meant for the GPU would go unnoticed.
        asked = [entry if isinstance(entry, str) else entry[0] for entry in providers or []]  # or (name, options)
        unused = [name for name in asked if name not in self._session.get_providers()]
        if unused:
            raise GraphgenError(
                f"ONNX Runtime could not start {', '.join(unused)} for {path} (it would run on "
                f"{', '.join(self._session.get_providers())}); for CUDA: the CUDA and cuDNN libraries "
                "its onnxruntime-gpu release was built for must be found (see docs/platforms.md, On a GPU)"
            )
        info = FileInfo(dict(self._session.get_modelmeta().custom_metadata_map))
        if info.interface != TEXT_LEVEL:
            raise GraphgenError(f"{path} is not a text-level graphgen model (export it without --no-tokenizer)")
        self.defaults: dict[str, Any] = info.generation_defaults
        self._pad_id = info.special_ids.get("pad")
        self.max_positions = info.max_positions
        self.path = path
        self._baked_truncate = bool(info.baked.get(TRUNCATE, False))
        optional = self._session.get_overridable_initializers()  # inputs with a default
        self._required = {value.name for value in self._session.get_inputs()}
        self._inputs = {value.name for value in [*self._session.get_inputs(), *optional]}
        # Language-coded tokenizers (NLLB, mBART-50, M2M100): the codes the file accepts, and its defaults.
        self.languages: list[str] = info.languages
        self.source_language: str | None = info.source_language
        self.target_language: str | None = info.target_language
        # Tokens typed first in a text that choose its target (opus-mt's >>fra<<, MADLAD-400's <2de>).
        self.target_tags: list[str] = info.target_tags

    def settings(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint defaults with ``overrides`` applied, validated (languages checked, not returned)."""
        self.language_feeds({k: v for k, v in overrides.items() if k in LANGUAGE_PARAMETERS}, None)
        generation = {k: v for k, v in overrides.items() if k not in LANGUAGE_PARAMETERS}
        return generation_settings(self.defaults, self.max_positions, generation)

    def language_feeds(self, languages: dict[str, Any], rows: int | None) -> dict[str, np.ndarray]:
        """``source_language`` / ``target_language`` (one code, or one per text) as the graph's inputs.

        Checked here so that a wrong code names the codes that exist; the graph checks them too.
        """
        feeds: dict[str, np.ndarray] = {}
        for name in LANGUAGE_PARAMETERS:
            value = languages.get(name)
            as_bytes = LANGUAGE_UTF8_INPUTS[name] in self._inputs  # a file without strings (export --no-strings)
            fed = LANGUAGE_UTF8_INPUTS[name] if as_bytes else name
            if value is None and fed in self._required:  # a baked copy that kept them (bake --keep-languages)
                value = getattr(self, name)
            if value is None:
                continue
            if fed not in self._inputs:
                if not self.languages:
                    raise GraphgenError(
                        f"{self.path} takes no {name}: its tokenizer has no language codes"
                        " (Marian files take the target as a >>xx<< token at the start of each text)"
                    )
                raise GraphgenError(f"{name} is fixed to {getattr(self, name)!r} in {self.path} (a baked copy)")
            codes = [value] if isinstance(value, str) else list(value)
            if not codes or not all(isinstance(code, str) for code in codes):
                raise TypeError(f"{name} must be a str or a non-empty sequence of str")
            if rows is not None and len(codes) not in (1, rows):
                raise ValueError(f"give one {name}, or one per text ({rows}); got {len(codes)}")
            allowed = set(self.languages) | ({""} if name == TARGET_LANGUAGE else set())
            for code in codes:
                if code not in allowed:
                    close = difflib.get_close_matches(code, self.languages, n=3)
                    hint = f"; did you mean {', '.join(close)}?" if close else ""
                    raise ValueError(f"unknown {name} {code!r} (graphgen.languages lists {len(self.languages)}){hint}")
            feeds[fed] = utf8_batch(codes) if as_bytes else np.array(codes, dtype=object)
        return feeds

    def run(
        self,
        texts: Sequence[str],
        *,
        truncate: bool | None = None,
        source_language: str | Sequence[str] | None = None,
        target_language: str | Sequence[str] | None = None,
        **overrides: Any,
    ) -> dict[str, np.ndarray]:
        """All outputs of the graph (``translation``, ``sequences``, ``sequence_scores``).

        ``source_language`` and ``target_language`` (files of language-coded tokenizers: NLLB,
        mBART-50, M2M100) take one code as the HF tokenizer spells it, or one per text; ``None``
        keeps the file's default (``graphgen.source_language`` / ``graphgen.target_language``), and
        a target of ``""`` forces no first token.

        A text with more tokens than the model has positions raises :class:`SourceTooLongError`,
        unless ``truncate`` is true: then it is cut to the limit as HF's ``truncation=True`` cuts it.
        ``None`` (the default) means false, or what a baked copy fixed. A text with a U+0000 the
        file cannot carry raises :class:`TextInputError` (one at the end of a text, or any in an
        extensions file's text).
        """
        self._check_texts(texts)
        values = self.settings(overrides)
        if TEXT_UTF8 in self._inputs:
            feeds: dict[str, np.ndarray] = {TEXT_UTF8: utf8_batch(texts)}
        else:
            feeds = {TEXT: np.array(list(texts), dtype=object)}
        languages = {SOURCE_LANGUAGE: source_language, TARGET_LANGUAGE: target_language}
        feeds |= self.language_feeds(languages, len(texts))
        for parameter in GENERATION_PARAMETERS:
            name = parameter.name
            if name in self._inputs:
                feeds[name] = parameter.array(values[name])
            elif values[name] != self.defaults[name]:
                raise GraphgenError(f"{name} is fixed to {self.defaults[name]} in {self.path} (a baked copy)")
        if TRUNCATE in self._inputs:
            feeds[TRUNCATE] = np.array([bool(truncate)])
        elif truncate is not None and truncate != self._baked_truncate:
            raise GraphgenError(f"{self.path} has no truncate input (an older export, or a baked copy)")
        if not texts:
            returns = values[NUM_RETURN_SEQUENCES]
            return {
                TRANSLATION: np.empty((0, returns), dtype=object),
                SEQUENCES: np.empty((0, returns, 0), dtype=np.int32),
                SEQUENCE_SCORES: np.empty((0, returns), dtype=np.float32),
            }
        names = [output.name for output in self._session.get_outputs()]
        try:
            results = dict(zip(names, self._session.run(names, feeds), strict=True))
        except Exception as error:  # ORT's exception types differ between versions
            if SOURCE_TOO_LONG_PREFIX not in str(error):
                raise
            indices = tuple(self.too_long(texts)) if len(texts) > 1 else (0,)
            raise self._too_long_error(indices, len(texts)) from None
        if TRANSLATION not in results:  # a file without strings: its translations are UTF-8 bytes
            data, lengths = results[TRANSLATION_UTF8], results[TRANSLATION_LENGTHS]
            decoded = [
                bytes(row[:n]).decode("utf-8")
                for row, n in zip(data.reshape(-1, data.shape[-1]), lengths.reshape(-1), strict=True)
            ]
            results[TRANSLATION] = np.array(decoded, dtype=object).reshape(lengths.shape)
        return results

    def too_long(self, texts: Sequence[str]) -> list[int]:
        """Indices of the texts with more tokens than the model has positions.

        Each text is checked with a search cut to its first step, so this costs about one encoder
        pass per text.
        """
        cheap: dict[str, Any] = {NUM_BEAMS: 1, NUM_RETURN_SEQUENCES: 1, MAX_LENGTH: 3, MIN_LENGTH: 0}
        cheap = {name: value for name, value in cheap.items() if name in self._inputs}  # a baked copy fixes them
        found = []
        for index, text in enumerate(texts):
            try:
                self.run([text], **cheap)  # the source language is one token whichever it is
            except SourceTooLongError:
                found.append(index)
        return found

    def zero_characters(self, texts: Sequence[str]) -> tuple[tuple[int, ...], str]:
        """The texts holding a U+0000 the file would not see (their indices), and why, said of one.

        In ``text_utf8`` zero bytes after a row's last other byte are padding, so a U+0000 inside a
        text is carried (and tokenized as HF does) but a final one is not; an extensions file's
        string input is read only up to its first U+0000 (the rest of the text would be lost).
        Such texts are refused rather than translated as a different text.
        """
        if TEXT_UTF8 in self._inputs:
            indices = tuple(index for index, text in enumerate(texts) if text.endswith("\0"))
            why = "ends with U+0000, which the file's bytes input cannot carry (its rows are padded with zero bytes)"
        else:
            indices = tuple(index for index, text in enumerate(texts) if "\0" in text)
            why = "holds U+0000, up to which the file's SentencePiece op reads a text (the rest would be lost)"
        return indices, why

    def _check_texts(self, texts: Sequence[str]) -> None:
        """A list of str, none of them with a U+0000 the file cannot carry."""
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise TypeError("texts must be a sequence of str")
        refused, why = self.zero_characters(texts)
        if refused:
            which = "the text" if len(texts) == 1 else f"text {', '.join(map(str, refused))} of the batch"
            if len(refused) > 1:
                which = f"texts {', '.join(map(str, refused))} of the batch: each"
            raise TextInputError(f"{which} {why}; remove it", refused)

    def _too_long_error(self, indices: tuple[int, ...], count: int) -> SourceTooLongError:
        limit = self.max_positions
        which = "the text" if count == 1 else f"text(s) {', '.join(map(str, indices))} of the batch"
        return SourceTooLongError(
            f"{which} {'is' if len(indices) == 1 else 'are'} longer than the model's limit of {limit} tokens; "
            f"shorten {'it' if len(indices) == 1 else 'them'}, or pass truncate=True to cut to the limit",
            limit,
            indices,
        )

    def translate(
        self,
        texts: Sequence[str],
        *,
        batch_size: int | None = None,
        truncate: bool | None = None,
        source_language: str | Sequence[str] | None = None,
        target_language: str | Sequence[str] | None = None,
        **overrides: Any,
    ) -> list[str] | list[list[str]]:
        """One translation per text, or a list of ``num_return_sequences`` per text when > 1.

        ``batch_size``: translate that many texts per run, the longest first, and return the
        translations in the texts' order. A run holds every text's beams and caches at once, so a
        long list in one run (``None``, the default) can need more memory than the machine has.
        Languages as in :meth:`run`.
        """
        languages = {SOURCE_LANGUAGE: source_language, TARGET_LANGUAGE: target_language}
        if batch_size is None:
            return translations(self.run(texts, truncate=truncate, **languages, **overrides))
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
        self._check_texts(texts)  # a refused text named among all the texts, not among those of one run
        self.language_feeds(languages, len(texts))  # their number checked against all the texts
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))  # stable
        results: list[Any] = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            per_run = {  # one code per text: those of this run's texts
                name: [value[i] for i in chosen] if _per_text(value) else value for name, value in languages.items()
            }
            try:
                outputs = self.run([texts[i] for i in chosen], truncate=truncate, **per_run, **overrides)
            except SourceTooLongError as error:
                raise self._too_long_error(tuple(sorted(chosen[i] for i in error.indices)), len(texts)) from None
            for index, result in zip(chosen, translations(outputs), strict=True):
                results[index] = result
        return results

    def used_max_length(self, results: dict[str, np.ndarray], max_length: int) -> list[bool]:
        """Per text of a :meth:`run`: whether a hypothesis of it used every position up to
        ``max_length`` (HF's sequence would be ``max_length`` long), so may have been cut short
        there. ``sequences`` omit a final EOS: a hypothesis whose EOS came in the last position
        counts too (forced there by Marian's ``forced_eos_token_id``, or by chance)."""
        sequences = results[SEQUENCES]
        last = max_length - 2  # the last token's position when a final EOS follows it
        if self._pad_id is None or sequences.ndim != 3 or sequences.shape[2] <= last:
            return [False] * len(sequences)
        return [bool(row.any()) for row in sequences[:, :, last] != self._pad_id]


def _per_text(languages: str | Sequence[str] | None) -> TypeGuard[Sequence[str]]:
    return languages is not None and not isinstance(languages, str) and len(languages) > 1


def translations(results: dict[str, np.ndarray]) -> list[str] | list[list[str]]:
    """A :meth:`Translator.run`'s translations as :meth:`Translator.translate` returns them: one
    string per text, or a list of ``num_return_sequences`` per text when > 1."""
    result = results[TRANSLATION]
    if result.shape[1] == 1:
        return [str(row[0]) for row in result]
    return [[str(text) for text in row] for row in result]
