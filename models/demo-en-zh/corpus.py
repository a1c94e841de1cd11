"""Generated English→Chinese corpus for the bundled demo model.

Every English sentence has exactly one correct translation under the rules below, so accuracy
can be measured as an exact string match. The sentences cover what a real user tries first
with an en→zh model: numbers, dates, times, ages, prices and short sentences with measure words.
The leading language token selects Simplified (``>>cmn_Hans<<``) or Traditional
(``>>cmn_Hant<<``) characters, as opus-mt-en-zh expects a target-language token.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

LANGUAGE_TOKENS = (">>cmn_Hans<<", ">>cmn_Hant<<")

_DIGITS = "零一二三四五六七八九"
_ENGLISH_COUNTS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def chinese_number(n: int) -> str:
    """Read a number 0..99999 in Chinese (``1012`` → ``一千零一十二``)."""
    if not 0 <= n <= 99999:
        raise ValueError(f"number out of range: {n}")
    if n == 0:
        return "零"
    if 10 <= n <= 19:
        return "十" + (_DIGITS[n - 10] if n > 10 else "")
    units = [(10000, "万"), (1000, "千"), (100, "百"), (10, "十"), (1, "")]
    out = ""
    pending_zero = False
    for value, unit in units:
        digit = (n // value) % 10
        if digit == 0:
            if out:
                pending_zero = True
            continue
        if pending_zero:
            out += "零"
            pending_zero = False
        out += _DIGITS[digit] + unit
    return out


def chinese_count(n: int) -> str:
    """A count before a measure word: 2 is 两, everything else is read as a number."""
    return "两" if n == 2 else chinese_number(n)


def english_count(n: int) -> str:
    return _ENGLISH_COUNTS[n] if n <= 10 else f"{n:,}"


@dataclass(frozen=True)
class Noun:
    singular: str
    plural: str
    chinese: str
    measure: str


_NOUNS = [
    Noun("cat", "cats", "猫", "只"),
    Noun("dog", "dogs", "狗", "只"),
    Noun("bird", "birds", "鸟", "只"),
    Noun("book", "books", "书", "本"),
    Noun("apple", "apples", "苹果", "个"),
    Noun("egg", "eggs", "鸡蛋", "个"),
    Noun("orange", "oranges", "橙子", "个"),
    Noun("car", "cars", "车", "辆"),
    Noun("pen", "pens", "笔", "支"),
    Noun("ticket", "tickets", "票", "张"),
    Noun("photo", "photos", "照片", "张"),
    Noun("chair", "chairs", "椅子", "把"),
    Noun("letter", "letters", "信", "封"),
    Noun("flower", "flowers", "花", "朵"),
    Noun("tree", "trees", "树", "棵"),
]


@dataclass(frozen=True)
class Subject:
    english: str
    chinese: str
    third_person: bool


_SUBJECTS = [
    Subject("I", "我", False),
    Subject("You", "你", False),
    Subject("He", "他", True),
    Subject("She", "她", True),
    Subject("We", "我们", False),
    Subject("They", "他们", False),
    Subject("My friend", "我的朋友", True),
    Subject("My sister", "我的姐姐", True),
    Subject("My brother", "我的哥哥", True),
    Subject("The teacher", "老师", True),
    Subject("Our neighbor", "我们的邻居", True),
    Subject("Tom", "汤姆", True),
    Subject("Mary", "玛丽", True),
]

_PAST_VERBS = [("bought", "买了"), ("saw", "看见了"), ("found", "找到了"), ("drew", "画了"), ("sold", "卖了")]
_FUTURE_VERBS = [("buy", "买"), ("sell", "卖"), ("draw", "画"), ("find", "找")]
_PAST_TIMES = [("yesterday", "昨天"), ("last week", "上周"), ("this morning", "今天早上")]
_FUTURE_TIMES = [("tomorrow", "明天"), ("next week", "下周")]
_DAY_PARTS = [("in the morning", "早上"), ("in the afternoon", "下午"), ("in the evening", "晚上")]
_EVENTS = [
    ("The train leaves", "火车", "出发"),
    ("The meeting starts", "会议", "开始"),
    ("The shop opens", "商店", "开门"),
]

# Simplified → Traditional for every character the templates can produce.
_TRADITIONAL = str.maketrans(
    {
        "们": "們",
        "买": "買",
        "见": "見",
        "画": "畫",
        "卖": "賣",
        "书": "書",
        "鸟": "鳥",
        "苹": "蘋",
        "车": "車",
        "辆": "輛",
        "笔": "筆",
        "张": "張",
        "鸡": "雞",
        "树": "樹",
        "两": "兩",
        "这": "這",
        "个": "個",
        "数": "數",
        "岁": "歲",
        "点": "點",
        "会": "會",
        "议": "議",
        "开": "開",
        "发": "發",
        "周": "週",
        "汤": "湯",
        "玛": "瑪",
        "丽": "麗",
        "邻": "鄰",
        "师": "師",
        "几": "幾",
        "万": "萬",
        "猫": "貓",
        "门": "門",
        "只": "隻",
    }
)


def to_traditional(text: str) -> str:
    return text.translate(_TRADITIONAL)


def _count_phrase(n: int, noun: Noun) -> tuple[str, str]:
    english = f"{english_count(n)} {noun.singular if n == 1 else noun.plural}"
    return english, f"{chinese_count(n)}{noun.measure}{noun.chinese}"


def _have(subject: Subject) -> str:
    return "has" if subject.third_person else "have"


def _sentence(rng: random.Random) -> tuple[str, str]:
    """One (English, Simplified Chinese) pair from a randomly chosen template."""
    kind = rng.randrange(10)
    subject = rng.choice(_SUBJECTS)
    noun = rng.choice(_NOUNS)
    count = rng.choice([rng.randint(1, 10), rng.randint(1, 10), rng.randint(11, 999)])
    if kind == 0:
        en_count, zh_count = _count_phrase(count, noun)
        return f"{subject.english} {_have(subject)} {en_count}.", f"{subject.chinese}有{zh_count}。"
    if kind == 1:
        verb_en, verb_zh = rng.choice(_PAST_VERBS)
        when_en, when_zh = rng.choice(_PAST_TIMES)
        en_count, zh_count = _count_phrase(count, noun)
        return (
            f"{subject.english} {verb_en} {en_count} {when_en}.",
            f"{subject.chinese}{when_zh}{verb_zh}{zh_count}。",
        )
    if kind == 2:
        verb_en, verb_zh = rng.choice(_FUTURE_VERBS)
        when_en, when_zh = rng.choice(_FUTURE_TIMES)
        en_count, zh_count = _count_phrase(count, noun)
        return (
            f"{subject.english} will {verb_en} {en_count} {when_en}.",
            f"{subject.chinese}{when_zh}要{verb_zh}{zh_count}。",
        )
    if kind == 3:
        does = "does" if subject.third_person else "do"
        english_subject = subject.english if subject.english == "I" else subject.english.lower()
        if subject.english in ("Tom", "Mary"):
            english_subject = subject.english
        return (
            f"How many {noun.plural} {does} {english_subject} have?",
            f"{subject.chinese}有几{noun.measure}{noun.chinese}？",
        )
    if kind == 4:
        year, month, day = rng.randint(1900, 2099), rng.randint(1, 12), rng.randint(1, 28)
        return f"Today is {_MONTHS[month - 1]} {day}, {year}.", f"今天是{year}年{month}月{day}日。"
    if kind == 5:
        month, day = rng.randint(1, 12), rng.randint(1, 28)
        return f"My birthday is on {_MONTHS[month - 1]} {day}.", f"我的生日是{month}月{day}日。"
    if kind == 6:
        event_en, event_zh, action_zh = rng.choice(_EVENTS)
        part_en, part_zh = rng.choice(_DAY_PARTS)
        hour, minute = rng.randint(1, 12), rng.choice([0, rng.randint(1, 59)])
        if minute == 0:
            clock_en, clock_zh = f"{hour} o'clock", f"{chinese_count(hour)}点"
        else:
            minute_zh = ("零" + _DIGITS[minute]) if minute < 10 else chinese_number(minute)
            clock_en, clock_zh = f"{hour}:{minute:02d}", f"{chinese_count(hour)}点{minute_zh}分"
        return f"{event_en} at {clock_en} {part_en}.", f"{event_zh}{part_zh}{clock_zh}{action_zh}。"
    if kind == 7:
        number = rng.choice([rng.randint(0, 99), rng.randint(100, 9999), rng.randint(10000, 99999)])
        return f"The number is {number:,}.", f"这个数字是{chinese_number(number)}。"
    if kind == 8:
        price = rng.randint(1, 999)
        unit = "dollar" if price == 1 else "dollars"
        return (
            f"This {noun.singular} costs {price:,} {unit}.",
            f"这{noun.measure}{noun.chinese}{chinese_count(price)}美元。",
        )
    age = rng.randint(1, 99)
    verb = "is" if subject.third_person else ("am" if subject.english == "I" else "are")
    unit = "year" if age == 1 else "years"
    return f"{subject.english} {verb} {age} {unit} old.", f"{subject.chinese}{chinese_count(age)}岁。"


def generate_pairs(count: int, seed: int, exclude: set[str] | None = None) -> list[tuple[str, str]]:
    """``count`` distinct (source, target) pairs; sources in ``exclude`` are never produced."""
    rng = random.Random(seed)
    exclude = exclude or set()
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    attempts = 0
    while len(pairs) < count:
        attempts += 1
        if attempts > count * 50:
            raise RuntimeError("corpus space exhausted; lower the count")
        english, chinese = _sentence(rng)
        token = rng.choice(LANGUAGE_TOKENS)
        source = f"{token} {english}"
        if source in seen or source in exclude:
            continue
        seen.add(source)
        pairs.append((source, to_traditional(chinese) if token == ">>cmn_Hant<<" else chinese))
    return pairs
