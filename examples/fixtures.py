"""Write what the examples in other languages run and compare against (``make examples`` calls this).

Into ``build/examples/``: the demo model exported text-level (the default: the tokenizer in
standard ONNX ops, UTF-8 bytes in), the demo test set's sources, and the answers of graphgen's
Python path for them:

* ``expected.txt``: ``graphgen.Translator`` output, one line per source (the Java, Rust, Go and
  JavaScript examples must give the same strings); ``empty.txt``: the translation of "";
* ``demo-en-zh-no-strings.onnx``, ``nllb-no-strings-languages.onnx``: the same files without any
  string tensor (``--no-strings``: languages and translations as UTF-8 bytes);
* ``demo-en-zh-extensions.onnx``: the file with ``--tokenizer extensions``, which the examples
  (without onnxruntime-extensions) must refuse with a clear message;
* ``demo-en-zh-int4.onnx`` and ``expected-int4.txt``: the file with ``--int4`` (ONNX Runtime's
  ``MatMulNBits``) and its translations of the first 64 sources in batches of 16;
  ``demo-en-zh-int4-32.onnx`` and ``expected-int4-32.txt``: ``--int4-block-size 32`` and the
  translations of the first 4 sources (for onnxruntime-web's WebGPU provider);
* ``demo-en-zh-int8.onnx`` and ``expected-int8.txt``: the file with ``--int8`` and its
  translations of the first 32 sources, each translated alone (the examples translate them in
  batches: an int8 file gives an input the same tokens in any batch); ``demo-en-zh-int8.ort``:
  the same file as ``--ort`` writes it for phones (ONNX Runtime's format, optimized for ARM);
* ``demo-en-zh-fp16.onnx`` and ``expected-fp16.txt``: the file with ``--fp16`` and its translations
  of the first 32 sources in batches of 16;
* ``demo-en-zh-greedy.onnx`` and ``expected-greedy.txt``: a copy baked with ``num_beams=1``
  (``graphgen bake``: how hosts that cannot feed optional inputs choose settings) and the greedy
  translations of the first 40 sources; ``demo-en-zh-greedy-external.onnx`` (+ ``.data``): the same
  copy baked from an ``--external-data`` export, its weights beside it;
* ``demo-en-zh-settings.onnx`` and ``expected-settings.txt``: a copy that keeps ``num_beams`` and
  ``max_length`` as required inputs (``graphgen bake --keep num_beams,max_length``: how Java and
  JavaScript choose settings per call) and the translations of the first 16 sources with 2 beams
  and at most 8 tokens; ``expected-length-penalty.txt``: the first 16 with 6 beams and
  ``length_penalty`` -3 (a negative penalty, which favours shorter hypotheses: C's settings once
  could not express it);
* ``long.txt``: a source longer than the model's 512 positions, then its translation with
  ``truncate=True`` (without it the file must stop with an error naming the limit), and
  ``demo-en-zh-truncate.onnx``, a copy with ``truncate`` baked in (``graphgen bake --truncate``)
  for bindings that cannot set optional inputs (Java);
* ``nllb-languages.onnx`` and ``languages.tsv``: a small NLLB checkpoint (random weights, a
  SentencePiece model trained here, laid out as the hub's files by ``graphgen.testing``),
  exported and baked with ``--keep-languages`` so that Java can choose the languages per call; the
  TSV holds source language, target language, text and ``graphgen.Translator``'s translation;
  ``nllb-codes.txt``: the file's language codes as Python reads them, one per line;
* ``{family}.onnx``, ``{family}-sources.txt`` and ``{family}-expected.txt`` for mBART-50, T5 and
  mT5 (``WEB_FAMILIES``; small checkpoints with random weights, their default languages): what the
  browser test runs on onnxruntime-web's WebGPU provider beside the demo and NLLB files;
* ``info.json``: every file's metadata as ``graphgen.contract.read_file_info`` reads it (the
  JavaScript example's own reader must read the same).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "models" / "demo-en-zh"


def main(out: Path) -> None:
    import graphgen
    from graphgen.contract import read_file_info
    from graphgen.passes.bake import write_baked

    out.mkdir(parents=True, exist_ok=True)
    text_model = out / "demo-en-zh.onnx"
    graphgen.export(str(DEMO), str(text_model), progress=lambda _: None)
    graphgen.export(str(DEMO), str(out / "demo-en-zh-no-strings.onnx"), strings=False, progress=lambda _: None)
    # the other tokenizer kind, which the examples must refuse with a clear message
    graphgen.export(str(DEMO), str(out / "demo-en-zh-extensions.onnx"), tokenizer="extensions", progress=lambda _: None)
    sources = [line.split("\t")[0] for line in (DEMO / "test.tsv").read_text(encoding="utf-8").splitlines()]
    (out / "sources.txt").write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    translator = graphgen.Translator(text_model)
    expected = [t for start in range(0, len(sources), 16) for t in translator.translate(sources[start : start + 16])]
    (out / "expected.txt").write_text("".join(f"{t}\n" for t in expected), encoding="utf-8")
    (out / "empty.txt").write_text(f"{translator.translate([''])[0]}\n", encoding="utf-8")
    long = ">>cmn_Hans<< " + "My sister bought 12 books yesterday. " * 80  # about 1,300 tokens
    truncated = translator.translate([long], truncate=True)[0]
    (out / "long.txt").write_text(f"{long}\n{truncated}\n", encoding="utf-8")
    write_baked(text_model, out / "demo-en-zh-truncate.onnx", truncate=True)
    # settings for hosts that cannot feed optional inputs (Java, JavaScript): a baked copy
    write_baked(text_model, out / "demo-en-zh-greedy.onnx", {"num_beams": 1})
    greedy = translator.translate(sources[:40], num_beams=1)
    (out / "expected-greedy.txt").write_text("".join(f"{t}\n" for t in greedy), encoding="utf-8")
    # settings chosen per call by hosts that cannot feed optional inputs: a copy that keeps them required
    write_baked(text_model, out / "demo-en-zh-settings.onnx", keep=("num_beams", "max_length"))
    chosen = translator.translate(sources[:16], num_beams=2, max_length=8)
    (out / "expected-settings.txt").write_text("".join(f"{t}\n" for t in chosen), encoding="utf-8")
    shorter = translator.translate(sources[:16], num_beams=6, length_penalty=-3.0)
    (out / "expected-length-penalty.txt").write_text("".join(f"{t}\n" for t in shorter), encoding="utf-8")
    # the same copy with its weights beside it (a page's memory saver: onnxruntime-web's externalData)
    external = out / "demo-en-zh-external.onnx"
    graphgen.export(str(DEMO), str(external), external_data=True, progress=lambda _: None)
    write_baked(external, out / "demo-en-zh-greedy-external.onnx", {"num_beams": 1})
    graphgen.export(str(DEMO), str(out / "demo-en-zh-int4.onnx"), int4=True, progress=lambda _: None)
    int4 = graphgen.Translator(out / "demo-en-zh-int4.onnx")
    quantized = [t for start in range(0, 64, 16) for t in int4.translate(sources[start : start + 16])]
    (out / "expected-int4.txt").write_text("".join(f"{t}\n" for t in quantized), encoding="utf-8")
    # blocks of 32: what onnxruntime-web's WebGPU provider multiplies right (the browser test runs it there)
    graphgen.export(
        str(DEMO), str(out / "demo-en-zh-int4-32.onnx"), int4=True, int4_block_size=32, progress=lambda _: None
    )
    blocks32 = graphgen.Translator(out / "demo-en-zh-int4-32.onnx").translate(sources[:4])
    (out / "expected-int4-32.txt").write_text("".join(f"{t}\n" for t in blocks32), encoding="utf-8")

    # with the .ort file mobile apps load (optimized for ARM), which the C example runs on emulated ARM64 cores
    graphgen.export(str(DEMO), str(out / "demo-en-zh-int8.onnx"), int8=True, ort="arm", progress=lambda _: None)
    int8 = graphgen.Translator(out / "demo-en-zh-int8.onnx")
    alone = [int8.translate([source])[0] for source in sources[:32]]
    (out / "expected-int8.txt").write_text("".join(f"{t}\n" for t in alone), encoding="utf-8")

    # float16 (the loop search): on the CPU runtimes; refused on a WebGPU adapter without shader-f16
    graphgen.export(str(DEMO), str(out / "demo-en-zh-fp16.onnx"), fp16=True, progress=lambda _: None)
    half = graphgen.Translator(out / "demo-en-zh-fp16.onnx")
    halves = [t for start in range(0, 32, 16) for t in half.translate(sources[start : start + 16])]
    (out / "expected-fp16.txt").write_text("".join(f"{t}\n" for t in halves), encoding="utf-8")

    texts = [source.split(" ", 1)[1] for source in sources]  # without the demo's >>cmn_Hans<< token
    rows = language_fixtures(out, texts[:24])
    family_fixtures(out, texts[:4])
    # what Python reads from each file's metadata, which the JavaScript reader must read the same
    info = {model.name: read_file_info(model).metadata for model in sorted(out.glob("*.onnx"))}
    (out / "info.json").write_text(json.dumps(info, indent=1, sort_keys=True), encoding="utf-8")
    print(f"examples fixtures: {len(sources)} sentences, {rows} NLLB rows, {', '.join(WEB_FAMILIES)} in {out}")


# The families whose layers the demo (Marian) and NLLB files do not show: mBART-50's normalized
# embeddings, T5's relative position bias, mT5's gated feed-forward (each kernel WebGPU runs).
WEB_FAMILIES = ("mbart50", "t5", "mt5")


def family_fixtures(out: Path, texts: list[str]) -> None:
    """A text file per ``WEB_FAMILIES`` row, its sources and ``graphgen.Translator``'s translations."""
    import graphgen
    from graphgen.testing import family_checkpoint
    from graphgen.testing.families import FAMILIES

    for family in WEB_FAMILIES:
        checkpoint = out / f"{family}-checkpoint"
        family_checkpoint(checkpoint, family, seed=1, num_beams=4)
        model = out / f"{family}.onnx"
        graphgen.export(str(checkpoint), str(model), progress=lambda _: None)
        sources = [FAMILIES[family].text_prefix + text for text in texts]
        translations = graphgen.Translator(model).translate(sources)
        (out / f"{family}-sources.txt").write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
        (out / f"{family}-expected.txt").write_text("".join(f"{t}\n" for t in translations), encoding="utf-8")


