"""Whether two memories state the same fact, strictly.

Write-time consolidation (:mod:`.._write.judge`) and the note use this
to keep one memory per fact. Merging two memories that differ in meaning
hides one of them, so what blocks a merge is checked first and wins:

* another person: a relative, a pet or a named person that the other memory
  does not mention ("User's sister lives in Hangzhou" is not "User lives in
  Hangzhou"); the user's own name counts as "the user";
* negation ("does not live in Beijing", "dislikes", "no longer");
* a different time: other time words ("in May", "last year", "used to") or
  the same verb in another tense ("lived" against "lives");
* different numbers, digits or words ("two cats" is "2 cats", not "3 cats").

Neither may add a detail the other lacks ("likes tea", "likes green tea") or
swap one verb for another ("wants a dog", "has a dog"). Past those, two
memories are the same fact when their content words, with a few families of
synonyms folded ("likes"/"enjoys", "works at"/"is employed at",
"named"/"called"), overlap by :attr:`SameFactRule.lexical` (Jaccard) and
neither puts a word of its own in the place of one of the other's (however
long the sentence, "dark mode" is not "light mode"; only a light verb may
differ: "works as a nurse", "is a nurse"); or,
with their embeddings at hand, when their content words other than light
verbs ("works as", "does", "has") overlap by
:attr:`SameFactRule.with_vectors` and the embeddings' cosine similarity
reaches :attr:`SameFactRule.cosine`. The thresholds were chosen by
cross-validation on the pair set of ``benchmarks/consolidation.py``.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .fact_words import holder
from .lexicon import CJK_NEGATIONS, CJK_RUN, UNREAD, WORD, Lexicon, any_of, fold, lexicon_for

__all__ = [
    "DEFAULT_SAME_FACT_RULE",
    "FactShape",
    "SameFactRule",
    "as_user",
    "blocker",
    "cosine",
    "fact_shape",
    "first_repeat",
    "kept_apart",
    "same_fact",
    "user_names",
]


@dataclass(frozen=True, slots=True)
class SameFactRule:
    """The thresholds of :func:`same_fact`."""

    lexical: float = 0.6
    """Jaccard overlap of content words that alone makes two memories the same fact
    (kept with embeddings too, so that an embedder whose similarities run lower
    than e5's still merges what the words show)."""
    with_vectors: float = 1.0
    """Overlap of the content words other than light verbs needed with embeddings."""
    cosine: float = 0.98
    """Cosine similarity of the two embeddings needed with them."""


DEFAULT_SAME_FACT_RULE = SameFactRule()


_VALUE = re.compile(r"(?P<sign>(?<![0-9A-Za-z.])[-−](?=\d))?(?P<number>\d+(?:[.,:/-]\d+)*)")
"""A number as one value: its sign, and its parts in order ("2024-03-04", "12/05", "-18")."""
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_GRADE = re.compile(r"(?<![\w+-])([a-z]{1,2}[+-])(?![\w+-])")
"""A grade or a blood type ("a+", "b-", "ab+"), in folded text."""
_CURRENCY_SIGNS = {"$": "usd", "£": "gbp", "€": "eur", "¥": "cny|jpy", "₹": "inr", "₩": "krw"}
_CAPITALISED = re.compile(r"[^\W\d_][\w'’]*")


@dataclass(frozen=True, slots=True)
class FactShape:
    """What :func:`same_fact` compares of one memory."""

    words: frozenset[str]
    """Content words, stemmed, synonyms folded, the user's names left out."""
    numbers: frozenset[str]
    negated: bool
    people: frozenset[str]
    """Relatives, pets and named people other than the user."""
    times: frozenset[str]
    """Time words, and ``past`` for a past tense."""
    order: tuple[str, ...] | None
    """The content words in order, for a memory that compares ("tea over coffee")."""
    lemmas: frozenset[str]
    """Verb-like words in their base form, for comparing tenses."""
    past_lemmas: frozenset[str]
    """Base forms of the words written in a past tense."""
    verbs: frozenset[str] = frozenset()
    """Content words written as a verb ("learning", "to play"), as in :attr:`words`."""
    holder: str | None = None
    """Whose fact it is (:func:`~.fact_words.holder`); ``None`` when the words do not tell."""
    owners: frozenset[tuple[str, str]] = frozenset()
    """Who owns what it names, as ``(thing, owner)``: "User's manager" is not "Dana's manager"."""
    currencies: frozenset[str] = frozenset()
    """The currencies its amounts are in ("$", "euros")."""
    relations: frozenset[str] = frozenset()
    """Its prepositions that change what it says ("for", "with", "against", "over")."""
    roles: frozenset[str] = frozenset()
    """What its holder is ("is a nurse", "works as a nanny"), as in :attr:`words`."""
    activities: frozenset[str] = frozenset()
    """Words written as an activity ("likes boxing"; not "is living"), as in :attr:`words`."""
    text: str = field(default="", compare=False)
    """The memory as read (folded)."""
    lexicon: Lexicon = field(default=UNREAD, compare=False)
    """The lexicon the memory was read with."""


def user_names(user_id: str | None, texts: Iterable[str] = ()) -> frozenset[str]:
    """The words that name the user: the parts of ``user_id`` and any "name is X" in ``texts``."""
    names = {part for part in re.split(r"[^\w]+|_", (user_id or "").casefold()) if len(part) > 1}
    for text in texts:
        lexicon = lexicon_for(text) or UNREAD
        names.update(match.casefold() for match in lexicon.name_is.findall(text))
    return frozenset(names)


def as_user(text: str, names: frozenset[str]) -> str:
    """``text`` with the user's ``names`` written as "User", for embedding."""
    if not names:
        return text
    pattern = r"\b(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(pattern + r")\b", "User", text, flags=re.IGNORECASE)


