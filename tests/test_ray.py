"""graphgen.ray on a local Ray cluster (``ray.init(num_cpus=2)``): the same output as the single-process path.

Ray runs in a child process, so this test session keeps no Ray workers or global state.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from graphgen import Translator
from graphgen.runtime.bulk import TextLines, translate_lines
from graphgen.testing import LONG_SOURCE, REPO, corpus_pairs


def test_local_cluster_equals_single_process(demo_onnx: Path, tmp_path: Path) -> None:
    sources = [source for source, _ in corpus_pairs(400, seed=11)]
    sources[17:17] = ["", LONG_SOURCE]  # a blank line and one over the model's limit keep their places
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    # translate_text_file reads lines as graphgen translate -i does: a byte order mark first, a CRLF,
    # a form feed and U+2028 inside lines (where ray.data.read_text would start new rows)
    odd_sources = [*sources]
    odd_sources[3] = f"{sources[3]}\u2028{sources[4]}"
    odd_sources[7] = f"{sources[7]}\x0c{sources[8]}"
    odd = tmp_path / "odd.txt"
    odd.write_bytes(
        b"\xef\xbb\xbf" + "".join(f"{s}\r\n" if i == 5 else f"{s}\n" for i, s in enumerate(odd_sources)).encode()
    )
    script = textwrap.dedent(f"""
        import json, sys
        import ray
        from graphgen.ray import translate, translate_text_file
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        model, corpus, out = {str(demo_onnx)!r}, {str(corpus)!r}, {str(tmp_path / "written")!r}
        odd = {str(odd)!r}
        try:
            translate(ray.data.read_text(corpus), model, concurrency=2)
        except Exception as error:
            print(json.dumps({{"refused": str(error)}}))
        try:
            translate(ray.data.read_text(corpus), model, concurrency=1, providers=("npu9",))
        except Exception as error:
            print(json.dumps({{"refused": str(error)}}))
        rows = ray.data.read_text(corpus, drop_empty_lines=False)
        taken = translate(rows, model, concurrency=2, cpus_per_actor=0.5, batch_size=16, providers=("cpu",)).take_all()
        print(json.dumps({{"rows": taken}}, ensure_ascii=False))
        short = translate(rows, model, concurrency=1, cpus_per_actor=0.5, max_length=8, num_beams=1).take(40)
        print(json.dumps({{"short": short}}, ensure_ascii=False))
        try:
            translate(rows, model, concurrency=1, max_length_column="error")
        except Exception as error:
            print(json.dumps({{"refused": str(error)}}))
        translate_text_file(odd, out, model, concurrency=2, cpus_per_actor=0.5, num_beams=1)
        ray.shutdown()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    messages = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert "leave less than one of the cluster's 2 CPUs" in messages[0]["refused"]
    assert "no npu9" in messages[1]["refused"]
    messages.pop(1)
    assert "the added columns ['translation', 'error', 'error'] must all differ" in messages[3]["refused"]

    translator = Translator(demo_onnx)
    single = list(translate_lines(translator, [f"{s}\n".encode() for s in sources], TextLines()))
    rows = messages[1]["rows"]
    assert [row["text"] for row in rows] == sources
    assert [row["translation"] or "" for row in rows] == [text for text, _ in single]
    errors = {i: row["error"] for i, row in enumerate(rows) if row["error"]}
    assert errors == {18: "longer than the model's limit of 512 tokens (truncation cuts it: --truncate)"}
    assert rows[17]["translation"] == ""
    assert not any(row["used_max_length"] for row in rows)  # the demo's max_length is 512

    # max_length reached: flagged per row, as the single-process path reports the same lines
    cut: list[int] = []
    settings = {"max_length": 8, "num_beams": 1}
    lines = [f"{s}\n".encode() for s in sources[:40]]
    short = list(translate_lines(translator, lines, TextLines(), settings=settings, used_max_length=cut.append))
    assert [row["translation"] or "" for row in messages[2]["short"]] == [text for text, _ in short]
    flagged = [index + 1 for index, row in enumerate(messages[2]["short"]) if row["used_max_length"]]
    assert flagged == cut and 0 < len(cut) < 40

    # The JSON Lines files Ray wrote, read in name order, hold the rows in input order, a row per line.
    written = [
        json.loads(line)
        for path in sorted((tmp_path / "written").glob("*.json"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    greedy = list(
        translate_lines(translator, [f"{s}\n".encode() for s in odd_sources], TextLines(), settings={"num_beams": 1})
    )
    assert [row["text"] for row in written] == odd_sources
    assert [row["translation"] or "" for row in written] == [text for text, _ in greedy]
