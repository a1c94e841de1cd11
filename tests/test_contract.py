"""The file's contract lives in graphgen/contract.py: the documentation, the exported files and the
code are checked against that one table."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest

from graphgen import contract
from graphgen.contract import (
    GENERATION_PARAMETERS,
    TEXT_FILE_PORTS,
    FileInfo,
    Key,
    generation_settings,
    listed_tags,
    read_file_info,
)
from graphgen.testing import REPO

DOC = REPO / "docs" / "io-contract.md"
ONNX_TYPES = {
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.STRING: "string",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.FLOAT: "float",
    onnx.TensorProto.BOOL: "bool",
}


def _documented_ports() -> dict[str, tuple[str, str]]:
    """name → (direction, "type, shape" cell) from the I/O table of docs/io-contract.md."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def test_the_documented_table_is_the_contract() -> None:
    documented = _documented_ports()
    declared = {
        port.name: (port.direction, f"{port.dtype} " + " or ".join(f"`{shape}`" for shape in port.shapes))
        for port in TEXT_FILE_PORTS
    }
    assert documented == declared


def test_every_metadata_key_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    keys = [value for name, value in vars(Key).items() if name.isupper()]
    assert keys and all(f"`{key}`" in text for key in keys), [k for k in keys if f"`{k}`" not in text]


def test_an_exported_file_has_the_declared_inputs_and_outputs(demo_onnx: Path) -> None:
    """The default file's every input and output is a declared port, with the declared type and rank."""
    model = onnx.load(str(demo_onnx), load_external_data=False)
    ports = {port.name: port for port in TEXT_FILE_PORTS}
    defaults = {tensor.name for tensor in model.graph.initializer}
    for value, direction in [*((v, "in") for v in model.graph.input), *((v, "out") for v in model.graph.output)]:
        port = ports[value.name]
        tensor_type = value.type.tensor_type
        assert ONNX_TYPES[tensor_type.elem_type] == port.dtype, value.name
        assert any(len(tensor_type.shape.dim) == shape.count(",") + 1 for shape in port.shapes), value.name
        optional = value.name in defaults
        assert port.direction == ("in, optional" if optional else direction), value.name
    info = read_file_info(demo_onnx)
    assert info.interface == contract.TEXT_LEVEL and info.tokenizer == contract.PORTABLE
    assert set(info.generation_defaults) >= {p.name for p in GENERATION_PARAMETERS}
    assert not info.needs_extensions


def test_generation_settings_validate_by_the_contract() -> None:
    defaults = {"max_length": 20, "min_length": 0, "num_beams": 4, "num_return_sequences": 1}
    defaults |= {"length_penalty": 1.0, "repetition_penalty": 1.0}
    assert generation_settings(defaults, 64, {"num_beams": 2})["num_beams"] == 2
    for bad, message in [
        ({"num_beams": 0}, "num_beams must be at least 1"),
        ({"num_return_sequences": 5}, "between 1 and num_beams"),
        ({"max_length": 65}, "exceeds the model's 64 positions"),
        ({"min_length": 30}, "min_length must be between 0 and max_length"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be positive"),
        ({"num_beams": 2.5}, "must be an integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            generation_settings(defaults, 64, bad)
    with pytest.raises(TypeError, match="unknown generation setting"):
        generation_settings(defaults, 64, {"top_k": 5})


def test_file_info_reads_what_the_metadata_says() -> None:
    info = FileInfo({Key.INTERFACE: "text", Key.MAX_POSITIONS: "512", Key.BAKED: '{"truncate": true}'})
    assert info.tokenizer == contract.EXTENSIONS  # files from before the choice
    assert info.max_positions == 512 and info.baked == {"truncate": True}
    assert FileInfo({}).max_positions is None and FileInfo({}).languages == []


def test_no_io_name_is_spelled_outside_the_contract() -> None:
    """A name of the file's I/O typed as a literal elsewhere would silently become a new input when
    misspelled: the builders, the runtime and the CLI import it from graphgen.contract. (The HF
    generation config's field names, which coincide, are read in checkpoint/generation.py.)"""
    names = [port.name for port in TEXT_FILE_PORTS] + [contract.INPUT_IDS, contract.ATTENTION_MASK]
    # "text" and "translation" are also the fields of JSON Lines records and Ray rows; "truncate" a keyword
    names = [name for name in names if name not in ("text", "translation", "truncate")]
    alternatives = "|".join(map(re.escape, names))
    pattern = re.compile(rf"""["']({alternatives})["']""")
    keys = re.compile(r"""["']graphgen\.\w+["']""")
    allowed = {"contract.py", "generation.py"}
    offenders = []
    for path in sorted((REPO / "graphgen").rglob("*.py")):
        if path.name in allowed or "testing" in path.parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if (pattern.search(code) and '"batch"' not in code and '"chunk"' not in code) or keys.search(code):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_listed_target_tags_are_those_every_example_parses() -> None:
    """The C, Rust and Java examples read a JSON list of plain strings: a tag they could not read is
    not listed (it still works typed in a text)."""
    tags = [">>fra<<", "<2de>", ">>a b<<", '>>"<<', ">>,<<", ">>a\\b<<", ">>ü<<", ">>\t<<"]
    assert listed_tags(tags) == [">>fra<<", "<2de>", ">>ü<<"]
