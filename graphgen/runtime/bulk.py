"""Translate a whole file: plain text or JSON Lines, batched by length, resumable, one line out per line in.

Every input line produces exactly one output line, in input order, so an output file's line
count is how far a run got: ``resume`` continues after the last complete line, dropping a
partly written one. Blank lines stay blank. Lines are read in windows; within a window they are sorted by length and
cut into batches (less padding, so fewer wasted positions per batch), and the window is written
back in input order and flushed to disk before the next one starts. A UTF-8 byte order mark at the
start of the input is not part of the first line (the output is written without one). A line that cannot be
translated (not UTF-8, not JSON, too long for the model, ...) is reported with its line number;
it either stops the run (``on_error="fail"``, after everything before it is written) or is
written as a placeholder (``on_error="skip"``): an empty line, or for JSON Lines the record with
the translation ``null`` and a ``graphgen_error`` field. Nothing is dropped silently.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

from graphgen._errors import GraphgenError, SourceTooLongError
from graphgen.contract import MAX_LENGTH, NUM_RETURN_SEQUENCES
from graphgen.runtime.progress import Progress
from graphgen.runtime.translator import Translator, translations

Translation = str | list[str]
ERROR_FIELD = "graphgen_error"


@dataclass(frozen=True)
class LineError:
    line: int  # 1-based, as editors count
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class BulkError(GraphgenError):
    """A line failed with ``on_error="fail"``; the lines before it were written. ``used_max_length``:
    the written lines whose translation used every position up to ``max_length``, as in
    :class:`BulkResult`, so a stopped run still names them."""

    def __init__(self, error: LineError, used_max_length: list[int] | None = None, *, resumable: bool = True) -> None:
        again = "run again with --resume" if resumable else "run again"  # --resume needs an output file
        super().__init__(
            f"{error} (the lines before it were written; fix or remove it and {again}, or pass --on-error skip)"
        )
        self.error = error
        self.used_max_length = used_max_length or []


class _BadLine(Exception):
    def __init__(self, message: str, record: Any = None) -> None:
        super().__init__(message)
        self.record = record  # what could be parsed, kept in the placeholder


class TextLines:
    """One sentence per line; the output line is the translation (hypotheses tab-separated)."""

    def parse(self, raw: bytes) -> tuple[str, Any]:
        text = _decode(raw)
        return text, None

    def render(self, record: Any, translation: Translation | None, error: str | None) -> str:
        if translation is None:
            return ""
        line = translation if isinstance(translation, str) else "\t".join(translation)
        return line.replace("\r", " ").replace("\n", " ")


class JsonLines:
    """One JSON object per line; ``field`` is translated into ``target_field``, other fields are kept."""

    def __init__(self, field: str = "text", target_field: str = "translation") -> None:
        self.field = field
        self.target_field = target_field

    def parse(self, raw: bytes) -> tuple[str, Any]:
        line = _decode(raw)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise _BadLine(f"not valid JSON ({error})") from None
        if not isinstance(record, dict):
            raise _BadLine(f"{_json_type(record)}, not a JSON object")
        if self.field not in record:
            raise _BadLine(f"no field {self.field!r}", record)
        text = record[self.field]
        if not isinstance(text, str):
            raise _BadLine(f"field {self.field!r} is {_json_type(text)}, not a string", record)
        return text, record

    def render(self, record: Any, translation: Translation | None, error: str | None) -> str:
        out = dict(record) if isinstance(record, dict) else {}
        out[self.target_field] = translation
        if error is not None:
            out[ERROR_FIELD] = error
        return json.dumps(out, ensure_ascii=False)


LineFormat = TextLines | JsonLines


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # what Windows' "Unicode" text files start with


def _decode(raw: bytes) -> str:
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        hint = "; it starts with UTF-16's byte order mark: save the file as UTF-8" if raw[:2] in UTF16_BOMS else ""
        raise _BadLine(f"not valid UTF-8 (byte {raw[error.start]:#04x} at offset {error.start}){hint}") from None


@dataclass
class BulkResult:
    lines: int = 0  # output lines written by this run
    skipped: list[LineError] = field(default_factory=list)
    # lines whose translation used every position up to max_length, so may be cut short there
    used_max_length: list[int] = field(default_factory=list)
    resumed_after: int = 0  # lines already in the output before this run
    seconds: float = 0.0


@dataclass
class Item:
    line: int
    text: str | None
    record: Any
    error: str | None = None
    translation: Translation | None = None
    used_max_length: bool = False  # a hypothesis reached max_length (``Translator.used_max_length``)


def translate_items(translator: Translator, items: list[Item], truncate: bool | None, settings: dict[str, Any]) -> None:
    """Fill in each item's translation or error; one bad line does not fail its batch-mates.

    A blank line (whitespace only) stays blank: a model asked to translate nothing still writes
    something, which in a document or a subtitle file would be text that was never there.
    """
    blank = [item for item in items if not (item.text or "").strip()]
    if blank:
        returns = translator.settings(settings)[NUM_RETURN_SEQUENCES]
        for item in blank:
            item.translation = "" if returns == 1 else [""] * returns
        items = [item for item in items if (item.text or "").strip()]
        if not items:
            return
    refused, why = translator.zero_characters([item.text or "" for item in items])
    if refused:
        for index in refused:
            items[index].error = why
        items = [item for index, item in enumerate(items) if index not in refused]
        if not items:
            return
    texts = [item.text or "" for item in items]
    try:
        outputs = translator.run(texts, truncate=truncate, **settings)
    except SourceTooLongError as error:
        bad = set(error.indices)
        for index in bad:
            items[
                index
            ].error = f"longer than the model's limit of {error.limit} tokens (truncation cuts it: --truncate)"
        rest = [item for index, item in enumerate(items) if index not in bad]
        if rest:
            translate_items(translator, rest, truncate, settings)
        return
    except GraphgenError:
        raise
    except Exception as error:  # an ORT failure: find the line(s) that cause it
        if len(items) == 1:
            items[0].error = f"translation failed: {error}"
            return
        for item in items:
            translate_items(translator, [item], truncate, settings)
        return
    reached = translator.used_max_length(outputs, translator.settings(settings)[MAX_LENGTH])
    results: list[Any] = translations(outputs)
    for item, result, full in zip(items, results, reached, strict=True):
        item.translation = result
        item.used_max_length = bool(full)


def translate_lines(
    translator: Translator,
    lines: Iterable[bytes],
    line_format: LineFormat,
    *,
    first_line: int = 1,
    batch_size: int = 16,
    window: int = 256,
    truncate: bool | None = None,
    settings: dict[str, Any] | None = None,
    used_max_length: Callable[[int], None] | None = None,
) -> Iterator[tuple[str, LineError | None]]:
    """Output lines in input order, each with the error that made it a placeholder, if any.
    ``used_max_length`` is called with the number of each line whose translation used every
    position up to ``max_length`` (so may be cut short), before the line is yielded.

    Yields a window's lines together, once the whole window is translated.
    """
    settings = _checked_settings(translator, batch_size, window, settings)
    pending: list[Item] = []

    def flush() -> Iterator[tuple[str, LineError | None]]:
        todo = sorted((item for item in pending if item.error is None), key=lambda item: len(item.text or ""))
        for start in range(0, len(todo), batch_size):
            translate_items(translator, todo[start : start + batch_size], truncate, settings)
        for item in pending:
            error = None if item.error is None else LineError(item.line, item.error)
            if item.used_max_length and used_max_length is not None:
                used_max_length(item.line)
            yield line_format.render(item.record, item.translation, item.error), error
        pending.clear()

    for number, raw in enumerate(lines, start=first_line):
        try:
            text, record = line_format.parse(raw)
            pending.append(Item(number, text, record))
        except _BadLine as error:
            pending.append(Item(number, None, error.record, error=str(error)))
        if len(pending) >= window:
            yield from flush()
    yield from flush()


def _checked_settings(
    translator: Translator, batch_size: int, window: int, settings: dict[str, Any] | None
) -> dict[str, Any]:
    if batch_size < 1 or window < 1:
        raise GraphgenError("batch size and window must be at least 1")
    settings = dict(settings or {})
    try:
        translator.settings(settings)
    except ValueError as error:
        raise GraphgenError(str(error)) from error
    return settings


def _is_stream(path: Path) -> bool:
    """A pipe or a terminal (``-i <(zcat corpus.gz)``, ``/dev/stdin``): read once, so no line count."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def count_lines(path: Path) -> int:
    """Lines in a file, a last line without newline included."""
    count, last = 0, b"\n"
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _complete_lines(path: Path) -> tuple[int, int]:
    """(lines ending in a newline, byte offset just past the last of them)."""
    count, offset, end = 0, 0, 0
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk.rfind(b"\n")
            if last >= 0:
                end = offset + last + 1
            offset += len(chunk)
    return count, end


