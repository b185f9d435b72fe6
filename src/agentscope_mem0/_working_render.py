"""Working memory as lines of the block: escaped, and cut to a token budget.

Unlike a memory in the note, working memory is multi-line (Markdown, JSON),
so line breaks stay; what is escaped is what could end the
``<working_memory>`` block early or disguise text: angle brackets (and their
full-width look-alikes), control characters, bidi overrides and the Unicode
line separators.
"""

from __future__ import annotations

import unicodedata

from ._tokens import estimate_tokens

__all__ = ["TRUNCATION_MARKER", "escape_block", "truncate_block"]

TRUNCATION_MARKER = "[… working memory truncated here: about {hidden} more tokens not shown]"

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SEPARATORS = frozenset("\u2028\u2029\x85\r")


def escape_block(text: str) -> str:
    """``text`` safe to show inside the block, its lines kept."""
    out: list[str] = []
    for char in text:
        if char in _BIDI:
            continue
        if char in _SEPARATORS:
            out.append("\n")
            continue
        plain = unicodedata.normalize("NFKC", char) if ord(char) > 0x7F else char
        if plain == "<":
            out.append("&lt;")
        elif plain == ">":
            out.append("&gt;")
        elif char not in "\n\t" and unicodedata.category(char) == "Cc":
            continue
        else:
            out.append(char)
    return "".join(out)


def truncate_block(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens``: whole lines from the top, then a marker.

    The marker says how much was left out, so the model knows the memory goes
    on and can rewrite it shorter.
    """
    total = estimate_tokens(text)
    if total <= max_tokens:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    used = 0
    marker_room = estimate_tokens(TRUNCATION_MARKER.format(hidden=total)) + 1
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > max_tokens - marker_room:
            break
        kept.append(line)
        used += cost
    if not kept and lines:
        # One long first line: keep as much of it as fits.
        first, room = lines[0], max_tokens - marker_room
        low, high = 0, len(first)
        while low < high:
            middle = (low + high + 1) // 2
            if estimate_tokens(first[:middle]) <= room:
                low = middle
            else:
                high = middle - 1
        cut = first[:low]
        amp = cut.rfind("&", max(0, low - 4))
        if amp != -1 and ";" not in cut[amp:]:
            cut = cut[:amp]
        kept = [cut]
        used = estimate_tokens(cut)
    hidden = max(1, total - used)
    return "\n".join([*kept, TRUNCATION_MARKER.format(hidden=hidden)])
