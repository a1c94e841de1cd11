"""Rebuild the bundled demo checkpoint from nothing: corpus → SentencePiece → vocab → MarianMT.

Run from the repository root (needs ``graphgen[export]``)::

    python models/demo-en-zh/train.py            # writes into models/demo-en-zh/
    python models/demo-en-zh/train.py --out /tmp/x --steps 200   # a quick smoke run

The output has the file layout of a Helsinki-NLP opus-mt checkpoint, including its vocabulary
quirks: one ``vocab.json`` shared by both sides whose ids differ from the SentencePiece ids,
``</s>`` = 0, ``<pad>`` = last id = decoder start, ``bad_words_ids=[[pad]]``, a zero pad
embedding row and 4 beams by default. Everything is seeded; on 2 CPU cores it takes about
ten minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

import sentencepiece as spm
import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus  # noqa: E402

SEED = 20261202
TRAIN_PAIRS = 60_000
TEST_PAIRS = 300


def train_sentencepiece(lines: list[str], prefix: Path, vocab_size: int) -> None:
    """Unigram model with Marian's defaults (nmt_nfkc normaliser); digits split for numbers."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(
        input=handle.name,
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        split_digits=True,
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )
    Path(handle.name).unlink()
    neutral_trainer_spec(prefix.with_suffix(".model"), prefix.name)


def neutral_trainer_spec(model_file: Path, side: str) -> None:
    """Replace the training machine's paths that SentencePiece records in the model's trainer spec
    (the corpus file, the output prefix) with plain names; the pieces and scores stay as trained."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(model_file.read_bytes())
    del model.trainer_spec.input[:]
    model.trainer_spec.input.append(f"{side}.txt")
    model.trainer_spec.model_prefix = side
    model_file.write_bytes(model.SerializeToString())


def build_vocab(source_spm: Path, target_spm: Path) -> dict[str, int]:
    """opus-mt layout: ``</s>`` 0, ``<unk>`` 1, language tokens, pieces of both sides, ``<pad>`` last."""
    pieces = ["</s>", "<unk>", *corpus.LANGUAGE_TOKENS]
    for model_file in (source_spm, target_spm):
        processor = spm.SentencePieceProcessor(model_file=str(model_file))
        for index in range(processor.get_piece_size()):
            if processor.is_control(index) or processor.is_unknown(index):
                continue
            piece = processor.id_to_piece(index)
            if piece not in pieces:
                pieces.append(piece)
    pieces.append("<pad>")
    return {piece: index for index, piece in enumerate(pieces)}


def write_checkpoint_files(out: Path, vocab: dict[str, int]) -> MarianConfig:
    pad = len(vocab) - 1
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
    tokenizer_config = {
        "source_lang": "eng",
        "target_lang": "zho",
        "model_max_length": 512,
        "separate_vocabs": False,
        "tokenizer_class": "MarianTokenizer",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=128,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=512,
        decoder_ffn_dim=512,
        max_position_embeddings=512,
        activation_function="swish",
        scale_embedding=True,
        dropout=0.1,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        bos_token_id=0,
        forced_eos_token_id=0,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        architectures=["MarianMTModel"],
    )
    return config


def generation_config(pad: int) -> GenerationConfig:
    return GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=pad,
        renormalize_logits=True,
    )


def batches(lengths: list[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches of at most ``batch_tokens`` source tokens, in random order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    result: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and (len(current) + 1) * lengths[index] > batch_tokens:
            result.append(current)
            current = []
        current.append(index)
    if current:
        result.append(current)
    rng.shuffle(result)
    return result


def pad_rows(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(row) for row in rows)
    return torch.tensor([row + [value] * (width - len(row)) for row in rows], dtype=torch.long)


def train(model: MarianMTModel, tokenizer: MarianTokenizer, pairs: list[tuple[str, str]], steps: int) -> None:
    sources = [source for source, _ in pairs]
    targets = [target for _, target in pairs]
    encoded = tokenizer(sources, text_target=targets)
    source_ids, target_ids = encoded["input_ids"], encoded["labels"]
    pad = model.config.pad_token_id
    rng = random.Random(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.5e-3, betas=(0.9, 0.98), weight_decay=0.0)
    warmup = max(1, steps // 20)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)
    model.train()
    step, started = 0, time.time()
    while step < steps:
        for batch in batches([len(ids) for ids in source_ids], 3000, rng):
            if step >= steps:
                break
            input_ids = pad_rows([source_ids[i] for i in batch], pad)
            labels = pad_rows([target_ids[i] for i in batch], -100)
            logits = model(input_ids=input_ids, attention_mask=(input_ids != pad).long(), labels=labels).logits
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            with torch.no_grad():  # keep the pad (= decoder start) embedding at zero, as in opus-mt
                model.model.shared.weight[pad].zero_()
            step += 1
            if step % 100 == 0 or step == steps:
                elapsed = time.time() - started
                print(f"step {step}/{steps}  loss {loss.item():.3f}  {elapsed:.0f}s", flush=True)
    model.eval()


def evaluate(model: MarianMTModel, tokenizer: MarianTokenizer, pairs: list[tuple[str, str]]) -> int:
    correct = 0
    for start in range(0, len(pairs), 32):
        chunk = pairs[start : start + 32]
        inputs = tokenizer([source for source, _ in chunk], return_tensors="pt", padding=True)
        with torch.no_grad():
            output = model.generate(**inputs)
        hypotheses = tokenizer.batch_decode(output, skip_special_tokens=True)
        correct += sum(hyp == ref for hyp, (_, ref) in zip(hypotheses, chunk, strict=True))
    return correct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE, help="checkpoint directory (default: beside this script)")
    parser.add_argument("--steps", type=int, default=2400, help="optimizer steps (default: 2400)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    torch.set_num_threads(2)

    train_pairs = corpus.generate_pairs(TRAIN_PAIRS, seed=SEED)
    test_pairs = corpus.generate_pairs(TEST_PAIRS, seed=SEED + 1, exclude={s for s, _ in train_pairs})
    with open(args.out / "test.tsv", "w", encoding="utf-8") as handle:
        handle.writelines(f"{source}\t{target}\n" for source, target in test_pairs)

    strip = len(corpus.LANGUAGE_TOKENS[0]) + 1  # the tokenizer cuts the language token off
    train_sentencepiece([s[strip:] for s, _ in train_pairs], args.out / "source", 400)
    train_sentencepiece([t for _, t in train_pairs], args.out / "target", 300)
    for side in ("source", "target"):
        (args.out / f"{side}.model").rename(args.out / f"{side}.spm")
        (args.out / f"{side}.vocab").unlink()
    vocab = build_vocab(args.out / "source.spm", args.out / "target.spm")
    config = write_checkpoint_files(args.out, vocab)
    tokenizer = MarianTokenizer.from_pretrained(args.out)

    model = MarianMTModel(config)
    model.generation_config = generation_config(config.pad_token_id)
    with torch.no_grad():
        model.model.shared.weight[config.pad_token_id].zero_()
    print(f"vocab {len(vocab)}, parameters {sum(p.numel() for p in model.parameters()):,}", flush=True)
    started = time.time()
    train(model, tokenizer, train_pairs, args.steps)
    train_seconds = time.time() - started
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)

    correct = evaluate(model, tokenizer, test_pairs)
    metrics = {
        "test_sentences": len(test_pairs),
        "exact_match": correct,
        "accuracy": round(correct / len(test_pairs), 4),
        "decoding": "HF generate, generation_config defaults (4 beams)",
        "train_steps": args.steps,
        "train_seconds": round(train_seconds),
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