# A user's memories come back turn after turn (the note, the time judgement):
# each is read once, not on every turn (0.1-0.2 ms a memory on the event loop).
# The shape is immutable and depends on nothing but the text and the names.
@functools.lru_cache(maxsize=4096)
def fact_shape(text: str, names: frozenset[str] = frozenset()) -> FactShape:
    """The shape of ``text`` for :func:`same_fact`; ``names`` name the user (:func:`user_names`)."""
    plain = unicodedata.normalize("NFKC", text).replace("’", "'")
    folded = fold(text)
    lexicon = lexicon_for(plain) or UNREAD
    numbers, currencies = _values(folded, lexicon)
    words: set[str] = set()
    people: set[str] = set()
    times: set[str] = set()
    lemmas: set[str] = set()
    past_lemmas: set[str] = set()
    verbs: set[str] = set()
    activities: set[str] = set()
    sequence: list[str] = []
    negated = False
    if lexicon.spaced:
        # Chinese, Japanese or Korean words in a text of another language (or of no
        # lexicon): read by pairs of characters, a negating character kept apart.
        for run in CJK_RUN.findall(folded):
            negated = negated or any(char in CJK_NEGATIONS for char in run)
            words.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    tokens = lexicon.split(folded)
    for index, word in enumerate(tokens):
        base = word.removesuffix("'s")
        if base in names or (base in lexicon.user_words and not lexicon.spaced):
            continue
        if lexicon.numeral.fullmatch(base):
            continue  # a number in the language's numerals: read by lexicon.values
        if lexicon.denies(base) or base in lexicon.opposites:
            negated = True
            if base in lexicon.negations or base in lexicon.opposites or lexicon.spaced:
                continue
            base = base[1:]  # "不吃": a negation written into its verb, "吃"
        if base in lexicon.numbers:
            numbers.add(lexicon.numbers[base])
            continue
        lemma = lexicon.stem(base)
        before = tokens[index - 1] if index else ""
        if base in lexicon.frequencies and before in lexicon.frequency_markers:
            times.add(lexicon.frequencies[base])  # "a month", "per month": "monthly"
            continue
        if base in lexicon.people or base in lexicon.animals:
            people.add(lemma)
            sequence.append(lemma)
            continue
        if base in lexicon.time_words:
            times.add(lemma)
            if _every_weekday(base, before, lexicon):
                times.add(lexicon.frequencies.get("week", "weekly"))
            if lexicon.is_past(base):
                times.add("past")  # "planned" is not "plans": the stem folds them
            continue
        if base in lexicon.past_auxiliaries:
            times.add("past")
            continue
        if base in lexicon.fillers or base in lexicon.currencies or base.isdigit():
            continue
        if lexicon.synonyms.get(base) in lexicon.fillers:
            continue  # a form of a filler ("每" of "每个")
        lemmas.add(lemma)
        if lexicon.is_past(base):
            past_lemmas.add(lemma)
        word_key = _word_key(base, lexicon)
        words.add(word_key)
        sequence.append(word_key)
        if lexicon.is_verb_form(base) or before in lexicon.verb_markers:
            verbs.add(word_key)
            if lexicon.is_verb_form(base) and before not in lexicon.progressive:
                activities.add(word_key)
    if lexicon is not UNREAD:
        # Capitals name people only where the words are read: German writes its
        # nouns with one.
        people.update(_named_people(plain, names, lexicon))
    return FactShape(
        words=frozenset(words),
        numbers=frozenset(numbers),
        negated=negated,
        people=frozenset(people),
        times=frozenset(times),
        order=tuple(sequence)
        if lexicon.comparing.intersection(tokens) or lexicon.comparison.search(folded)
        else None,
        lemmas=frozenset(lemmas),
        past_lemmas=frozenset(past_lemmas),
        verbs=frozenset(verbs),
        holder=holder(plain, names),
        owners=frozenset(_owners(plain, tokens, names, lexicon)),
        currencies=frozenset(currencies),
        relations=frozenset(lexicon.relations.intersection(tokens)),
        roles=frozenset(_roles(tokens, names, lexicon)),
        activities=frozenset(activities),
        text=folded,
        lexicon=lexicon,
    )


