"""The words this package's rules read, one :class:`Lexicon` per language.

The same-fact rule (:mod:`.same_fact`) and the time judgement's word rules
(:mod:`.fact_words`) read what a memory's words say: whose fact it is,
whether it negates, tells of another time, counts, ends something. Those
words belong to a language, so every rule takes them from the lexicon
:func:`lexicon_for` picks for the text, never from a list of its own. A text
the package has no lexicon for gets ``None``: the words decide nothing there
and veto nothing they cannot read; the model's readings do.
:data:`LEXICONS` holds the lexicons by language code: English and Chinese.

A lexicon reads a text written in its script and, where several languages
share one, in its language: a German or French memory is not read with the
English words (:meth:`Lexicon.reads`). Words are what :attr:`Lexicon.split`
makes of a text: runs of letters and digits for English (an apostrophe
inside kept, as in "user's" and "don't"); for Chinese, which has no spaces,
the words the ``jieba`` segmenter finds (:func:`chinese_words`, loaded the
first time a Chinese text is read; :func:`segmenter_ready` loads it off the
event loop). :data:`CJK_RUN` finds Chinese, Japanese and Korean runs in other
text.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHINESE",
    "CJK_NEGATIONS",
    "CJK_RUN",
    "ENGLISH",
    "LEXICONS",
    "UNREAD",
    "WORD",
    "Lexicon",
    "any_of",
    "chinese_words",
    "fold",
    "lexicon_for",
    "segmenter_ready",
    "spaced_words",
]

logger = logging.getLogger(__name__)

WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
CJK_NEGATIONS = frozenset("不没沒别別無无非않안못")
"""Characters that negate a Chinese, Japanese or Korean memory (read by the
same-fact rule until those languages have lexicons of their own)."""


_NOTHING = re.compile(r"(?!)")
"""A pattern that matches nothing: what a lexicon without a phrase reads."""


def _never(word: str) -> bool:
    return False


def spaced_words(folded: str) -> list[str]:
    """The words of a language written with spaces: runs of letters and digits
    (Chinese, Japanese and Korean runs left out; the rules read those apart)."""
    return WORD.findall(CJK_RUN.sub(" ", folded))


def fold(text: str) -> str:
    """``text`` as the rules compare it: NFKC, case folded, a typographic apostrophe as ``'``."""
    return unicodedata.normalize("NFKC", text).replace("’", "'").casefold()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Lexicon:
    """The words of one language that the rules read (all case folded).

    A field left out reads nothing: no word in a set, a pattern that never
    matches, a stem that is the word itself.
    """

    code: str
    """The language's code ("en")."""
    letters: re.Pattern[str] = _NOTHING
    """A letter of the script the language is written in (:func:`lexicon_for` counts them)."""
    foreign_letters: re.Pattern[str] = _NOTHING
    """A letter of a script the language is never written in: a text with one is
    another language's (kana or hangul in a text of Chinese characters)."""
    common: frozenset[str] = frozenset()
    """The language's most frequent words."""
    others_common: frozenset[str] = frozenset()
    """Frequent words of other languages written in the same script: a text with
    more of them than of :attr:`common` is not this language's ("der", "und")."""
    split: Callable[[str], list[str]] = spaced_words
    """The words of a folded text, in order."""
    spaced: bool = True
    """Whether the language separates its words with spaces."""
    numeral: re.Pattern[str] = _NOTHING
    """A word that is a number written in the language's own numerals, with its
    classifier or unit ("五百元", "两个"); :attr:`values` reads its value."""
    values: Callable[[str], set[str]] = lambda folded: set()
    """The values a folded text writes in the language's own words (dates, numbers)."""
    possessive_word: str = ""
    """The word between an owner and its thing ("的" in "用户的车"), for languages
    without a possessive ending."""
    negation_starts: tuple[str, ...] = ()
    """Beginnings of words that deny ("不" in "不能")."""
    stem: Callable[[str], str] = str
    """A key shared by a word's forms ("lived", "lives", "living" -> "liv")."""
    is_past: Callable[[str], bool] = _never
    """Whether a word is written in a past tense."""
    is_verb_form: Callable[[str], bool] = _never
    """Whether a word is written as a verb ("learning")."""
    verb_markers: frozenset[str] = frozenset()
    """Words that make the next word a verb ("to" in "wants to play")."""
    fillers: frozenset[str] = frozenset()
    """Words that do not change what a memory or a short answer says."""
    question_fillers: frozenset[str] = frozenset()
    """Words that do not change what a question asks about: when ("now", "still")
    and how it names a kind ("what kind of transport" / "what mode of transport")."""
    asking_words: frozenset[str] = frozenset()
    """Words that only ask ("what", "where") or ask of anything ("do", "happen",
    "status"): a question of nothing but these ("What did the user do?", "What is
    the user's status?") names no attribute."""
    negations: frozenset[str] = frozenset()
    """Words that deny ("not", "never"); a word ending in :attr:`negation_endings` does too."""
    negation_endings: tuple[str, ...] = ()
    opposites: frozenset[str] = frozenset()
    """Words that make a memory say the opposite of one without them ("hates", "quit")."""
    people: frozenset[str] = frozenset()
    """Another person a memory can be about ("sister", "boss"); after "User's", the holder."""
    animals: frozenset[str] = frozenset()
    """Pets and animals a memory can be about."""
    time_words: frozenset[str] = frozenset()
    """Words that place a fact in time ("yesterday", "used", "plans", "may", "monday")."""
    months: tuple[str, ...] = ()
    """The twelve months in order."""
    month_abbreviations: frozenset[str] = frozenset()
    weekdays: tuple[str, ...] = ()
    """The seven days, Monday first."""
    weekday_abbreviations: frozenset[str] = frozenset()
    past_auxiliaries: frozenset[str] = frozenset()
    """Words that put the verb after them in the past ("was", "had")."""
    numbers: Mapping[str, str] = field(default_factory=dict)
    """Number words and the number they stand for ("two" -> "2", "couple" -> "2~")."""
    synonyms: Mapping[str, str] = field(default_factory=dict)
    """A word or its stem -> its family, for words that say the same thing in a memory."""
    light_verbs: frozenset[str] = frozenset()
    """Families of verbs that add little to a memory ("works as", "has")."""
    wish: str = ""
    """The family of "wants" and "wishes": a wish is not the fact wished ("prefers"
    is a liking, not a wish)."""
    frequencies: Mapping[str, str] = field(default_factory=dict)
    """A unit of time and how often it makes a fact ("month" -> "monthly"), read
    after one of :attr:`frequency_markers` ("a month", "per month", "every month")."""
    frequency_markers: frozenset[str] = frozenset()
    naming: frozenset[str] = frozenset()
    """Words that give a name ("叫" in "叫豆豆的狗", "called"): the possessive word
    after the name then ends a description, not an owner ("a dog called
    Doudou"); right after a person, they only name them ("User's sister is
    called Anna" is the user's fact)."""
    comparing: frozenset[str] = frozenset()
    """Words that compare two things ("over", "than"): their order matters."""
    comparison: re.Pattern[str] = _NOTHING
    """A comparison written with a common word ("prefers tea to coffee"): the order
    matters there too."""
    common_first_words: frozenset[str] = frozenset()
    """Words that open a sentence with a capital without being a name."""
    user_words: frozenset[str] = frozenset()
    """Words that name the user ("user"): a memory opening with one is the user's."""
    relations: frozenset[str] = frozenset()
    """Prepositions that change what a memory says: "works for" is not "works
    with", "voted against" not "voted for", "over 30" not "30"."""
    loose_relations: frozenset[str] = frozenset()
    """Those of :attr:`relations` that change it only against another one: "works
    for" is not "works with", but "dark mode for charts" is "charts in dark mode"."""
    roles: frozenset[str] = frozenset()
    """Words right after the user that make the noun phrase after them (and an
    article) what the user is: "User is a nurse" (not "User hired a nanny")."""
    roles_after_verb: frozenset[str] = frozenset()
    """The same, one verb after the user: "User works as a nanny"."""
    articles: frozenset[str] = frozenset()
    """Articles and possessives ("a", "the", "their"): a noun phrase follows."""
    progressive: frozenset[str] = frozenset()
    """Words after which an "-ing" form is a verb ("is living"); elsewhere it names
    an activity ("likes boxing"), which is not the thing ("likes boxes")."""
    currencies: Mapping[str, str] = field(default_factory=dict)
    """Currency words and the currency they name ("dollars" -> "usd")."""
    minus: frozenset[str] = frozenset()
    """Words giving the number after them a minus sign ("minus 20")."""
    name_is: re.Pattern[str] = _NOTHING
    """A memory giving the user's name; group 1 is the name."""
    possessive: re.Pattern[str] = _NOTHING
    """A memory opening with someone's thing ("User's new car"): groups owner and thing."""
    owned: re.Pattern[str] = _NOTHING
    """Someone's thing anywhere in a memory ("Dana's manager"): groups owner and thing."""
    first_word: re.Pattern[str] = _NOTHING
    """A memory's first word (its subject); group 1."""
    additive: re.Pattern[str] = _NOTHING
    """Words adding one more item ("also", "another")."""
    past: re.Pattern[str] = _NOTHING
    """Words telling how things were ("used to", "in college")."""
    now: re.Pattern[str] = _NOTHING
    """Words telling how things are now ("now", "no longer")."""
    ending: re.Pattern[str] = _NOTHING
    """Words that end something ("quit", "no longer", "戒"); the ended thing is
    named after them."""
    held_together: frozenset[str] = frozenset()
    """Words of a relation that holds for several values at once ("likes",
    "speaks", "owns", "会", "去过"): one value said after another is no swap."""
    ends_alone: re.Pattern[str] = _NOTHING
    """Ending words that take no object ("辞职", "退休"): what follows them is
    another clause ("辞职回老家了": went home), and the ended thing is named before."""
    ended_stop: re.Pattern[str] = _NOTHING
    """Where the ended thing's words stop: the next clause, a time, or the verb
    after a thing given away ("把鹦鹉|送给了邻居")."""
    partner: re.Pattern[str] = _NOTHING
    """Someone an end is shared with, in the clause of the ending word ("和大伟"
    in "和大伟取消了婚约", "和小敏" in "和小敏的婚约取消了", "with Dave" in "called
    off the engagement with Dave"): group 1 names them, and what the user had
    with them ends too."""
    bounded: re.Pattern[str] = _NOTHING
    """An end for a while ("for a week", "for a trip", "一个周末", "去北京出差"):
    what it ends goes on afterwards."""
    sentence: re.Pattern[str] = _NOTHING
    """The opening of a sentence retelling a memory rather than a short answer."""
    year: re.Pattern[str] = _NOTHING
    """A year an event is told in ("in 2015", "March 2019"), not an amount ("2000 euros")."""
    asks: re.Pattern[str] = _NOTHING
    """The opening of a clause that asks or requests ("what", "can you", "write")."""
    remember: re.Pattern[str] = _NOTHING
    """Words asking for something to be remembered ("remember that") or stating a
    standing wish ("by default", "always"): such a request is a statement."""

    def __repr__(self) -> str:
        return f"Lexicon({self.code!r})"

    def denies(self, word: str) -> bool:
        """Whether ``word`` (folded) denies."""
        return (
            word in self.negations
            or word.endswith(self.negation_endings)
            or word.startswith(self.negation_starts)
        )

    def reads(self, text: str) -> bool:
        """Whether ``text`` is in this language, as far as its letters and most
        frequent words tell (its letters are counted by :func:`lexicon_for`)."""
        if self.foreign_letters.search(text):
            return False
        if not self.others_common:
            return True
        words = WORD.findall(fold(text))
        ours = sum(word in self.common for word in words)
        return ours >= sum(word in self.others_common for word in words)


