"""Which memories a turn recalls: the search query and the concurrent reads.

Three recall modes:

* ``"query"``: search mem0 with the turn's query (AgentScope's built-in does
  this with the user message alone).
* ``"profile"``: the user's most recent memories, whatever the message says;
  read with ``get_all`` and cached per scope for a short time, so it also
  serves turns like "ok, go on" that are too short or vague to search with.
* ``"full"``: both, profile first, without repeats.

A reply builds its query with :func:`build_query` and reads with
:func:`retrieve` (see ``Mem0Middleware.on_reply``); the profile and its cache are
:mod:`.profile`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Literal, TypeVar

from .._mem0.bounded import bounded
from .._observe.tracing import skipped_search, traced_search
from .._scope import Scope
from .dedupe import dedupe_by_meaning
from .note import is_memory_note
from .profile import ProfileCache, recall_profile

if TYPE_CHECKING:
    from agentscope.message import Msg

    from .._mem0.backend import Mem0Backend
    from .._mem0.breaker import CircuitBreaker
    from .._memories.hit import MemoryHit
    from .._text.periods import EventPeriod, Period

__all__ = ["RecallMode", "build_query", "retrieve"]

logger = logging.getLogger(__name__)

RecallMode = Literal["query", "profile", "full"]
"""What a turn recalls: see the module's docstring."""

_CONTEXT_CHARS = 300
"""Characters kept of each earlier message in a query: enough to name the
topic, not so much that a long answer drowns the new question."""


# -- the query ------------------------------------------------------------------


def build_query(
    message: str,
    context: Sequence[Msg],
    *,
    turns: int,
    roles: tuple[str, ...] = ("user", "assistant"),
) -> str:
    """The search query for a turn: ``message``, after up to ``turns`` earlier
    messages of ``context`` (their text; memory notes skipped).

    Args:
        message: The new user message's text.
        context: The agent's ``state.context`` before the new message lands.
        turns: How many earlier messages to carry; 0 is the message alone.
        roles: Whose earlier messages count.
    """
    if turns <= 0:
        return message
    earlier: list[str] = []
    for msg in reversed(context):
        if len(earlier) >= turns:
            break
        if msg.role not in roles or is_memory_note(msg):
            continue
        text = (msg.get_text_content() or "").strip()
        if not text or text == message.strip():
            continue
        earlier.append(text[:_CONTEXT_CHARS])
    return "\n".join([*reversed(earlier), message])


# -- one turn ---------------------------------------------------------------------

_T = TypeVar("_T")


async def _quietly(
    what: str, scope: Scope, timeout: float | None, read: Awaitable[list[_T]]
) -> list[_T]:
    """``await read`` (a :func:`bounded` call); a failure or timeout is logged and empty."""
    try:
        return await read
    except TimeoutError:
        logger.warning(
            "memory %s for user %s took over %.2f s; replying without it",
            what,
            scope.user_id,
            timeout,
        )
    except Exception as exc:
        logger.warning("memory %s for user %s failed: %s", what, scope.user_id, exc)
    return []


def _searchable(query: str) -> bool:
    return any(char.isalnum() for char in query)


async def retrieve(
    backend: Mem0Backend,
    scope: Scope,
    query: str,
    *,
    recall: RecallMode = "query",
    top_k: int = 5,
    threshold: float | None = None,
    profile_cache: ProfileCache | None = None,
    timeout: float | None = None,
    breaker: CircuitBreaker | None = None,
    include_superseded: bool = False,
    period: Period | EventPeriod | None = None,
) -> list[MemoryHit]:
    """The memories for one turn, most important first. Never raises.

    Args:
        backend: Where the memories are.
        scope: Whose memories.
        query: The search query (see :func:`build_query`); a query without a
            letter or digit is not searched.
        recall: ``"query"``, ``"profile"`` or ``"full"`` (module docstring).
        top_k: Memories searched for.
        threshold: Minimum search score; ``None`` leaves it to mem0.
        profile_cache: Where profiles are cached; ``None`` reads every time.
        timeout: Seconds each of the search and the profile read may take
            (they run concurrently); one that fails or is late contributes
            nothing and is logged.
        breaker: Skips the turn's reads while open and learns from each
            read's outcome.
        include_superseded: Also memories a newer one superseded (the note
            marks them); the profile is then read past its cache.
        period: The time the turn's message names: the search puts its
            memories first (:meth:`~.._mem0.backend.Mem0Backend.search`).

    Returns:
        Profile memories (newest first) then search hits (best first), each
        fact once (:func:`~.dedupe.dedupe_by_meaning`, embedding only within
        what is left of ``timeout``); empty when nothing was found or
        everything failed.
    """
    if breaker is not None and not breaker.allow():
        logger.debug("memory reads skipped for user %s: breaker open", scope.user_id)
        skipped_search(scope, top_k=top_k, breaker=breaker)
        return []
    started = time.monotonic()
    jobs: list[Awaitable[list[MemoryHit]]] = []
    searched = recall in ("query", "full") and _searchable(query)
    if recall in ("profile", "full"):
        profile = recall_profile(
            backend,
            scope,
            limit=top_k,
            cache=None if include_superseded else profile_cache,
            include_superseded=include_superseded,
        )
        jobs.append(
            _quietly(
                "profile read",
                scope,
                timeout,
                bounded(profile, timeout=timeout, breaker=breaker, check=False),
            )
        )
    if searched:
        search = backend.start_read(
            backend.search(
                query,
                scope,
                top_k=top_k,
                threshold=threshold,
                include_superseded=include_superseded,
                period=period,
            )
        )
        # The span ends when the reply stops waiting, not when a late search does.
        traced = traced_search(
            bounded(search, timeout=timeout, breaker=breaker, check=False),
            scope,
            query=query,
            top_k=top_k,
            source="auto",
            breaker=breaker,
        )
        jobs.append(_quietly("search", scope, timeout, traced))
    if not jobs:
        return []
    # One read is awaited as it is: a task around it costs the reply two
    # more turns of a busy event loop.
    parts = [await jobs[0]] if len(jobs) == 1 else await asyncio.gather(*jobs)
    # The turn's one dedupe; the note shows what comes out as it is.
    left = None if timeout is None else timeout - (time.monotonic() - started)
    return await dedupe_by_meaning(
        (hit for part in parts for hit in part),
        user_id=scope.user_id,
        embed=backend.embed,
        budget=left,
    )