def _every_weekday(word: str, before: str, lexicon: Lexicon) -> bool:
    """Whether ``word`` names a weekday as a habit: "every Sunday", "on Sundays"."""
    day = word.removesuffix("s") if word not in lexicon.weekdays else word
    return day in lexicon.weekdays and (word != day or before in lexicon.frequency_markers)


def _word_key(word: str, lexicon: Lexicon) -> str:
    """``word`` as :attr:`FactShape.words` holds it: stemmed, its synonyms folded."""
    return lexicon.synonyms.get(word) or lexicon.synonyms.get(
        lexicon.stem(word), lexicon.stem(word)
    )


def _values(folded: str, lexicon: Lexicon) -> tuple[set[str], set[str]]:
    """The values ``folded`` text gives, each whole and in order ("2024-03-04" is not
    "2024-04-03", "-18" not "18", "b+" not "b-"), and the currencies of its amounts."""
    text = _THOUSANDS.sub("", folded)
    if lexicon.minus:
        minus = any_of(*lexicon.minus)
        pattern = rf"\b(?:{minus})\s+(?=\d)" if lexicon.spaced else rf"(?:{minus})\s*(?=\S)"
        text = re.sub(pattern, "-", text)
    numbers = {match.group().replace("−", "-") for match in _VALUE.finditer(text)}
    numbers.update(_GRADE.findall(text))
    numbers.update(lexicon.values(text))
    currencies = {code for sign, code in _CURRENCY_SIGNS.items() if sign in text}
    if lexicon.spaced:
        found = (lexicon.currencies.get(word) for word in WORD.findall(text))
        currencies.update(code for code in found if code)
    else:
        # No spaces: the longest currency word first, so "美元" is not read as "元".
        for word in sorted(lexicon.currencies, key=len, reverse=True):
            if word in text:
                currencies.add(lexicon.currencies[word])
                text = text.replace(word, " ")
    return numbers, currencies