UNREAD = Lexicon(code="")
"""What a rule reads a text with when :func:`lexicon_for` has no lexicon for it:
no word known, every word read as written."""


def any_of(*words: str) -> str:
    """A regular expression matching any of ``words``, the longest first."""
    return "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))


_KEPT_TEXT = 1000
"""Texts up to this long keep their lexicon: memories and questions, read again
turn after turn on the event loop (the note, the judgement); not whole exchanges."""


def lexicon_for(text: str) -> Lexicon | None:
    """The lexicon to read ``text`` with: the one whose script has the most
    letters in it, when the text is in its language (:meth:`Lexicon.reads`);
    ``None`` for text in a language no lexicon reads."""
    if len(text) <= _KEPT_TEXT:
        return _kept_lexicon_for(text)
    return _choose_lexicon(text)


def _choose_lexicon(text: str) -> Lexicon | None:
    counts = {code: len(lexicon.letters.findall(text)) for code, lexicon in LEXICONS.items()}
    best = max(counts, key=counts.__getitem__, default=None)
    if best is None or not counts[best] or not LEXICONS[best].reads(text):
        return None
    return LEXICONS[best]


_kept_lexicon_for = functools.lru_cache(maxsize=8192)(_choose_lexicon)


# English --------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _in_order(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _table(text: str) -> dict[str, str]:
    """``"went:go ran:run"`` as a mapping."""
    return dict(pair.split(":") for pair in text.split())


