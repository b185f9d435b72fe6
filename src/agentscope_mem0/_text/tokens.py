"""A tokenizer-free estimate of how many tokens a text costs a chat model.

``len(text) / 4`` is close for English and far off elsewhere: one Chinese,
Japanese or Korean character is about one token, not a quarter of one. The
estimate here counts by kind of text and leans high, so a budget computed with
it holds for the common BPE vocabularies (checked against cl100k and o200k in
``docs/benchmarks/note-recall.md``).
"""

from __future__ import annotations

import math
import re

__all__ = ["estimate_tokens", "prefix_within"]

# One alternative per kind of text; the first that matches at a position wins.
_PIECES = re.compile(
    r"(?P<cjk>[\u2e80-\u2fff\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff])"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<digits>[0-9]+)"
    r"|(?P<newlines>\n+)"
    r"|(?P<space>[ \t\r\f\v]+)"
    r"|(?P<letters>[^\W\d_]+)"
    r"|(?P<other>.)",
    re.S,
)

# Tuned on 600 LoCoMo turns and a CJK sample: about 15 % above cl100k for
# English and within a few percent of it for Chinese, Japanese and Korean.
_SHORT_WORD = 7
_LONG_WORD_CHARS = 4.0
_CJK_PER_CHAR = 1.3
_DIGITS_PER_TOKEN = 3
_OTHER_LETTER_CHARS = 2.0


def estimate_tokens(text: str) -> int:
    """Roughly how many tokens ``text`` is, erring high.

    A CJK character counts 1.3 (cl100k spends 1.1-1.4 on common ones, o200k
    about 0.8), an ASCII word one token up to seven letters and a token per
    four letters beyond, digits one per three, other scripts (Cyrillic, Greek,
    accented words...) one per two letters, and every other symbol one.

    Args:
        text: Any text.

    Returns:
        The estimate, 0 for an empty text.
    """
    total = 0.0
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        size = match.end() - match.start()
        if kind == "cjk":
            total += _CJK_PER_CHAR
        elif kind == "word":
            total += 1.0 if size <= _SHORT_WORD else math.ceil(size / _LONG_WORD_CHARS)
        elif kind == "digits":
            total += math.ceil(size / _DIGITS_PER_TOKEN)
        elif kind == "newlines":
            total += 1.0
        elif kind == "letters":
            total += max(1.0, math.ceil(size / _OTHER_LETTER_CHARS))
        elif kind == "other":
            # Emoji and other astral symbols take several byte-level tokens.
            total += 2.0 if ord(match.group()) > 0xFFFF else 1.0
        # Spaces ride along with the following word in BPE vocabularies.
    return math.ceil(total)


def prefix_within(text: str, max_tokens: int, *, suffix: str = "") -> str:
    """The longest prefix of ``text`` that, followed by ``suffix``, fits ``max_tokens``.

    The cut never leaves half of an escape behind: a prefix ending in ``"&l"`` or
    ``"&gt"`` (the start of ``&lt;``/``&gt;``) is backed up to before the ``&``.
    """
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle] + suffix) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    cut = text[:low]
    amp = cut.rfind("&", max(0, low - 3))
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut
