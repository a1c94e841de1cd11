"""The last stage: write the model atomically, with external data when protobuf cannot hold it.

The weights reach the disk as the model is assembled (``StreamedWeights``): into the external data
file, or into a staging file that ``deploy.inline`` copies into the one ``.onnx``.

The file appears at its final path only once it is complete (written into a staging directory
beside it, then ``os.replace``d), so an interrupted export never leaves a half-written model that
a later ``InferenceSession`` would choke on. A staging directory is named after the process that
made it; one left by a killed export (``kill -9`` gives no chance to clean up) is removed by the
next export into the same directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto

from graphgen._errors import OutputPathError
from graphgen._graphs import all_initializers
from graphgen.checkpoint.safetensors import release_pages
from graphgen.deploy.inline import inline_pieces, inline_size, write_inline
from graphgen.deploy.shared_data import separate_unpacked_readers

EXTERNAL_DATA_THRESHOLD = int(1.8 * 2**30)  # leave room for the graph itself


_STAGING = re.compile(r"\..*\.graphgen-staging-(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_staging(folder: Path) -> None:
    """Delete staging directories in ``folder`` whose export process no longer runs."""
    for entry in folder.glob(".*.graphgen-staging-*"):
        match = _STAGING.match(entry.name)
        if match and entry.is_dir() and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


@contextlib.contextmanager
def staging_directory(folder: Path, name: str) -> Iterator[Path]:
    """A fresh directory beside the output, removed on exit; files are moved out of it when complete."""
    try:
        staging = tempfile.mkdtemp(dir=folder, prefix=f".{name}.graphgen-staging-{os.getpid()}-")
    except OSError as error:
        raise OutputPathError(f"cannot create files in {folder}: {error.strerror}") from error
    try:
        yield Path(staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def check_output_path(path: Path) -> Path:
    """Fail before any slow work if the output cannot be written.

    Permission bits do not say everything (root passes ``os.access`` on ``/proc``, a read-only
    mount passes it too), so a staging directory is actually made and removed again.
    """
    path = path.expanduser().resolve()
    if path.is_dir():
        raise OutputPathError(f"{path} is a directory; give a file name such as {path / 'model.onnx'}")
    parent = path.parent
    if not parent.is_dir():
        raise OutputPathError(f"directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise OutputPathError(f"directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"{path} exists and is not writable")
    with staging_directory(parent, path.name):
        pass
    remove_stale_staging(parent)
    return path


def _weights_bytes(model: ModelProto) -> int:
    return sum(len(tensor.raw_data) for tensor in all_initializers(model.graph))


def past_protobuf_limit(weight_bytes: float) -> bool:
    """Whether weights of this size are written as external data (read at call time: tests lower it)."""
    return weight_bytes > EXTERNAL_DATA_THRESHOLD


# Offsets of streamed tensors are multiples of this, so that a runtime can map them from the file.
DATA_ALIGNMENT = 4096
# Tensors smaller than this stay inside the .onnx (as onnx.save_model's size_threshold does).
INLINE_BYTES = 1024
BYTES_PER_WRITE = 16 * 2**20  # a transposed weight is copied into C order this much at a time


class StreamedWeights:
    """A data file the weights go to while the model is assembled.

    Each weight goes from its array (often a view of the memory-mapped checkpoint) to the file in
    blocks of rows, and its ``TensorProto`` only points at it: the model's bytes are never all in
    memory, as they would be in a ``ModelProto`` handed to ``onnx.save_model``. With ``mapped`` the
    file is the model's external data, which ONNX Runtime memory-maps (the weight formats lay some
    tables out for that, ``model.weights``); otherwise ``save_model`` copies the weights from it into
    the one ``.onnx`` file (``deploy.inline``).
    """

    def __init__(self, staging: Path, name: str, mapped: bool = True) -> None:
        self.name = name
        self.path = staging / name
        self.mapped = mapped
        self.file = self.path.open("wb")

    def holds(self, array: np.ndarray) -> bool:
        return array.nbytes >= INLINE_BYTES

    def write(self, tensor: onnx.TensorProto, array: np.ndarray) -> None:
        """Append ``array`` (C order) and point ``tensor`` (name, type and dims set) at it."""
        padding = -self.file.tell() % DATA_ALIGNMENT
        self.file.write(b"\0" * padding)
        offset = self.file.tell()
        rows = array.reshape(1, -1) if array.ndim < 2 else array.reshape(array.shape[0], -1)
        step = max(1, BYTES_PER_WRITE // max(1, rows[0].nbytes))
        for start in range(0, rows.shape[0], step):
            block = rows[start : start + step]
            self.file.write(np.ascontiguousarray(block).data)
            release_pages(block)  # a table's pages go as it is written (NLLB's is 1 GB)
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.name), ("offset", str(offset)), ("length", str(array.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value


@contextlib.contextmanager
def streamed_weights(path: Path, mapped: bool = True) -> Iterator[StreamedWeights]:
    """A ``StreamedWeights`` for the model to be saved at ``path`` (its data file ``path.data``), in a
    staging directory until ``save_model`` moves it out (``mapped``) or copies it into the model."""
    with staging_directory(path.parent, path.name + ".data") as staging:
        weights = StreamedWeights(staging, path.name + ".data", mapped)
        try:
            yield weights
        except OSError as error:
            raise OutputPathError(f"cannot write {weights.path}: {error.strerror or error}") from error
        finally:
            weights.file.close()


def save_model(
    model: ModelProto, path: Path, streamed: StreamedWeights | None = None, *, external: bool = False
) -> list[Path]:
    """Write ``model`` to ``path`` (plus ``path.data`` for large models, or with ``external``);
    returns the files written.

    With ``streamed``, the weights are already in its file (``streamed_weights``): it is moved
    beside the model when mapped (or with ``external``), or else its bytes are copied into the one
    ``.onnx`` file, unless that file would be past 2 GB, which protobuf cannot parse. With external
    data, a weight that ONNX Runtime prepacks and that other nodes also read gets a second
    initializer over the same bytes for those readers (``deploy.shared_data``), so that its original
    is not held beside the packed copy.
    """
    path = check_output_path(path)
    external = external or past_protobuf_limit(_weights_bytes(model))
    data_name = path.name + ".data"
    written: list[Path] = []
    with staging_directory(path.parent, path.name) as staging:
        staged = staging / path.name
        try:
            if streamed is not None:
                streamed.file.close()
                pieces = [] if streamed.mapped or external else inline_pieces(model, streamed.name)
                if pieces and not past_protobuf_limit(inline_size(pieces)):
                    write_inline(pieces, staged, streamed.path)
                else:  # the same tensors as external data (past 2 GB protobuf could not parse the one file)
                    separate_unpacked_readers(model)
                    staged.write_bytes(model.SerializeToString())
                    os.replace(streamed.path, path.parent / data_name)
                    written.append(path.parent / data_name)
            elif external:
                onnx.save_model(
                    model,
                    staged,
                    save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=data_name,
                    size_threshold=1024,
                )
                if separate_unpacked_readers(model):  # the tensors now point into the data file
                    staged.write_bytes(model.SerializeToString())
                # onnx (1.23) creates the data file readable by its owner alone; it gets the model's
                # permissions (what the umask allows), so that whoever may read one may read both
                shutil.copymode(staged, staging / data_name)
                os.replace(staging / data_name, path.parent / data_name)
                written.append(path.parent / data_name)
            else:
                staged.write_bytes(model.SerializeToString())
            os.replace(staged, path)
        except OSError as error:  # a full disk, a directory gone read-only meanwhile
            raise OutputPathError(f"cannot write {path}: {error.strerror or error}") from error
        written.insert(0, path)
    return written