_IRREGULAR_PAST = _table(
    "went:go ran:run ate:eat drank:drink gave:give taught:teach bought:buy left:leave "
    "met:meet wrote:write spoke:speak began:begin drove:drive took:take made:make saw:see "
    "came:come got:get sold:sell thought:think flew:fly swam:swim grew:grow knew:know "
    "paid:pay told:tell won:win lost:lose kept:keep felt:feel slept:sleep studied:study "
    "lived:live moved:move"
)


def _english_stem(word: str) -> str:
    """A key shared by an English word's forms: no possessive, plural, "-ed" or
    "-ing" ending, no final "e" ("lived", "lives", "living" -> "liv"; "stopped"
    -> "stop"; "went" -> "go")."""
    word = word.removesuffix("'s")
    if word in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[word].rstrip("e")
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # stopped -> stop
            return base.rstrip("e")
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word.rstrip("e")


def _english_is_past(word: str) -> bool:
    return word in _IRREGULAR_PAST or (len(word) > 4 and word.endswith("ed"))


def _families(families: Mapping[str, str]) -> dict[str, str]:
    """Each member of a family, and its stem, -> the family; an irregular past and
    a participle are kept to themselves (the stem of "got" is "get"; "is employed
    at" works there, "employs a gardener" does not)."""
    out: dict[str, str] = {}
    for family, members in families.items():
        for word in members.split():
            out[word] = family
            if word not in _IRREGULAR_PAST and not word.endswith("ed"):
                out.setdefault(_english_stem(word), family)
    return out


