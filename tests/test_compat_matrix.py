"""The exported files on the ONNX Runtime and onnxruntime-extensions releases other bindings ship.

Java's and Android's extensions packages are 0.13.0, C#'s is 0.14.0; mobile apps and services pin
older runtimes. Each cell of the matrix is a throwaway virtual environment with just those two
packages and numpy (no pip, no dependencies: 120-160 MB, built in seconds and deleted once the cell
has run, so the suite's disk use does not grow with the matrix); the demo test set goes through the
text-level files (the default portable tokenizer, float32 and int8, and the extensions-based one)
and the id-level files (float32 and int8 with the default loop search, and ORT's BeamSearch op
with ``--search op``); they must give what HF and the newest runtime give. So must the text files
of the other families (NLLB, M2M100, mBART-50 with a target language per row; T5 with its relative
position bias), built here with random weights. The portable files also run in cells that have
no extensions package at all (``ort-only``): ONNX Runtime and numpy, nothing else.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from transformers import MarianMTModel, MarianTokenizer

from graphgen import Translator, export
from graphgen._graphs import all_initializers
from graphgen.contract import read_file_info
from graphgen.passes.compat import MIN_EXTENSIONS, MIN_ONNXRUNTIME
from graphgen.runtime.mapped_weights import session_source, supported
from graphgen.testing import FAMILIES, REPO, demo_sources, demo_texts, family_checkpoint, hf_translate, open_session

ORT_RELEASES = ("1.17.3", "1.20.1", "1.24.4", "1.32.0")  # the floor, the floor, a middle one, the newest
EXTENSIONS_RELEASES = ("0.13.0", "0.14.0", "0.15.2")  # Java/Android, C#, PyPI's newest
NO_EXTENSIONS = "none"
CELLS = [(runtime, extensions) for runtime in ORT_RELEASES for extensions in (*EXTENSIONS_RELEASES, NO_EXTENSIONS)]
SOURCES = demo_sources()
BATCH = 16
ID_FILES = ("ids", "ids-int8", "ids-int8-external", "ids-op", "ids-int8-mapped")
# files whose output must equal another file's: the weights beside the file (twinned table, mapped),
# and a single file loaded as Translator does, its weights mapped from it (runtime.mapped_weights)
SAME_AS = {"ids-int8-external": "ids-int8", "ids-int8-mapped": "ids-int8", "text-mapped": "text"}
# what Translator loads from a single file where ONNX Runtime allows it (1.21 on; before, it fails),
# given in the cells without the extensions library (the mapping does not depend on it)
MAPPED = ("text-mapped", "ids-int8-mapped")
PORTABLE_TEXT = ("text", "text-int8", "text-int4", "text-mapped")  # the default: the tokenizer in standard ONNX ops
EXTENSIONS_TEXT = ("text-extensions",)
FAMILY_SENTENCES = demo_texts()[:48]
# file name → the FAMILIES row: one per tokenizer kind (T5: the original, tied head and relative
# position bias in both stacks; no languages, the task is in the text)
MATRIX_FAMILIES = {f"{name}-text": FAMILIES[name] for name in ("nllb", "m2m100", "mbart50", "t5")}
# NLLB also as int8, in the same batches: the same strings on every cell (each row of an int8
# product has its own activation scale; with one scale per tensor, graphgen's int8 until 2026-12-07,
# 1.17-1.24 and 1.32 differed on 3 of 48 rows in batches of 16). A random-weight T5 is too unstable
# under int8 for that (its int8 file agrees with its float32 file on 9 of 48 sentences, and runtimes
# differ in the last bits), so T5 is checked in float32 only.
FAMILY_INT8 = ("nllb-text",)
FAMILY_EXTENSIONS = ("nllb-text",)  # the families' extensions-based files are checked through NLLB's
FAMILY_FILES = [
    *MATRIX_FAMILIES,
    *(f"{name}-int8" for name in FAMILY_INT8),
    *(f"{name}-extensions" for name in FAMILY_EXTENSIONS),
]


def _cell_requirements(runtime: str, extensions: str) -> list[str]:
    """What a cell installs: ONNX Runtime, numpy and (unless ``none``) the extensions, nothing else.

    ONNX Runtime's other dependencies (sympy, protobuf, flatbuffers, coloredlogs, packaging) serve
    its tools, not ``InferenceSession``; leaving them out is also what a minimal deployment does.
    """
    numpy = "numpy<2" if tuple(map(int, runtime.split(".")[:2])) < (1, 19) else "numpy<2.4"
    packages = [f"onnxruntime=={runtime}", numpy]
    if extensions != NO_EXTENSIONS:
        packages.append(f"onnxruntime-extensions=={extensions}")
    return packages


def _run_cell(cell: tuple[str, str], request: Path) -> dict:
    """The runner's report from a fresh venv of the cell, which is deleted afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=f"graphgen-cell-{cell[0]}-{cell[1]}-"))
    try:
        venv.create(folder, with_pip=False)
        python = folder / "bin" / "python"
        install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps"]
        done = subprocess.run([*install, *_cell_requirements(*cell)], capture_output=True, text=True)
        assert done.returncode == 0, f"{cell}: installing failed: {done.stderr[-3000:]}"
        done = subprocess.run(
            [python, REPO / "tests" / "compat_runner.py", request], capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"{cell}: {done.stderr[-3000:]}"
        return json.loads(done.stdout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _needs_extensions(name: str) -> bool:
    return name.endswith("extensions")


@pytest.fixture(scope="module")
def files(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("matrix")
    paths = {}
    for name, options in {
        "text": {},
        "text-int8": {"int8": True},
        "text-int4": {"int4": True},
        "text-extensions": {"tokenizer": "extensions"},
        "ids": {"tokenizer": False},
        "ids-int8": {"tokenizer": False, "int8": True},
        "ids-int8-external": {"tokenizer": False, "int8": True, "external_data": True},
        "ids-op": {"tokenizer": False, "search": "op"},  # ORT's BeamSearch op instead of the loop
    }.items():
        paths[name] = folder / f"{name}.onnx"
        export(str(demo_dir), str(paths[name]), progress=lambda _: None, **options)
    return paths


@pytest.fixture(scope="module")
def id_batches(demo_dir: Path) -> list[dict[str, list[list[int]]]]:
    tokenizer = MarianTokenizer.from_pretrained(demo_dir)
    batches = []
    for start in range(0, len(SOURCES), BATCH):
        encoded = tokenizer(SOURCES[start : start + BATCH], padding=True, return_tensors="np")
        batches.append({k: encoded[k].astype(np.int32).tolist() for k in ("input_ids", "attention_mask")})
    return batches


@pytest.fixture(scope="module")
def family_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[dict[str, list[str]]]]]:
    """name → (text file, its batches of string inputs): 48 sentences, a target language per row.
    NLLB also as an int8 file."""
    folder = tmp_path_factory.mktemp("families")
    out = {}
    for name, family in MATRIX_FAMILIES.items():
        directory = folder / name
        family_checkpoint(directory, family.name, num_beams=4)
        export(directory, directory / "model.onnx", progress=lambda _: None)
        if name in FAMILY_INT8:
            export(directory, directory / "int8.onnx", int8=True, progress=lambda _: None)
        if name in FAMILY_EXTENSIONS:
            export(directory, directory / "extensions.onnx", tokenizer="extensions", progress=lambda _: None)
        batches = []
        for start in range(0, len(FAMILY_SENTENCES), BATCH):
            texts = FAMILY_SENTENCES[start : start + BATCH]
            if family.has_languages:
                languages = {
                    "source_language": [family.source_language],
                    "target_language": [family.target_languages[i % 3] for i in range(len(texts))],
                }
                batches.append({"text": texts, **languages})
            else:
                batches.append({"text": family.texts(texts)})
        out[name] = (directory / "model.onnx", batches)
        if name in FAMILY_INT8:
            out[f"{name}-int8"] = (directory / "int8.onnx", batches)
        if name in FAMILY_EXTENSIONS:
            out[f"{name}-extensions"] = (directory / "extensions.onnx", batches)
    return out


@pytest.fixture(scope="module")
def expected(demo_dir: Path, files: dict[str, Path], id_batches: list, family_files: dict) -> dict[str, object]:
    """HF generate for float32 text; the newest runtime (this venv) for int8, the ids and the other
    families (whose files equal HF on it: tests/test_family_parity.py)."""
    model = MarianMTModel.from_pretrained(demo_dir).eval()
    tokenizer = MarianTokenizer.from_pretrained(demo_dir)
    hf = []
    for start in range(0, len(SOURCES), BATCH):
        hf += hf_translate(model, tokenizer, SOURCES[start : start + BATCH])
    newest = {name: Translator(files[name]) for name in ("text-int8", "text-int4")}
    ids = {}
    for name in ID_FILES:
        session = open_session(files[SAME_AS.get(name, name)])
        ids[name] = [
            session.run(["sequences"], {k: np.array(v, dtype=np.int32) for k, v in batch.items()})[0].tolist()
            for batch in id_batches
        ]
    families = {}
    for name, (path, batches) in family_files.items():
        translator = Translator(path)
        families[name] = [
            t
            for batch in batches
            for t in translator.translate(batch["text"], **{k: v for k, v in batch.items() if k != "text"})
        ]
    return {
        "text": hf,
        "text-extensions": hf,
        **families,
        **{
            name: [t for s in range(0, len(SOURCES), BATCH) for t in translator.translate(SOURCES[s : s + BATCH])]
            for name, translator in newest.items()
        },
        **ids,
    }


@pytest.fixture(scope="module")
def matrix(
    files: dict[str, Path], id_batches: list, family_files: dict, tmp_path_factory: pytest.TempPathFactory
) -> dict:
    """Every cell's results (cells run two at a time)."""
    text_batches = [SOURCES[s : s + BATCH] for s in range(0, len(SOURCES), BATCH)]
    request = tmp_path_factory.mktemp("request") / "request.json"
    # "text": strings through the extensions library; "utf8": bytes, no library registered
    jobs = [
        {
            "name": name,
            "kind": "text" if _needs_extensions(name) else "utf8",
            "model": str(files[name]),
            "batches": text_batches,
        }
        for name in (*PORTABLE_TEXT, *EXTENSIONS_TEXT)
        if name not in MAPPED
    ]
    jobs += [
        {"name": name, "kind": "ids", "model": str(files[name]), "batches": id_batches}
        for name in ID_FILES
        if name not in MAPPED
    ]
    jobs += [
        {"name": name, "kind": "text" if _needs_extensions(name) else "utf8", "model": str(path), "batches": b}
        for name, (path, b) in family_files.items()
    ]
    for job in jobs:  # the session config entries each file asks for, set as a host would
        job["config"] = read_file_info(job["model"]).session_config
    mapped = []
    for name in MAPPED:
        single = files[SAME_AS[name]]
        source = session_source(single)
        assert isinstance(source.model, bytes), name
        given = tmp_path_factory.mktemp("mapped") / f"{name}.onnx"
        given.write_bytes(source.model)
        text = name.startswith("text")
        mapped.append(
            {
                "name": name,
                "kind": "utf8" if text else "ids",
                "model": str(given),
                "from_bytes": True,
                "config": read_file_info(single).session_config | source.config,
                "batches": text_batches if text else id_batches,
            }
        )
    request.write_text(json.dumps({"jobs": jobs}), encoding="utf-8")
    no_library = tmp_path_factory.mktemp("request") / "request.json"  # the cells without extensions
    no_library_jobs = [job for job in jobs if job["kind"] != "text"] + mapped
    no_library.write_text(json.dumps({"jobs": no_library_jobs}), encoding="utf-8")

    def run(cell: tuple[str, str]) -> dict:
        return _run_cell(cell, no_library if cell[1] == NO_EXTENSIONS else request)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(CELLS, pool.map(run, CELLS), strict=True))


