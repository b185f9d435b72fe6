"""When two memories say the same thing in other words.

mem0 keeps "User lives in Hangzhou." and "The user lives in Hangzhou." as two
memories (it only drops exact-hash repeats), and showing both wastes the
note's budget. This module compares memories by their content words: case,
punctuation, articles, the word "user" and plural or possessive endings do
not count. It is deliberately strict, because merging two memories that
differ in meaning would hide one of them:

* numbers must be the same ("2 cats" is not "3 cats");
* negation must be the same ("likes tea" is not "does not like tea");
* the content words must overlap by at least :data:`NEAR_DUPLICATE_JACCARD`
  (Jaccard similarity of the two word sets).

Chinese, Japanese and Korean text has no spaces: runs of those characters
count as overlapping character pairs.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "CJK_RUN",
    "NEAR_DUPLICATE_JACCARD",
    "NEGATION_WORDS",
    "WORD",
    "MemoryWords",
    "are_near_duplicates",
    "memory_words",
    "stem",
]

NEAR_DUPLICATE_JACCARD = 0.8
"""Share of content words two memories must have in common to be merged."""

WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that do not change what a memory says about the user.
_FILLER = _words(
    "a an the user user's users they their he she his her him "
    "is are was were be been being am that this also currently"
)
NEGATION_WORDS = _words(
    "not no never none nobody nothing nor neither without cannot dislike dislikes disliked "
    "不 没 沒 别 別 無 无 非 않 안 못"
)


@dataclass(frozen=True, slots=True)
class MemoryWords:
    """What a memory's comparison looks at."""

    words: frozenset[str]
    numbers: frozenset[str]
    negated: bool


def stem(word: str) -> str:
    """``word`` without a possessive or plural ending."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def memory_words(text: str) -> MemoryWords:
    """The content words, numbers and negation of ``text``."""
    plain = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    numbers = frozenset(_NUMBER.findall(plain))
    words: set[str] = set()
    negated = False
    for run in CJK_RUN.findall(plain):
        negated = negated or any(char in NEGATION_WORDS for char in run)
        words.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    for word in WORD.findall(CJK_RUN.sub(" ", plain)):
        if word in NEGATION_WORDS or word.endswith("n't"):
            negated = True
        elif word not in _FILLER and not word.isdigit():
            words.add(stem(word))
    return MemoryWords(frozenset(words), numbers, negated)


def are_near_duplicates(a: MemoryWords, b: MemoryWords) -> bool:
    """Whether two memories say the same thing (see the module docstring)."""
    if a.numbers != b.numbers or a.negated != b.negated:
        return False
    if not a.words or not b.words:
        return a.words == b.words and bool(a.numbers)
    shared = len(a.words & b.words)
    return shared / len(a.words | b.words) >= NEAR_DUPLICATE_JACCARD
