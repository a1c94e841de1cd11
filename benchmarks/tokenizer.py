"""The portable tokenizer (standard ONNX ops) against onnxruntime-extensions' SentencePiece op.

    python benchmarks/tokenizer.py        # `make bench` runs it; writes benchmarks/tokenizer_report.md

What it measures, on a full-size opus-mt vocabulary (a source.spm of 32,000 unigram pieces built
here, with the real nmt_nfkc normalizer: no hub, so the pieces are synthetic, their count, lengths
and scores as a real one's) and the full opus-mt-en-zh model shape (random weights):

* the encoding half of each text file alone (text → input_ids, attention_mask), batch 1 and 16,
  20-token and 200-token English sentences, one thread, median of N runs;
* a batch-1 greedy translation of the 20-token sentence (20 new tokens) through the whole text
  file, so the tokenizer's share of a translation is on the same scale;
* the two text files' sizes;
* the portable tokenizer of an NLLB-size vocabulary (256,000 BPE pieces, synthetic) against HF's
  own tokenizer, same texts, same ids.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from graphgen.testing import DEMO_DIR, builder_model, open_session, opus_mt_shaped_checkpoint

HERE = Path(__file__).resolve().parent
PIECES = 32_000
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "that",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "which",
    "this",
    "be",
    "are",
    "an",
    "or",
    "had",
    "not",
    "but",
    "have",
    "one",
    "were",
    "all",
    "their",
    "there",
    "been",
    "when",
    "who",
    "more",
    "will",
    "would",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "than",
    "into",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "time",
    "could",
    "these",
    "two",
    "may",
    "first",
    "then",
    "do",
    "any",
    "like",
    "my",
    "now",
    "over",
    "such",
    "our",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "meeting",
    "morning",
    "sister",
    "bought",
    "books",
    "yesterday",
    "number",
    "cats",
    "translation",
    "model",
    "graph",
    "runtime",
    "browser",
    "language",
]


def synthetic_spm(path: Path, count: int = PIECES, seed: int = 0) -> Path:
    """A unigram source.spm with ``count`` pieces: the demo's model (its normalizer, special pieces)
    with pieces added: frequent words whole, then word beginnings, endings and random letter runs."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((DEMO_DIR / "source.spm").read_bytes())
    rng = random.Random(seed)
    existing = {piece.piece for piece in proto.pieces}
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    candidates = [f"▁{w}" for w in WORDS] + list(WORDS)
    while len(candidates) < 4 * count:
        length = min(16, 1 + int(rng.expovariate(1 / 4)))
        word = "".join(rng.choices(letters, weights=range(len(letters), 0, -1), k=length))
        candidates.append(("▁" if rng.random() < 0.4 else "") + word)
    kinds = sentencepiece_model_pb2.ModelProto.SentencePiece
    for rank, piece in enumerate(dict.fromkeys(candidates)):
        if len(proto.pieces) >= count:
            break
        if piece in existing:
            continue
        added = proto.pieces.add()
        added.piece, added.score, added.type = piece, -3.0 - 12.0 * rank / count - rng.random(), kinds.NORMAL
    path.write_bytes(proto.SerializeToString())
    return path


