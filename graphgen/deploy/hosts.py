"""Which hosts run a given file, and how: docs/platforms.md's measured rules applied to one file.

A file says what it is in its metadata (``contract.FileInfo``) and which inputs a caller must feed
(``contract.FileInputs``); the hosts differ in what they can load and feed. ``graphgen info`` prints
the verdicts, so that whoever holds a file (exported by someone else, or months ago) learns before
writing code that, say, JavaScript will run it with 4 beams whatever it asks, or that WebGPU would
compute it wrongly. Reads metadata only: no session is created, no weight is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphgen.contract import (
    ID_INPUTS,
    ID_LEVEL,
    LANGUAGE_UTF8_INPUTS,
    TEXT,
    TEXT_LEVEL,
    TEXT_UTF8,
    FileInfo,
    FileInputs,
    Key,
)

# onnxruntime-web 1.31.1's WebGPU MatMulNBits: right with these block sizes, wrong (no error) with
# 64 and 128 (benchmarks/webgpu_kernels_report.md); examples/node/translate.js applies the same rule.
WEBGPU_INT4_BLOCK_SIZES = (16, 32)


@dataclass(frozen=True)
class Host:
    name: str
    runs: bool
    note: str


def _languages(info: FileInfo) -> str:
    target = info.target_language or "none forced (the checkpoint's first token)"
    return f"languages {info.source_language} → {target}"


_UTF8_NAMES = {utf8: name for name, utf8 in LANGUAGE_UTF8_INPUTS.items()}  # a --no-strings file's languages


def _settings(names: tuple[str, ...]) -> list[str]:
    """The settings and languages among ``names`` (not the texts or ids), by their usual names."""
    data = {TEXT, TEXT_UTF8, *ID_INPUTS}
    return list(dict.fromkeys(_UTF8_NAMES.get(name, name) for name in names if name not in data))


def _choices(info: FileInfo, inputs: FileInputs) -> str:
    """What a host that cannot feed optional inputs (Java, JavaScript) gets from this file."""
    optional, kept = _settings(inputs.optional), _settings(inputs.required)
    parts = []
    if kept:
        parts.append(f"feeds {', '.join(kept)} on every call (kept by graphgen bake)")
    if optional:
        defaults = info.generation_defaults
        values = [f"{name} {defaults[name]}" for name in optional if name in defaults]
        languages = any(name in LANGUAGE_UTF8_INPUTS for name in optional)
        if languages:
            values.append(_languages(info))
        parts.append(
            f"cannot feed {', '.join(optional)}: runs with {', '.join(values) or 'the defaults'}; "
            f"to choose them per call, a copy made with `graphgen bake --keep NAMES`"
            + (" (--keep-languages for the languages)" if languages else "")
        )
    return "; ".join(parts) or "feeds every input it has (the settings are fixed in this copy)"


def _per_call(inputs: FileInputs) -> str:
    """What Python and the C API choose per call: every optional input, and what a copy kept."""
    if inputs.optional:
        return "every setting chosen per call (the optional inputs)"
    kept = _settings(inputs.required)
    return "the settings fixed in this copy (graphgen bake)" + (f", {', '.join(kept)} per call" if kept else "")


def hosts(info: FileInfo, inputs: FileInputs) -> list[Host]:
    """One verdict per host, in the order of docs/platforms.md's table."""
    floor = f"ONNX Runtime {info.metadata.get(Key.MIN_ONNXRUNTIME, '1.17')} or newer"
    extensions = info.needs_extensions
    needs = f"; with onnxruntime-extensions {info.metadata.get(Key.MIN_EXTENSIONS, '')} or newer"
    if info.interface == ID_LEVEL:
        python = f"{floor}: a plain session, token ids in and out (graphgen.Translator takes text files)"
    else:
        python = f"{floor}; graphgen.Translator, {_per_call(inputs)}"
    found = [Host("Python", True, python + (needs if extensions else ""))]
    library = "; register the extensions library file" if extensions else ""
    found.append(Host("C, C++, Rust, Go (the C API)", True, f"{floor}; {_per_call(inputs)}{library}"))
    jar = "; needs the onnxruntime-extensions jar" if extensions else ""
    found.append(Host("Java", True, f"{_choices(info, inputs)}{jar}"))
    javascript = "JavaScript (onnxruntime-node, onnxruntime-web, browsers)"
    if extensions:
        refusal = "cannot load the extensions tokenizer: export with the default --tokenizer onnx"
        found += [Host(javascript, False, refusal), Host("WebGPU (onnxruntime-web)", False, refusal)]
    else:
        found += [Host(javascript, True, _choices(info, inputs)), _webgpu(info)]
    found.append(_cuda(info))
    if extensions:
        mobile = (
            "needs onnxruntime-extensions in the app (not in Google Play's AAR, not in React Native): "
            "export with the default --tokenizer onnx"
        )
    else:
        mobile = "`graphgen export --ort` writes the .ort file; the stock onnxruntime-android and -objc packages run it"
    found.append(Host("Android, iOS", not extensions, mobile))
    if info.metadata.get(Key.SEARCH) == "op":  # ORT's BeamSearch op: only the Python matrix ran it
        untested = "ORT's BeamSearch op (--search op) was run here from Python only; the default loop search everywhere"
        found = [found[0], *(Host(host.name, host.runs, f"{host.note}; {untested}") for host in found[1:])]
    return found


def _webgpu(info: FileInfo) -> Host:
    name = "WebGPU (onnxruntime-web)"
    if info.precision == "int4" and info.int4_block_size not in WEBGPU_INT4_BLOCK_SIZES:
        blocks = f"blocks of {info.int4_block_size}" if info.int4_block_size else "an unrecorded block size"
        return Host(name, False, f"computes int4 in {blocks} wrongly: export with --int4 --int4-block-size 32")
    if info.precision == "float16":
        return Host(name, False, "only on an adapter with shader-f16 (empty translations without; not measured with)")
    note = "the int8 products run on the WebAssembly side" if info.precision == "int8" else "as on the CPU"
    return Host(name, True, f"run on a software GPU only (SwiftShader): {note}")


def _cuda(info: FileInfo) -> Host:
    name = "NVIDIA GPU (onnxruntime-gpu, CUDA)"
    notes = []
    if info.interface == TEXT_LEVEL:
        entries = ", ".join(f"{key}={value}" for key, value in info.session_config.items())
        notes.append(f"set {entries} (ONNX Runtime 1.25 or newer; Translator does): the tokenizer stays on the CPU")
    if info.precision in ("int8", "int4"):
        notes.append(f"{info.precision} files are made for CPUs; not run on a GPU")
    elif info.interface == TEXT_LEVEL or info.precision == "float16":
        notes.append("not run on a GPU yet (text files and float16 loop search: benchmarks/gpu.py)")
    else:
        notes.append("an earlier build's float32 id-level files ran on CUDA, equal to HF generate (2026-12-04)")
    return Host(name, True, "; ".join(notes))
