"""Which memories a turn recalls: the search query, profile recall and its cache.

Three recall modes:

* ``"query"``: search mem0 with the turn's query (AgentScope's built-in does
  this with the user message alone).
* ``"profile"``: the user's most recent memories, whatever the message says;
  read with ``get_all`` and cached per scope for a short time, so it also
  serves turns like "ok, go on" that are too short or vague to search with.
* ``"full"``: both, profile first, without repeats.

The middleware calls :func:`build_query` and :func:`retrieve` per turn and
:meth:`ProfileCache.invalidate` after each write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, TypeVar

from ._exceptions import ConfigurationError
from ._notes import dedupe_hits, is_memory_note

if TYPE_CHECKING:
    from agentscope.message import Msg

    from ._backend import Mem0Backend, MemoryHit
    from ._breaker import CircuitBreaker
    from ._scope import Scope

__all__ = [
    "DEFAULT_MAX_MEMORY_TOKENS",
    "DEFAULT_PROFILE_SCAN",
    "DEFAULT_PROFILE_TTL",
    "DEFAULT_QUERY_CONTEXT_TURNS",
    "RECALL_MODES",
    "ProfileCache",
    "RecallMode",
    "build_query",
    "check_recall_options",
    "recall_profile",
    "retrieve",
]

logger = logging.getLogger(__name__)

RecallMode = Literal["query", "profile", "full"]
RECALL_MODES: tuple[RecallMode, ...] = ("query", "profile", "full")

DEFAULT_MAX_MEMORY_TOKENS = 1000
"""Default budget of the memory note: above five short extracted memories
(about 200 tokens with the frame) or five long raw LoCoMo turns (about 500),
low enough to stop a few huge ones."""

DEFAULT_PROFILE_TTL = 30.0
"""Seconds a scope's profile is reused before ``get_all`` is asked again."""

DEFAULT_PROFILE_SCAN = 200
"""Memories read per profile refresh; the newest of them make the profile.
mem0's local stores list in no particular order (mem0 2.2), so a user with
more memories than this gets the newest of an arbitrary subset."""

DEFAULT_QUERY_CONTEXT_TURNS = 0
"""Earlier messages added to the search query. The message alone won on the
LoCoMo development half (e5 recall@10 0.570; with the previous reply 0.529,
with the previous exchange 0.367): see ``docs/benchmarks/note-recall.md``."""

_CONTEXT_CHARS = 300
"""Characters kept of each earlier message in a query: enough to name the
topic, not so much that a long answer drowns the new question."""


def check_recall_options(
    recall: str,
    *,
    query_context_turns: int = DEFAULT_QUERY_CONTEXT_TURNS,
    profile_ttl: float = DEFAULT_PROFILE_TTL,
    max_memory_tokens: int | None = None,
) -> RecallMode:
    """Validate the recall keywords of the middleware.

    Returns:
        ``recall`` as a :data:`RecallMode`.

    Raises:
        ConfigurationError: A value out of range, naming the fix.
    """
    if recall not in RECALL_MODES:
        raise ConfigurationError(
            f"unknown recall {recall!r}; use one of {', '.join(map(repr, RECALL_MODES))}"
        )
    if not isinstance(query_context_turns, int) or query_context_turns < 0:
        raise ConfigurationError(
            f"query_context_turns must be a non-negative integer, got {query_context_turns!r}"
        )
    if not isinstance(profile_ttl, int | float) or profile_ttl < 0:
        raise ConfigurationError(f"profile_ttl must be seconds >= 0, got {profile_ttl!r}")
    if max_memory_tokens is not None and (
        not isinstance(max_memory_tokens, int) or max_memory_tokens < 1
    ):
        raise ConfigurationError(
            f"max_memory_tokens must be a positive integer or None, got {max_memory_tokens!r}"
        )
    return recall


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
    value = hit.date
    if not value:
        return float("-inf")
    try:
        parsed = datetime.fromisoformat(value.strip().replace(" ", "T", 1))
    except ValueError:
        return float("-inf")
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


async def recall_profile(
    backend: Mem0Backend,
    scope: Scope,
    *,
    limit: int,
    cache: ProfileCache | None = None,
    scan: int = DEFAULT_PROFILE_SCAN,
) -> list[MemoryHit]:
    """The ``limit`` most recently updated memories of ``scope``, newest first."""
    if cache is not None:
        cached = cache.get(scope)
        if cached is not None:
            return cached[:limit]
        epoch = cache.epoch(scope)
    everything = await backend.get_all(scope, limit=max(scan, limit))
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
    """``await call`` within ``timeout``; a failure or timeout is logged and empty.

    The outcome (latency, hits, failure, timeout) is reported to ``breaker``.
    """
    started = time.perf_counter()
    try:
        result = await asyncio.wait_for(call, timeout=timeout)
    except TimeoutError:
        if breaker is not None:
            breaker.record_failure(timeout=True)
        logger.warning(
            "memory %s for user %s took over %.2f s; replying without it",
            what,
            scope.user_id,
            timeout,
        )
    except Exception as exc:
        if breaker is not None:
            breaker.record_failure()
        logger.warning("memory %s for user %s failed: %s", what, scope.user_id, exc)
    else:
        if breaker is not None:
            breaker.record_success(time.perf_counter() - started, hits=len(result))
        return result
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
    profile_limit: int | None = None,
    timeout: float | None = None,
    breaker: CircuitBreaker | None = None,
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
        profile_limit: Profile memories; ``None`` means ``top_k``.
        timeout: Seconds each of the search and the profile read may take
            (they run concurrently); one that fails or is late contributes
            nothing and is logged.
        breaker: Skips the turn's reads while open and learns from each
            read's outcome.

    Returns:
        Profile memories (newest first) then search hits (best first), without
        repeats; empty when nothing was found or everything failed.
    """
    if breaker is not None and not breaker.allow():
        logger.debug("memory reads skipped for user %s: breaker open", scope.user_id)
        return []
    limit = top_k if profile_limit is None else profile_limit
    jobs: list[Awaitable[list[MemoryHit]]] = []
    if recall in ("profile", "full"):
        jobs.append(
            _bounded(
                "profile read",
                scope,
                recall_profile(backend, scope, limit=limit, cache=profile_cache),
                timeout,
                breaker,
            )
        )
    if recall in ("query", "full") and _searchable(query):
        jobs.append(
            _bounded(
                "search",
                scope,
                backend.search(query, scope, top_k=top_k, threshold=threshold),
                timeout,
                breaker,
            )
        )
    if not jobs:
        return []
    parts = await asyncio.gather(*jobs)
    return dedupe_hits(hit for part in parts for hit in part)
