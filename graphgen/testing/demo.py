"""The bundled demo model (``models/demo-en-zh``) and its held-out test set, as tests and benchmarks read them.

Everything here reads the repository's ``models/`` folder, so it works in a source checkout only (an
installed wheel has no ``models/``); the paths are computed, never imported at import time, so importing
this module costs nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

# graphgen/testing/demo.py → the checkout's root, where models/, tests/ and benchmarks/ are.
REPO = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO / "models" / "demo-en-zh"

# About 1,200 tokens: past the demo model's 512 positions, so a file must refuse it or truncate it.
LONG_SOURCE = ">>cmn_Hans<< " + "I have three cats. " * 200


def demo_test_pairs() -> list[tuple[str, str]]:
    """The demo model's 300 held-out (source, reference) pairs; each source starts with its
    ``>>cmn_Hans<<`` / ``>>cmn_Hant<<`` token, as MarianTokenizer takes it."""
    lines = (DEMO_DIR / "test.tsv").read_text(encoding="utf-8").splitlines()
    pairs = []
    for line in lines:
        source, reference = line.split("\t")
        pairs.append((source, reference))
    return pairs


def demo_sources() -> list[str]:
    """The test set's sources with their language tokens (what the demo model's files take); a new list
    each call, so callers may change it."""
    return [source for source, _ in demo_test_pairs()]


def demo_texts() -> list[str]:
    """The test set's sources without the language token: plain English, for the models of other
    families (their language is an input of its own, or a task prefix)."""
    return [source.split(" ", 1)[1] for source in demo_sources()]


def _demo_corpus() -> ModuleType:
    """``models/demo-en-zh/corpus.py`` (the generator the demo model was trained on), loaded from its
    file: it is no package, and putting its folder on ``sys.path`` would shadow any other ``corpus``."""
    name = "graphgen_demo_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DEMO_DIR / "corpus.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {DEMO_DIR / 'corpus.py'}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up while being defined
        spec.loader.exec_module(module)
    return sys.modules[name]


def corpus_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` distinct (source, target) pairs from the demo model's corpus generator: real
    sentences with real lengths, as many as a bulk or cluster test needs."""
    pairs: list[tuple[str, str]] = _demo_corpus().generate_pairs(count, seed=seed)
    return pairs