_SMALL_NUMBERS = _in_order(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
)
_MONTHS = _in_order(
    "january february march april may june july august september october november december"
)
_MONTH_ABBREVIATIONS = _words("jan feb mar apr jun jul aug sep sept oct nov dec")
_MONTH_WORDS = any_of(*_MONTHS, *_MONTH_ABBREVIATIONS)
_WEEKDAYS = _in_order("monday tuesday wednesday thursday friday saturday sunday")
_QUALIFIERS = (
    "new|former|old|current|best|close|late|ex|step|elder|eldest|older|oldest|younger|youngest|"
    "little|big|twin|only|favou?rite"
)
"""Words between "User's" and a person that do not change whose fact it is."""

ENGLISH = Lexicon(
    code="en",
    letters=re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]"),
    common=_words(
        "user user's users the a an is are was were has have had of and to in on at for with "
        "his her their they he she it its not no by from as this that my i me you your we our"
    ),
    others_common=_words(
        # German, French, Spanish, Italian, Portuguese, Dutch: their own frequent words.
        "der die das dem den des ein eine einen einem und ist sind nicht mit für auf sich "
        "nutzer benutzer wohnt arbeitet hat "
        "le la les un une est et des du avec pour dans utilisateur il elle ne pas "
        "el los las es y una con para usuario del que su "
        "il lo gli è di che utente della sono "
        "os é com não usuário utilizador da do "
        "het een gebruiker woont niet"
    ),
    stem=_english_stem,
    is_past=_english_is_past,
    is_verb_form=lambda word: len(word) > 5 and word.endswith("ing"),
    verb_markers=frozenset({"to"}),
    fillers=_words(
        "a an the user users user's they them their theirs he she his her hers him i me my "
        "mine our your s is are am was were be been being that this these those also "
        "currently really very in at on of to for with by as over than into about do does "
        "own and or which who whose it its every each per"
    ),
    question_fillers=_words(
        "now current currently still anymore today nowadays presently these days kind kinds "
        "type types sort sorts mode form"
    ),
    asking_words=_words(
        "what where when who whom how why which much many do does did doing done have has "
        "had having happen happens happened happening get gets got go goes going like "
        "status state situation condition thing things news update"
    ),
    negations=_words("not no non never none nobody nothing nor neither cannot anymore"),
    negation_endings=("n't",),
    opposites=_words(
        "without dislike dislikes disliked hate hates hating avoid avoids avoiding refuse "
        "refuses refused stop stopped stops quit quits longer lack lacks free"
    ),
    people=_words(
        "sister sisters brother brothers sibling siblings mother mom mum mama father dad papa "
        "parent parents wife husband spouse partner son sons daughter daughters child children "
        "kid kids baby friend friends colleague colleagues coworker coworkers boss manager "
        "team teammate classmate neighbour neighbor neighbours neighbors roommate roommates "
        "flatmate cousin cousins aunt uncle grandmother grandma grandfather grandpa "
        "grandparents nephew niece girlfriend boyfriend fiance fiancee family teacher student "
        "students doctor client clients customer customers landlord landlady tenant tenants "
        "mentor mentee"
    ),
    animals=_words("dog dogs cat cats pet pets puppy kitten horse bird"),
    time_words=_words(
        "yesterday today tomorrow tonight last next ago before after until till since "
        "previously formerly former used once earlier recently soon later childhood "
        "morning afternoon evening night weekend weekends weekday weekly daily monthly yearly "
        "spring summer autumn fall winter will would going plan plans planned planning"
    )
    | {*_MONTHS, *_MONTH_ABBREVIATIONS, *_WEEKDAYS, *(f"{day}s" for day in _WEEKDAYS)},
    months=_MONTHS,
    month_abbreviations=_MONTH_ABBREVIATIONS,
    weekdays=_WEEKDAYS,
    weekday_abbreviations=_words("mon tue tues wed thu thur thurs fri sat sun"),
    past_auxiliaries=_words("was were had did used"),
    numbers={word: str(value) for value, word in enumerate(_SMALL_NUMBERS)}
    | _table(
        "thirty:30 forty:40 fifty:50 sixty:60 seventy:70 eighty:80 ninety:90 hundred:100 "
        "thousand:1000 million:1000000 dozen:12 twice:2x couple:2~ few:few several:several "
        "many:many first:1st second:2nd third:3rd fourth:4th fifth:5th single:1 both:2"
    ),
    synonyms=_families(
        {
            "like": "like love enjoy adore fond fan into prefer favor favour",
            "want": "want wish",
            "favorite": "favorite favourite fave",
            "live": "live reside based resident",
            "work": "work employed job",
            "name": "name call",
            "have": "have has owns got possess",
            "colour": "colour color",
            "summarize": "summarize summarise",
            "bicycle": "bicycle bike",
            "movie": "movie movies film",
            "fluent": "fluent fluently",
            "allergy": "allergy allergic",
            "practice": "practice practise",
        }
    ),
    light_verbs=_words("like want have work go practice do get speak pay"),
    wish="want",
    frequencies=_table("day:daily night:nightly week:weekly month:monthly year:yearly"),
    frequency_markers=_words("a an per every each"),
    comparing=_words("over than rather instead versus vs from"),
    comparison=re.compile(r"\bprefer(?:s|red|ring)?\b.*\bto\b"),
    common_first_words=_words("every at for in on my our her his their its there"),
    user_words=_words("user users"),
    relations=_words(
        "for with against near without under over above below beside behind toward towards "
        "among between beyond across around inside outside opposite"
    ),
    loose_relations=_words("for with"),
    roles=_words("is am are was were became becomes"),
    roles_after_verb=_words("as"),
    articles=_words("a an the my your his her their our"),
    progressive=_words(
        "is am are was were be been being not go goes went going gone do does did doing"
    ),
    currencies=_table(
        "dollar:usd dollars:usd usd:usd bucks:usd euro:eur euros:eur eur:eur pound:gbp "
        "pounds:gbp gbp:gbp quid:gbp sterling:gbp yuan:cny rmb:cny cny:cny renminbi:cny "
        "yen:jpy jpy:jpy rupee:inr rupees:inr inr:inr franc:chf francs:chf chf:chf "
        "won:krw krw:krw ruble:rub rubles:rub roubles:rub"
    ),
    minus=_words("minus negative"),
    name_is=re.compile(r"\b(?:user'?s|my|the user'?s) name is ([^\W\d_]+)", re.IGNORECASE),
    naming=_words("called named name"),
    possessive=re.compile(
        rf"^\s*(?:the\s+)?([A-Za-z]+)(?:'s|’s)\s+(?:(?:{_QUALIFIERS})[\s-]+)*([A-Za-z]+)", re.I
    ),
    owned=re.compile(rf"\b([A-Za-z]+)(?:'s|’s)\s+(?:(?:{_QUALIFIERS})[\s-]+)*([A-Za-z]+)", re.I),
    first_word=re.compile(r"^\s*(?:the\s+)?([A-Za-z]+)\b", re.I),
    additive=re.compile(
        r"\b(also|too|as well|another|other|second|third|additional(?:ly)?|in addition|"
        r"besides|more than one|several|"
        # Learning a thing adds a skill and ends none: "is learning Japanese".
        r"(?:is|are|am|has been|have been|started|starts|began|begins) "
        r"(?:learning|studying|taking up))\b",
        re.I,
    ),
    past=re.compile(
        r"\b(used to|as a (?:child|kid|teen(?:ager)?|student)|in (?:high )?school|in college|"
        r"at university|when (?:he|she|they|i|the user) (?:was|were)|years ago|back then|"
        r"(?:during|throughout|through|in) (?:(?:high )?school|college|university|uni|"
        r"(?:his|her|their) (?:studies|youth|childhood|twenties|teens))|"
        r"formerly|in (?:his|her|their) (?:youth|childhood|twenties|teens)|growing up|"
        r"once (?:lived|worked|had|played|owned))\b",
        re.I,
    ),
    now=re.compile(
        r"\b(now|currently|no longer|anymore|any more|these days|nowadays|today|instead)\b", re.I
    ),
    ending=re.compile(
        r"\b(?:quit|quits|stopped|stops|gave up|gives up|given up|cancell?ed|cancels|"
        r"called off|broke up|broken up|split up|divorced|left|leaves|sold|"
        r"sells|retired from|retired|dropped out of|dropped|got rid of|gave away|closed|"
        r"ended|graduated from|graduated|finished|moved out of|no longer|not \w+ any ?more)\b",
        re.I,
    ),
    partner=re.compile(r"\bwith ((?:[A-Z][\w'-]*\s?){1,2})"),
    held_together=_words(
        "like likes liked love loves enjoy enjoys hate hates fear fears allergic "
        "speak speaks can knows know own owns visited been collect collects play plays"
    ),
    ended_stop=re.compile(
        r"[,.;:!?()]|\b(?:and|but|because|after|before|when|while|since|instead|so|"
        rf"last|this|next|ago|in \d{{4}}|in (?:{_MONTH_WORDS})|on \w+day)\b",
        re.I,
    ),
    bounded=re.compile(
        r"\bfor (?:a|an|one|the|a few|several|\d+|"
        + "|".join(_SMALL_NUMBERS[1:])
        + r")\b[\w\s-]{0,20}?\b(?:day|night|week|weekend|fortnight|month|trip|holiday|"
        r"vacation|visit|getaway|break|tour|conference|stay)s?\b"
        r"|\b\w+-(?:day|night|week|month)(?:-long)?\b|\b(?:day|week|month)-long\b",
        re.I,
    ),
    sentence=re.compile(r"^\s*(?:the user|user|they|he|she|it)\b", re.I),
    year=re.compile(
        rf"(?:\b(?:in|during|from|around|until|till|of|{_MONTH_WORDS})\s+|(?<=\d\d\d\d to ))"
        r"(1[89]\d\d|20\d\d)\b"
        r"(?!\s*(?:euros?|dollars?|pounds?|yuan|yen|francs?|usd|eur|gbp|kg|km|miles?|m\b|"
        r"meters?|metres?|feet|ft|calories?|steps?|words?|people|users?|units?|items?))",
        re.I,
    ),
    asks=re.compile(
        r"(?:what|what's|whats|which|who|whom|whose|where|when|why|how|is|are|am|was|were|"
        r"do|does|did|can|could|would|will|shall|should|may|might|have|has|had|isn't|aren't|"
        r"don't|doesn't|didn't|won't|wouldn't|shouldn't|please|tell|give|show|write|make|"
        r"create|translate|explain|describe|list|name|suggest|recommend|help|find|compute|"
        r"calculate|summarize|summarise|define|compare|let's|any|ok|okay|thanks|thank|hi|hello|"
        r"hey|good|bye|goodbye|got it|sure|understood|makes sense|sounds good|cool|great|nice|"
        r"suppose|imagine|if)\b",
        re.I,
    ),
    remember=re.compile(
        r"\b(?:remember|note|keep in mind|don't forget|do not forget|for the record|"
        r"by default|always|never|from now on|every time|in (?:the )?future)\b",
        re.I,
    ),
)


