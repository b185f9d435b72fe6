"""The JSON object in a chat model's answer, found where that is unambiguous.

Small models wrap the JSON they were asked for: a code fence, a sentence
before it, a remark after it. :func:`find_json_object` takes the one object
out of such an answer and refuses an answer that holds two candidate objects
(which one was meant is a guess). It reads each character a bounded number of
times, so a hostile or runaway answer costs linear time: it is safe to call on
the event loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_ANSWER_CHARS", "find_json_object"]

MAX_ANSWER_CHARS = 200_000
"""Answers longer than this are not searched for JSON at all."""

_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.S)
_STARTS_TRIED = 4
"""Opening braces tried as the start of the object before giving up."""

_DECODER = json.JSONDecoder(strict=False)


def find_json_object(answer: Any) -> dict[str, Any] | None:
    """The one JSON object in ``answer``, or ``None`` when there is none or several.

    Accepted: the object alone; inside one code fence; with text before or
    after it (a brace in that text is tolerated as long as it does not start a
    second object). Refused: two fences or two objects, an array, a truncated
    object, a whole answer that is JSON but not an object, anything over
    :data:`MAX_ANSWER_CHARS`.
    """
    if not isinstance(answer, str) or len(answer) > MAX_ANSWER_CHARS:
        return None
    text = _without_thinking(answer).strip()
    try:
        whole = _DECODER.decode(text)
    except (ValueError, RecursionError):
        pass
    else:  # valid JSON as a whole is what was meant, object or not
        return whole if isinstance(whole, dict) else None
    fences = _FENCED.findall(text)
    if len(fences) > 1:
        return None
    if len(fences) == 1:
        return _only_object(fences[0])
    return _only_object(text)


def _without_thinking(text: str) -> str:
    """``text`` without its closed ``<think>...</think>`` blocks, in one pass.

    (A lazy regex rescans the rest of the answer from every unclosed ``<think>``:
    quadratic on an answer that repeats it.)
    """
    kept, position = [], 0
    while (start := text.find("<think>", position)) >= 0:
        end = text.find("</think>", start)
        if end < 0:
            break
        kept.append(text[position:start])
        position = end + len("</think>")
    kept.append(text[position:])
    return "".join(kept)


def _only_object(text: str) -> dict[str, Any] | None:
    """The object starting at one of the first few ``{`` with no other object after it."""
    start = text.find("{")
    for _ in range(_STARTS_TRIED):
        if start < 0:
            return None
        found = _object_at(text, start)
        if found is not None:
            value, end = found
            nxt = text.find("{", end)
            if nxt >= 0 and _object_at(text, nxt) is not None:
                return None  # a second object: which one was meant is a guess
            return value
        start = text.find("{", start + 1)
    return None


def _object_at(text: str, start: int) -> tuple[dict[str, Any], int] | None:
    try:
        value, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return (value, end) if isinstance(value, dict) else None
