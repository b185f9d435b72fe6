"""What this package's call of mem0 tells the adapters mem0 calls back into.

mem0 passes nothing of ours through its calls: ``AsyncMemory.add`` and
``search`` run the chat-model and embedder adapters, and the watched store
methods, in worker threads with mem0's own arguments. What those need to know
about the call that started them travels in one context variable holding a
:class:`Mem0Call`: ``asyncio.to_thread`` and the lanes (:mod:`.loops`) copy
the context into the threads and loops that run mem0's steps. Each layer adds
what it knows with :func:`calling` (the backend the extraction style and the
said time, the lanes the lane, the writer the add watch), and the readers take
:func:`current`.

The vector stores sit below this package's door and are told about the search
in progress the same way, through :mod:`.._vectors.search_terms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .._observe.usage import CallTokens, Kind, TokenMeter
from .._text.grounding import Grounding, GroundingReading

__all__ = [
    "AddSeen",
    "ExtractionCheck",
    "ExtractionStyle",
    "Lane",
    "Mem0Call",
    "WriteTime",
    "caller_loop_scope",
    "calling",
    "current",
    "metered",
    "no_reply_waits",
    "record_call",
    "reply_waits",
]

Lane = Literal["read", "write"]
ExtractionStyle = Literal["mem0", "compact"]


@dataclass
class WriteTime:
    """What the extraction of one write needs to know and found out about time."""

    said_at: datetime
    event_dates: dict[str, str] = field(default_factory=dict)
    """Event date per extracted memory text (filled by the chat-model adapter)."""


@dataclass
class AddSeen:
    """What mem0 did inside one ``add`` and did not report (see :mod:`.add_check`)."""

    answers: list[Any] = field(default_factory=list)
    """The LLM's extraction answers (JSON-mode calls)."""
    embed_errors: dict[str, str] = field(default_factory=dict)
    """Facts whose embedding raised and never succeeded since, with the error.

    mem0 retries a failed batch one text at a time, so a later success of the
    same text clears it."""
    insert_errors: dict[str, BaseException] = field(default_factory=dict)
    """Ids of memories the vector store refused and never took since, with the error."""


@dataclass
class ExtractionCheck:
    """What the extraction of one write is checked against, and what the check did."""

    grounding: Grounding | None
    """The exchange's words; ``None``: proposals are kept as mem0 extracted them."""
    remember: str = ""
    """The user's own rules for what to keep (``Parameters(remember=...)``)."""
    ignore: str = ""
    """... and for what never to keep (``Parameters(ignore=...)``)."""
    dropped: dict[GroundingReading, int] = field(default_factory=dict)
    """Proposals dropped, by reason."""
    kept: int = 0
    """Proposals kept."""
    asked: int = 0
    """Proposals the words could not decide, asked of the model."""
    rewritten: bool = False
    """A kept proposal was put in the third person."""

    @property
    def guidance(self) -> str:
        """The user's rules as the prompts show them ("" when none)."""
        lines = [f"Remember: {self.remember.strip()}"] if self.remember.strip() else []
        lines += [f"Never remember: {self.ignore.strip()}"] if self.ignore.strip() else []
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Mem0Call:
    """The context of one call of mem0 by this package, as its adapters see it."""

    loop: asyncio.AbstractEventLoop | None = None
    """The caller's event loop: where the adapters run AgentScope model coroutines
    (:mod:`.loops`); ``None`` outside the backend (a user's own mem0 call)."""
    lane: Lane | None = None
    """The lane mem0's coroutine runs on (:mod:`.loops`)."""
    waiter: Literal["reply", "nobody"] | None = None
    """Who waits for the call, when its lane does not tell (:func:`no_reply_waits`,
    :func:`reply_waits`)."""
    extraction: ExtractionStyle = "mem0"
    """The extraction prompt of the ``add`` under way (:mod:`.extraction`)."""
    said: WriteTime | None = None
    """The said time of the ``add`` under way, and the event dates it found."""
    check: ExtractionCheck | None = None
    """What the extraction of the ``add`` under way is checked against (:mod:`.extraction`)."""
    watch: AddSeen | None = None
    """Where the add watch records what mem0 swallows (:mod:`.add_check`)."""
    meter: tuple[TokenMeter, Kind] | None = None
    """Where the model calls made below count their tokens, and under which kind."""

    @property
    def serves_no_reply(self) -> bool:
        """Whether the call serves mem0's writes or other work no reply waits for."""
        return self.waiter == "nobody" or self.lane == "write"

    @property
    def serves_a_reply(self) -> bool:
        """Whether a reply waits for the call: its search on mem0's read lane, or
        what :func:`reply_waits` marks."""
        return self.waiter == "reply" or (self.waiter is None and self.lane == "read")


_NO_CALL = Mem0Call()  # frozen: one default serves every context
_CALL: contextvars.ContextVar[Mem0Call] = contextvars.ContextVar(
    "agentscope_mem0_call", default=_NO_CALL
)


def current() -> Mem0Call:
    """The context of the mem0 call the calling code serves."""
    return _CALL.get()


@contextlib.contextmanager
def calling(**changes: Any) -> Iterator[Mem0Call]:
    """Within the block, the current :class:`Mem0Call` with ``changes`` (its field names)."""
    call = dataclasses.replace(_CALL.get(), **changes)
    token = _CALL.set(call)
    try:
        yield call
    finally:
        # A coroutine never finished is closed by the garbage collector in
        # another context, where its token cannot be reset (nor needs to be).
        with contextlib.suppress(ValueError):
            _CALL.reset(token)


def caller_loop_scope() -> contextlib.AbstractContextManager[Mem0Call]:
    """Mark the running loop as the one the adapter calls made below run models on.

    A read started whole on a reader thread (:meth:`.loops.Mem0Lanes.start`)
    keeps the loop of the caller that started it.
    """
    call = _CALL.get()
    if call.lane is not None and call.loop is not None:
        return contextlib.nullcontext(call)
    return calling(loop=asyncio.get_running_loop())


def no_reply_waits() -> contextlib.AbstractContextManager[Mem0Call]:
    """Mark the reads and embeddings made below as work no reply waits for.

    The time judgement and consolidation search and embed after a write is
    stored. Marked, their mem0 reads run on the write lane and their texts
    are embedded as background work, after every reply's waiting query.
    """
    return calling(waiter="nobody")


def reply_waits() -> contextlib.AbstractContextManager[Mem0Call]:
    """Mark the embeddings made below as what a reply waits for, unless an
    enclosing :func:`no_reply_waits` said no reply does."""
    call = _CALL.get()
    return contextlib.nullcontext(call) if call.waiter == "nobody" else calling(waiter="reply")


def metered(meter: TokenMeter | None, kind: Kind) -> contextlib.AbstractContextManager[Mem0Call]:
    """Count the model calls made within the block on ``meter`` under ``kind``."""
    return calling(meter=(meter, kind) if meter is not None else None)


def record_call(usage: Any, prompt: str, answer: str) -> CallTokens:
    """The tokens of one model call, counted on the current meter (if any).

    Args:
        usage: The response's ``ChatUsage`` (``input_tokens``/``output_tokens``), or ``None``.
        prompt: The prompt's text, estimated when ``usage`` is missing.
        answer: The answer's text, likewise.
    """
    tokens = CallTokens.of(usage, prompt, answer)
    if (meter := _CALL.get().meter) is not None:
        meter[0].add(meter[1], tokens)
    return tokens