# Chinese -------------------------------------------------------------------

_SEGMENTER: Any = None
_SEGMENTER_LOCK = threading.Lock()


def _segmenter() -> Any:
    """The ``jieba`` segmenter, loaded once (a second or two: its dictionary)."""
    global _SEGMENTER
    with _SEGMENTER_LOCK:
        if _SEGMENTER is None:
            import jieba

            # jieba logs its dictionary loading at DEBUG to stderr by default.
            if logging.getLogger("jieba").level <= logging.DEBUG:
                jieba.setLogLevel(logging.WARNING)
            segmenter = jieba.Tokenizer()
            segmenter.initialize()
            for word in (*_CHINESE_USER, *_CHINESE_PEOPLE):
                segmenter.add_word(word)
            for word in (*_CHINESE_PEOPLE, *_CHINESE_ANIMALS):
                # "狗叫" is in jieba's dictionary ("the dog barks"); "用户的狗叫豆豆" names the dog.
                segmenter.suggest_freq((word, "叫"), tune=True)
            _SEGMENTER = segmenter
            logger.debug("jieba's dictionary is loaded")
    return _SEGMENTER


_CHINESE_PERIODS = (
    ("每一个月", "每月"),
    ("每个月", "每月"),
    ("每个星期", "每周"),
    ("每星期", "每周"),
    ("每个礼拜", "每周"),
    ("每礼拜", "每周"),
    ("每一天", "每天"),
)
"""One way of writing "every month", "every week", "every day"."""

