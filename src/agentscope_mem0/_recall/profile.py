"""Profile recall: a scope's most recent memories, whatever the turn says, cached.

``get_all`` reads are cheap to skip and expensive to repeat every turn, so a
scope's profile is kept for a short time; :meth:`ProfileCache.invalidate`
runs after each write to that user.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._scope import Scope
from .dedupe import dedupe_hits

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .._memories.hit import MemoryHit

__all__ = ["DEFAULT_PROFILE_SCAN", "DEFAULT_PROFILE_TTL", "ProfileCache", "recall_profile"]

DEFAULT_PROFILE_TTL = 30.0
"""Seconds a scope's profile is reused before ``get_all`` is asked again."""

DEFAULT_PROFILE_SCAN = 200
"""Memories read per profile refresh; the newest of them make the profile.
mem0's local stores list in no particular order (mem0 2.2), so a user with
more memories than this gets the newest of an arbitrary subset."""


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
    when = hit.when
    return when.timestamp() if when is not None else float("-inf")


async def recall_profile(
    backend: Mem0Backend,
    scope: Scope,
    *,
    limit: int,
    cache: ProfileCache | None = None,
    scan: int = DEFAULT_PROFILE_SCAN,
    include_superseded: bool = False,
) -> list[MemoryHit]:
    """The ``limit`` most recently updated memories of ``scope``, newest first,
    without repeats (superseded ones left out unless ``include_superseded``)."""
    if cache is not None:
        cached = cache.get(scope)
        if cached is not None:
            return cached[:limit]
        epoch = cache.epoch(scope)
    everything = await backend.get_all(
        scope, limit=max(scan, limit), include_superseded=include_superseded
    )
    unique = dedupe_hits(everything, user_id=scope.user_id)
    newest = sorted(unique, key=_sort_key, reverse=True)[: max(limit, 1)]
    if cache is not None:
        cache.put(scope, newest, epoch)
    return newest[:limit]
