"""≥ 2,000 strings for tokenizer parity: what real inputs look like, and the awkward cases."""

from __future__ import annotations

import random

from conftest import demo_test_pairs

PROSE = (
    "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times; "
    "call me Ishmael. In the beginning the Universe was created. This has made a lot of people very angry "
    "and been widely regarded as a bad move. Somewhere, something incredible is waiting to be known. "
    "Don't panic! Are you sure? (Yes.) \"Quoted\" and 'single' — dashes – and… ellipses. e-mail: a.b@c.org, "
    "https://example.com/path?q=1&r=2 #hashtag @mention 50% off $19.99 £5 €3,50 ¥100 100°C 3×4=12 ½ ¼ ™ © ®"
)
SCRIPTS = (
    "猫",
    "我有三只猫。",
    "你好世界",
    "東京",
    "こんにちは",
    "안녕하세요",
    "Привет мир",
    "مرحبا",
    "שלום",
    "γειά σου",
    "ñandú",
    "Ünïcödé",
    "ﬁne",
    "Ａｂｃ１２３",
    "①②③",
    "ﾊﾝｶｸ",
    "cafe\u0301",
    "\u200bzero\u200bwidth",
)
EMOJI = ("😀", "👍🏽", "👨‍👩‍👧", "🇨🇳", "❤️", "🐱🐶", "✓", "★")
SPACES = (" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", " \t ")
TOKENS = (">>cmn_Hans<<", ">>cmn_Hant<<", ">>yue_Hans<<", ">>xx<<", ">><<", ">>", "<<", ">> cmn_Hans <<")


def tokenizer_strings(seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    words = PROSE.split(" ")
    demo = [source for source, _ in demo_test_pairs()]
    strings: list[str] = ["", " ", "\t", "\n", "   ", "a", ".", "0", "12345678901234567890"]
    strings += demo  # with their language tokens
    strings += [source.split(" ", 1)[1] for source in demo[:100]]  # without
    for _ in range(400):  # English prose fragments
        start = rng.randrange(len(words))
        strings.append(" ".join(words[start : start + rng.randint(1, 25)]))
    for _ in range(300):  # digits and punctuation
        strings.append("".join(rng.choice("0123456789.,:;!?-()'\"/%$ ") for _ in range(rng.randint(1, 30))))
    for _ in range(300):  # mixed scripts and emoji inside English
        parts = [rng.choice(words), rng.choice(SCRIPTS), rng.choice(words), rng.choice(EMOJI)]
        rng.shuffle(parts)
        strings.append(rng.choice(SPACES).join(parts))
    for _ in range(300):  # whitespace at the edges and in the middle
        text = " ".join(rng.sample(words, rng.randint(1, 6)))
        strings.append(
            rng.choice(SPACES) * rng.randint(0, 3)
            + text.replace(" ", rng.choice(SPACES))
            + rng.choice(SPACES) * rng.randint(0, 3)
        )
    for _ in range(300):  # language tokens, well-formed or not, with and without a space after
        body = " ".join(rng.sample(words, rng.randint(0, 8)))
        strings.append(rng.choice(TOKENS) + rng.choice(("", " ", "  ")) + body)
    for _ in range(60):  # special tokens typed as text, which MarianTokenizer splits off
        parts = [rng.choice(words), rng.choice(("</s>", "<unk>", "<pad>", " </s> ", "<pad><pad>")), rng.choice(words)]
        strings.append(rng.choice(("", ">>cmn_Hans<< ")) + "".join(parts[: rng.randint(1, 3)]))
    strings += ["</s>", "<unk>", "<pad>", "</s>>>cmn_Hans<< hi", "a</s>", " <unk> ", "</s", "<pad> >>cmn_Hant<<"]
    for length in (100, 300, 511, 512, 513, 700, 2000):  # around and beyond the 512-token limit
        strings.append(" ".join(rng.choice(words) for _ in range(length)))
        strings.append(">>cmn_Hans<< " + " ".join(str(rng.randint(0, 9)) for _ in range(length)))
    return strings