_GLUED_FIRST = "想要叫"
"""Characters jieba's guess at an unknown word glues onto the next one: "想养"
(wants to keep), "叫小丽" (is called Xiaoli)."""


def chinese_words(folded: str) -> list[str]:
    """The words of a folded Chinese text, as ``jieba`` segments it (no spaces or
    punctuation; Latin words and numbers as they are). A word jieba guessed that
    opens with a wish or a naming verb is read as that verb and the rest."""
    for written, period in _CHINESE_PERIODS:
        folded = folded.replace(written, period)
    segmenter = _segmenter()
    words: list[str] = []
    for word in segmenter.lcut(folded):
        if not WORD.match(word):
            continue
        if len(word) > 1 and word[0] in _GLUED_FIRST and not segmenter.FREQ.get(word):
            words.extend((word[0], word[1:]))
        else:
            words.append(word)
    return words


async def segmenter_ready(texts: Iterable[str]) -> None:
    """Load the Chinese segmenter off the event loop when ``texts`` hold Chinese and
    it is not loaded yet, so that reading them does not stall the loop."""
    if _SEGMENTER is None and any(CJK_RUN.search(text) for text in texts):
        await asyncio.to_thread(_segmenter)


_CHINESE_DIGITS = {char: value for value, char in enumerate("零一二三四五六七八九")} | {"两": 2}
_CHINESE_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10_000, "亿": 100_000_000}
_NUMERALS = "零一二两三四五六七八九十百千万亿"
_GIVEN_AWAY = "送给|送人|送走|卖给|卖掉|卖了|扔掉|扔了|丢掉|捐给|捐掉|捐了|转让|转给|退掉|退了"
"""Verbs after a thing given away, sold or thrown out ("把鹦鹉送给了邻居")."""
_CLASSIFIERS = "个只位名辆条本家件台张套间座次岁天年月日号周元块度米斤点分层栋口"
_CHINESE_DATE = re.compile(rf"([{_NUMERALS}\d]+)月(?:([{_NUMERALS}\d]+)[日号])?")
_CHINESE_NUMBER = re.compile(
    rf"-?[{_NUMERALS}]+(?=[{_CLASSIFIERS}]|美元|欧元|英镑|日元|公里|公斤|$|\W)"
)


