"""An exchange as mem0's ``add`` writes it out, and the user's words of it."""

from __future__ import annotations

__all__ = ["users_words"]

_ROLES = ("user: ", "assistant: ", "system: ")


def users_words(exchange: str) -> str:
    """What the user said in an exchange as mem0's ``add`` reads it, or the text
    itself when it is no such exchange.

    mem0 2.2's ``add`` looks up the memories a write may touch with the whole
    exchange as its query (``"user: ...\\nassistant: ...\\n"``). The memories
    are what the user said, so the user's lines find them; the assistant's
    answer, often many times longer, only costs: read whole it made that lookup
    the embedder's costliest call of a turn, and it pulls in memories of what
    the assistant talked about. A text with no user line, or nothing but
    user lines, is returned as it is.
    """
    if not exchange.startswith(_ROLES):
        return exchange
    kept: list[str] = []
    keeping = dropped = False
    for line in exchange.splitlines():
        if line.startswith(_ROLES):
            keeping = line.startswith("user: ")
            dropped = dropped or not keeping
        if keeping:
            kept.append(line)
    return "\n".join(kept) if kept and dropped else exchange