def checkpoint(directory: Path) -> Path:
    """The full opus-mt-en-zh shape with random weights and the synthetic vocabulary."""
    import sentencepiece as spm

    opus_mt_shaped_checkpoint(directory)
    synthetic_spm(directory / "source.spm")
    (directory / "target.spm").write_bytes((directory / "source.spm").read_bytes())
    processor = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
    pieces = ["</s>", "<unk>", ">>cmn_Hans<<"]
    pieces += [p for p in map(processor.id_to_piece, range(processor.get_piece_size())) if p not in pieces]
    pieces = pieces[: 65000 - 1]
    pieces += [f"<extra_{i}>" for i in range(65000 - len(pieces))] + ["<pad>"]
    (directory / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}), encoding="utf-8")
    config = {"separate_vocabs": False, "model_max_length": 512, "tokenizer_class": "MarianTokenizer"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


NLLB_PIECES = 256_000  # NLLB-200's SentencePiece model (its 256,206 ids add the codes and specials)


def synthetic_nllb_tokenizer(directory: Path, count: int = NLLB_PIECES, seed: int = 0) -> Path:
    """An ``NllbTokenizer`` (as the hub lays it out: codes, ``tokenizers`` pipeline) over a BPE
    SentencePiece model of ``count`` pieces: the tests' trained 600-piece model, then pieces made by
    joining two existing ones (short ones more often), each a merge of its two halves, as BPE's are."""
    import transformers
    from sentencepiece import sentencepiece_model_pb2
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    from graphgen.testing import language_tokenizer

    language_tokenizer(directory, "NllbTokenizer")
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((directory / "sentencepiece.bpe.model").read_bytes())
    kinds = sentencepiece_model_pb2.ModelProto.SentencePiece
    pieces = [piece.piece for piece in proto.pieces if piece.type == kinds.NORMAL]
    short = [piece for piece in pieces if len(piece) <= 4]
    existing = {piece.piece for piece in proto.pieces}
    score = min(piece.score for piece in proto.pieces if piece.type == kinds.NORMAL)
    rng = random.Random(seed)
    while len(proto.pieces) < count:
        left, right = (rng.choice(short) if rng.random() < 0.7 else rng.choice(pieces) for _ in range(2))
        if right.startswith("▁"):
            left, right = right, left
        joined = left + right
        if right.startswith("▁") or len(joined) > 16 or joined in existing:
            continue
        existing.add(joined)
        pieces.append(joined)
        if len(joined) <= 4:
            short.append(joined)
        score -= 1.0
        added = proto.pieces.add()
        added.piece, added.score, added.type = joined, score, kinds.NORMAL
    (directory / "sentencepiece.bpe.model").write_bytes(proto.SerializeToString())
    for stale in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (directory / stale).unlink(missing_ok=True)
    tokenizer = transformers.NllbTokenizer.from_pretrained(
        directory, additional_special_tokens=FAIRSEQ_LANGUAGE_CODES, src_lang="eng_Latn"
    )
    tokenizer.save_pretrained(directory)
    return directory


def nllb_rows(directory: Path, threads: int, runs: int) -> tuple[list[tuple[str, int, int, float, float]], int]:
    """The portable tokenizer of an NLLB-size vocabulary against HF's own (``tokenizers``, Rust) on
    the same texts: (rows of label, batch, tokens, portable ms, HF ms), the graph's bytes. Asserts
    that the ids are HF's."""
    from graphgen.custom_ops import GraphBuilder
    from graphgen.custom_ops.builder import INT32, ML_DOMAIN, ML_OPSET
    from onnx import TensorProto, helper
    from transformers import AutoTokenizer

    from graphgen.runtime.translator import utf8_batch
    from graphgen.text.languages import load_language_vocabulary
    from graphgen.text.portable import add_portable_tokenizer

    hf = AutoTokenizer.from_pretrained(directory)
    vocabulary = load_language_vocabulary(directory)
    b = GraphBuilder("tokenizer")
    source = b.op("Expand", [b.const(np.int64(vocabulary.languages["eng_Latn"])), b.op("Shape", ["text_utf8"], end=1)])
    ids, mask, _ = add_portable_tokenizer(b, "text_utf8", vocabulary.portable_spec(), 1024, source_ids=source)
    b.output(ids, "input_ids", INT32, ["batch", "length"])
    b.output(mask, "attention_mask", INT32, ["batch", "length"])
    inputs = [helper.make_tensor_value_info("text_utf8", TensorProto.UINT8, ["batch", "bytes"])]
    model = builder_model(b, inputs, domains=[(ML_DOMAIN, ML_OPSET)])
    session = open_session(model, threads)
    rows = []
    for label, tokens in (("20-word", 20), ("200-word", 200)):
        for batch in (1, 16):
            texts = [sentence(tokens, seed).split(" ", 1)[1] for seed in range(batch)]
            data = utf8_batch(texts)
            graph_ids = session.run(None, {"text_utf8": data})[0]
            expected = hf(texts, padding=True, return_tensors="np")["input_ids"]
            assert np.array_equal(graph_ids, expected), "the portable tokenizer is not HF's"
            portable = median_ms(lambda d=data: session.run(None, {"text_utf8": d}), runs)
            reference = median_ms(lambda t=texts: hf(t, padding=True, return_tensors="np"), runs)
            rows.append((label, batch, int(graph_ids.shape[1]), portable, reference))
    return rows, model.ByteSize()


def sentence(tokens: int, seed: int) -> str:
    """An English sentence of about ``tokens`` words (each a token or two of the vocabulary)."""
    rng = random.Random(seed)
    return ">>cmn_Hans<< " + " ".join(rng.choice(WORDS) for _ in range(tokens)).capitalize() + "."


def encoder_sessions(directory: Path, threads: int) -> dict[str, object]:
    """The encoding half of each kind of text file, as a session of its own."""
    from graphgen.custom_ops import GraphBuilder
    from graphgen.custom_ops.builder import EXTENSIONS_DOMAIN, INT32, ML_DOMAIN, ML_OPSET, STRING
    from onnx import TensorProto, helper

    from graphgen.text.marian import add_tokenizer, load_vocabulary
    from graphgen.text.portable import add_portable_tokenizer

    vocabulary = load_vocabulary(directory)
    sessions = {}
    for kind in ("onnx", "extensions"):
        b = GraphBuilder("tokenizer")
        if kind == "onnx":
            name, elem, shape = "text_utf8", TensorProto.UINT8, ["batch", "bytes"]
            ids, mask, _ = add_portable_tokenizer(b, name, vocabulary.portable_spec(0, 65000), max_length=512)
        else:
            name, elem, shape = "text", STRING, ["batch"]
            ids, mask = add_tokenizer(b, name, vocabulary, 0, 65000, max_length=512)
        b.output(ids, "input_ids", INT32, ["batch", "length"])
        b.output(mask, "attention_mask", INT32, ["batch", "length"])
        inputs = [helper.make_tensor_value_info(name, elem, shape)]
        model = builder_model(b, inputs, domains=[(EXTENSIONS_DOMAIN, 1), (ML_DOMAIN, ML_OPSET)])
        sessions[kind] = open_session(model, threads, extensions=kind == "extensions")
    return sessions


def feeds(kind: str, texts: list[str]) -> dict[str, np.ndarray]:
    from graphgen.runtime.translator import utf8_batch

    return {"text_utf8": utf8_batch(texts)} if kind == "onnx" else {"text": np.array(texts, dtype=object)}


def median_ms(run, runs: int) -> float:
    run()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--report", type=Path, default=HERE / "tokenizer_report.md")
    args = parser.parse_args()

    from graphgen import Translator, export

    with tempfile.TemporaryDirectory() as folder:
        directory = checkpoint(Path(folder) / "opus-mt-shape")
        files = {}
        for kind in ("onnx", "extensions"):
            files[kind] = Path(folder) / f"{kind}.onnx"
            export(directory, files[kind], tokenizer=kind, progress=lambda _: None)
        sizes = {kind: path.stat().st_size for kind, path in files.items()}
        sessions = encoder_sessions(directory, args.threads)
        rows = []
        for label, tokens in (("20-token", 20), ("200-token", 200)):
            for batch in (1, 16):
                texts = [sentence(tokens, seed) for seed in range(batch)]
                inputs = {kind: feeds(kind, texts) for kind in sessions}
                times = {
                    kind: median_ms(lambda s=session, f=inputs[kind]: s.run(None, f), args.runs)
                    for kind, session in sessions.items()
                }
                ids = {kind: session.run(None, inputs[kind])[0] for kind, session in sessions.items()}
                assert np.array_equal(ids["onnx"], ids["extensions"]), "the two tokenizers disagree"
                rows.append((label, batch, int(ids["onnx"].shape[1]), times["onnx"], times["extensions"]))
        translator = Translator(files["onnx"], threads=args.threads)
        text = [sentence(20, 0)]
        greedy = {"num_beams": 1, "max_length": 21, "min_length": 21}
        translate_ms = median_ms(lambda: translator.translate(text, **greedy), max(3, args.runs // 4))
        nllb, nllb_bytes = nllb_rows(synthetic_nllb_tokenizer(Path(folder) / "nllb-tokenizer"), args.threads, args.runs)

    lines = [
        "# The portable tokenizer against the extensions' SentencePiece op",
        "",
        f"Written by `benchmarks/tokenizer.py` ({args.threads} thread, median of {args.runs} runs). Vocabulary: a",
        f"{PIECES:,}-piece unigram source.spm (synthetic pieces, the real nmt_nfkc normalizer) in the full",
        "opus-mt-en-zh shape (random weights). Times are for the encoding half alone (text → ids and mask);",
        "both kinds give the same ids for every input here (asserted).",
        "",
        "| input | batch | tokens (longest) | portable (ONNX ops) ms | extensions op ms | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, batch, width, portable, extensions in rows:
        lines.append(
            f"| {label} | {batch} | {width} | {portable:.2f} | {extensions:.2f} | {portable / extensions:.1f}× |"
        )
    share = rows[0][3] / translate_ms
    extra = sizes["onnx"] - sizes["extensions"]
    lines += [
        "",
        "A batch-1 greedy translation of the 20-token sentence (20 new tokens) through the whole portable file:",
        f"{translate_ms:.0f} ms, of which tokenizing is {rows[0][3]:.2f} ms: **{100 * share:.1f}%** (target: ≤ 5%).",
        "",
        "| file (full opus-mt shape, float32) | bytes | MB |",
        "|---|---:|---:|",
        f"| `--tokenizer onnx` (portable) | {sizes['onnx']:,} | {sizes['onnx'] / 1e6:.1f} |",
        f"| `--tokenizer extensions` | {sizes['extensions']:,} | {sizes['extensions'] / 1e6:.1f} |",
        f"| difference | {extra:+,} | {extra / 1e6:+.1f} |",
        "",
        f"NLLB's size: an `NllbTokenizer` over a {NLLB_PIECES:,}-piece BPE model (synthetic pieces, each the",
        "merge of two others; the real nmt_nfkc normalizer; the `tokenizers` pipeline HF builds from it).",
        f"The portable tokenizer's graph is {nllb_bytes / 1e6:.1f} MB; beside it HF's own tokenizer (Rust,",
        "`tokenizer(texts, padding=True)`), whose ids it equals on every row (asserted):",
        "",
        "| input | batch | tokens (longest) | portable (ONNX ops) ms | HF tokenizers ms | ratio |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {label} | {batch} | {width} | {portable:.2f} | {reference:.2f} | {portable / reference:.1f}× |"
            for label, batch, width, portable, reference in nllb
        ),
        "",
    ]
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