def _chinese_number(numeral: str) -> int | None:
    """The value of Chinese numerals ("三千" 3000, "十八" 18, "两" 2, "1208" as is)."""
    if numeral.startswith("-"):
        value = _chinese_number(numeral[1:])
        return None if value is None else -value
    if numeral.isdigit():
        return int(numeral)
    total, section, digit = 0, 0, None
    for char in numeral:
        if char in _CHINESE_DIGITS:
            digit = _CHINESE_DIGITS[char]
        elif char in _CHINESE_UNITS:
            unit = _CHINESE_UNITS[char]
            if unit >= 10_000:
                total += (section + (digit or 0)) * unit
                section = 0
            else:
                section += (1 if digit is None else digit) * unit
            digit = None
        else:
            return None
    return total + section + (digit or 0)


def _chinese_values(folded: str) -> set[str]:
    """Dates ("三月五日" is 3-5, not 5-3) and numbers written in Chinese numerals;
    "一" before a classifier ("一只狗") is an article, not a count."""
    out: set[str] = set()
    rest = folded
    for match in _CHINESE_DATE.finditer(folded):
        month, day = _chinese_number(match.group(1)), match.group(2)
        day_value = _chinese_number(day) if day else None
        out.add(f"{month}-{day_value}" if day_value is not None else f"month {month}")
        rest = rest.replace(match.group(), " ")
    for match in _CHINESE_NUMBER.finditer(rest):
        if match.group() in ("一", "-一"):
            continue
        value = _chinese_number(match.group())
        if value is not None:
            out.add(str(value))
    return out


_CHINESE_USER = ("用户", "我")
_CHINESE_ANIMALS = _words("狗 猫 小狗 小猫 鸟 马 鱼")
_CHINESE_PEOPLE = _words(
    "妈妈 母亲 爸爸 父亲 父母 儿子 女儿 孩子 妻子 老婆 丈夫 老公 哥哥 姐姐 弟弟 妹妹 "
    "爷爷 奶奶 外公 外婆 朋友 同事 老板 家人 男朋友 女朋友 宠物 室友 邻居 老师 学生 "
    "同学 医生 经理 领导 上司 宝宝 叔叔 阿姨 舅舅 姑姑 表哥 表姐 表弟 表妹 房东 房客"
)