def _owners(
    text: str, tokens: list[str], names: frozenset[str], lexicon: Lexicon
) -> set[tuple[str, str]]:
    """Who owns what ``text`` names: ``("manager", "user")`` for "User's manager"."""

    def who(owner: str) -> str:
        return "user" if owner in names or owner in lexicon.user_words else owner

    out = set()
    for match in lexicon.owned.finditer(text):
        out.add((_word_key(fold(match.group(2)), lexicon), who(fold(match.group(1)))))
    if lexicon.possessive_word:
        for index, word in enumerate(tokens[1:-1], start=1):
            if word != lexicon.possessive_word:
                continue
            if index >= 2 and tokens[index - 2] in lexicon.naming:
                continue  # "叫豆豆的狗": a dog called Doudou, not Doudou's dog
            out.add((_word_key(tokens[index + 1], lexicon), who(tokens[index - 1])))
    return out


_ROLE_WORDS = 4
"""Words of a noun phrase read after a role word ("is a senior software engineer")."""


def _roles(tokens: list[str], names: frozenset[str], lexicon: Lexicon) -> set[str]:
    """What the user is: the last word of the noun phrase after a role word and an
    article right after the user ("User is a local farmer": ``farmer``; "User works
    as a nanny": ``nanny``; not "User's car is a red Mazda", "User wants it as a PDF")."""
    users = [i for i, word in enumerate(tokens) if word in lexicon.user_words or word in names]
    if not users:
        return set()
    at = users[0] + 1
    if tokens[at : at + 1] and tokens[at] in lexicon.roles:
        start = at + 1
    elif tokens[at + 1 : at + 2] and tokens[at + 1] in lexicon.roles_after_verb:
        start = at + 2
    else:
        return set()
    if tokens[start : start + 1] and tokens[start] in lexicon.articles:
        phrase = []
        for following in tokens[start + 1 : start + 1 + _ROLE_WORDS]:
            if following in lexicon.fillers or following in lexicon.relations:
                break
            phrase.append(following)
        if phrase:
            return {_word_key(phrase[-1], lexicon)}
    return set()


def _named_people(text: str, names: frozenset[str], lexicon: Lexicon) -> set[str]:
    """Capitalised words that are not the user's name (a first word only if it is not common)."""
    out: set[str] = set()
    for index, match in enumerate(_CAPITALISED.finditer(text)):
        word = match.group().removesuffix("'s").removesuffix("’s")
        if not word[:1].isupper():
            continue
        folded = word.casefold()
        if folded in names or folded in lexicon.fillers or folded in lexicon.time_words:
            continue
        if folded in lexicon.user_words or folded in lexicon.currencies:
            continue
        if index == 0 and folded in lexicon.common_first_words:
            continue
        out.add("@" + folded)
    return out


def _person(holder: str | None, own: FactShape, other: FactShape) -> bool:
    """Whether ``holder`` (of ``own``) is a person: the user, someone's relative, or a
    name the ``other`` memory writes as one ("Mark" in "User owes Mark"); not a
    thing a sentence opens with ("Sushi is the user's favourite food")."""
    if holder is None:
        return False
    people = own.lexicon.people | own.lexicon.user_words
    if holder == "user" or holder in people or "'s " in holder or f"@{holder}" in other.people:
        return True
    # Without capitals to tell a name by: one the other memory names after its start.
    return not own.lexicon.spaced and holder in other.text[1:]


def _other_relation(a: FactShape, b: FactShape) -> bool:
    """Whether a preposition changes what one of the two says: one only one side
    has ("lives near the airport", "lives at the airport"), or two different ones
    ("works for", "works with"); a loose one ("for") counts only against another."""
    loose = a.lexicon.loose_relations | b.lexicon.loose_relations
    if (a.relations ^ b.relations) - loose:
        return True
    return bool(a.relations and b.relations and a.relations != b.relations)


