"""The memory note: what retrieved memories look like in the agent's context,
and where the note goes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentscope.message import AssistantMsg, HintBlock, Msg

if TYPE_CHECKING:
    from ._backend import MemoryHit

__all__ = [
    "DEFAULT_MEMORY_SECTION_HEADER",
    "DEFAULT_MEMORY_SECTION_INTRO",
    "NOTE_MARKER",
    "is_memory_note",
    "place_note",
    "render_note",
]

DEFAULT_MEMORY_SECTION_HEADER = "## Relevant memories from past conversations"
DEFAULT_MEMORY_SECTION_INTRO = (
    "The following memories about the user may be relevant. "
    "Use them only if they are pertinent to the current request."
)

NOTE_MARKER = "agentscope_mem0.memory_note"
"""Key set in a note's ``Msg.metadata``; survives saving and loading the state."""

NOTE_NAME = "memory"


def render_note(hits: Sequence[MemoryHit], *, header: str, intro: str) -> Msg | None:
    """The note for ``hits``, or ``None`` when there is nothing to show."""
    lines = [f"- {hit.memory}" for hit in hits]
    if not lines:
        return None
    text = "\n".join([header, intro, *lines])
    return AssistantMsg(
        name=NOTE_NAME,
        content=[HintBlock(hint=text, source=NOTE_NAME)],
        metadata={NOTE_MARKER: True},
    )


def is_memory_note(msg: Msg) -> bool:
    """Whether ``msg`` is a note this package placed."""
    return bool(msg.metadata.get(NOTE_MARKER))


def place_note(context: list[Msg], note: Msg | None, *, replace: bool = True) -> None:
    """Put ``note`` right after the newest user message in ``context``.

    Args:
        context: The agent's ``state.context``, changed in place.
        note: The new note; ``None`` only removes old ones.
        replace: Remove this package's earlier notes first (the default), so
            at most one note is in context at a time.
    """
    if replace:
        context[:] = [msg for msg in context if not is_memory_note(msg)]
    if note is None:
        return
    position = len(context)
    for index in range(len(context) - 1, -1, -1):
        if context[index].role == "user":
            position = index + 1
            break
    context.insert(position, note)
