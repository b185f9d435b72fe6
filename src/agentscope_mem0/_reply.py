"""One reply as the middleware sees it: its query and memory note before it
runs, and what it hands to the write queue when it finished (the user's
question and the agent's answer).

:func:`query_text` is the reply's new user text, searched for the note
(:func:`~._recall.recall.retrieve`). :class:`ReplyWatch` places the note when
the reply starts and notes whether the reply stopped to wait (a confirmation,
an external tool) and what the agent answered. A reply that stops has no answer
yet: its question is parked in the agent's state and written with the answer
once the resumed reply completes. In mode ``both``, a reply whose user words
the ``add_memory`` tool already stored is not written again
(:func:`told_beyond`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentscope.event import (
    ExternalExecutionResultEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from agentscope.message import Msg
from agentscope.types import ReplyFinishedReason

from ._profile.record import PROFILE_CLOSE, PROFILE_OPEN
from ._recall.note import MEMORIES_CLOSE, MEMORIES_OPEN, place_note
from ._text.grounding import content_words
from ._tools.long_term import STORED_THIS_REPLY
from ._working.manager import WORKING_CLOSE, WORKING_OPEN

__all__ = ["ReplyWatch", "query_text", "told_beyond"]

_RESUMPTIONS = (UserConfirmResultEvent, ExternalExecutionResultEvent)
_PARKED = "parked_query"


class ReplyWatch:
    """Watches the items of one reply go by.

    Args:
        query: The reply's new user text, or ``None`` when it has none (a
            resumption event, empty input) or nothing is recalled
            (``agent_control``): then the context's notes are left alone.
        note: The memory note to place, or ``None`` (nothing recalled for
            ``query``) to only remove the previous one.
        accumulate: Keep the previous notes (``accumulate_notes``).
        header: The middleware's ``memory_section_header``, which marks
            the built-in's notes.
    """

    def __init__(
        self, query: str | None, note: Msg | None, *, accumulate: bool, header: str
    ) -> None:
        self._accumulate = accumulate
        self._header = header
        self.query = query
        self._note = note
        self._placed = query is None
        self.parked = False
        """The reply stopped to wait for the user or an external tool."""
        self.final: Msg | None = None
        """The last assistant message of the reply."""

    def see(self, item: Any, context: list[Msg]) -> None:
        """Look at one item; at ``ReplyStartEvent`` the note goes into ``context``."""
        if not self._placed and isinstance(item, ReplyStartEvent):
            place_note(
                context,
                self._note,
                replace=not self._accumulate,
                builtin_header=self._header,
            )
            self._placed = True
        if isinstance(item, RequireUserConfirmEvent | RequireExternalExecutionEvent):
            self.parked = True
        if isinstance(item, Msg) and item.role == "assistant":
            self.final = item

    def exchange(self, entry: dict[str, Any], inputs: Any) -> list[dict[str, str]] | None:
        """The messages to write once the reply ended, or ``None`` when there is
        nothing to write.

        Args:
            entry: The middleware's entry in the agent's ``middle_context``; a
                parked question is kept there between the two halves of a reply.
            inputs: The reply's ``inputs``.
        """
        query = self.query
        if query is None and isinstance(inputs, _RESUMPTIONS):
            query = entry.get(_PARKED)
        if query is None:
            return None
        if self.parked:
            entry[_PARKED] = query
            return None
        entry.pop(_PARKED, None)
        stored = entry.pop(STORED_THIS_REPLY, None)
        if stored and not told_beyond(query, stored):
            return None  # add_memory stored all of it: mem0 is not asked twice
        final = self.final
        if final is None or final.finished_reason not in (None, ReplyFinishedReason.COMPLETED):
            return None
        answer = final.get_text_content()
        if not answer:
            return None
        answer = without_own_text(answer, self._header)
        user = {"role": "user", "content": query}
        return [user, {"role": "assistant", "content": answer}] if answer else [user]


_ASIDES = frozenset(content_words("remember please hi hello hey thanks ok okay"))
"""Words a user wraps a fact in that tell nothing about the user (as stems)."""


def told_beyond(said: str, stored: Iterable[str]) -> bool:
    """Whether the user's words ``said`` hold more than the facts ``add_memory``
    ``stored`` during the reply: a content word (:func:`~._text.grounding.content_words`)
    that none of them has, asides ("remember", "please") apart.

    A reply's write is left out only when it could add nothing: one word the
    tool did not store ("... and I have a cat") and the whole exchange is
    written, as in any other reply (the repeat is then merged by the time
    judgement).
    """
    kept = set().union(*(content_words(fact) for fact in stored))
    return bool(content_words(said) - _ASIDES - kept)


_OWN_BLOCKS = [
    re.compile(rf"{re.escape(opening)}.*?(?:{re.escape(closing)}|\Z)", re.S)
    for opening, closing in (
        (MEMORIES_OPEN, MEMORIES_CLOSE),
        (WORKING_OPEN, WORKING_CLOSE),
        (PROFILE_OPEN, PROFILE_CLOSE),
    )
]


def without_own_text(answer: str, header: str) -> str:
    """``answer`` without what this package put in front of the model and the
    model repeated: the memory note's, the profile's and working memory's blocks (to the end
    when a block is not closed) and the note's header. What the model read
    from memory must not be written back as something said.
    """
    for block in _OWN_BLOCKS:
        answer = block.sub("", answer)
    return answer.replace(header, "").strip() if header else answer.strip()


# -- before the reply: what it recalls ----------------------------------------------


def query_text(inputs: Any) -> str | None:
    """The text of the new user message(s) of a reply, or ``None`` when there is none.

    Resumption events (a confirmation or an external tool result) and empty
    inputs carry no new user text.
    """
    if inputs is None or isinstance(inputs, _RESUMPTIONS):
        return None
    messages = inputs if isinstance(inputs, list) else [inputs]
    texts = [
        text
        for msg in messages
        if isinstance(msg, Msg) and msg.role == "user"
        for text in [msg.get_text_content()]
        if text and text.strip()
    ]
    return "\n".join(texts) if texts else None
