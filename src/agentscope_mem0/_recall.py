"""Which memories a turn recalls: the search query, profile recall and its cache.

Three recall modes:

* ``"query"``: search mem0 with the turn's query (AgentScope's built-in does
  this with the user message alone).
* ``"profile"``: the user's most recent memories, whatever the message says;
  read with ``get_all`` and cached per scope for a short time, so it also
  serves turns like "ok, go on" that are too short or vague to search with.
* ``"full"``: both, profile first, without repeats.

The middleware calls :func:`recall_note` per turn (it runs :func:`build_query`,
:func:`retrieve` and renders the note); :meth:`ProfileCache.invalidate` runs
after each write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agentscope.event import ExternalExecutionResultEvent, UserConfirmResultEvent
from agentscope.message import Msg

from ._bounded import bounded
from ._notes import dedupe_hits, is_memory_note, render_note
from ._options import DEFAULT_PROFILE_TTL, RecallMode
from ._scope import Scope
from ._time import parse_time
from ._tracing import skipped_search, traced_search

if TYPE_CHECKING:
    from ._backend import Mem0Backend, MemoryHit
    from ._breaker import CircuitBreaker
    from ._client_state import ClientState
    from ._options import Options

__all__ = [
    "DEFAULT_PROFILE_SCAN",
    "ProfileCache",
    "build_query",
    "query_text",
    "recall_note",
    "recall_profile",
    "retrieve",
]

logger = logging.getLogger(__name__)

DEFAULT_PROFILE_SCAN = 200
"""Memories read per profile refresh; the newest of them make the profile.
mem0's local stores list in no particular order (mem0 2.2), so a user with
more memories than this gets the newest of an arbitrary subset."""

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


# -- profile ----------------------------------------------------------------------


class ProfileCache:
    """Each scope's profile memories, kept for ``ttl`` seconds.

    Safe to share between agents, threads and event loops. A refresh that was
    already running when :meth:`invalidate` was called is not cached, so a
    write is never hidden behind a profile read before it.

    Args:
        ttl: Seconds an entry is served; 0 turns caching off.
        max_scopes: Entries kept at most; the least recently stored go first.
        clock: Monotonic seconds; replaceable in tests.
    """

    def __init__(
        self,
        ttl: float = DEFAULT_PROFILE_TTL,
        *,
        max_scopes: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self._max_scopes = max_scopes
        self._clock = clock
        self._entries: OrderedDict[Scope, tuple[float, list[MemoryHit]]] = OrderedDict()
        self._epochs: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, scope: Scope) -> list[MemoryHit] | None:
        """The cached profile of ``scope``, or ``None`` when absent or expired."""
        with self._lock:
            entry = self._entries.get(scope)
            if entry is None:
                return None
            if self._clock() >= entry[0]:
                del self._entries[scope]
                return None
            return list(entry[1])

    def epoch(self, scope: Scope) -> int:
        """A token to pass to :meth:`put`; it goes stale when ``scope``'s user writes."""
        with self._lock:
            return self._epochs.get(scope.user_id, 0)

    def put(self, scope: Scope, hits: Sequence[MemoryHit], epoch: int) -> None:
        """Cache ``hits`` for ``scope`` unless a write happened since ``epoch``."""
        if self.ttl <= 0:
            return
        with self._lock:
            if self._epochs.get(scope.user_id, 0) != epoch:
                return
            self._entries[scope] = (self._clock() + self.ttl, list(hits))
            self._entries.move_to_end(scope)
            while len(self._entries) > self._max_scopes:
                self._entries.popitem(last=False)

    def invalidate(self, scope: Scope) -> None:
        """Forget every cached profile that a write to ``scope`` may change.

        That is the written scope itself and the user-wide scope (searches
        that are not scoped by agent); other agents' scopes stay.
        """
        with self._lock:
            self._epochs[scope.user_id] = self._epochs.get(scope.user_id, 0) + 1
            for cached in list(self._entries):
                if cached.user_id == scope.user_id and (
                    cached.agent_id is None
                    or scope.agent_id is None
                    or cached.agent_id == scope.agent_id
                ):
                    del self._entries[cached]


