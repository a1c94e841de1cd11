"""Read a checkpoint's ``model.safetensors`` (or its shards) as float32 numpy arrays, without torch.

The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw data; reading it here (memory-mapped) also covers bfloat16,
which numpy has no dtype for (its 16 bits are the top half of a float32).
"""

from __future__ import annotations

import json
import mmap
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from graphgen._errors import CheckpointError

_DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "F64": np.float64,
    "I64": np.int64,
    "I32": np.int32,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def safetensors_files(directory: Path) -> list[Path]:
    """The weight files of a safetensors checkpoint, or ``[]`` when it has none."""
    single = directory / "model.safetensors"
    if single.is_file():
        return [single]
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError) as error:
            raise CheckpointError(f"cannot read {index}: {error}") from error
        return [directory / shard for shard in shards]
    return []


def _tensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    try:
        with path.open("rb") as file:
            size = struct.unpack("<Q", file.read(8))[0]
            header = json.loads(file.read(size))
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, struct.error) as error:
        raise CheckpointError(f"cannot read {path} as safetensors: {error}") from error
    start = 8 + size
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = (start + offset for offset in entry["data_offsets"])
        raw = np.frombuffer(data, dtype=np.uint8, count=end - begin, offset=begin)
        if entry["dtype"] == "BF16":
            array = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif entry["dtype"] in _DTYPES:
            array = raw.view(np.dtype(_DTYPES[entry["dtype"]]).newbyteorder("<"))
        else:
            raise CheckpointError(f"{path}: tensor {name} has dtype {entry['dtype']}, which graphgen cannot read")
        yield name, array.reshape(entry["shape"])


def release_pages(array: np.ndarray) -> None:
    """Let the system drop the file pages behind ``array`` once it has been written out.

    A view of the memory-mapped checkpoint keeps every page it was read through resident (and in
    the process's RSS) until the mapping closes; for an array read once, that is the whole export.
    Arrays that are not views of such a mapping are left alone, and so are views whose bytes are not
    one run of memory (a block of rows of a transposed view): the pages they span are still read.
    """
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        return
    base: object = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if not isinstance(base, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    start = np.frombuffer(base, dtype=np.uint8, count=1).__array_interface__["data"][0]
    offset = array.__array_interface__["data"][0] - start
    aligned = offset - offset % mmap.PAGESIZE
    base.madvise(mmap.MADV_DONTNEED, aligned, min(offset - aligned + array.nbytes, len(base) - aligned))


def read_safetensors(files: list[Path]) -> dict[str, np.ndarray]:
    """Every tensor of ``files``, floating-point ones as float32.

    float32 tensors stay read-only views of the memory-mapped file: the export then holds no
    private copy of the checkpoint (the pages are the file's, read as they are written out, and
    the system may drop them again). Other float types are converted into float32 copies.
    """
    tensors: dict[str, np.ndarray] = {}
    for path in files:
        for name, array in _tensors(path):
            if array.dtype == np.dtype("<f4"):
                tensors[name] = array.view(np.float32)
            elif np.issubdtype(array.dtype, np.floating):
                tensors[name] = array.astype(np.float32)
            else:
                tensors[name] = array.copy()
    return tensors
