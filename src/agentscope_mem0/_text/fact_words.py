"""What the words of a memory say, without a model: whose fact it is, whether it
tells of the past, of one more item or of a while, and how two short answers
compare.

The time judgement uses these around the model's readings, only ever to veto
a change: a new memory about another person, about the past ("used to", "in
college", a year long gone), adding an item ("also", "another") or away for
a while ("for a week") never makes an older memory untrue. No word makes one
untrue on its own; words that end something the older memory names
(:func:`ends_what_older_names`) only earn the pair one more question to the
model. Each reads the words of the memory's language
(:func:`~.lexicon.lexicon_for`); a memory in a language without a lexicon
passes them and relies on the readings alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from enum import StrEnum
from typing import NamedTuple

from .lexicon import CJK_RUN, UNREAD, WORD, Lexicon, fold, lexicon_for

__all__ = [
    "Agreement",
    "answers_with_what_it_ends",
    "compare_answers",
    "denies",
    "ends_something_else",
    "ends_what_older_names",
    "for_a_while",
    "holder",
    "holds_several",
    "is_additive",
    "is_short_answer",
    "names_its_answer",
    "same_holder",
    "same_question",
    "swaps_one_value",
    "tells_of_past",
    "year_told",
]


_CHINESE_QUALIFIERS = ("现任", "新", "前", "现", "旧")
"""Qualifiers before a person in Chinese ("新老板", "前男友")."""


def _lexicon(*texts: str) -> Lexicon:
    return lexicon_for(" ".join(texts)) or UNREAD


def _tokens(text: str) -> list[str]:
    """The words of ``text``, folded: its lexicon's words (Chinese as ``jieba``
    segments it); Japanese and Korean characters, or Chinese ones in another
    language's text, one by one."""
    folded = fold(text)
    lexicon = _lexicon(text)
    if not lexicon.spaced:
        return lexicon.split(folded)
    return [*"".join(CJK_RUN.findall(folded)), *WORD.findall(CJK_RUN.sub(" ", folded))]


def holder(memory: str, names: frozenset[str] = frozenset()) -> str | None:
    """Whose fact ``memory`` is: ``"user"``, ``"user's sister"``, ``"maria"``...;
    ``None`` when the memory does not open with a word to tell by.

    "User's car ..." is the user's (a thing of theirs); "User's sister ..."
    is the sister's; a memory opening with another name is that person's.
    The user's own ``names`` (:func:`~.same_fact.user_names`) are the user.
    """
    return _whose(memory, names).holder


class _Whose(NamedTuple):
    """Whose fact a memory is; for someone's person ("User's boyfriend ..."),
    also that someone (``owner``) and the words after the person (``rest``)."""

    holder: str | None
    owner: str | None = None
    rest: tuple[str, ...] = ()


def _whose(memory: str, names: frozenset[str]) -> _Whose:
    lexicon = _lexicon(memory)

    def who(word: str) -> str:
        word = fold(word)
        return "user" if word in names or word in lexicon.user_words else word

    if not lexicon.spaced:
        # "用户的妹妹 ..." is the sister's; "用户 ..." the user's; "小王 ..." 小王's.
        words = lexicon.split(fold(memory))
        if not words or words[0] in lexicon.common_first_words or words[0] in lexicon.time_words:
            return _Whose(None)
        owner = who(words[0])
        if words[1:2] == [lexicon.possessive_word] and words[2:3]:
            # A qualifier before the person ("新老板", "前男友"), a word of its own or not.
            index = 3 if words[2] in _CHINESE_QUALIFIERS and words[3:4] else 2
            after = words[index]
            person = next(
                (
                    after.removeprefix(q)
                    for q in ("", *_CHINESE_QUALIFIERS)
                    if after.startswith(q) and after.removeprefix(q) in lexicon.people
                ),
                None,
            )
            if person is not None:
                return _Whose(f"{owner}'s {person}", owner, tuple(words[index + 1 :]))
        return _Whose(owner)
    possessive = lexicon.possessive.match(memory)
    if possessive:
        owner, thing = who(possessive.group(1)), fold(possessive.group(2))
        if thing not in lexicon.people:
            return _Whose(owner)
        rest = WORD.findall(fold(memory[possessive.end() :]))
        return _Whose(f"{owner}'s {thing}", owner, tuple(rest))
    first = lexicon.first_word.match(memory)
    if first is None or fold(first.group(1)) in lexicon.common_first_words:
        return _Whose(None)
    return _Whose(who(first.group(1)))