def translate_file(
    translator: Translator,
    source: Path | None,
    target: Path | None,
    line_format: LineFormat,
    *,
    resume: bool = False,
    overwrite: bool = False,
    on_error: Literal["fail", "skip"] = "fail",
    batch_size: int = 16,
    window: int = 256,
    truncate: bool | None = None,
    settings: dict[str, Any] | None = None,
    progress: bool = True,
    report: Callable[[LineError], None] | None = None,
) -> BulkResult:
    """Translate ``source`` (stdin when None) into ``target`` (stdout when None); see the module doc."""
    started = time.perf_counter()
    if on_error not in ("fail", "skip"):
        raise GraphgenError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    if source is not None and not (source.is_file() or _is_stream(source)):
        raise GraphgenError(f"input {source} does not exist or is neither a file nor a pipe")
    if resume and target is None:
        raise GraphgenError("--resume needs an output file (--output)")
    if source is not None and target is not None and source.resolve() == target.resolve():
        raise GraphgenError("the output file is the input file")
    report = report or (lambda error: print(f"graphgen: {error}", file=sys.stderr, flush=True))
    result = BulkResult()
    total = count_lines(source) if source is not None and source.is_file() else None  # a pipe is read once
    keep = 0
    if target is not None and target.exists() and target.stat().st_size > 0:
        if resume:
            result.resumed_after, keep = _complete_lines(target)
            if total is not None and result.resumed_after > total:
                raise GraphgenError(
                    f"{target} has {result.resumed_after} lines but {source} only {total}: not an output of this input"
                )
        elif not overwrite:
            raise GraphgenError(f"{target} exists; pass --resume to continue it or --overwrite to replace it")
    if target is not None:
        _check_writable(target)
    settings = _checked_settings(translator, batch_size, window, settings)  # before a file is opened
    try:
        source_file: BinaryIO = source.open("rb") if source is not None else sys.stdin.buffer
        if target is not None:
            target_file: BinaryIO = target.open("r+b" if result.resumed_after else "wb")
            target_file.truncate(keep)  # a line cut short by a crash is written again
            target_file.seek(keep)
        else:
            target_file = sys.stdout.buffer
    except OSError as error:
        raise GraphgenError(f"cannot open {error.filename}: {error.strerror}") from error
    bar = Progress(total, done=result.resumed_after) if progress else None
    try:
        outputs = translate_lines(
            translator,
            _skip(_without_bom(source_file), result.resumed_after),
            line_format,
            first_line=result.resumed_after + 1,
            batch_size=batch_size,
            window=window,
            truncate=truncate,
            settings=settings,
            used_max_length=result.used_max_length.append,
        )
        chunk: list[bytes] = []
        for text, failure in outputs:
            if failure is not None:
                if on_error == "fail":
                    _write(target_file, chunk)
                    result.lines += len(chunk)
                    # the window's later lines were translated too, but not written
                    written = [line for line in result.used_max_length if line < failure.line]
                    raise BulkError(failure, written, resumable=target is not None)
                report(failure)
                result.skipped.append(failure)
            chunk.append(text.encode("utf-8") + b"\n")
            if len(chunk) >= window:
                _write(target_file, chunk)
                result.lines += len(chunk)
                if bar is not None:
                    bar.advance(len(chunk))
                chunk = []
        _write(target_file, chunk)
        result.lines += len(chunk)
        if bar is not None:
            bar.advance(len(chunk))
    finally:
        if bar is not None:
            bar.close()
        if source is not None:
            source_file.close()
        if target is not None:
            target_file.close()
    result.seconds = time.perf_counter() - started
    return result