def _other_role(a: FactShape, b: FactShape) -> bool:
    """Whether ``a`` says the user is what ``b`` names as someone else ("User works
    as a nanny", "User hired a nanny": ``b`` has a verb of its own for it)."""
    light = _light_verbs(a, b)
    return any(role in b.words and b.words - b.roles - light - {role} for role in a.roles - b.roles)


def blocker(a: FactShape, b: FactShape) -> str | None:
    """Why ``a`` and ``b`` cannot be the same fact, or ``None`` when nothing blocks it."""
    if a.negated != b.negated:
        return "negation"
    if a.numbers != b.numbers:
        return "numbers"
    if a.currencies != b.currencies:
        return "currency"
    if _other_holder(a, b):
        return "another person"
    # A named person counts when the other memory does not name them at all.
    people_a = {p for p in a.people if not (p.startswith("@") and p[1:] in b.words | b.lemmas)}
    people_b = {p for p in b.people if not (p.startswith("@") and p[1:] in a.words | a.lemmas)}
    if people_a != people_b:
        return "another person"
    if a.times != b.times:
        return "time"
    if _other_relation(a, b):
        return "another relation"  # "works for", "works with"; "under 10", "10"
    if (a.order or b.order) and a.order != b.order:
        return "comparison"  # "tea over coffee" against "coffee over tea"
    # The same verb in another tense: "lived" against "lives".
    if (a.past_lemmas - b.past_lemmas) & b.lemmas or (b.past_lemmas - a.past_lemmas) & a.lemmas:
        return "time"
    if _other_role(a, b) or _other_role(b, a):
        return "role"  # "works as a nanny", "hired a nanny"
    if a.activities & (b.words - b.verbs) or b.activities & (a.words - a.verbs):
        return "another word"  # "likes boxing", "likes boxes"
    return None


def _other_holder(a: FactShape, b: FactShape) -> bool:
    """Whether the two are about different people ("Mark owes User", "User owes
    Mark"), or name one thing of different owners ("User's manager is Dana",
    "User is Dana's manager")."""
    if (
        a.holder != b.holder
        and _person(a.holder, a, b)
        and _person(b.holder, b, a)
        and not _relative_named(a, b)
        and not _relative_named(b, a)
    ):
        return True
    owners_a, owners_b = dict(a.owners), dict(b.owners)
    return any(owners_a[thing] != owners_b[thing] for thing in owners_a.keys() & owners_b.keys())


def _relative_named(a: FactShape, b: FactShape) -> bool:
    """Whether ``a`` is about someone of ``b``'s holder whom ``b`` names too: "User's
    daughter is called Emma" and "User has a daughter named Emma" tell one fact."""
    if a.holder is None or b.holder is None:
        return False
    owner, _, relative = a.holder.partition("'s ")
    return owner == b.holder and bool(relative) and a.lexicon.stem(relative) in b.people


def kept_apart(a: FactShape, b: FactShape) -> str | None:
    """Why ``a`` and ``b`` must stay two memories whatever else reads them as one
    (a model, a similarity), or ``None``.

    What :func:`blocker` names, and three more: another verb ("wants a dog",
    "has a dog"; "wants to live in Hangzhou", "lives in Hangzhou"; a word of
    its own on each side, one written as a verb: "likes reading science
    fiction", "likes writing science fiction"), a detail on one side only
    ("likes tea", "likes green tea"), and nothing in common but the holder
    ("has a fever", "is feverish about football"), in a language the words
    read.
    """
    reason = blocker(a, b)
    if reason is not None:
        return reason
    only_a, only_b = a.words - b.words, b.words - a.words
    light = _light_verbs(a, b)
    if only_a & light and only_b & light:
        return "another verb"
    if (a.lexicon.wish in a.words) != (b.lexicon.wish in b.words):
        return "another verb"  # a wish is not the fact: "wants to live there", "lives there"
    own_a, own_b = only_a - light, only_b - light
    if bool(own_a) != bool(own_b):
        return "more detail"
    if own_a and (own_a & a.verbs or own_b & b.verbs):
        return "another verb"  # "is learning to play the cello", "teaches the cello"
    read = a.lexicon is not UNREAD and b.lexicon is not UNREAD
    if read and not (_named(a) & _named(b)) - light:
        return "nothing in common"
    return None