CHINESE = Lexicon(
    code="zh",
    letters=re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
    foreign_letters=re.compile(r"[\u3040-\u30ff\uac00-\ud7af]"),
    split=chinese_words,
    spaced=False,
    fillers=frozenset(
        "的了是在我你他她它们用户这那有个也都就和跟与及吗呢吧啊呀哦嗯么着过地得很还又把被给对从到向让"
    )
    | _words("目前 现在 当前 如今 一直 每个 都是 正在 还是 可以 已经 经常 通常"),
    user_words=frozenset(_CHINESE_USER),
    question_fillers=_words("目前 现在 当前 如今 最近 还 仍然 依然 种 类 类型 方式"),
    asking_words=_words(
        "什么 哪 哪里 哪儿 哪个 哪些 谁 怎么 怎样 如何 为什么 多少 几 做 干 有 发生 是 吗 呢 "
        "情况 状态 状况 事情 东西"
    ),
    negations=_words("不 没 没有 别 未 非 无 不再 从不 从没 从未 不能 不会 不要 不是 不用"),
    negation_starts=("不", "没", "別", "别", "未"),
    opposites=_words("讨厌 厌恶 戒 戒掉 放弃 停止"),
    numbers={char: str(value) for value, char in enumerate("零一二三四五六七八九十")} | {"两": "2"},
    numeral=re.compile(
        rf"[{_NUMERALS}\d.]+[{_CLASSIFIERS}]*(?:美元|欧元|英镑|日元|港币|公里|公斤)?"
    ),
    values=_chinese_values,
    people=_CHINESE_PEOPLE,
    animals=_CHINESE_ANIMALS,
    time_words=_words(
        "以前 之前 曾经 原来 过去 小时候 年轻时 去年 前年 明年 今年 上个月 下个月 上周 下周 "
        "昨天 今天 明天 将来 未来 以后 打算 计划 准备 将 要 每天 每周 每月 每年 周末 早上 "
        "晚上 上午 下午 周一 周二 周三 周四 周五 周六 周日 星期一 星期二 星期三 星期四 "
        "星期五 星期六 星期天 星期日"
    ),
    past_auxiliaries=_words("过 曾"),
    synonyms={
        "每": "每个",
        "居住": "住",
        "住在": "住",
        "喜爱": "喜欢",
        "爱": "喜欢",
        "上班": "工作",
        "汽车": "车",
        "轿车": "车",
        "小狗": "狗",
        "小猫": "猫",
        "想要": "想",
        "希望": "想",
    },
    light_verbs=_words("有 做 是 去 搞 当 付 交 支付"),
    wish="想",
    naming=_words("叫 名叫 叫做 名为"),
    comparing=_words("比 胜过 而不是"),
    roles=_words("是 当 成为 担任"),
    articles=_words("一名 一个 一位 一只 名 位 个"),
    currencies={
        "人民币": "cny",
        "美元": "usd",
        "美金": "usd",
        "欧元": "eur",
        "英镑": "gbp",
        "日元": "jpy",
        "港币": "hkd",
        "元": "cny",
        "块": "cny",
    },
    minus=_words("零下 负"),
    possessive_word="的",
    common_first_words=_words("每 在 从 以前 去年 今年 现在 目前"),
    additive=re.compile(
        r"也|另外|另一|又一|第二|在学|开始学"
        r"|(?:又|还)(?:养|收养|领养|买|添|生|交|认识|学|报|多)"
    ),
    past=re.compile(
        r"小时候|年轻时|上学时|读书时|大学时|大学期间|学生时代|以前|曾经|原来|过去|当年|那时"
    ),
    now=re.compile(r"现在|目前|如今|不再|已经不|改|换成"),
    ending=re.compile(
        r"(?:不再|不(?!久|少|错|仅|断|同|过|管|论|但|然|如)(?=[^，。,.;；！!？?、]{1,8}了)|戒掉|戒(?!指)|取消|分手|分开|离婚|辞职|辞去|辞掉|离职|"
        r"退休|卖掉|卖了|搬出|搬离|关掉|关闭|关了|退学|退掉|毕业|放弃|退出|去世|死了|走丢|弄丢|丢了|"
        rf"送人|扔掉|扔了|丢掉|把(?=[^，。,.;；！!？?、]{{1,10}}?(?:{_GIVEN_AWAY})))"
    ),
    ends_alone=re.compile(r"辞职|离职|退休|退学|分手|分开|离婚|去世|死了|走丢"),
    held_together=_words(
        "喜欢 爱 爱吃 爱喝 爱看 爱玩 爱好 讨厌 怕 害怕 过敏 会 能 懂 去过 到过 吃过 学过 "
        "有 养 拥有 认识 收藏 参加"
    ),
    ended_stop=re.compile(
        r"[，。,.;；！!？?、]|然后|因为|之后|以后|现在|后来|但|"
        r"上个月|上周|上星期|去年|前年|今年|昨天|前天|今天|最近|刚刚|刚才|已经|"
        rf"[{_NUMERALS}\d半]+个?(?:天|晚|周末|星期|礼拜|周|月|年)|{_GIVEN_AWAY}"
    ),
    partner=re.compile(r"(?:和|跟|与)([^和跟与的]{1,6})(?:的[^和跟与的]{1,4})?$"),
    bounded=re.compile(
        rf"[{_NUMERALS}\d半]+(?:天|晚|个?(?:周末|星期|礼拜|周)|个月)(?!前|以前|之前|后|以后|之后|了)"
        r"|离开[^，。,.]{0,8}?去[^，。,.]{0,8}?(?:玩|出差|旅游|旅行|度假|开会)"
    ),
    sentence=re.compile(r"^\s*(?:用户|他们|他|她)"),
    year=re.compile(r"((?:19|20)\d\d)年"),
    # A request needs no opening word in Chinese: a clause without "我" that
    # asks for writing, translating, drawing ... anywhere is one ("用Go写一个").
    asks=re.compile(
        r"(?:请|帮我|帮忙|给我|告诉我|写|讲|说说|翻译|解释|推荐|介绍|怎么|怎样|如何|什么|为什么|"
        r"哪|谁|几|多少|多长|多大|能不能|可不可以|可以|是不是|有没有|你好|您好|谢谢|好的|再见|"
        r"嗯|好|明白|知道了|收到|行|假如|假设|如果)"
        r"|(?:(?!我).)*?(?:写|编|翻译|讲个|讲一|生成|画|计算|算一|列出|推荐|介绍|解释)"
    ),
    remember=re.compile(r"记住|记得|别忘了|不要忘了|请注意|以后|总是|每次|默认|一直|从现在起"),
)
"""Chinese: ``jieba``'s words (:func:`chinese_words`); the grounding check reads it
character by character (its single-character fillers and numbers)."""

LEXICONS: Mapping[str, Lexicon] = {ENGLISH.code: ENGLISH, CHINESE.code: CHINESE}
"""The lexicons by language code."""