def _sort_key(hit: MemoryHit) -> float:
    parsed = parse_time(hit.date)
    return parsed.timestamp() if parsed is not None else float("-inf")


async def recall_profile(
    backend: Mem0Backend,
    scope: Scope,
    *,
    limit: int,
    cache: ProfileCache | None = None,
    scan: int = DEFAULT_PROFILE_SCAN,
    include_superseded: bool = False,
) -> list[MemoryHit]:
    """The ``limit`` most recently updated memories of ``scope``, newest first
    (superseded ones left out unless ``include_superseded``)."""
    if cache is not None:
        cached = cache.get(scope)
        if cached is not None:
            return cached[:limit]
        epoch = cache.epoch(scope)
    everything = await backend.get_all(
        scope, limit=max(scan, limit), include_superseded=include_superseded
    )
    newest = sorted(dedupe_hits(everything), key=_sort_key, reverse=True)[: max(limit, 1)]
    if cache is not None:
        cache.put(scope, newest, epoch)
    return newest[:limit]


# -- one turn ---------------------------------------------------------------------

_T = TypeVar("_T")


async def _bounded(
    what: str,
    scope: Scope,
    call: Awaitable[list[_T]],
    timeout: float | None,
    breaker: CircuitBreaker | None = None,
) -> list[_T]:
    """``await call`` through :func:`bounded`; a failure or timeout is logged and empty."""
    try:
        return await bounded(call, timeout=timeout, breaker=breaker, check=False)
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

    Returns:
        Profile memories (newest first) then search hits (best first), without
        repeats; empty when nothing was found or everything failed.
    """
    if breaker is not None and not breaker.allow():
        logger.debug("memory reads skipped for user %s: breaker open", scope.user_id)
        skipped_search(scope, top_k=top_k, breaker=breaker)
        return []
    jobs: list[Awaitable[list[MemoryHit]]] = []
    if recall in ("profile", "full"):
        jobs.append(
            _bounded(
                "profile read",
                scope,
                recall_profile(
                    backend,
                    scope,
                    limit=top_k,
                    cache=None if include_superseded else profile_cache,
                    include_superseded=include_superseded,
                ),
                timeout,
                breaker,
            )
        )
    if recall in ("query", "full") and _searchable(query):
        jobs.append(
            _bounded(
                "search",
                scope,
                traced_search(
                    backend.search(
                        query,
                        scope,
                        top_k=top_k,
                        threshold=threshold,
                        include_superseded=include_superseded,
                    ),
                    scope,
                    query=query,
                    top_k=top_k,
                    source="auto",
                    breaker=breaker,
                ),
                timeout,
                breaker,
            )
        )
    if not jobs:
        return []
    parts = await asyncio.gather(*jobs)
    return dedupe_hits(hit for part in parts for hit in part)


_RESUMPTIONS = (UserConfirmResultEvent, ExternalExecutionResultEvent)


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


async def recall_note(
    state: ClientState,
    options: Options,
    scope: Scope,
    message: str,
    context: Sequence[Msg],
) -> Msg | None:
    """The memory note of one turn, or ``None`` when nothing was recalled. Never raises.

    Args:
        state: The client's backend, breaker and profile cache.
        options: The middleware's options (recall, note, deadlines, top_k...).
        scope: The calling agent's scope; searched user-wide unless
            ``scope_search_by_agent``.
        message: The new user text.
        context: The agent's context before the new message lands.
    """
    hits = await retrieve(
        state.backend,
        scope if options.scope_search_by_agent else Scope(scope.user_id),
        build_query(message, context, turns=options.recall.query_context_turns),
        recall=options.recall.mode,
        top_k=options.top_k,
        threshold=options.threshold,
        profile_cache=state.profiles,
        timeout=options.deadlines.search_timeout,
        breaker=state.breaker,
        include_superseded=options.recall.include_superseded,
    )
    return render_note(
        hits,
        header=options.header,
        intro=options.intro,
        rules=options.note.rules,
        max_tokens=options.note.max_memory_tokens,
    )
