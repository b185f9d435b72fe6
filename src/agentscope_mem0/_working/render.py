"""Working memory cut to a token budget, with a marker saying so.

Escaping is :func:`agentscope_mem0._text.escape.escape_text` (multi-line mode):
working memory is Markdown or JSON, so its lines stay.
"""

from __future__ import annotations

from .._text.tokens import estimate_tokens, prefix_within

__all__ = ["TRUNCATION_MARKER", "truncate_block"]

TRUNCATION_MARKER = "[… working memory truncated here: about {hidden} more tokens not shown]"


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
        cut = prefix_within(lines[0], max_tokens - marker_room)
        kept = [cut]
        used = estimate_tokens(cut)
    hidden = max(1, total - used)
    return "\n".join([*kept, TRUNCATION_MARKER.format(hidden=hidden)])
