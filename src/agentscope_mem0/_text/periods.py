"""The period a question names ("last week", "in May 2023", "两年前"), read against
the turn's own time.

Calendar expressions are read here: a day, a week, a month, a season or a
year, named outright or counted back from now, in English or Chinese,
optionally after "before", "after" or "since". A time told by one of the
user's own past events ("before I moved", "after I graduated", "我搬家之前")
is read as an :class:`EventPeriod`: the event's date is the memory's that
tells of it, which only a search can find (:mod:`.._memories.validity`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from .lexicon import CJK_RUN, ENGLISH, fold

__all__ = ["EventPeriod", "Period", "event_period_in", "period_in", "time_in"]

_EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
_LATEST = datetime(9999, 12, 31, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Period:
    """A span of time a question is about: from ``start`` (included) to ``end`` (not)."""

    start: datetime
    end: datetime
    words: str
    """The words of the question that named it."""
    reaches_now: bool = False
    """Whether the period runs up to the time of asking ("this week", "recently",
    "since 2023"): a question of it asks about the present ("this week's
    weather where I live"), so what was superseded since stays superseded."""

    def holds(self, moment: datetime) -> bool:
        """Whether ``moment`` falls in the period."""
        return self.start <= moment < self.end

    def overlaps(self, start: datetime, end: datetime) -> bool:
        """Whether the span ``[start, end)`` shares a moment with the period."""
        return start < self.end and self.start < end


# -- calendar spans ------------------------------------------------------------------


def _day(on: date) -> datetime:
    return datetime(on.year, on.month, on.day, tzinfo=UTC)


def _month_start(year: int, month: int) -> datetime:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    return _month_start(year, month), _month_start(year, month + 1)


def _year(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _days(today: date, back: int) -> tuple[datetime, datetime]:
    start = _day(today - timedelta(days=back))
    return start, start + timedelta(days=1)


def _weeks(today: date, back: int) -> tuple[datetime, datetime]:
    """The calendar week (Monday first) ``back`` weeks before this one; this week
    reaches back at least six days, so "this week" on a Monday means the days just past."""
    monday = _day(today - timedelta(days=today.weekday()))
    if back == 0:
        return min(monday, _day(today - timedelta(days=6))), _day(today + timedelta(days=1))
    start = monday - timedelta(weeks=back)
    return start, start + timedelta(weeks=1)


def _months(today: date, back: int) -> tuple[datetime, datetime]:
    return _month(today.year, today.month - back)


def _named_month(today: date, month: int, year: int | None) -> tuple[datetime, datetime]:
    """``month`` of ``year``; without a year, the latest such month not after today."""
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    return _month(year, month)


_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
"""The first month of each season (northern hemisphere, by meteorological months)."""


def _season(today: date, first_month: int, back: int) -> tuple[datetime, datetime]:
    """The season starting in ``first_month``: its latest start not after today
    (``back`` 0), or the one before that (``back`` 1)."""
    start = _month_start(today.year, first_month)
    if start > _day(today):
        start = _month_start(today.year - 1, first_month)
    if back and start + timedelta(days=92) > _day(today):
        start = _month_start(start.year - 1, first_month)
    return start, _month_start(start.year, start.month + 3)


# -- the words -------------------------------------------------------------------------

_MONTHS = {name: number for number, name in enumerate(ENGLISH.months, start=1)}
_MONTHS.update(
    {
        short: next(n for name, n in _MONTHS.items() if name.startswith(short))
        for short in ENGLISH.month_abbreviations
    }
)
"""Month names and their abbreviations (folded) -> the month's number."""
_NUMBERS = {"a": 1, "an": 1}
_NUMBERS.update(
    (word, int(value))
    for word, value in ENGLISH.numbers.items()
    if value.isdigit() and 0 < int(value) <= 20  # "two years ago", not "a hundred"
)
_HAN_DIGITS = {
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}

_MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
# A month named alone must be spelt out and not be "may" (the verb).
_LONE_MONTHS = "|".join(name for name in ENGLISH.months if name != ENGLISH.months[4])
_COUNT = r"(\d{1,2}|" + "|".join(_NUMBERS) + r")"
_YEAR = r"(1[89]\d\d|2[01]\d\d)"
_HAN_NUMBER = r"(\d{1,2}|十[一二]?|[一二两三四五六七八九十])"

# Month names are matched capitalised ("may" is a verb); "May" also needs a
# preposition or a year next to it, as in "in May" or "May 2023".
_ENGLISH = re.compile(
    r"(?P<shift>\b(?:before|after|since|until)\s+)?(?:"
    r"(?P<dby>\bthe\s+day\s+before\s+yesterday\b)"
    r"|(?P<yesterday>\byesterday\b)"
    r"|(?P<today>\btoday\b)"
    r"|(?P<recent>\b(?:recently|lately|these\s+days)\b)"
    r"|\b(?P<which>this|last|past)\s+(?P<unit>week|month|year)\b"
    r"|\b(?P<season_which>this|last)\s+(?P<season>spring|summer|autumn|fall|winter)\b"
    r"|\b(?P<count>" + _COUNT[1:-1] + r")\s+(?P<count_unit>day|week|month|year)s?\s+ago\b"
    r"|\b(?:in|during|of|by|early|late|mid)\s+(?P<pmonth>" + _MONTH_NAMES + r")\b"
    r"(?:\s*,?\s*(?P<pmonth_year>" + _YEAR[1:-1] + r")\b)?"
    r"|\b(?P<ymonth>" + _MONTH_NAMES + r")\s*,?\s+(?P<ymonth_year>" + _YEAR[1:-1] + r")\b"
    r"|\b(?P<lone_month>" + _LONE_MONTHS + r")\b"
    r"|\b(?P<year_word>in|during|of|by|early|late|mid)?\s*(?P<year>" + _YEAR[1:-1] + r")\b"
    r")",
    re.IGNORECASE,
)

_CHINESE = re.compile(
    r"(?:"
    r"(?P<zh_ym_year>" + _YEAR[1:-1] + r")\s*年\s*(?P<zh_ym_month>" + _HAN_NUMBER[1:-1] + r")\s*月"
    r"|(?P<zh_year>" + _YEAR[1:-1] + r")\s*年"
    r"|(?P<zh_month>" + _HAN_NUMBER[1:-1] + r")\s*月份?"
    r"|(?P<zh_count>" + _HAN_NUMBER[1:-1] + r")\s*"
    r"(?P<zh_count_unit>天|个?星期|周|个?礼拜|个月|年)\s*前"
    r"|(?P<zh_word>大前天|前天|昨天|昨日|今天|今日|这周|本周|这个?星期|这个?礼拜|上周|上个?星期|"
    r"上个?礼拜|这个月|本月|上个?月|今年|去年|前年|最近|近来)"
    r")(?P<zh_shift>之?前|以前|之后|以后)?"
)

_ZH_WORDS = {
    "大前天": ("day", 3),
    "前天": ("day", 2),
    "昨天": ("day", 1),
    "昨日": ("day", 1),
    "今天": ("day", 0),
    "今日": ("day", 0),
    "这周": ("week", 0),
    "本周": ("week", 0),
    "这星期": ("week", 0),
    "这个星期": ("week", 0),
    "这礼拜": ("week", 0),
    "这个礼拜": ("week", 0),
    "上周": ("week", 1),
    "上星期": ("week", 1),
    "上个星期": ("week", 1),
    "上礼拜": ("week", 1),
    "上个礼拜": ("week", 1),
    "这个月": ("month", 0),
    "本月": ("month", 0),
    "上月": ("month", 1),
    "上个月": ("month", 1),
    "今年": ("year", 0),
    "去年": ("year", 1),
    "前年": ("year", 2),
    "最近": ("recent", 0),
    "近来": ("recent", 0),
}

_RECENT_DAYS = 30
"""How far back "recently" reaches."""


def _count(text: str) -> int:
    text = text.lower()
    if text.isdigit():
        return int(text)
    if text in _NUMBERS:
        return _NUMBERS[text]
    if text.startswith("十"):  # 十, 十一, 十二
        return 10 + _HAN_DIGITS.get(text[1:], 0)
    return _HAN_DIGITS.get(text, 0)


def _span(today: date, unit: str, back: int) -> tuple[datetime, datetime]:
    if unit == "day":
        return _days(today, back)
    if unit == "week":
        return _weeks(today, back)
    if unit == "month":
        return _months(today, back)
    if unit == "recent":
        return _day(today - timedelta(days=_RECENT_DAYS)), _day(today + timedelta(days=1))
    return _year(today.year - back)


def _english(match: re.Match[str], today: date) -> tuple[datetime, datetime] | None:
    group = match.group
    if group("dby"):
        return _days(today, 2)
    if group("yesterday"):
        return _days(today, 1)
    if group("today"):
        return _days(today, 0)
    if group("recent"):
        return _span(today, "recent", 0)
    if group("which"):
        unit, which = group("unit").lower(), group("which").lower()
        if which == "past":  # "the past month": the days just gone, not a calendar month
            length = {"week": 7, "month": 31, "year": 366}[unit]
            return _day(today - timedelta(days=length)), _day(today + timedelta(days=1))
        return _span(today, unit, 0 if which == "this" else 1)
    if group("season"):
        first = _SEASONS[group("season").lower()]
        return _season(today, first, 0 if group("season_which").lower() == "this" else 1)
    if group("count"):
        return _span(today, group("count_unit").lower(), _count(group("count")))
    for name, year in (("pmonth", "pmonth_year"), ("ymonth", "ymonth_year")):
        if group(name):
            month = _MONTHS.get(group(name).lower())
            if month is None or not group(name)[0].isupper():
                return None
            return _named_month(today, month, int(group(year)) if group(year) else None)
    if group("lone_month"):
        if not group("lone_month")[0].isupper():
            return None
        return _named_month(today, _MONTHS[group("lone_month").lower()], None)
    if group("year"):
        # A year alone is a time only after a word that makes it one ("in 2023",
        # "before 2023"), not a count ("I have 2023 photos").
        if not (group("year_word") or group("shift")):
            return None
        return _year(int(group("year")))
    return None


def _chinese(match: re.Match[str], today: date) -> tuple[datetime, datetime] | None:
    group = match.group
    if group("zh_ym_year"):
        month = _count(group("zh_ym_month"))
        return _month(int(group("zh_ym_year")), month) if 1 <= month <= 12 else None
    if group("zh_year"):
        return _year(int(group("zh_year")))
    if group("zh_month"):
        month = _count(group("zh_month"))
        return _named_month(today, month, None) if 1 <= month <= 12 else None
    if group("zh_count"):
        unit = group("zh_count_unit")
        name = {"天": "day", "周": "week", "个月": "month", "年": "year"}.get(unit, "week")
        return _span(today, name, _count(group("zh_count")))
    unit, back = _ZH_WORDS[group("zh_word")]
    return _span(today, unit, back)


def _shifted(span: tuple[datetime, datetime], shift: str | None) -> tuple[datetime, datetime]:
    """``span`` read after "before", "after"/"since" or 之前/之后."""
    if not shift:
        return span
    shift = shift.strip().lower()
    if shift in ("before", "until", "之前", "以前", "前"):
        return _EARLIEST, span[0]
    if shift == "since":
        return span[0], _LATEST
    return span[1], _LATEST  # after, 之后, 以后


def period_in(text: str, now: datetime) -> Period | None:
    """The first period ``text`` names, read against ``now`` (the turn's time);
    ``None`` when it names none.

    Args:
        text: A question or message, English or Chinese.
        now: When it was asked (aware; its UTC day is "today").

    Returns:
        The period, or ``None``.
    """
    today = now.astimezone(UTC).date()
    found: list[tuple[int, Period]] = []
    for match in _ENGLISH.finditer(text):
        span = _english(match, today)
        if span is not None:
            start, end = _shifted(span, match.group("shift"))
            words = match.group(0).strip()
            found.append((match.start(), Period(start, end, words, reaches_now=end > now)))
            break
    for match in _CHINESE.finditer(text):
        span = _chinese(match, today)
        if span is not None:
            start, end = _shifted(span, match.group("zh_shift"))
            words = match.group(0).strip()
            found.append((match.start(), Period(start, end, words, reaches_now=end > now)))
            break
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


# -- a time told by an event -------------------------------------------------------------

EventRelation = Literal["before", "after", "when"]

_AFTER_EVENT = timedelta(days=365)
"""How long after an event "after I graduated" looks for what was said or happened."""


@dataclass(frozen=True, slots=True)
class EventPeriod:
    """A time told by one of the user's past events: "before I moved to Berlin"."""

    relation: EventRelation
    event: str
    """The event in the question's words ("I moved to Berlin", "搬家")."""
    words: str
    """The words of the question that named it."""

    def around(self, moment: datetime) -> Period:
        """The period, once the event is known to have happened at ``moment``:
        the day before it, the year after it, or its own day."""
        if self.relation == "before":  # what held just before
            return Period(moment - timedelta(days=1), moment, self.words)
        if self.relation == "after":
            return Period(moment, moment + _AFTER_EVENT, self.words)
        return Period(moment, moment + timedelta(days=1), self.words)

    def told_by(self, memory: str) -> bool:
        """Whether ``memory`` may tell of the event: it shares a word of it
        (a stem in English, a character in Chinese) beyond the common ones."""
        return bool(_event_words(self.event) & _event_words(memory))


_RELATIONS: dict[str, EventRelation] = {
    "before": "before",
    "until": "before",
    "after": "after",
    "since": "after",
    "when": "when",
    "while": "when",
    "之前": "before",
    "以前": "before",
    "之后": "after",
    "以后": "after",
}
_NOT_EVENT_WORDS = frozenset({"i", "we", "got", "get", "went", "go", "did", "do", "first"})
_NOT_EVENT_CHARACTERS = frozenset("我们了的在用户是个过去来")
_PAST_AUXILIARIES = frozenset({"was", "were", "had", "did"})

# A past event of the user's: "before I moved", "after we got married".
_ENGLISH_EVENT = re.compile(
    r"\b(?P<rel>before|until|after|since|when|while)\s+(?P<event>(?:I|we)\s+"
    r"(?P<verb>[A-Za-z']+)\b[^?.!,;]*)",
    re.IGNORECASE,
)
_CHINESE_EVENT = re.compile(r"我(?P<event>[^，。？！,.?!我]{1,12}?)(?P<rel>之前|以前|之后|以后)")


def _event_words(text: str) -> frozenset[str]:
    folded = fold(text)
    words = {
        ENGLISH.stem(word)
        for word in ENGLISH.split(folded)
        if word not in ENGLISH.common and word not in _NOT_EVENT_WORDS and len(word) > 2
    }
    characters = {
        char for run in CJK_RUN.findall(folded) for char in run if char not in _NOT_EVENT_CHARACTERS
    }
    return frozenset(words | characters)


def event_period_in(text: str) -> EventPeriod | None:
    """The time ``text`` tells by one of the user's past events, if any: "before
    I moved", "when I got married", "我搬家之前". A present or future clause
    ("before I leave", "when I feel sad") is none.
    """
    for match in _ENGLISH_EVENT.finditer(text):
        verb = match.group("verb").lower()
        if (ENGLISH.is_past(verb) or verb in _PAST_AUXILIARIES) and _event_words(
            match.group("event")
        ):
            relation = _RELATIONS[match.group("rel").lower()]
            return EventPeriod(relation, match.group("event").strip(), match.group(0).strip())
    for match in _CHINESE_EVENT.finditer(text):
        if _event_words(match.group("event")):
            relation = _RELATIONS[match.group("rel")]
            return EventPeriod(relation, match.group("event"), match.group(0))
    return None


# What a calendar period's reading needs in the text: four digits in a row (a
# year), one of these English words (each of its patterns' words, folded) or one
# of these Chinese characters. Without any, the full reading (0.1 ms for a short
# question, 0.6 ms for 250 characters, on the event loop every turn) finds none.
_PERIOD_WORDS = frozenset(
    {"yesterday", "today", "recently", "lately", "days", "week", "month", "year", "ago"}
    | set(_SEASONS)
    | set(_MONTHS)
)
_PERIOD_CHARACTERS = frozenset("年月前昨今周星礼近")
_FOUR_DIGITS = re.compile(r"\d{4}")
_LETTERS = re.compile(r"[^\W\d_]+")
# The letters a case-insensitive pattern matches to "i" and "s" that lower() keeps.
_TO_ASCII = str.maketrans({"ı": "i", "ſ": "s"})


def _may_name_a_period(text: str) -> bool:
    """Whether ``text`` holds what any calendar period starts from; ``False``
    means :func:`period_in` would find none."""
    if _FOUR_DIGITS.search(text) or not _PERIOD_CHARACTERS.isdisjoint(text):
        return True
    return not _PERIOD_WORDS.isdisjoint(_LETTERS.findall(text.lower().translate(_TO_ASCII)))


def time_in(text: str, now: datetime) -> Period | EventPeriod | None:
    """The time a question asks about: a calendar period (:func:`period_in`),
    else one told by an event (:func:`event_period_in`), else ``None``."""
    period = period_in(text, now) if _may_name_a_period(text) else None
    return period or event_period_in(text)