def _namer(whose: _Whose, memory: str, other: str) -> str | None:
    """The owner of ``memory``'s person when it only names that person: by a
    naming word ("User's boyfriend is called Mark", "用户的男朋友叫阿杰"), or by the
    one word ``other`` ends something with ("用户的女朋友是小美" beside
    "用户跟小美分开了")."""
    if whose.owner is None:
        return None  # no one's person: nothing to name
    lexicon = _lexicon(memory, other)
    words = [word for word in whose.rest if word not in lexicon.fillers]
    if words and words[0] in lexicon.naming:
        return whose.owner
    named = "".join(_content((" " if lexicon.spaced else "").join(words), lexicon))
    if named and named in {"".join(words) for words in _partners(other, lexicon)}:
        return whose.owner
    return None


def same_holder(first: str, second: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether two memories are about the same person, as far as their words tell.
    A memory that names someone's person ("User's boyfriend is called Mark") is
    about both ("User broke up with Mark", "User's boyfriend is a chef")."""
    a, b = _whose(first, names), _whose(second, names)
    return (
        a.holder is None
        or b.holder is None
        or a.holder == b.holder
        or _namer(a, first, second) == b.holder
        or _namer(b, second, first) == a.holder
    )


def is_additive(memory: str) -> bool:
    """Whether ``memory`` adds one more item ("also plays the violin", "another dog")."""
    return bool(_lexicon(memory).additive.search(memory))


def tells_of_past(memory: str) -> bool:
    """Whether ``memory`` only tells how things were ("used to", "in college"),
    without saying how they are now."""
    lexicon = _lexicon(memory)
    return bool(lexicon.past.search(memory)) and not lexicon.now.search(memory)


_ENDED_WORDS = 4
"""Words of an ended thing read after its ending word ("quit smoking", "left the jazz band")."""


def ends_what_older_names(new: str, old: str) -> bool:
    """Whether ``new`` tells that a thing ``old`` names has ended, for good.

    A word that ends something ("quit", "cancelled", "no longer", "戒", "分手")
    and a thing the older memory names, every word of it ("quit smoking" and
    "smokes a pack a day"; not "no longer works weekends" and "works at
    Google"); a Chinese word by all its characters ("不再喝咖啡" and
    "每天喝两杯咖啡"; not "不再对猫毛过敏" and "对花生过敏", nor "不再喝奶茶" and
    "喜欢喝茶"). The thing follows the ending word, or, with nothing after it,
    goes before it, past a time ("User and John got divorced", "从腾讯辞职了",
    "用户的金鱼上个月死了"); with nothing there either ("User graduated"),
    nothing is named. This only proposes the pair for the
    model's reading: it decides nothing (an end for a while is vetoed apart:
    :func:`for_a_while`). ``False`` for a language without a lexicon.
    """
    lexicon = _lexicon(new, old)
    return lexicon is not UNREAD and any(
        _named(thing, old, lexicon) for thing in _ended_things(new, lexicon)
    )


def ends_something_else(new: str, old: str) -> bool:
    """Whether ``new`` ends things and ``old`` names none of them ("stopped
    studying in the library" beside "is studying medicine"): a change the
    readings find between the two needs the model to say the older one ended.
    ``False`` for a language without a lexicon or a memory that ends nothing."""
    lexicon = _lexicon(new, old)
    if lexicon is UNREAD:
        return False
    things = _ended_things(new, lexicon)
    return bool(things) and not any(_named(thing, old, lexicon) for thing in things)


def holds_several(new: str, old: str) -> bool:
    """Whether both memories tell of one relation that holds for several values at
    once ("用户去过日本" / "用户去过泰国", "用户养了一只猫" / "用户养了一只狗",
    "User speaks French" / "User speaks German") and the newer says nothing of
    now or of an end ("现在", "instead", "no longer"): one more value, not
    another in the older's place. A veto of a change, however it was read."""
    lexicon = _lexicon(new, old)
    if lexicon is UNREAD or lexicon.now.search(new) or lexicon.ending.search(new):
        return False
    held = _stems(lexicon, lexicon.held_together)

    def relations(text: str) -> set[str]:
        return {lexicon.stem(word) for word in _tokens(text)} & held

    return bool(relations(new) & relations(old))


def swaps_one_value(new: str, old: str) -> bool:
    """Whether ``new`` says what ``old`` says of the same holder but for one short
    span, another in each: one value put in the place of another ("用户每天骑自行车上班"
    / "用户现在每天坐公交车上班", "User walks to the office" / "User drives to the
    office now"). Words of now ("现在", "now") are set aside; what the two share
    must name more than the holder and a time ("用户早上六点起床" and
    "用户现在早上改喝茶了" share only 早上); a relation that holds for several
    values at once ("likes", "会", "去过") swaps nothing, nor does a newer
    memory that ends or denies something (an end is
    :func:`ends_what_older_names`'s: "用户不再在超市买菜了" is no new job for
    "用户在超市当收银员"). Like that one, this only proposes the pair for the
    model's reading."""
    lexicon = _lexicon(new, old)
    if lexicon is UNREAD or lexicon.ending.search(new) or not same_holder(new, old):
        return False
    first, second = _without_now(old, lexicon), _without_now(new, lexicon)
    start = 0
    while start < min(len(first), len(second)) and first[start] == second[start]:
        start += 1
    end = 0
    while end < min(len(first), len(second)) - start and first[-1 - end] == second[-1 - end]:
        end += 1
    spans = first[start : len(first) - end], second[start : len(second) - end]
    frame = [*first[:start], *first[len(first) - end :]]
    held = _stems(lexicon, lexicon.held_together)
    return (
        all(0 < len(span) <= _SWAPPED_WORDS for span in spans)
        and not any(lexicon.denies(word) for span in spans for word in span)
        and bool(set(_content(" ".join(frame), lexicon)) - _stems(lexicon, lexicon.time_words))
        and not any(lexicon.stem(word) in held for word in [*frame, *spans[0], *spans[1]])
    )


_SWAPPED_WORDS = 3


def _without_now(text: str, lexicon: Lexicon) -> list[str]:
    return [word for word in _tokens(text) if not lexicon.now.fullmatch(word)]


@functools.cache
def _stems(lexicon: Lexicon, words: frozenset[str]) -> frozenset[str]:
    """The stems of one of ``lexicon``'s word sets (its time words, its relations
    held together), read once."""
    return frozenset(lexicon.stem(word) for word in words)


def answers_with_what_it_ends(new: str, answer: str) -> bool:
    """Whether ``answer``, read from ``new``, names only a thing ``new`` says has
    ended ("Tennis" from "quit watching tennis on TV"): no new value, however
    the question was put. ``False`` for an answer that denies ("not any more")."""
    lexicon = _lexicon(new, answer)
    if lexicon is UNREAD:
        return False
    things = _ended_things(new, lexicon)  # most memories end nothing: nothing more to read
    if not things or denies(answer, lexicon):
        return False
    words = _content(answer, lexicon)
    return bool(words) and any(_named(words, " ".join(thing), lexicon) for thing in things)


def names_its_answer(memory: str, answer: str) -> bool:
    """Whether ``answer``, read from ``memory``, shares a word with it (in Chinese
    a character), denies, or names nothing the words can check ("three"): an
    answer that shares nothing ("English" from "User stopped learning German")
    is the model's own, not the memory's."""
    lexicon = _lexicon(memory, answer)
    if lexicon is UNREAD or denies(answer, lexicon):
        return True
    words = _content(answer, lexicon)
    if not lexicon.spaced:
        return not words or bool(set("".join(words)) & set(fold(memory)))
    return not words or bool(set(words) & set(_content(memory, lexicon)))


def _ended_things(new: str, lexicon: Lexicon) -> list[list[str]]:
    """The things ``new`` says ended, each as its content words (see
    :func:`ends_what_older_names`), someone they were shared with among them."""
    things = []
    for before, after in _ending_clauses(new, lexicon):
        thing = _content(after, lexicon)[:_ENDED_WORDS] or _content(before, lexicon)
        for words in (thing, _partner(before, after, lexicon)):
            if words and words not in things:
                things.append(words)
    return things


def _ending_clauses(new: str, lexicon: Lexicon) -> Iterator[tuple[str, str]]:
    """For each ending word of ``new``, the clause after it and the nearest one
    before it that names something ("用户的金鱼上个月死了")."""
    for match in lexicon.ending.finditer(new):
        alone = lexicon.ends_alone.fullmatch(match.group())
        after = "" if alone else lexicon.ended_stop.split(new[match.end() :], maxsplit=1)[0]
        before = next(
            (
                part
                for part in reversed(lexicon.ended_stop.split(new[: match.start()]))
                if _content(part, lexicon)
            ),
            "",
        )
        yield before, after


def _partner(before: str, after: str, lexicon: Lexicon) -> list[str]:
    """The content words of someone an end is shared with, if any."""
    found = lexicon.partner.search(before) or lexicon.partner.search(after)
    return _content(found.group(1), lexicon) if found else []


def _partners(memory: str, lexicon: Lexicon) -> list[list[str]]:
    """Everyone ``memory`` ends something with ("小美" of "用户跟小美分开了")."""
    return [
        words
        for before, after in _ending_clauses(memory, lexicon)
        if (words := _partner(before, after, lexicon))
    ]


def _named(words: list[str], text: str, lexicon: Lexicon) -> bool:
    """Whether ``text`` names every one of ``words``: their stems, or in Chinese
    every character of each ("喝咖啡" in "每天喝两杯咖啡"; no "奶茶" in "喜欢喝茶")."""
    if lexicon.spaced:
        return set(words) <= set(_content(text, lexicon))
    characters = set(fold(text))
    return all(characters.issuperset(word) for word in words)


def _content(text: str, lexicon: Lexicon) -> list[str]:
    """The stems of ``text``'s words that name a thing, in order: fillers, articles,
    the user, numbers, units of time ("three months"), light verbs ("got") and a
    past participle describing the next word ("smoked" of "smoked salmon": a kind
    of thing, not the doing "quit smoking" ends) left out; Chinese as ``jieba``
    segments it."""
    return list(_content_of(text, lexicon))


@functools.lru_cache(maxsize=4096)
def _content_of(text: str, lexicon: Lexicon) -> tuple[str, ...]:
    """:func:`_content`, kept: a judgement reads each memory's words for every
    pair and every rule, and an older memory again with each newer one."""
    ignored, units = _left_out(lexicon)
    tokens = _tokens(text)
    stems = [
        lexicon.stem(word)
        for index, word in enumerate(tokens)
        if word not in ignored and not _describes(tokens, index, ignored, lexicon)
    ]
    return tuple(
        stem
        for stem in stems
        if not stem.isdigit()
        and stem not in units
        and lexicon.synonyms.get(stem, stem) not in lexicon.light_verbs
    )


@functools.cache
def _left_out(lexicon: Lexicon) -> tuple[frozenset[str], frozenset[str]]:
    """The words :func:`_content` leaves out, and the stems of its units of time."""
    ignored = lexicon.fillers | lexicon.articles | lexicon.user_words | frozenset(lexicon.numbers)
    return ignored, frozenset(lexicon.stem(unit) for unit in lexicon.frequencies)


def _describes(tokens: list[str], index: int, ignored: frozenset[str], lexicon: Lexicon) -> bool:
    """Whether ``tokens[index]`` is a past participle between a word of the memory's
    own (not its opening subject: "User married Sam" is a verb) and a word that
    names a thing ("loves smoked salmon", "rents a furnished flat")."""
    word = tokens[index]
    return (
        word.endswith("ed")
        and lexicon.is_past(word)
        and 1 < index < len(tokens) - 1
        and tokens[index - 1] not in lexicon.user_words
        and tokens[index + 1] not in ignored
        and not lexicon.denies(tokens[index + 1])
    )


def for_a_while(memory: str) -> bool:
    """Whether ``memory`` tells of a stay or a pause of a bounded length ("left
    Paris for a week-long trip", "for the weekend", "离开杭州去北京出差一周"):
    what it leaves goes on afterwards."""
    return bool(_lexicon(memory).bounded.search(memory))


class Agreement(StrEnum):
    """How two short answers to one question compare."""

    SAME = "same"
    """The same words, the second saying less, or too few words to tell."""
    MORE = "more"
    """The second holds all of the first and more (a detail added)."""
    DIFFERENT = "different"
    """Another answer."""


def denies(answer: str, lexicon: Lexicon | None = None) -> bool:
    """Whether a short answer denies ("no", "none", "not any more")."""
    lexicon = lexicon or _lexicon(answer)
    return any(lexicon.denies(word) for word in _tokens(answer))


def _words(answer: str, lexicon: Lexicon) -> set[str]:
    return {lexicon.stem(word) for word in _tokens(answer) if word not in lexicon.fillers}


def compare_answers(first: str, second: str) -> Agreement:
    """How ``second`` compares with ``first``, word by word (case, word endings and
    filler words aside); one denying what the other does not is another answer."""
    lexicon = _lexicon(first, second)
    if denies(first, lexicon) != denies(second, lexicon):
        return Agreement.DIFFERENT  # "vegetarian" / "no longer vegetarian"
    a, b = _words(first, lexicon), _words(second, lexicon)
    if not a or not b or b <= a:
        return Agreement.SAME
    if a <= b:
        return Agreement.MORE
    return Agreement.DIFFERENT


def same_question(first: str, second: str) -> bool:
    """Whether two questions ask about the same thing, as far as their words tell:
    the same words once time words ("now") and words naming a kind ("kind of",
    "mode of") are set aside, and at least one of them more than an asking word,
    so that "What did the user do?" is the same question as nothing."""
    lexicon = _lexicon(first, second)
    if lexicon is UNREAD:
        return False
    ignored = {lexicon.stem(word) for word in lexicon.question_fillers} | {
        lexicon.stem(word) for word in lexicon.user_words
    }
    asking = {lexicon.stem(word) for word in lexicon.asking_words}
    a, b = _words(first, lexicon) - ignored, _words(second, lexicon) - ignored
    return a == b and bool(a - asking)


_SHORT_ANSWER_WORDS = 4


def is_short_answer(reading: str) -> bool:
    """Whether a reading is a short answer ("Valencia", "80 kg") rather than a
    sentence retelling the memory ("The user quit smoking in March.")."""
    words = _tokens(reading)
    return 0 < len(words) <= _SHORT_ANSWER_WORDS and not _lexicon(reading).sentence.match(reading)


def year_told(memory: str) -> int | None:
    """The latest year ``memory`` names for its event ("interned at IBM in 2015",
    "from 1998 to 2003", "in March 2015"): a four-digit number after "in",
    "during", "from", a month... and not before a unit ("2000 euros"). A year
    after "since" tells how long a state has lasted, not when an event
    happened, and is not counted."""
    years = [int(year) for year in _lexicon(memory).year.findall(memory)]
    return max(years) if years else None
