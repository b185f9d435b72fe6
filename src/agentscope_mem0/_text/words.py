"""The words of a memory, as the same-fact rule (:mod:`.same_fact`) reads them.

Words are runs of letters and digits (an apostrophe inside kept); a plural or
possessive ending does not make another word. Chinese, Japanese and Korean
text has no spaces: its runs are read as overlapping character pairs, and a
negating character among them negates the memory.
"""

from __future__ import annotations

import re

__all__ = ["CJK_RUN", "NEGATION_WORDS", "WORD", "stem"]

WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

_NEGATIONS = (
    "not no never none nobody nothing nor neither without cannot dislike dislikes disliked "
    "不 没 沒 别 別 無 无 非 않 안 못"
)
NEGATION_WORDS = frozenset(_NEGATIONS.split())


def stem(word: str) -> str:
    """``word`` without a possessive or plural ending."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
