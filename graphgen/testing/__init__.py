"""Checkpoint factories, the demo test set and session helpers shared by the tests and the benchmarks.

Needs ``graphgen[export]`` (torch, transformers, sentencepiece), imported only when a function runs:
importing this package loads neither torch nor transformers. Parts read the repository's ``models/``
folder (the demo model, its test set and corpus generator), so they work in a source checkout, not
from an installed wheel.

- ``demo``: the bundled demo model's folder, its test set and corpus generator;
- ``families``: the ``FAMILIES`` table (NLLB, M2M100, mBART-50, T5, T5 v1.1, mT5);
- ``checkpoints``: random-weight checkpoints in the hub's layout, tiny and full-size;
- ``family_files``: a family's checkpoint exported once, beside its HF model;
- ``sessions``: an ONNX Runtime session on a file and HF ``generate`` on the same inputs;
- ``strings``: the tokenizer parity strings;
- ``venvs``: the extra virtual environments (no torch; others as a test needs);
- ``cuda_copies``: ONNX Runtime's CUDA placement of a file, and the copies a decoding step makes
  between the GPU and the host, modelled from its source for machines without a GPU.
"""

from __future__ import annotations

from graphgen.testing.checkpoints import (
    FULL_SIZE_EOS,
    FULL_SIZE_PAD,
    FULL_SIZE_SHAPES,
    MADE_UP_WORDS,
    MADLAD_TAGS,
    OPUS_MT_EN_ZH,
    T5_VARIANTS,
    family_checkpoint,
    family_model,
    full_size_family_checkpoint,
    language_checkpoint,
    language_tokenizer,
    madlad_shaped_checkpoint,
    madlad_tokenizer,
    mbart25_checkpoint,
    nllb_legacy_checkpoint,
    nllb_legacy_tokenizer,
    opus_mt_shaped_checkpoint,
    random_family_model,
    random_marian,
    random_t5_model,
    separate_vocab_checkpoint,
    t5_checkpoint,
)
from graphgen.testing.demo import (
    DEMO_DIR,
    LONG_SOURCE,
    REPO,
    corpus_pairs,
    demo_sources,
    demo_test_pairs,
    demo_texts,
)
from graphgen.testing.families import FAMILIES, LANGUAGE_TOKENIZERS, Family
from graphgen.testing.family_files import IdFiles, TextFiles
from graphgen.testing.sessions import (
    builder_model,
    generate_both,
    hf_sequences,
    hf_tokens,
    hf_translate,
    open_session,
    random_sources,
    run_id_file,
    text_feeds,
)
from graphgen.testing.strings import added_token_strings, generated_strings, tokenizer_strings
from graphgen.testing.venvs import cached_venv, no_torch_python

__all__ = [
    "DEMO_DIR",
    "FAMILIES",
    "FULL_SIZE_EOS",
    "FULL_SIZE_PAD",
    "FULL_SIZE_SHAPES",
    "LANGUAGE_TOKENIZERS",
    "LONG_SOURCE",
    "MADE_UP_WORDS",
    "MADLAD_TAGS",
    "OPUS_MT_EN_ZH",
    "REPO",
    "T5_VARIANTS",
    "Family",
    "IdFiles",
    "TextFiles",
    "added_token_strings",
    "builder_model",
    "cached_venv",
    "corpus_pairs",
    "demo_sources",
    "demo_test_pairs",
    "demo_texts",
    "family_checkpoint",
    "family_model",
    "full_size_family_checkpoint",
    "generate_both",
    "generated_strings",
    "hf_sequences",
    "hf_tokens",
    "hf_translate",
    "language_checkpoint",
    "language_tokenizer",
    "madlad_shaped_checkpoint",
    "madlad_tokenizer",
    "mbart25_checkpoint",
    "nllb_legacy_checkpoint",
    "nllb_legacy_tokenizer",
    "no_torch_python",
    "open_session",
    "opus_mt_shaped_checkpoint",
    "random_family_model",
    "random_marian",
    "random_sources",
    "random_t5_model",
    "run_id_file",
    "separate_vocab_checkpoint",
    "t5_checkpoint",
    "text_feeds",
    "tokenizer_strings",
]
