"""What the words of a memory say, without a model: whose fact it is, whether it
tells of the past or of one more item, what it says has ended, and how two
short answers compare.

The time judgement uses these around the model's readings: a new memory about
another person, about the past ("used to", "in college", a year long gone)
or adding an item ("also", "another") never makes an older memory untrue;
one that ends a thing the older memory names ("quit smoking", "broke up with
Mark") does, where a small model reads "not said". They
read English memories (mem0's extraction writes "User ...", "User's
sister ..."); other languages pass them and rely on the readings alone.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = [
    "Agreement",
    "compare_answers",
    "denies",
    "ended_topics",
    "holder",
    "is_additive",
    "is_short_answer",
    "named_in_both",
    "same_holder",
    "tells_of_past",
    "topics",
    "year_told",
]

_RELATIONS = frozenset(
    """sister sisters brother brothers mother mom mum father dad parent parents wife husband
    partner spouse fiance fiancee boyfriend girlfriend son sons daughter daughters child
    children kid kids baby friend friends colleague colleagues coworker coworkers boss
    manager roommate flatmate neighbor neighbour cousin aunt uncle niece nephew grandmother
    grandfather grandma grandpa grandparents family teammate classmate""".split()  # noqa: SIM905
)
"""Nouns that, after "User's", name another person rather than a thing of the user."""

_QUALIFIERS = (
    "new|former|old|current|best|close|late|ex|step|elder|eldest|older|oldest|younger|youngest|"
    "little|big|twin|only|favou?rite"
)
"""Words between "User's" and the relation that do not change whose fact it is
("User's new manager" is still the user's manager)."""

_POSSESSIVE = re.compile(
    rf"^\s*(?:the\s+)?([A-Za-z]+)(?:'s|’s)\s+(?:(?:{_QUALIFIERS})[\s-]+)*([A-Za-z]+)", re.I
)
_FIRST_WORD = re.compile(r"^\s*(?:the\s+)?([A-Za-z]+)\b", re.I)


def holder(memory: str) -> str | None:
    """Whose fact ``memory`` is: ``"user"``, ``"user's sister"``, ``"maria"``...;
    ``None`` when the memory does not open with a Latin-script word to tell by.

    "User's car ..." is the user's (a thing of theirs); "User's sister ..."
    is the sister's; a memory opening with another name is that person's.
    """
    possessive = _POSSESSIVE.match(memory)
    if possessive:
        owner, thing = possessive.group(1).lower(), possessive.group(2).lower()
        return f"{owner}'s {thing}" if thing in _RELATIONS else owner
    first = _FIRST_WORD.match(memory)
    return first.group(1).lower() if first else None


def same_holder(first: str, second: str) -> bool:
    """Whether two memories are about the same person, as far as their words tell."""
    a, b = holder(first), holder(second)
    return a is None or b is None or a == b


_ADDITIVE = re.compile(
    r"\b(also|too|as well|another|other|second|third|additional(?:ly)?|in addition|"
    r"besides|more than one|several)\b",
    re.I,
)
_PAST = re.compile(
    r"\b(used to|as a (?:child|kid|teen(?:ager)?|student)|in (?:high )?school|in college|"
    r"at university|when (?:he|she|they|i|the user) (?:was|were)|years ago|back then|"
    r"formerly|in (?:his|her|their) (?:youth|childhood|twenties|teens)|growing up|"
    r"once (?:lived|worked|had|played|owned))\b",
    re.I,
)
_NOW = re.compile(
    r"\b(now|currently|no longer|anymore|any more|these days|nowadays|today|instead)\b", re.I
)


def is_additive(memory: str) -> bool:
    """Whether ``memory`` adds one more item ("also plays the violin", "another dog")."""
    return bool(_ADDITIVE.search(memory))


def tells_of_past(memory: str) -> bool:
    """Whether ``memory`` only tells how things were ("used to", "in college"),
    without saying how they are now."""
    return bool(_PAST.search(memory)) and not _NOW.search(memory)


class Agreement(StrEnum):
    """How two short answers to one question compare."""

    SAME = "same"
    """The same words, the second saying less, or too few words to tell."""
    MORE = "more"
    """The second holds all of the first and more (a detail added)."""
    DIFFERENT = "different"
    """Another answer."""


_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\W_]+", re.U)
_FILLER = frozenset(
    """a an the of in at on to for and or is are was were be been it its this that with
    by from as user user's users his her their they he she my our your s""".split()  # noqa: SIM905
)


_DENIAL = re.compile(r"\b(no|not|never|none|nothing|nobody|anymore|neither|nor)\b|n't\b", re.I)


