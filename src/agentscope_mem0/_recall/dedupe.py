"""A turn's memories without repeats: each fact once, however it was worded.

The read path runs this once per turn (:func:`~.recall.retrieve`; a profile
is deduplicated when it is read, then cached), and ``search_memory`` over its
keywords' results. Two hits are one memory when

* they have the same :func:`memory_key` (case, punctuation, a leading date);
* their words show the same fact (:func:`~.same_fact.same_fact`; the user's
  own name, from the user id or a "name is" memory, counts as "the user"); or
* the words leave it open and their embeddings are as close as the
  same-fact rule asks (:func:`dedupe_by_meaning`): the few texts of such pairs
  are embedded with the client's own embedder (the query cache keeps what was
  embedded before) within what is left of the reply's search budget; past
  it, the words decide alone and the reply does not wait.

The kept memory has the text and id of the newest repeat, the newest date and
the best score, so a fact said again recently still reads as recent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._text.lexicon import ENGLISH, any_of, segmenter_ready
from .._text.same_fact import FactShape, as_user, cosine, fact_shape, same_fact, user_names

if TYPE_CHECKING:
    from .._memories.hit import MemoryHit

__all__ = ["Embed", "dedupe_by_meaning", "dedupe_hits", "memory_key"]

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], Awaitable[list[list[float]] | None]]
"""``embed(texts) -> vectors`` (``None`` without an embedder): ``Mem0Backend.embed``."""

_MONTH = rf"(?:{any_of(*ENGLISH.months, *ENGLISH.month_abbreviations)})\.?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_CORE_DATE = (
    r"(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}"
    r"(?:[ t]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}"
    rf"|{_DAY}\s+{_MONTH},?\s+\d{{4}}"
    rf"|{_MONTH}\s+{_DAY},?\s+\d{{4}}"
    rf"|{_MONTH}\s+\d{{4}}"
    r"|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?)"
)
_TIME = r"\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\b\.?)?"
_WEEKDAY = rf"(?:{any_of(*ENGLISH.weekdays, *ENGLISH.weekday_abbreviations)})\.?"
_JUNK = r"[\s\[\](){}<>*_|:,.\-–—]*"
# A leading date, possibly behind a weekday or a time ("1:56 pm on 8 May, 2023").
_LEADING_DATE = re.compile(
    rf"^{_JUNK}(?:(?:{_WEEKDAY}|{_TIME})[\s,]*(?:(?:on|at)\s+)?)*"
    rf"(?:(?:on|at)\s+)?{_CORE_DATE}(?!\w)"
)
# A time or weekday alone only counts as part of a date prefix right after a date.
_TRAILING_TIME = re.compile(rf"^{_JUNK}(?:at\s+)?(?:{_TIME}|{_WEEKDAY})(?!\w)")
_NOT_WORD = re.compile(r"[\W_]+")


# A user's memories come back turn after turn: each one's key is worked out once
# (12 us a memory on the event loop).
@functools.lru_cache(maxsize=4096)
def memory_key(text: str) -> str:
    """What two memories must share to count as the same memory.

    Case, whitespace, punctuation and leading dates or times ("2024-05-08:",
    "[May 8, 2023]", "1:56 pm on 8 May, 2023 -") do not matter.
    """
    key = unicodedata.normalize("NFKC", text).casefold()
    patterns: tuple[re.Pattern[str], ...] = (_LEADING_DATE,)
    for _ in range(8):  # a few stacked prefixes: "[Mon] 8 May 2023, 1:56 pm:"
        for pattern in patterns:
            stripped = pattern.sub("", key, count=1)
            if stripped != key:
                key = stripped
                patterns = (_LEADING_DATE, _TRAILING_TIME)
                break
        else:
            break
    return _NOT_WORD.sub(" ", key).strip()


@dataclass
class _Kept:
    key: str
    shape: FactShape
    text: str
    """The text it was first seen with (what its vector, if any, is of)."""
    hit: MemoryHit


def _shapes(hits: Sequence[MemoryHit], user_id: str | None) -> list[FactShape]:
    names = user_names(user_id, [hit.memory for hit in hits])
    return [fact_shape(hit.memory, names) for hit in hits]


def dedupe_hits(
    hits: Iterable[MemoryHit],
    *,
    user_id: str | None = None,
    vectors: Mapping[str, Sequence[float]] | None = None,
) -> list[MemoryHit]:
    """``hits`` without repeats, in the order of each memory's first appearance.

    Args:
        hits: The memories, most important first.
        user_id: Whose memories: the parts of the id name the user.
        vectors: Embeddings by memory text, for the pairs the words leave open.
    """
    keyed = [(key, hit) for hit in hits if (key := memory_key(hit.memory))]
    shapes = _shapes([hit for _, hit in keyed], user_id)
    kept: list[_Kept] = []
    for (key, hit), shape in zip(keyed, shapes, strict=True):
        for entry in kept:
            if entry.key == key or _same(entry, shape, hit.memory, vectors):
                entry.hit = _merge(entry.hit, hit)
                break
        else:
            kept.append(_Kept(key, shape, hit.memory, hit))
    return [entry.hit for entry in kept]


def _same(
    entry: _Kept, shape: FactShape, text: str, vectors: Mapping[str, Sequence[float]] | None
) -> bool:
    if same_fact(entry.shape, shape):
        return True
    if not vectors or entry.text not in vectors or text not in vectors:
        return False
    similarity = cosine(vectors[entry.text], vectors[text])
    return similarity is not None and same_fact(entry.shape, shape, similarity=similarity)


def _open_texts(hits: Sequence[MemoryHit], user_id: str | None) -> list[str]:
    """Texts of the pairs whose words neither show nor rule out the same fact."""
    shapes = _shapes(hits, user_id)
    wanted: dict[str, None] = {}
    for i, j in itertools.combinations(range(len(hits)), 2):
        if same_fact(shapes[i], shapes[j], similarity=1.0):
            wanted.update(dict.fromkeys((hits[i].memory, hits[j].memory)))
    return list(wanted)


async def dedupe_by_meaning(
    hits: Iterable[MemoryHit],
    *,
    user_id: str | None,
    embed: Embed | None,
    budget: float | None,
) -> list[MemoryHit]:
    """:func:`dedupe_hits`, then the pairs the words leave open by their embeddings.

    Never raises and never takes much over ``budget`` seconds: an embedding
    that fails or is late leaves those pairs to the words.

    Args:
        hits: The memories, most important first.
        user_id: Whose memories.
        embed: Embeds texts (``None``: the words decide alone).
        budget: Seconds the embedding may take; ``None`` waits for it.
    """
    hits = list(hits)
    # The first Chinese memories a process reads load the segmenter (about a second).
    await segmenter_ready(hit.memory for hit in hits)
    unique = dedupe_hits(hits, user_id=user_id)
    if embed is None or len(unique) < 2 or (budget is not None and budget <= 0):
        return unique
    texts = _open_texts(unique, user_id)
    if not texts:
        return unique
    names = user_names(user_id, [hit.memory for hit in unique])
    try:
        found = await asyncio.wait_for(embed([as_user(t, names) for t in texts]), budget)
    except Exception as exc:  # a late embedding too: the words decided already
        logger.debug("the note's repeats were compared by words only: %r", exc)
        return unique
    if not found or len(found) != len(texts):
        return unique
    return dedupe_hits(unique, user_id=user_id, vectors=dict(zip(texts, found, strict=True)))


def _merge(first: MemoryHit, repeat: MemoryHit) -> MemoryHit:
    """One memory from two repeats: the newer one's text, the best score."""
    first_when, repeat_when = first.when, repeat.when
    newer = repeat_when is not None and (first_when is None or repeat_when > first_when)
    newest = repeat if newer else first
    scores = [s for s in (first.score, repeat.score) if s is not None]
    return dataclasses.replace(newest, score=max(scores) if scores else None)
