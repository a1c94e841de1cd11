"""`graphgen translate --input/--output`: a corpus file, as a user runs it from the command line."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from graphgen import Translator
from graphgen.runtime.bulk import UTF8_BOM, JsonLines, TextLines, translate_lines
from graphgen.testing import LONG_SOURCE, REPO, corpus_pairs, demo_sources

SOURCES = demo_sources()


def graphgen_translate(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "graphgen", "translate", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO, **kwargs)  # type: ignore[call-overload]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_ten_thousand_lines_equal_line_by_line_and_resume_after_kill(demo_onnx: Path, tmp_path: Path) -> None:
    """10,000 lines, greedy (four times cheaper than beam search; batching works the same way)."""
    sources = [source for source, _ in corpus_pairs(10_000, seed=2026)]
    source_file = tmp_path / "corpus.txt"
    source_file.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    translator = Translator(demo_onnx)
    expected = [translator.translate([s], num_beams=1)[0] for s in sources]  # one line at a time

    whole = tmp_path / "whole.txt"
    done = graphgen_translate(demo_onnx, "-i", source_file, "-o", whole, "--num-beams", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert lines_of(whole) == expected
    assert "10,000/10,000 lines (100%)" in done.stderr and "lines/s" in done.stderr

    resumed = tmp_path / "resumed.txt"
    command = [sys.executable, "-m", "graphgen", "translate", str(demo_onnx), "-i", str(source_file)]
    command += ["-o", str(resumed), "--num-beams", "1", "-q"]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while (not resumed.exists() or resumed.read_bytes().count(b"\n") < 5_000) and time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()[-2000:] if process.stderr else ""
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    written = resumed.read_bytes().count(b"\n")
    assert 5_000 <= written < 10_000, written
    with resumed.open("ab") as file:  # as if the kill had landed in the middle of a write
        file.write("半行".encode())

    done = graphgen_translate(demo_onnx, "-i", source_file, "-o", resumed, "--num-beams", "1", "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resumed after line {written:,}" in done.stderr
    assert lines_of(resumed) == expected


def test_a_pipe_as_input_is_read_once(demo_onnx: Path, tmp_path: Path) -> None:
    """`-i <(zcat corpus.gz)` or a named pipe: read as it comes (no line count first), to the same lines."""
    sources = SOURCES[:40]
    expected = Translator(demo_onnx).translate(sources, num_beams=1)
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out.txt"
    command = [sys.executable, "-m", "graphgen", "translate", str(demo_onnx), "-i", str(fifo), "-o", str(out)]
    process = subprocess.Popen([*command, "--num-beams", "1"], cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while True:  # the writing end opens once graphgen has opened the reading end (ENXIO before)
        try:
            descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as error:
            assert error.errno == errno.ENXIO, error
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
    os.set_blocking(descriptor, True)
    with os.fdopen(descriptor, "w", encoding="utf-8") as writer:
        writer.write("".join(f"{s}\n" for s in sources))
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-2000:]
    assert lines_of(out) == expected
    assert "40 lines" in stderr and "/40" not in stderr  # progress without a total

    directory = graphgen_translate(demo_onnx, "-i", tmp_path, "-o", tmp_path / "o.txt")
    assert directory.returncode == 2 and "neither a file nor a pipe" in directory.stderr


def test_length_batching_keeps_order_and_results(demo_onnx: Path) -> None:
    """Default beam search over windows smaller and larger than the file, in every batch size."""
    translator = Translator(demo_onnx)
    expected = [translator.translate([s])[0] for s in SOURCES[:120]]
    raw = [f"{s}\n".encode() for s in SOURCES[:120]]
    for window, batch_size in ((7, 3), (50, 16), (1000, 8)):
        out = list(translate_lines(translator, raw, TextLines(), batch_size=batch_size, window=window))
        assert [text for text, _ in out] == expected
        assert all(error is None for _, error in out)


def test_json_lines_keep_other_fields(demo_onnx: Path, tmp_path: Path) -> None:
    records = [{"id": i, "src": s, "meta": {"n": [i]}} for i, s in enumerate(SOURCES[:40])]
    source_file = tmp_path / "docs.jsonl"
    source_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = graphgen_translate(
        demo_onnx, "-i", source_file, "-o", out, "--field", "src", "--target-field", "zh", "--num-return-sequences", "2"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    translator = Translator(demo_onnx)
    expected = [translator.translate([r["src"]], num_return_sequences=2)[0] for r in records]
    written = [json.loads(line) for line in lines_of(out)]
    assert written == [{**r, "zh": e} for r, e in zip(records, expected, strict=True)]


def test_a_byte_order_mark_starts_no_line(demo_onnx: Path, tmp_path: Path) -> None:
    """Windows editors and spreadsheet exports write a UTF-8 byte order mark first: it is not part of
    line 1 (whose leading ``>>xx<<`` tag still chooses the target; with the mark in, the tag is not at
    the start and the sentence translates differently), in text and JSON Lines, from a file and from
    stdin, and resumed; a mark inside the file stays text; the output has none. A UTF-16 file is
    refused saying so."""
    texts = SOURCES[:6]
    translator = Translator(demo_onnx)
    expected = translator.translate(texts)
    assert translator.translate(["\ufeff" + texts[0]]) != expected[:1]  # the mark, kept, would be seen
    plain = tmp_path / "bom.txt"
    plain.write_bytes(UTF8_BOM + "".join(f"{text}\r\n" for text in texts).encode())
    out = tmp_path / "bom.zh.txt"
    done = graphgen_translate(demo_onnx, "-i", plain, "-o", out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert lines_of(out) == expected and not out.read_bytes().startswith(UTF8_BOM)
    piped = graphgen_translate(demo_onnx, input=plain.read_bytes().decode("utf-8"))
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert piped.stdout.split("\n")[:-1] == expected
    out.write_text("".join(f"{line}\n" for line in expected[:2]), encoding="utf-8")
    assert graphgen_translate(demo_onnx, "-i", plain, "-o", out, "--resume").returncode == 0
    assert lines_of(out) == expected

    records = tmp_path / "bom.jsonl"
    records.write_bytes(UTF8_BOM + "".join(json.dumps({"text": text}) + "\n" for text in texts).encode())
    out = tmp_path / "bom.zh.jsonl"
    done = graphgen_translate(demo_onnx, "-i", records, "-o", out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [json.loads(line)["translation"] for line in lines_of(out)] == expected

    inside = tmp_path / "inside.txt"
    inside.write_text(f"{texts[0]}\n\ufeff{texts[0]}\n", encoding="utf-8")
    out = tmp_path / "inside.zh.txt"
    assert graphgen_translate(demo_onnx, "-i", inside, "-o", out).returncode == 0
    assert lines_of(out) == [expected[0], translator.translate(["\ufeff" + texts[0]])[0]]

    utf16 = tmp_path / "utf16.txt"  # what Windows' Notepad saved as "Unicode"
    utf16.write_text(f"{texts[0]}\n", encoding="utf-16")
    done = graphgen_translate(demo_onnx, "-i", utf16, "-o", tmp_path / "utf16.zh.txt")
    assert done.returncode != 0
    assert "line 1: not valid UTF-8 (byte 0xff at offset 0); it starts with UTF-16's byte order mark" in done.stderr


def test_bad_lines_fail_with_their_number_or_are_skipped(demo_onnx: Path, tmp_path: Path) -> None:
    source_file = tmp_path / "mixed.txt"
    source_file.write_bytes(
        b"I have three cats.\n\xff\xfe not UTF-8\n"
        + LONG_SOURCE.encode()
        + b"\n  \nTom is 7 years old.\r\nNo newline at the end."
    )
    out = tmp_path / "out.txt"
    done = graphgen_translate(demo_onnx, "-i", source_file, "-o", out)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "line 2: not valid UTF-8" in done.stderr and "--on-error skip" in done.stderr
    translator = Translator(demo_onnx)
    first = translator.translate(["I have three cats."])[0]
    assert lines_of(out) == [first]  # everything before the bad line, nothing after it

    done = graphgen_translate(demo_onnx, "-i", source_file, "-o", out, "--on-error", "skip", "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "line 2: not valid UTF-8" in done.stderr
    assert "line 3: longer than the model's limit of 512 tokens (truncation cuts it: --truncate)" in done.stderr
    assert "2 line(s) could not be translated" in done.stderr
    tail = translator.translate(["Tom is 7 years old.", "No newline at the end."])
    assert lines_of(out) == [first, "", "", "", *tail]  # placeholders, and a blank line stays blank

    done = graphgen_translate(
        demo_onnx, "-i", source_file, "-o", out, "--on-error", "skip", "--truncate", "--overwrite"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert lines_of(out) == [first, "", translator.translate([LONG_SOURCE], truncate=True)[0], "", *tail]


def test_a_line_ending_in_a_zero_character_is_an_error_of_its_own(demo_onnx: Path) -> None:
    """A final U+0000 cannot go into the bytes input: that line is refused by its number, its batch-mates
    (one with a U+0000 inside, which is carried) translated."""
    translator = Translator(demo_onnx)
    raw = [b"I have three cats.\n", b"cats\x00\n", b"a\x00b\n", b'{"text": "x\\u0000"}\n']
    out = list(translate_lines(translator, raw[:3], TextLines()))
    assert [error.line for _, error in out if error] == [2]
    assert str(out[1][1]).startswith("line 2: ends with U+0000, which the file's bytes input cannot carry")
    expected = translator.translate(["I have three cats.", "a\0b"])
    assert [line for line, _ in out] == [expected[0], "", expected[1]]
    out = list(translate_lines(translator, raw[3:], JsonLines()))
    assert json.loads(out[0][0])["graphgen_error"].startswith("ends with U+0000")
    done = graphgen_translate(demo_onnx, "-q", input=b"".join(raw[:3]).decode())  # stdin: nothing to resume
    assert done.returncode == 2 and done.stdout == expected[0] + "\n"
    assert "line 2: ends with U+0000" in done.stderr and "run again, or pass --on-error skip" in done.stderr


def test_bad_json_lines_are_reported(demo_onnx: Path) -> None:
    translator = Translator(demo_onnx)
    raw = [b'{"text": "I have three cats."}\n', b"not json\n", b"[1, 2]\n", b'{"other": 1}\n', b'{"text": 5}\n']
    out = list(translate_lines(translator, raw, JsonLines(), first_line=10))
    assert [error.line for _, error in out if error] == [11, 12, 13, 14]
    messages = [error.message for _, error in out if error]
    assert messages[0].startswith("not valid JSON") and messages[1] == "an array, not a JSON object"
    assert messages[2:] == ["no field 'text'", "field 'text' is a number, not a string"]
    assert json.loads(out[0][0]) == {
        "text": "I have three cats.",
        "translation": translator.translate(["I have three cats."])[0],
    }
    assert json.loads(out[3][0]) == {"other": 1, "translation": None, "graphgen_error": "no field 'text'"}


def test_output_protection_and_argument_errors(demo_onnx: Path, tmp_path: Path) -> None:
    source_file = tmp_path / "in.txt"
    source_file.write_text("I have three cats.\n", encoding="utf-8")
    existing = tmp_path / "existing.txt"
    existing.write_text("someone's work\n", encoding="utf-8")
    cases = [
        (["-i", source_file, "-o", existing], f"{existing} exists; pass --resume"),
        (["-i", tmp_path / "missing.txt", "-o", tmp_path / "o.txt"], "does not exist"),
        (["-i", source_file, "-o", source_file, "--overwrite"], "the output file is the input file"),
        (["-i", source_file, "-o", tmp_path / "no" / "dir.txt"], "does not exist"),
        (["-i", source_file, "--resume"], "--resume needs an output file"),
        (["-i", source_file, "-o", tmp_path / "o.txt", "--batch-size", "0"], "at least 1"),
        (["-i", source_file, "-o", tmp_path / "o.txt", "--num-beams", "0"], "num_beams must be at least 1"),
        (["-i", source_file, "-o", existing, "--resume"], "has 2 lines but"),
    ]
    existing.write_text("a\nb\n", encoding="utf-8")
    for arguments, message in cases:
        done = graphgen_translate(demo_onnx, *arguments)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (arguments, done)
    assert existing.read_text(encoding="utf-8") == "a\nb\n"
    assert not (tmp_path / "o.txt").exists()


def test_translations_that_used_all_of_max_length_are_named(demo_onnx: Path, demo_dir: Path, tmp_path: Path) -> None:
    """A translation that used every position up to max_length may be cut short: HF's ``generate``
    stops there too (same text), and the run names those lines on stderr. Which ones: exactly those
    whose HF ``generate`` sequence is ``max_length`` long (4 beams, 2 hypotheses each: any of them)."""
    import torch
    import transformers

    sources = SOURCES[:40]
    tokenizer = transformers.AutoTokenizer.from_pretrained(demo_dir)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(demo_dir).eval()
    with torch.no_grad():
        generated = model.generate(
            **tokenizer(sources, return_tensors="pt", padding=True), max_length=12, num_return_sequences=2
        )
    lengths = ((generated != tokenizer.pad_token_id).sum(-1) + 1).reshape(len(sources), 2)  # start is pad
    expected = [index + 1 for index, row in enumerate(lengths.tolist()) if max(row) == 12]
    assert 0 < len(expected) < len(sources)  # some reach the limit, some end before it

    source_file = tmp_path / "sources.txt"
    source_file.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    out = tmp_path / "out.txt"
    args = ["-i", source_file, "-o", out, "--max-length", "12", "--num-return-sequences", "2", "-q"]
    done = graphgen_translate(demo_onnx, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = ", ".join(map(str, expected[:20])) + (f" and {len(expected) - 20} more" if len(expected) > 20 else "")
    assert f"{len(expected)} translation(s) used all 12 tokens of max_length and may be cut short: " in done.stderr
    assert f"line(s) {listed}; a larger --max-length lets them finish (up to 512)" in done.stderr
    hf_texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
    assert lines_of(out) == ["\t".join(hf_texts[2 * i : 2 * i + 2]) for i in range(len(sources))]

    # --on-error fail stops at a bad line 21: the lines written before it are still named (not those
    # after it, translated in the same window but not written)
    lines = [f"{s}\n".encode() for s in sources]
    source_file.write_bytes(b"".join(lines[:20]) + b"\xff\n" + b"".join(lines[20:]))
    done = graphgen_translate(demo_onnx, *args, "--overwrite")
    assert done.returncode != 0 and "line 21: not valid UTF-8" in done.stderr, done.stderr[-2000:]
    before = [number for number in expected if number <= 20]
    assert 0 < len(before) < len(expected)
    assert f"{len(before)} translation(s) used all 12 tokens of max_length and may be cut short: " in done.stderr
    assert f"line(s) {', '.join(map(str, before))}; a larger" in done.stderr
    assert len(lines_of(out)) == 20
    source_file.write_bytes(b"".join(lines))

    done = graphgen_translate(demo_onnx, *sources[:3], "--max-length", "12", "--num-return-sequences", "2")
    few = [number for number in expected if number <= 3]
    assert ("used all 12 tokens" in done.stderr) == bool(few)
    if few:
        assert f"text(s) {', '.join(map(str, few))};" in done.stderr
    done = graphgen_translate(demo_onnx, "-i", source_file, "-o", out, "--overwrite", "-q")  # max_length 512
    assert done.returncode == 0 and "max_length" not in done.stderr, done.stderr[-2000:]