def language_fixtures(out: Path, texts: list[str]) -> int:
    """The NLLB file with its language inputs kept, and Python's answers for three targets."""
    import graphgen
    from graphgen.contract import read_file_info
    from graphgen.passes.bake import write_baked
    from graphgen.testing import language_checkpoint

    checkpoint = out / "nllb-checkpoint"
    language_checkpoint(checkpoint, "NllbTokenizer", seed=1, num_beams=4)  # a seed whose targets differ on every text
    graphgen.export(str(checkpoint), str(out / "nllb.onnx"), progress=lambda _: None)
    write_baked(out / "nllb.onnx", out / "nllb-languages.onnx", keep_languages=True)
    codes = read_file_info(out / "nllb.onnx").languages
    (out / "nllb-codes.txt").write_text("".join(f"{code}\n" for code in codes), encoding="utf-8")
    # without string tensors (languages as UTF-8 bytes too), for builds without the string type
    graphgen.export(str(checkpoint), str(out / "nllb-no-strings.onnx"), strings=False, progress=lambda _: None)
    write_baked(out / "nllb-no-strings.onnx", out / "nllb-no-strings-languages.onnx", keep_languages=True)
    translator = graphgen.Translator(out / "nllb.onnx")
    rows = []
    for target in ("zho_Hans", "fra_Latn", "deu_Latn"):
        (out / f"nllb-{target}.txt").write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")
        translations = translator.translate(texts, source_language="eng_Latn", target_language=target)
        rows += [("eng_Latn", target, text, translation) for text, translation in zip(texts, translations, strict=True)]
    if any("\t" in field or "\n" in field for row in rows for field in row):
        raise ValueError("a fixture field holds a tab or a newline; languages.tsv cannot hold it")
    (out / "languages.tsv").write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return len(rows)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "build" / "examples")
