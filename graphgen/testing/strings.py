"""Strings for tokenizer parity: ≥ 2,000 that look like real inputs and the awkward cases, and as many
generated ones as asked for (every Unicode plane, marks, odd whitespace, controls, emoji sequences).

Fixed seeds, so a failure names a string that fails again; the tokenizer tests compare the graphs'
ids with the HF tokenizers' on all of them, and the docs quote the counts.
"""

from __future__ import annotations

import random

from graphgen.testing.demo import demo_sources

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
    """2,091 strings: the demo test set with and without its language tokens, English prose, digits and
    punctuation, mixed scripts and emoji, odd whitespace, language tokens well-formed or not, special
    tokens typed as text, and inputs around and beyond the 512-token limit."""
    rng = random.Random(seed)
    words = PROSE.split(" ")
    demo = demo_sources()
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


# Unicode material for generated_strings: each a list of code points or of short strings.
COMBINING = [*range(0x0300, 0x0370), *range(0x1AB0, 0x1ACF), *range(0x1DC0, 0x1E00), *range(0x20D0, 0x20F1)]
COMBINING += [*range(0xFE20, 0xFE30), 0x093F, 0x094D, 0x0A3E, 0x0E31, 0x0E48, 0x302A, 0x3099, 0x309A, 0xFF9E, 0xFF9F]
FULL_WIDTH = [*range(0xFF01, 0xFF5F), *range(0xFF61, 0xFFA0), *range(0xFFE0, 0xFFEF), *range(0x3000, 0x3040)]
WHITE = ["\u00a0", "\u3000", "\t", "\n", "\r", "\r\n", "\u2028", "\u2029", "\u200b", "\u2009", "\u202f", "\x0b", "\x0c"]
CONTROLS = [*range(0x01, 0x20), 0x7F, *range(0x80, 0xA0), 0x00AD, 0x061C, 0x200E, 0x200F, 0xFEFF, 0xFFF9, 0xE0001]
EMOJI_SEQUENCES = [
    "👨\u200d👩\u200d👧\u200d👦",
    "👩🏽\u200d💻",
    "🏳️\u200d🌈",
    "❤️\u200d🔥",
    "🇯🇵",
    "🇺🇸🇨🇳",
    "1️⃣",
    "#️⃣",
    "👍🏿",
    "©\u200d©",
    "®️",
    "🧑🏻\u200d🤝\u200d🧑🏾",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "☝🏽",
    "😀\u200d",
]
HANGUL = [*range(0x1100, 0x1113), *range(0x1161, 0x1176), *range(0x11A8, 0x11C3), *range(0xAC00, 0xAC40)]
ASCII_WORDS = ("the", "Cat", "x", "12", "3.5", "e-mail", "Hello,", "world!", "a", "I", "<s>", "</s>", "<unk>", "<pad>")


def _random_scalar(rng: random.Random) -> str:
    """A code point from any plane (half of them from the BMP), never a surrogate or U+0000."""
    while True:
        code = rng.randrange(1, 0x10000) if rng.random() < 0.5 else rng.randrange(0x10000, 0x110000)
        if not 0xD800 <= code < 0xE000:
            return chr(code)


def _piece(rng: random.Random, words: list[str]) -> str:
    """One random piece of ``generated_strings``: its kind drawn first, then its characters."""
    kind = rng.randrange(10)
    if kind == 0:
        return "".join(_random_scalar(rng) for _ in range(rng.randint(1, 4)))
    if kind == 1:  # a base (letter, full-width, symbol or random) with combining marks
        base = rng.choice(["a", "e", "Z", "\u00e9", "\uff21", "\u00a9", "\u0915", "\u3042", _random_scalar(rng)])
        return base + "".join(chr(rng.choice(COMBINING)) for _ in range(rng.randint(1, 3)))
    if kind == 2:
        return "".join(chr(rng.choice(FULL_WIDTH)) for _ in range(rng.randint(1, 6)))
    if kind == 3:
        return "".join(rng.choice(WHITE) for _ in range(rng.randint(1, 3)))
    if kind == 4:
        return "".join(chr(rng.choice(CONTROLS)) for _ in range(rng.randint(1, 2)))
    if kind == 5:
        return rng.choice(EMOJI_SEQUENCES)
    if kind == 6:
        return "".join(chr(rng.choice(HANGUL)) for _ in range(rng.randint(1, 4)))
    if kind == 7:
        return rng.choice(SCRIPTS)
    return rng.choice(words) if kind == 8 else rng.choice(ASCII_WORDS)


def generated_strings(count: int = 10_000, seed: int = 11) -> list[str]:
    """``count`` strings from a fixed seed: every Unicode plane, combining marks, full-width forms,
    NBSP/U+3000/tabs/newlines, control characters, emoji ZWJ sequences, Hangul jamo, special tokens
    typed as text, empty strings and a few 2,000-character lines, joined by spaces or nothing."""
    rng = random.Random(seed)
    words = PROSE.split(" ")
    strings = ["", "", " ", "\u3000", "\t\n"]
    while len(strings) < count:
        pieces = [_piece(rng, words) for _ in range(rng.randint(1, 8))]
        strings.append("".join(p + rng.choice(("", "", " ", "  ")) for p in pieces))
    for index in range(0, count, max(1, count // 5)):  # 2,000-character lines
        line = ""
        while len(line) < 2000:
            line += _piece(rng, words) + rng.choice(("", " "))
        strings[index] = line[:2000]
    return strings[:count]


# Texts around added tokens: whitespace each side (for lstrip/rstrip), tokens back to back or one
# running into another ("eng_Latn" + "nob_Latn" share the "n"), forms that normalize into a token.
ADDED_TOKEN_CASES = (
    "say eng_Latn now",
    "x <mask> y",
    "a  <mask>  b",
    " <mask>",
    "<mask> ",
    "x\u3000<mask>",
    "a \t<mask>b",
    "\uff1cmask\uff1e x",
    "\uff45\uff4e\uff47_\uff2c\uff41\uff54\uff4e x",
    "eng_Latnob_Latn",
    "<mask><mask>",
    "__en____fr__",
    "<extra_id_1><extra_id_10>",
    "<extra_id_1",
    "x  fra_Latn  y",
    "<s>eng_Latn</s>",
    "a __fr__ b",
    "say en_XX now",
    "fra_Latn",
)


def added_token_strings(tokens: list[str], count: int = 600, seed: int = 3) -> list[str]:
    """``ADDED_TOKEN_CASES`` and ``count`` strings from a fixed seed that put the given added tokens
    (a tokenizer's language codes, ``<mask>``, sentinels) among words, whitespace and each other."""
    rng = random.Random(seed)
    words = ["a", "x", "猫", "bc", "é", "Latn", "_", "<", ">", *tokens[:1]]
    spaces = [" ", "  ", "\t", "\u3000", ""]
    strings = list(ADDED_TOKEN_CASES)
    while len(strings) < len(ADDED_TOKEN_CASES) + count:
        parts = [rng.choice(tokens) if rng.random() < 0.4 else rng.choice(words) for _ in range(rng.randint(1, 6))]
        strings.append("".join(part + rng.choice(spaces) for part in parts))
    return strings
