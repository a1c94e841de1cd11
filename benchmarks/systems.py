"""The systems the speed benchmark compares, each behind the same small interface.

A system is prepared once (export or conversion, outside any timing), then loaded in its own
worker process (``worker.py``), where ``generate`` runs one batch producing exactly
``new_tokens`` tokens per hypothesis. Preparation may need torch; loading and generating use only
what that system needs at run time, so each worker's peak RSS is the system's own.

Every ``generate`` returns the number of decoder steps it took per returned top hypothesis, so the
driver can check that all systems did the same work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

THREADS = 2


def cpu_model() -> str:
    """The processor's name (Linux), which the reports give: CTranslate2's memory depends on it
    (the least memory it translated in was 30-55% higher on an Intel Xeon than on an AMD EPYC)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")


class Runner(Protocol):
    def generate(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> list[int]: ...


@dataclass(frozen=True)
class System:
    key: str  # stable identifier used on the worker's command line
    label: str  # how the report names it
    python: str  # "main" (the project's venv) or "optimum" (optimum-onnx needs transformers 4.x)

    def prepare(self, checkpoint: Path, work: Path) -> None:
        PREPARE[self.key](checkpoint, work)

    def load(self, checkpoint: Path, work: Path) -> Runner:
        return LOAD[self.key](checkpoint, work)

    def size_bytes(self, checkpoint: Path, work: Path) -> int:
        folder = work / self.key
        if not folder.exists():  # HF generate reads the checkpoint itself
            return (checkpoint / "model.safetensors").stat().st_size
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


SYSTEMS = [
    System("hf", "HF generate (torch)", "main"),
    System("seed", "seed: ONNX without KV cache + Python loop", "main"),
    System("optimum", "optimum-onnx ORTModelForSeq2SeqLM (with past)", "optimum"),
    System("ct2-float32", "CTranslate2 float32", "main"),
    System("ct2-int8", "CTranslate2 int8", "main"),
    System("graphgen-fp32", "graphgen fp32", "main"),
    System("graphgen-int8", "graphgen int8", "main"),
    System("graphgen-int4", "graphgen int4", "main"),
    System("graphgen-int8-op", "graphgen int8 --search op (ORT BeamSearch op)", "main"),
    System("graphgen-fp32-ext", "graphgen fp32 --external-data", "main"),
    System("graphgen-int8-ext", "graphgen int8 --external-data", "main"),
    System("graphgen-int4-ext", "graphgen int4 --external-data", "main"),
]
BY_KEY = {system.key: system for system in SYSTEMS}


def _forced_length_kwargs(new_tokens: int) -> dict[str, int]:
    # decoder start + new tokens; min == max forces exactly new_tokens (the last one a forced EOS)
    return {"min_length": new_tokens + 1, "max_length": new_tokens + 1}


# --- HF generate -------------------------------------------------------------------------------


class _HF:
    def __init__(self, checkpoint: Path) -> None:
        import torch
        from transformers import AutoModelForSeq2SeqLM

        torch.set_num_threads(THREADS)
        self.torch = torch
        self.model = AutoModelForSeq2SeqLM.from_pretrained(checkpoint).eval()

    def generate(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> list[int]:
        with self.torch.no_grad():
            out = self.model.generate(
                input_ids=self.torch.from_numpy(ids).long(),
                attention_mask=self.torch.from_numpy(mask).long(),
                num_beams=beams,
                **_forced_length_kwargs(new_tokens),
            )
        return [out.shape[1] - 1] * ids.shape[0]


# --- graphgen ----------------------------------------------------------------------------------


def _prepare_graphgen(key: str, int8: bool, search: str = "auto", int4: bool = False, external_data: bool = False):
    def prepare(checkpoint: Path, work: Path) -> None:
        from graphgen import export

        folder = work / key
        folder.mkdir(parents=True, exist_ok=True)
        export(
            str(checkpoint),
            str(folder / "model.onnx"),
            tokenizer=False,
            int8=int8,
            int4=int4,
            search=search,
            external_data=external_data,
            progress=lambda _: None,
        )

    return prepare


class _Graphgen:
    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        from graphgen.runtime.mapped_weights import session_source
        from graphgen.runtime.translator import session_options

        # loaded as graphgen.Translator loads a file (a single file's weights mapped from it, memory
        # patterns off), without its text-level wrapper
        source = session_source(path)
        options = session_options(THREADS, extensions=False, config=source.config)
        self.session = ort.InferenceSession(source.model, options, providers=["CPUExecutionProvider"])

    def generate(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> list[int]:
        lengths = {k: np.array([v], np.int32) for k, v in _forced_length_kwargs(new_tokens).items()}
        feeds = {"input_ids": ids, "attention_mask": mask, "num_beams": np.array([beams], np.int32), **lengths}
        sequences = self.session.run(["sequences"], feeds)[0]
        # Tokens after the decoder start, plus the final EOS that ORT's hypotheses leave out (HF's keep
        # it) when one ended them (Marian forces it at max_length; M2M100 and mBART do not).
        length = sequences.shape[2]
        ended_by_eos = length < int(lengths["max_length"][0])
        return [length - 1 + ended_by_eos] * ids.shape[0]


# --- CTranslate2 -------------------------------------------------------------------------------


def _prepare_ct2(compute: str):
    def prepare(checkpoint: Path, work: Path) -> None:
        from ctranslate2.converters import TransformersConverter

        TransformersConverter(str(checkpoint)).convert(str(work / f"ct2-{compute}"), quantization=compute, force=True)

    return prepare


class _CT2:
    """CTranslate2 takes token strings; hypotheses exclude EOS, so N decoding steps = N tokens."""

    def __init__(self, checkpoint: Path, folder: Path, compute: str) -> None:
        import ctranslate2

        vocab = json.loads((checkpoint / "vocab.json").read_text(encoding="utf-8"))
        self.pieces = {i: piece for piece, i in vocab.items()}
        self.translator = ctranslate2.Translator(str(folder), device="cpu", compute_type=compute, intra_threads=THREADS)

    def generate(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> list[int]:
        source = [[self.pieces[int(i)] for i in row[keep.astype(bool)]] for row, keep in zip(ids, mask, strict=True)]
        results = self.translator.translate_batch(
            source, beam_size=beams, min_decoding_length=new_tokens, max_decoding_length=new_tokens
        )
        return [len(r.hypotheses[0]) for r in results]


# --- optimum-onnx ------------------------------------------------------------------------------


def _prepare_optimum(checkpoint: Path, work: Path) -> None:
    from optimum.onnxruntime import ORTModelForSeq2SeqLM

    model = ORTModelForSeq2SeqLM.from_pretrained(checkpoint, export=True, use_cache=True)
    model.save_pretrained(work / "optimum")


class _Optimum:
    def __init__(self, folder: Path) -> None:
        import onnxruntime as ort
        import torch
        from optimum.onnxruntime import ORTModelForSeq2SeqLM

        torch.set_num_threads(THREADS)
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.log_severity_level = 3
        self.torch = torch
        self.model = ORTModelForSeq2SeqLM.from_pretrained(folder, session_options=options, use_cache=True)

    def generate(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> list[int]:
        out = self.model.generate(
            input_ids=self.torch.from_numpy(ids).long(),
            attention_mask=self.torch.from_numpy(mask).long(),
            num_beams=beams,
            **_forced_length_kwargs(new_tokens),
        )
        return [out.shape[1] - 1] * ids.shape[0]


# --- registry ----------------------------------------------------------------------------------


def _prepare_seed(checkpoint: Path, work: Path) -> None:
    from seed import export_seed

    export_seed(checkpoint, work / "seed")


def _load_seed(checkpoint: Path, work: Path) -> Runner:
    from seed import SeedTranslator

    return SeedTranslator(checkpoint, work / "seed", THREADS)


def _nothing(checkpoint: Path, work: Path) -> None:
    pass


PREPARE = {
    "hf": _nothing,
    "seed": _prepare_seed,
    "optimum": _prepare_optimum,
    "ct2-float32": _prepare_ct2("float32"),
    "ct2-int8": _prepare_ct2("int8"),
    "graphgen-fp32": _prepare_graphgen("graphgen-fp32", False),
    "graphgen-int8": _prepare_graphgen("graphgen-int8", True),
    "graphgen-int4": _prepare_graphgen("graphgen-int4", False, int4=True),
    "graphgen-int8-op": _prepare_graphgen("graphgen-int8-op", True, search="op"),
    "graphgen-fp32-ext": _prepare_graphgen("graphgen-fp32-ext", False, external_data=True),
    "graphgen-int8-ext": _prepare_graphgen("graphgen-int8-ext", True, external_data=True),
    "graphgen-int4-ext": _prepare_graphgen("graphgen-int4-ext", False, int4=True, external_data=True),
}
LOAD = {
    "hf": lambda checkpoint, work: _HF(checkpoint),
    "seed": _load_seed,
    "optimum": lambda checkpoint, work: _Optimum(work / "optimum"),
    "ct2-float32": lambda checkpoint, work: _CT2(checkpoint, work / "ct2-float32", "float32"),
    "ct2-int8": lambda checkpoint, work: _CT2(checkpoint, work / "ct2-int8", "int8"),
    "graphgen-fp32": lambda checkpoint, work: _Graphgen(work / "graphgen-fp32" / "model.onnx"),
    "graphgen-int8": lambda checkpoint, work: _Graphgen(work / "graphgen-int8" / "model.onnx"),
    "graphgen-int4": lambda checkpoint, work: _Graphgen(work / "graphgen-int4" / "model.onnx"),
    "graphgen-int8-op": lambda checkpoint, work: _Graphgen(work / "graphgen-int8-op" / "model.onnx"),
    "graphgen-fp32-ext": lambda checkpoint, work: _Graphgen(work / "graphgen-fp32-ext" / "model.onnx"),
    "graphgen-int8-ext": lambda checkpoint, work: _Graphgen(work / "graphgen-int8-ext" / "model.onnx"),
    "graphgen-int4-ext": lambda checkpoint, work: _Graphgen(work / "graphgen-int4-ext" / "model.onnx"),
}
