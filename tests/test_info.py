"""``graphgen info``: a file's inputs read without loading it, and the verdict per host."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

from graphgen import export
from graphgen.cli import main
from graphgen.contract import GENERATION_PARAMETERS, TRUNCATE, read_file_info, read_file_inputs
from graphgen.deploy.hosts import hosts
from graphgen.passes.bake import write_baked
from graphgen.testing import REPO

JAVASCRIPT = "JavaScript (onnxruntime-node, onnxruntime-web, browsers)"
WEBGPU = "WebGPU (onnxruntime-web)"


def _onnx_view(path: Path) -> tuple[list[str], list[str]]:
    """Required and optional inputs as onnx's own parser sees them (the reference)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    defaults = {tensor.name for tensor in graph.initializer}
    names = [value.name for value in graph.input]
    return [n for n in names if n not in defaults], [n for n in names if n in defaults]


@pytest.fixture(scope="module")
def files(
    text_file_kinds: dict[str, Path], demo_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("info")
    kinds = ("marian-onnx", "marian-extensions", "marian-onnx-fp16", "nllb-onnx")
    made = {name: text_file_kinds[name] for name in kinds}
    made["int8"] = text_file_kinds["marian-onnx-int8"]
    for name, options in {"int4": {}, "int4-32": {"int4_block_size": 32}}.items():
        made[name] = folder / f"{name}.onnx"
        export(demo_dir, made[name], int4=True, progress=lambda _: None, **options)
    made["ids"] = folder / "ids.onnx"
    export(demo_dir, made["ids"], tokenizer=False, progress=lambda _: None)
    made["op"] = folder / "op.onnx"
    export(demo_dir, made["op"], tokenizer=False, search="op", progress=lambda _: None)
    made["kept"] = folder / "kept.onnx"
    write_baked(made["marian-onnx"], made["kept"], keep=("num_beams", "max_length"))
    made["nllb-languages"] = folder / "nllb-languages.onnx"
    write_baked(made["nllb-onnx"], made["nllb-languages"], keep_languages=True)
    made["external"] = folder / "external.onnx"
    export(demo_dir, made["external"], external_data=True, progress=lambda _: None)
    return made


def test_inputs_read_as_onnx_reads_them(files: dict[str, Path]) -> None:
    for name, path in files.items():
        inputs = read_file_inputs(path)
        assert (list(inputs.required), list(inputs.optional)) == _onnx_view(path), name
    demo = read_file_inputs(files["marian-onnx"])
    assert demo.required == ("text_utf8",)
    assert demo.optional == (*(p.name for p in GENERATION_PARAMETERS), TRUNCATE)
    assert read_file_inputs(files["kept"]).required == ("text_utf8", "max_length", "num_beams")
    assert read_file_inputs(files["external"]).external_data == ("external.onnx.data",)
    assert read_file_inputs(files["marian-onnx"]).external_data == ()


def _verdicts(path: Path) -> dict[str, tuple[bool, str]]:
    return {host.name: (host.runs, host.note) for host in hosts(read_file_info(path), read_file_inputs(path))}


def test_the_verdicts_follow_the_measured_rules(files: dict[str, Path]) -> None:
    demo = _verdicts(files["marian-onnx"])
    assert all(runs for runs, _ in demo.values())
    # Java and JavaScript cannot feed optional inputs: the defaults they get, and the way out
    assert "runs with max_length 512, min_length 0, num_beams 4" in demo[JAVASCRIPT][1]
    assert "graphgen bake --keep" in demo["Java"][1]
    assert "feeds max_length, num_beams on every call" in _verdicts(files["kept"])[JAVASCRIPT][1]
    languages = _verdicts(files["nllb-languages"])
    assert "feeds source_language, target_language on every call" in languages["Java"][1]
    assert "--keep-languages" in _verdicts(files["nllb-onnx"])[JAVASCRIPT][1]
    extensions = _verdicts(files["marian-extensions"])
    assert not extensions[JAVASCRIPT][0] and "--tokenizer onnx" in extensions[JAVASCRIPT][1]
    assert not extensions["Android, iOS"][0] and "onnxruntime-extensions jar" in extensions["Java"][1]
    # onnxruntime-web's WebGPU kernels: int4 right only in blocks of 16 or 32, float16 needs shader-f16
    refused = (False, "computes int4 in blocks of 64 wrongly: export with --int4 --int4-block-size 32")
    assert _verdicts(files["int4"])[WEBGPU] == refused
    assert _verdicts(files["int4-32"])[WEBGPU][0]
    assert not _verdicts(files["marian-onnx-fp16"])[WEBGPU][0]
    assert _verdicts(files["int8"])[WEBGPU][0]
    assert "a plain session, token ids" in _verdicts(files["ids"])["Python"][1]
    op = _verdicts(files["op"])
    assert "--search op" in op["Java"][1] and "--search op" not in op["Python"][1]
    assert "--search op" not in demo["Java"][1]


def test_the_command(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(files["int4"])]) == 0
    out = capsys.readouterr().out
    assert "loop, int4 in blocks of 64" in out and "NO   WebGPU (onnxruntime-web)" in out
    assert main(["info", str(files["nllb-onnx"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["metadata"] == read_file_info(files["nllb-onnx"]).metadata
    assert report["inputs"]["required"] == ["text_utf8"] and len(report["hosts"]) == 7
    assert main(["info", str(files["nllb-onnx"]), "--languages"]) == 0
    assert "zho_Hans" in capsys.readouterr().out  # the whole list, not its first six
    assert main(["info", str(files["external"])]) == 0
    assert "weights in external.onnx.data" in capsys.readouterr().out


def test_target_tags_are_hf_marian_codes(
    files: dict[str, Path], demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A text file lists the tokens typed first in a text that choose the target: for opus-mt,
    HF's ``MarianTokenizer.supported_language_codes``, in its order (MADLAD's: tests/test_madlad.py)."""
    from transformers import MarianTokenizer

    from graphgen import Translator

    expected = MarianTokenizer.from_pretrained(demo_dir).supported_language_codes
    assert expected == [">>cmn_Hans<<", ">>cmn_Hant<<"]
    for kind in ("marian-onnx", "marian-extensions", "int8", "kept"):
        assert read_file_info(files[kind]).target_tags == expected, kind
    assert Translator(files["marian-onnx"]).target_tags == expected
    assert read_file_info(files["nllb-onnx"]).target_tags == [] and read_file_info(files["ids"]).target_tags == []
    assert main(["info", str(files["marian-onnx"])]) == 0
    assert "target tags  2: >>cmn_Hans<<, >>cmn_Hant<<, typed first in the text" in capsys.readouterr().out


def test_int8_activations(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An int8 file says that it quantizes per row; one without the entry (exported before 2026-12-07,
    one scale per tensor) is named as batch-dependent, with the remedy."""
    assert read_file_info(files["int8"]).int8_activations == "row"
    assert read_file_info(files["marian-onnx"]).int8_activations is None
    assert main(["info", str(files["int8"])]) == 0
    assert "int8, activations quantized per row" in capsys.readouterr().out
    older = onnx.load(str(files["int8"]))
    kept = [entry for entry in older.metadata_props if entry.key != "graphgen.int8_activations"]
    del older.metadata_props[:]
    older.metadata_props.extend(kept)
    onnx.save(older, str(tmp_path / "older.onnx"))
    assert read_file_info(tmp_path / "older.onnx").int8_activations == "tensor"
    assert main(["info", str(tmp_path / "older.onnx")]) == 0
    assert "per tensor (an input's result can depend on its batch: export again)" in capsys.readouterr().out


def test_refusals(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.onnx"
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    onnx.save(onnx.helper.make_model(graph), str(plain))
    (tmp_path / "text.txt").write_text("not a model\n")
    (tmp_path / "empty.onnx").write_bytes(b"")
    cases = {
        plain: "was not written by graphgen export",
        tmp_path / "text.txt": "cannot read",
        tmp_path / "empty.onnx": "cannot read",
        tmp_path / "missing.onnx": "does not exist",
    }
    for path, message in cases.items():
        assert main(["info", str(path)]) == 2
        assert message in capsys.readouterr().err


def test_info_reads_no_weights_and_imports_no_onnx(files: dict[str, Path]) -> None:
    script = textwrap.dedent(f"""
        import sys
        from graphgen.cli import main
        assert main(["info", {str(files["marian-onnx"])!r}]) == 0
        bad = [m for m in ("onnx", "torch", "transformers") if m in sys.modules]
        assert not bad, bad
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
