"""``graphgen verify``: how users check their own checkpoint against HF, sentence by sentence."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from graphgen._errors import GraphgenError
from graphgen.contract import (
    DECODER_START_TOKEN_ID,
    FORCED_BOS_TOKEN_ID,
    ID_INPUTS,
    NUM_BEAMS,
    SEQUENCES,
    SOURCE_LANGUAGE,
    TARGET_LANGUAGE,
    TEXT_LEVEL,
    TRANSLATION,
    FileInfo,
    read_file_info,
)

SAMPLE_SENTENCES = (
    "Hello, world.",
    "I have three cats and two dogs.",
    "The meeting starts at 9:30 tomorrow morning.",
    "Where is the train station?",
    "This book costs 25 dollars.",
    "She was born on March 5, 1990.",
    "Please call me when you arrive.",
    "The weather is nice today, isn't it?",
)


def read_sentences(path: str | None, limit: int | None) -> list[str]:
    if path is None:
        sentences = list(SAMPLE_SENTENCES)
    else:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise GraphgenError(f"cannot read {path}: {error}") from error
        sentences = [line.split("\t")[0] for line in lines if line.strip()]
    if limit is not None:
        sentences = sentences[:limit]
    if not sentences:
        raise GraphgenError("no sentences to verify")
    return sentences


def verify(
    checkpoint: str,
    model: str,
    *,
    sentences_file: str | None = None,
    batch_size: int = 8,
    limit: int | None = None,
    source_language: str | None = None,
    target_language: str | None = None,
    out: TextIO,
) -> bool:
    """Print a parity report; True when every sentence matches in every configuration.

    For language-coded tokenizers (NLLB, mBART-50, M2M100) the languages default to the file's;
    HF's side gets the source as ``tokenizer.src_lang`` and the target as ``forced_bos_token_id``
    (MBartTokenizer's checkpoints: as ``decoder_start_token_id``); an id-level file gets the same
    input.
    """
    import numpy as np
    import onnxruntime as ort
    import transformers

    from graphgen.runtime.translator import Translator, session_options
    from graphgen.text.languages import starts_decoder_with_target
    from graphgen.verify.parity import compare, generated_tokens, hf_generate

    sentences = read_sentences(sentences_file, limit)
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(checkpoint).eval()
    info = read_file_info(model)
    session = ort.InferenceSession(model, session_options(extensions=info.needs_extensions, config=info.session_config))
    text_level = info.interface == TEXT_LEVEL
    translator = Translator(model) if text_level else None
    config = hf_model.generation_config
    chosen = _languages(tokenizer, info, source_language, target_language)
    hf_languages: dict[str, Any] = {}
    graph_languages: dict[str, Any] = {}
    forced: dict[str, Any] = {}
    if chosen is not None:
        source, target, target_id = chosen
        print(f"languages: source {source}, target {target}", file=out)
        if starts_decoder_with_target(tokenizer):
            hf_languages = {DECODER_START_TOKEN_ID: target_id}  # the same name in HF and in the file
            feedable = {value.name for value in [*session.get_inputs(), *session.get_overridable_initializers()]}
            if not text_level and DECODER_START_TOKEN_ID in feedable:
                forced = hf_languages
            elif not text_level and target_id != info.special_ids.get("decoder_start"):
                raise GraphgenError(
                    f"this id-level file has no {DECODER_START_TOKEN_ID} input (a --search op file, or one "
                    f"exported before it was an input): it starts the decoder with the checkpoint's; {target} "
                    "needs a text-level file (its target_language input) or an id-level file exported again"
                )
        else:
            hf_languages = forced = {FORCED_BOS_TOKEN_ID: target_id}  # the same name in HF and in the file
        graph_languages = {SOURCE_LANGUAGE: source, TARGET_LANGUAGE: target}
    all_match = True
    runs: list[tuple[str, dict[str, Any]]] = [
        ("greedy", {NUM_BEAMS: 1}),
        (f"beam search ({config.num_beams} beams)", {}),
    ]
    for label, settings in runs:
        expected_ids = hf_generate(hf_model, tokenizer, sentences, batch_size, **settings, **hf_languages)
        expected: list[list[Any]]  # strings (text files) or token tuples (id files)
        actual: list[list[Any]] = []
        if translator is not None:
            expected = [[tokenizer.decode(list(ids), skip_special_tokens=True) for ids in row] for row in expected_ids]
            for start in range(0, len(sentences), batch_size):
                chunk = sentences[start : start + batch_size]
                translations = translator.run(chunk, **settings, **graph_languages)[TRANSLATION]
                actual += [[str(text) for text in row] for row in translations]
        else:
            expected = list(expected_ids)
            for start in range(0, len(sentences), batch_size):
                batch = tokenizer(
                    sentences[start : start + batch_size], return_tensors="np", padding=True, truncation=True
                )
                feeds = {name: batch[name].astype(np.int32) for name in ID_INPUTS}  # HF's names too
                feeds |= {k: np.array([v], dtype=np.int32) for k, v in (settings | forced).items()}
                sequences = session.run([SEQUENCES], feeds)[0]
                actual += [
                    [generated_tokens(h, config.eos_token_id, config.pad_token_id) for h in row] for row in sequences
                ]
        result = compare(label, sentences, expected, actual)
        all_match &= result.matches == result.total
        print(f"{label}: {result.matches}/{result.total} identical ({100 * result.rate:.1f}%)", file=out)
        for sentence, want, got in result.differences[:5]:
            print(f"  input: {sentence}\n    HF:    {want}\n    graph: {got}", file=out)
    return all_match


def _languages(tokenizer: Any, info: FileInfo, source: str | None, target: str | None) -> tuple[str, str, int] | None:
    """The source and target codes (the file's defaults unless given) and the target's token id, or
    ``None`` for tokenizers without language codes; the tokenizer's ``src_lang`` is set on the way."""
    from graphgen.text.languages import language_codes

    codes = language_codes(tokenizer)
    if not codes:
        if source is not None or target is not None:
            raise GraphgenError("this checkpoint's tokenizer has no language codes (Marian: >>xx<< in the text)")
        return None
    source = source if source is not None else (info.source_language or tokenizer.src_lang)
    target = target if target is not None else (info.target_language or "")
    for name, code in (("source", source), ("target", target)):
        if code not in codes:
            hint = "" if code else " (verify needs a target language: pass --target-language)"
            raise GraphgenError(f"unknown {name} language {code!r}{hint}")
    tokenizer.src_lang = source
    return source, target, codes[target]