def denies(answer: str) -> bool:
    """Whether a short answer denies ("no", "none", "not any more")."""
    return bool(_DENIAL.search(answer))


def _words(answer: str) -> set[str]:
    out = set()
    for word in _WORD.findall(answer.casefold()):
        if word in _FILLER:
            continue
        out.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return out


def compare_answers(first: str, second: str) -> Agreement:
    """How ``second`` compares with ``first``, word by word (case, plurals and
    filler words aside); one denying what the other does not is another answer."""
    if denies(first) != denies(second):
        return Agreement.DIFFERENT  # "vegetarian" / "no longer vegetarian"
    a, b = _words(first), _words(second)
    if not a or not b or b <= a:
        return Agreement.SAME
    if a <= b:
        return Agreement.MORE
    return Agreement.DIFFERENT


_SENTENCE = re.compile(r"^\s*(?:the user|user|they|he|she|it)\b", re.I)
_SHORT_ANSWER_WORDS = 4


def is_short_answer(reading: str) -> bool:
    """Whether a reading is a short answer ("Valencia", "80 kg") rather than a
    sentence retelling the memory ("The user quit smoking in March.")."""
    words = _WORD.findall(reading)
    return 0 < len(words) <= _SHORT_ANSWER_WORDS and not _SENTENCE.match(reading)


_NOT_A_TOPIC = _FILLER | frozenset(
    """what which who whom whose where when why how many much do does did doing done
    have has had having get gets got go goes went use uses used now current currently
    new kind type sort mode way thing things something status situation state name
    called like about there up out off with them him me one""".split()  # noqa: SIM905
)
_SUFFIX = re.compile(r"(?<=\w{3})(?:ing|ies|ied|es|ed|s)$")


def topics(text: str) -> set[str]:
    """The words of ``text`` that name something, cut to a stem of four letters."""
    out = set()
    for word in _WORD.findall(text.casefold()):
        if word in _NOT_A_TOPIC or len(word) < 3:
            continue
        out.add(_SUFFIX.sub("", word)[:4])
    return out


def named_in_both(question: str, first: str, second: str) -> bool:
    """Whether ``question`` asks about a thing both memories name ("work" in
    "What does the user ride to work?", "User takes the bus to work" and
    "User cycles to work now")."""
    return bool(topics(question) & topics(first) & topics(second))


_ENDING = re.compile(
    r"\b(?:quit|quits|stopped|stops|gave up|gives up|given up|cancell?ed|cancels|"
    r"broke up with|split up with|broken up with|divorced|left|leaves|sold|sells|"
    r"retired from|dropped out of|dropped|got rid of|"
    r"moved out of|no longer|not \w+ any ?more)\s+(.*)",
    re.I,
)
"""Words that end something, and what follows them (where the ended thing is named)."""
_ENDED_STOP = re.compile(
    r"\s*(?:\band\b|\bbut\b|\bbecause\b|\bafter\b|\bbefore\b|\bin\b|\blast\b|"
    r"\bthis\b|\bthat\b|\bwhen\b|\bsince\b|\binstead\b|[,.;:!?(])",
    re.I,
)
_ENDED_WORDS = 3


def ended_topics(memory: str) -> set[str]:
    """The stems of what ``memory`` tells has ended: the words after "quit", "sold",
    "broke up with", "no longer"... up to the next clause ("User quit smoking in
    March": ``{"smok"}``; "User sold their car and takes the train": ``{"car"}``).
    Empty when no such word opens a named thing."""
    out: set[str] = set()
    for match in _ENDING.finditer(memory):
        ended = _ENDED_STOP.split(match.group(1), maxsplit=1)[0]
        out |= topics(" ".join(ended.split()[:_ENDED_WORDS]))
    return out


_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_YEAR = re.compile(
    rf"(?:\b(?:in|during|from|around|until|till|of|{_MONTHS})\s+|(?<=\d\d\d\d to ))"
    r"(1[89]\d\d|20\d\d)\b"
    r"(?!\s*(?:euros?|dollars?|pounds?|yuan|yen|francs?|usd|eur|gbp|kg|km|miles?|m\b|"
    r"meters?|metres?|feet|ft|calories?|steps?|words?|people|users?|units?|items?))",
    re.I,
)


def year_told(memory: str) -> int | None:
    """The latest year ``memory`` names for its event ("interned at IBM in 2015",
    "from 1998 to 2003", "in March 2015"): a four-digit number after "in",
    "during", "from", a month... and not before a unit ("2000 euros"). A year
    after "since" tells how long a state has lasted, not when an event
    happened, and is not counted."""
    years = [int(year) for year in _YEAR.findall(memory)]
    return max(years) if years else None
