"""An offline keyword (BM25) encoder for mem0's hybrid search on Qdrant.

mem0 2.2's Qdrant store keeps a sparse ``"bm25"`` vector beside each dense
vector and adds a keyword score to the semantic one at search time. Qdrant
applies the IDF part of BM25 itself (the slot is created with
``Modifier.IDF``); the encoder supplies the term-frequency part. mem0 loads
fastembed's ``Qdrant/bm25`` model for that, which downloads on first use, so
offline it either stalls or silently searches by meaning only.

:class:`KeywordEncoder` does the same job from the standard library and
numpy: tokenise, lowercase, drop English stop words, lightly stem, hash each
term to a stable 32-bit index and weight it with BM25's saturated term
frequency. Chinese and Japanese text is split into overlapping character
pairs. :func:`install_keyword_encoder` hands it to a mem0 Qdrant store.

Indices differ from fastembed's: a collection written with one encoder
should be searched with the same one.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ENGLISH_STOP_WORDS",
    "KeywordEncoder",
    "SparseTerms",
    "install_keyword_encoder",
]

logger = logging.getLogger(__name__)

_STOP_WORD_LIST = """
    a about above after again against all am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't down during each few for from further had hadn't
    has hasn't have haven't having he he'd he'll he's her here here's hers herself him
    himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    just let's me more most mustn't my myself no nor not now of off on once only or
    other ought our ours ourselves out over own same shan't she she'd she'll she's
    should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to
    too under until up very was wasn't we we'd we'll we're we've were weren't what
    what's when when's where where's which while who who's whom why why's will with
    won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
"""
ENGLISH_STOP_WORDS = frozenset(_STOP_WORD_LIST.split())
"""Function words that carry no keyword signal."""

# A word (letters, digits, inner apostrophes) or one CJK character; the
# characters are paired up afterwards.
_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
    r"|[^\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
    r"(?:['’][^\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)*"
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KEEP_DOUBLE = frozenset("lsz")
_VOWELS = frozenset("aeiouy")


def light_stem(word: str) -> str:
    """Strip common English inflections so that "hiking", "hikes" and "hiked" meet.

    A deliberately small stemmer: plural ``-s``/``-es``/``-ies``, ``-ing``,
    ``-ed``, a doubled final consonant, and a final ``-e``. Words of three
    letters or fewer, and words that are not plain ASCII letters, are kept.
    """
    if len(word) <= 3 or not (word.isascii() and word.isalpha()):
        return word
    stem = word
    if stem.endswith("ies"):
        stem = stem[:-3] + "y"
    elif stem.endswith("sses"):
        stem = stem[:-2]
    elif stem.endswith("s") and not stem.endswith(("ss", "us", "is")):
        stem = stem[:-1]
    elif stem.endswith("ing") and len(stem) >= 6 and _VOWELS & set(stem[:-3]):
        stem = _undouble(stem[:-3])
    elif (
        stem.endswith("ed")
        and not stem.endswith("eed")
        and len(stem) >= 5
        and _VOWELS & set(stem[:-2])
    ):
        stem = _undouble(stem[:-2])
    if stem.endswith("e") and len(stem) > 3:
        stem = stem[:-1]
    return stem


def _undouble(stem: str) -> str:
    if (
        len(stem) >= 3
        and stem[-1] == stem[-2]
        and stem[-1] not in _VOWELS
        and stem[-1] not in _KEEP_DOUBLE
    ):
        return stem[:-1]
    return stem


def term_index(term: str) -> int:
    """The stable sparse index of ``term``: CRC-32 of its UTF-8 bytes."""
    return zlib.crc32(term.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class SparseTerms:
    """One text's sparse vector, in the shape mem0 reads from fastembed."""

    indices: np.ndarray
    """Term indices, ``uint32``, unique and ascending."""

    values: np.ndarray
    """Term weights, ``float32``, aligned with ``indices``."""