@pytest.mark.parametrize(
    "cell", CELLS, ids=[f"ort{r}-ext{e}" if e != NO_EXTENSIONS else f"ort{r}-only" for r, e in CELLS]
)
@pytest.mark.parametrize("name", [*PORTABLE_TEXT, *EXTENSIONS_TEXT, *ID_FILES, *FAMILY_FILES])
def test_cell_gives_the_same_output(matrix: dict, expected: dict, cell: tuple[str, str], name: str) -> None:
    report = matrix[cell]
    assert report["versions"] == {"onnxruntime": cell[0], "extensions": cell[1]}
    if cell[1] == NO_EXTENSIONS and _needs_extensions(name):
        assert name not in report["results"]  # not asked: no library to run it with
        return
    if name in MAPPED and cell[1] != NO_EXTENSIONS:
        assert name not in report["results"]  # asked in the cells without the library only
        return
    if name in MAPPED and not supported(cell[0]):  # why Translator reads the file whole there
        assert "error" in report["results"][name], f"{name} loads on {cell}: map the weights there too"
        return
    got = report["results"][name]
    assert not isinstance(got, dict), f"{name} on {cell}: {got}"
    if name in ID_FILES:
        assert got == expected[name]
    else:
        differ = [(e, a) for e, a in zip(expected[SAME_AS.get(name, name)], got, strict=True) if e != a]
        assert not differ, f"{len(differ)}/{len(got)} differ on {cell}: {differ[:3]}"