def _named(shape: FactShape) -> frozenset[str]:
    """What a memory names: its content words, people and values."""
    return shape.words | shape.people | shape.numbers


def _light_verbs(a: FactShape, b: FactShape) -> frozenset[str]:
    """Verbs that add little to what a memory says ("works as an engineer" is "is
    an engineer"): one side may have one the other lacks, but two different ones
    ("wants a dog", "has a dog") are two facts."""
    return a.lexicon.light_verbs | b.lexicon.light_verbs


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two sets of content words."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def same_fact(
    a: FactShape,
    b: FactShape,
    *,
    similarity: float | None = None,
    rule: SameFactRule = DEFAULT_SAME_FACT_RULE,
) -> bool:
    """Whether ``a`` and ``b`` state the same fact (see the module docstring).

    Args:
        a: One memory's shape.
        b: The other's.
        similarity: The cosine similarity of their embeddings, when at hand.
        rule: The thresholds.
    """
    if kept_apart(a, b) is not None:
        return False
    # The words alone never merge a swap ("dark mode", "light mode"): a shared
    # majority of words says nothing about the one that differs.
    light = _light_verbs(a, b)
    swapped = bool(a.words - b.words - light) and bool(b.words - a.words - light)
    # Where both say what the user is or name the same amounts, a light verb one
    # side adds is no word of its own ("works as a nurse", "is a nurse"; "pays
    # $1500 rent a month", "monthly rent is $1500"); elsewhere it may be ("has a
    # cold", "is cold"). Two different ones were kept apart above.
    same_role = bool(a.roles) and a.roles == b.roles
    added = (
        (a.words ^ b.words) & light
        if same_role or (a.numbers and a.numbers == b.numbers)
        else set()
    )
    if not swapped and overlap(a.words - added, b.words - added) >= rule.lexical:
        return True
    return (
        similarity is not None
        and similarity >= rule.cosine
        and overlap(a.words - light, b.words - light) >= rule.with_vectors
    )


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The cosine similarity of two vectors, ``None`` when either is empty or zero."""
    if len(a) != len(b) or not a:
        return None
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else None


async def first_repeat(
    shape: FactShape,
    others: Sequence[FactShape],
    *,
    similarities: Callable[[list[int]], Awaitable[Sequence[float | None] | None]] | None = None,
    rule: SameFactRule = DEFAULT_SAME_FACT_RULE,
) -> int | None:
    """Where ``others`` first state ``shape``'s fact: the one place that decides a repeat.

    The words decide first (:func:`same_fact`). The pairs they leave open, those
    that would be the same fact were their embeddings alike, are then decided
    with ``similarities(indices)``, when given: the cosine similarity of
    ``shape``'s embedding with each of those ``others`` (``None`` for one, or
    for all, when there is none at hand). Only those pairs need embedding.

    Returns:
        The index of the first of ``others`` stating the same fact, or ``None``.
    """
    open_pairs = [
        i for i, other in enumerate(others) if same_fact(shape, other, similarity=1.0, rule=rule)
    ]
    for i in open_pairs:
        if same_fact(shape, others[i], rule=rule):
            return i  # the words show it: nothing to embed
    found = await similarities(open_pairs) if similarities is not None and open_pairs else None
    if found is None:
        return None
    for i, similarity in zip(open_pairs, found, strict=True):
        if similarity is not None and same_fact(shape, others[i], similarity=similarity, rule=rule):
            return i
    return None