class KeywordEncoder:
    """Turns text into BM25 term-frequency sparse vectors, offline.

    The IDF factor is left to Qdrant (the ``"bm25"`` slot's ``Modifier.IDF``),
    so a term's weight here is ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))``.

    mem0 2.2 encodes queries with the same call as stored texts and squashes
    the raw score with a sigmoid tuned for fastembed's scale, so the defaults
    follow fastembed's ``Qdrant/bm25`` (``k1=1.2``, ``b=0.75``, ``avg_len=256``).

    Args:
        k1: Term-frequency saturation.
        b: Length normalisation strength.
        avg_len: The document length (in terms) normalisation is relative to.
        stem: Apply :func:`light_stem` to English words.
        stop_words: Words to drop (lowercase).
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        avg_len: float = 256.0,
        stem: bool = True,
        stop_words: Iterable[str] = ENGLISH_STOP_WORDS,
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1 or avg_len <= 0:
            raise ValueError(
                f"need k1 >= 0, 0 <= b <= 1 and avg_len > 0; got k1={k1}, b={b}, avg_len={avg_len}"
            )
        self.k1 = float(k1)
        self.b = float(b)
        self.avg_len = float(avg_len)
        self.stem = stem
        self.stop_words = frozenset(w.lower() for w in stop_words)

    def tokenize(self, text: str) -> list[str]:
        """The terms of ``text``, in order: lowercased, stop words out, stemmed."""
        terms: list[str] = []
        run: list[str] = []
        for token in _TOKEN.findall(text.lower().replace("’", "'")):
            if _CJK.fullmatch(token):
                run.append(token)
                continue
            terms.extend(_pairs(run))
            run = []
            token = token.strip("'")
            if not token or token in self.stop_words:
                continue
            if "'" in token:
                # "caroline's" -> "caroline"; "don't" was caught as a stop word.
                token = token.split("'", 1)[0]
            terms.append(light_stem(token) if self.stem else token)
        terms.extend(_pairs(run))
        return terms

    def encode(self, text: str) -> SparseTerms:
        """The sparse vector of one text (empty when it has no terms)."""
        terms = self.tokenize(text)
        counts: Counter[int] = Counter(term_index(t) for t in terms)
        if not counts:
            return SparseTerms(np.zeros(0, np.uint32), np.zeros(0, np.float32))
        norm = self.k1 * (1.0 - self.b + self.b * len(terms) / self.avg_len)
        indices = np.fromiter(sorted(counts), dtype=np.uint32, count=len(counts))
        tf = np.array([counts[int(i)] for i in indices], dtype=np.float64)
        values = tf * (self.k1 + 1.0) / (tf + norm)
        return SparseTerms(indices, values.astype(np.float32))

    def embed(self, documents: str | Iterable[str], **kwargs: Any) -> Iterator[SparseTerms]:
        """Encode each document, as fastembed's ``SparseTextEmbedding.embed`` does.

        Args:
            documents: One text or many.
            **kwargs: Accepted for fastembed compatibility and ignored.

        Returns:
            An iterator of :class:`SparseTerms`, one per document, in order.
        """
        if isinstance(documents, str):
            documents = [documents]
        return (self.encode(str(d)) for d in documents)

    def query_embed(self, query: str | Iterable[str], **kwargs: Any) -> Iterator[SparseTerms]:
        """Same as :meth:`embed` (mem0 2.2 encodes queries with ``embed`` too)."""
        return self.embed(query, **kwargs)


def _pairs(run: list[str]) -> list[str]:
    """Overlapping character pairs of a CJK run (a lone character stays single)."""
    if len(run) <= 1:
        return list(run)
    return [run[i] + run[i + 1] for i in range(len(run) - 1)]


def install_keyword_encoder(target: Any, encoder: KeywordEncoder | None = None) -> bool:
    """Make mem0's Qdrant store use an offline keyword encoder, enabling hybrid search.

    Install it before the first memory is stored: memories stored without it
    have no keyword vector. ``AsyncMemory.reset()`` builds a new store object,
    so install again after a reset.

    Args:
        target: A mem0 ``Qdrant`` vector store, or a ``Memory``/``AsyncMemory``
            (its ``vector_store`` is used).
        encoder: The encoder; a default :class:`KeywordEncoder` otherwise.

    Returns:
        Whether keyword scoring is now active: ``False`` when the store is not
        mem0's Qdrant store (other stores do keyword search their own way), or
        when its collection predates mem0's ``"bm25"`` sparse slot.
    """
    store = getattr(target, "vector_store", target)
    if not hasattr(store, "_bm25_encoder") or not hasattr(store, "_get_bm25_encoder"):
        logger.debug(
            "%s has no BM25 encoder slot; keyword encoder not installed", type(store).__name__
        )
        return False
    # mem0 2.2.1 lazily loads fastembed into Qdrant._bm25_encoder; a preset value is used as is.
    store._bm25_encoder = encoder if encoder is not None else KeywordEncoder()
    if not getattr(store, "_has_bm25_slot", False):
        logger.warning(
            "collection %r has no 'bm25' sparse slot (created by mem0 before 2.x hybrid "
            "search); keyword scoring stays off until the collection is recreated",
            getattr(store, "collection_name", "?"),
        )
        return False
    return True
