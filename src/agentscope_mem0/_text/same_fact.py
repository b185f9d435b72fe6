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

import math
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .lexicon import CJK_NEGATIONS, CJK_RUN, UNREAD, WORD, Lexicon, fold, lexicon_for

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


_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
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


def fact_shape(text: str, names: frozenset[str] = frozenset()) -> FactShape:
    """The shape of ``text`` for :func:`same_fact`; ``names`` name the user (:func:`user_names`)."""
    plain = unicodedata.normalize("NFKC", text).replace("’", "'")
    folded = fold(text)
    lexicon = lexicon_for(plain) or UNREAD
    numbers = set(_NUMBER.findall(folded))
    words: set[str] = set()
    people: set[str] = set()
    times: set[str] = set()
    lemmas: set[str] = set()
    past_lemmas: set[str] = set()
    verbs: set[str] = set()
    sequence: list[str] = []
    negated = False
    for run in CJK_RUN.findall(folded):
        negated = negated or any(char in CJK_NEGATIONS for char in run)
        words.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    tokens = WORD.findall(CJK_RUN.sub(" ", folded))
    for index, word in enumerate(tokens):
        base = word.removesuffix("'s")
        if base in names:
            continue
        if lexicon.denies(base) or base in lexicon.opposites:
            negated = True
            continue
        if base in lexicon.numbers:
            numbers.add(lexicon.numbers[base])
            continue
        lemma = lexicon.stem(base)
        if base in lexicon.people or base in lexicon.animals:
            people.add(lemma)
            sequence.append(lemma)
            continue
        if base in lexicon.time_words:
            times.add(lemma)
            if lexicon.is_past(base):
                times.add("past")  # "planned" is not "plans": the stem folds them
            continue
        if base in lexicon.past_auxiliaries:
            times.add("past")
            continue
        if base in lexicon.fillers or base.isdigit():
            continue
        lemmas.add(lemma)
        if lexicon.is_past(base):
            past_lemmas.add(lemma)
        word_key = lexicon.synonyms.get(base) or lexicon.synonyms.get(lemma, lemma)
        words.add(word_key)
        sequence.append(word_key)
        if lexicon.is_verb_form(base) or (index and tokens[index - 1] in lexicon.verb_markers):
            verbs.add(word_key)
    people.update(_named_people(plain, names, lexicon))
    return FactShape(
        words=frozenset(words),
        numbers=frozenset(numbers),
        negated=negated,
        people=frozenset(people),
        times=frozenset(times),
        order=tuple(sequence) if lexicon.comparing.intersection(tokens) else None,
        lemmas=frozenset(lemmas),
        past_lemmas=frozenset(past_lemmas),
        verbs=frozenset(verbs),
        lexicon=lexicon,
    )


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
        if index == 0 and folded in lexicon.common_first_words:
            continue
        out.add("@" + folded)
    return out


def blocker(a: FactShape, b: FactShape) -> str | None:
    """Why ``a`` and ``b`` cannot be the same fact, or ``None`` when nothing blocks it."""
    if a.negated != b.negated:
        return "negation"
    if a.numbers != b.numbers:
        return "numbers"
    # A named person counts when the other memory does not name them at all.
    people_a = {p for p in a.people if not (p.startswith("@") and p[1:] in b.words | b.lemmas)}
    people_b = {p for p in b.people if not (p.startswith("@") and p[1:] in a.words | a.lemmas)}
    if people_a != people_b:
        return "another person"
    if a.times != b.times:
        return "time"
    if (a.order or b.order) and a.order != b.order:
        return "comparison"  # "tea over coffee" against "coffee over tea"
    # The same verb in another tense: "lived" against "lives".
    if (a.past_lemmas - b.past_lemmas) & b.lemmas or (b.past_lemmas - a.past_lemmas) & a.lemmas:
        return "time"
    return None


def kept_apart(a: FactShape, b: FactShape) -> str | None:
    """Why ``a`` and ``b`` must stay two memories whatever else reads them as one
    (a model, a similarity), or ``None``.

    What :func:`blocker` names, and two more: another verb ("wants a dog",
    "has a dog"; "wants to live in Hangzhou", "lives in Hangzhou"; a word of
    its own on each side, one written as a verb: "likes reading science
    fiction", "likes writing science fiction") and a detail on one side only
    ("likes tea", "likes green tea").
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
    return None


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
    if not swapped and overlap(a.words, b.words) >= rule.lexical:
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