def test_floor_is_recorded_in_the_file(files: dict[str, Path], family_files: dict) -> None:
    for name, path in [*files.items(), *((name, path) for name, (path, _) in family_files.items())]:
        props = {p.key: p.value for p in onnx.load(path, load_external_data=False).metadata_props}
        assert props["graphgen.min_onnxruntime"] == MIN_ONNXRUNTIME == ORT_RELEASES[0].rsplit(".", 1)[0]
        if _needs_extensions(name):
            assert props["graphgen.min_extensions"] == MIN_EXTENSIONS == EXTENSIONS_RELEASES[0].rsplit(".", 1)[0]
        else:  # the id-level files and the portable text files need no extensions package
            assert "graphgen.min_extensions" not in props


def test_compatibility_passes_hold_in_every_file(files: dict[str, Path]) -> None:
    """What the old releases need, checked on the files themselves (the cells above show it works)."""
    from graphgen.passes.compat import _search_nodes, outer_reads

    for path in files.values():
        model = onnx.load(path)
        initializers = {t.name for t in all_initializers(model.graph)}
        for node in _search_nodes(model.graph):
            parts = {a.name: a.g for a in node.attribute if a.name in ("encoder", "decoder")}
            reads = {role: outer_reads(graph) & initializers for role, graph in parts.items()}
            assert reads["encoder"] == reads["decoder"], path.name
            for graph in parts.values():
                assert reads["encoder"] <= {v.name for v in graph.value_info}, path.name


def test_runner_is_standalone() -> None:
    """The runner imports nothing of graphgen's (a matrix venv has only ORT, extensions, numpy)."""
    source = (REPO / "tests" / "compat_runner.py").read_text(encoding="utf-8")
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "importlib", "json", "sys", "pathlib", "numpy", "onnxruntime"}, imports
