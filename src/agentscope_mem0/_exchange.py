"""What a finished reply hands to the write queue: the user's question and the
agent's answer, once the reply really finished.

A reply that stops to wait for a confirmation or an external tool has no
answer yet: its question is parked in the agent's state and written with the
answer once the resumed reply completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentscope.event import ExternalExecutionResultEvent, UserConfirmResultEvent
from agentscope.types import ReplyFinishedReason

if TYPE_CHECKING:
    from agentscope.message import Msg

__all__ = ["finished_exchange"]

_RESUMPTIONS = (UserConfirmResultEvent, ExternalExecutionResultEvent)
_PARKED = "parked_query"


def finished_exchange(
    entry: dict[str, Any],
    inputs: Any,
    query: str | None,
    final: Msg | None,
    *,
    parked: bool,
) -> list[dict[str, str]] | None:
    """The messages to write for one reply, or ``None`` when there is nothing to write.

    Args:
        entry: The middleware's entry in the agent's ``middle_context``; a
            parked question is kept there between the two halves of a reply.
        inputs: The reply's ``inputs``.
        query: The new user text of the reply (``None`` for a resumption).
        final: The last assistant message the reply yielded.
        parked: The reply stopped to wait for the user or an external tool.
    """
    if query is None and isinstance(inputs, _RESUMPTIONS):
        query = entry.get(_PARKED)
    if query is None:
        return None
    if parked:
        entry[_PARKED] = query
        return None
    entry.pop(_PARKED, None)
    if final is None or final.finished_reason not in (None, ReplyFinishedReason.COMPLETED):
        return None
    answer = final.get_text_content()
    if not answer:
        return None
    return [
        {"role": "user", "content": query},
        {"role": "assistant", "content": answer},
    ]