def _without_bom(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The lines, a UTF-8 byte order mark at the start of the first removed (as Python's
    ``utf-8-sig`` reads a file): Windows editors and spreadsheet exports write one, and left in, it
    would be the first line's first character (a ``>>xx<<`` tag after it is no longer at the start
    of the text, and a JSON line no longer parses). A mark anywhere else stays in its line."""
    iterator = iter(lines)
    first = next(iterator, None)
    if first is None:
        return
    yield first.removeprefix(UTF8_BOM)
    yield from iterator


def text_lines(data: bytes, name: str) -> list[str]:
    """The lines of a whole plain-text input ``data`` as :func:`translate_file` reads them: split at
    ``\\n`` only (a ``\\r\\n``'s ``\\r`` dropped; a form feed, U+0085 or U+2028 stays inside its line,
    where ``str.splitlines`` would start a new one), a leading byte order mark removed. A line that is
    not UTF-8 is refused, naming ``name`` and the line."""
    lines = []
    for number, raw in enumerate(_without_bom(io.BytesIO(data)), start=1):
        try:
            lines.append(_decode(raw))
        except _BadLine as error:
            raise GraphgenError(f"{name}: line {number}: {error}") from None
    return lines


def _skip(lines: Iterable[bytes], count: int) -> Iterator[bytes]:
    iterator = iter(lines)
    for _ in range(count):
        next(iterator, None)
    yield from iterator


def _write(file: BinaryIO, chunk: list[bytes]) -> None:
    if not chunk:
        return
    file.write(b"".join(chunk))
    file.flush()
    if file.fileno() > 2:  # stdout may be a pipe or a terminal
        os.fsync(file.fileno())


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise GraphgenError(f"output {path} is a directory")
    if not path.parent.is_dir():
        raise GraphgenError(f"directory {path.parent} does not exist")


def line_format_for(path: Path | None, name: str | None, field: str, target_field: str) -> LineFormat:
    """``name`` ("text" or "jsonl"), or guessed from the input's extension."""
    if name is None:
        name = "jsonl" if path is not None and path.suffix.lower() in (".jsonl", ".ndjson") else "text"
    if name == "jsonl":
        return JsonLines(field, target_field)
    if name == "text":
        return TextLines()
    raise GraphgenError(f"unknown format {name!r}; choose text or jsonl")
