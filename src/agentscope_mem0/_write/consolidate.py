"""Consolidation: one current memory per fact.

mem0 2.2 only ever adds (and drops exact repeats), so the same fact said
twice in other words, or stored by both ``add_memory`` and the automatic
extraction of the same turn, would be two current memories. After each
stored batch, :class:`Consolidator` looks up, per new memory, the few most
similar current memories of the same scope (one search each) and decides
with :func:`~.._recall.same_fact.same_fact` whether the new memory states a
fact one of them already states: what blocks a merge first (another person,
negation, time, numbers), then the content words, and, only for the pairs
they leave open, the cosine similarity of the two texts' embeddings (the
client's own embedder, its query cache shared; the user's name read as
"User"; none for hosted mem0). No model is asked.

The new memory is then marked, not deleted: ``duplicate_of`` names the one
kept (the older), ``valid_until`` says when they were merged, and the kept
one lists it under ``duplicates`` (see :mod:`.._mem0.timeline`), so reads
leave it out, ``export`` and ``history`` keep it, and forgetting the kept one
brings it back.

It runs in the scope's background worker after the write was stored, never
on a reply; a failure or a late answer only leaves the duplicate current.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._mem0.breaker import LatencyRecorder
from .._mem0.dates import iso
from .._mem0.timeline import DUPLICATE_OF, DUPLICATES, VALID_UNTIL
from .._mem0.tracing import span
from .._recall.same_fact import (
    DEFAULT_SAME_FACT_RULE,
    FactShape,
    SameFactRule,
    cosine,
    fact_shape,
    same_fact,
    user_names,
)

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .._scope import Scope

__all__ = ["DEFAULT_CONSOLIDATION_CANDIDATES", "Consolidator", "as_user", "new_memories"]

logger = logging.getLogger(__name__)

DEFAULT_CONSOLIDATION_CANDIDATES = 5
"""Current memories compared per new memory."""

_TIMEOUT = 30.0


@dataclass
class _Memory:
    id: str
    text: str
    shape: FactShape
    duplicates: list[str]


def new_memories(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The entries of mem0's ``add`` results that are new memories."""
    return [
        item
        for item in results
        if isinstance(item, dict)
        and item.get("id")
        and item.get("memory")
        and item.get("event", "ADD") == "ADD"
    ]


def as_user(text: str, names: frozenset[str]) -> str:
    """``text`` with the user's names written as "User", for embedding."""
    if not names:
        return text
    pattern = r"\b(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(pattern + r")\b", "User", text, flags=re.IGNORECASE)


class Consolidator:
    """Marks new memories that repeat a current memory of their scope.

    Args:
        backend: The memories' mem0 client.
        candidates: Current memories compared per new memory.
        rule: The thresholds of the same-fact rule.
        timeout: Seconds the lookups, embeddings and marks may take per batch.
    """

    def __init__(
        self,
        backend: Mem0Backend,
        *,
        candidates: int = DEFAULT_CONSOLIDATION_CANDIDATES,
        rule: SameFactRule = DEFAULT_SAME_FACT_RULE,
        timeout: float | None = _TIMEOUT,
    ) -> None:
        if not isinstance(candidates, int) or candidates < 1:
            raise ValueError(f"candidates must be a positive integer, got {candidates!r}")
        self._backend = backend
        self._candidates = candidates
        self._rule = rule
        self._timeout = timeout
        self._latency = LatencyRecorder()
        self._counts = dict.fromkeys(("batches", "compared", "merged", "embedded", "skipped"), 0)

    def stats(self) -> dict[str, Any]:
        """``consolidation_*`` counters and the write-path latency per batch."""
        out: dict[str, Any] = {f"consolidation_{k}": v for k, v in self._counts.items()}
        out.update(self._latency.summary("consolidation_latency"))
        return out

    async def consolidate(
        self, scope: Scope, results: Sequence[Any], said_at: datetime
    ) -> list[dict[str, Any]]:
        """Mark the new memories in ``results``, said at ``said_at``, that repeat a
        current one. Never raises.

        Returns:
            mem0's entries without those marked as duplicates, for the judge.
        """
        new = new_memories(results)
        if not new:
            return list(results)
        self._counts["batches"] += 1
        started = time.perf_counter()
        merged: set[str] = set()
        with span("consolidate", user_id=scope.user_id, agent_id=scope.agent_id) as handle:
            try:
                await asyncio.wait_for(self._run(scope, new, merged, said_at), self._timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._counts["skipped"] += 1
                logger.warning(
                    "consolidating the new memories of user %s failed (%s); "
                    "repeats may stay current",
                    scope.user_id,
                    exc or type(exc).__name__,
                )
            finally:
                self._latency.record(time.perf_counter() - started)
            handle.set(new=len(new), merged=len(merged))
        return [item for item in results if not _is_one_of(item, merged)]

    async def _run(
        self, scope: Scope, new: list[dict[str, Any]], merged: set[str], said_at: datetime
    ) -> None:
        names = user_names(scope.user_id)
        batch_ids = {str(item["id"]) for item in new}
        earlier: list[_Memory] = []
        for item in new:
            memory_id, text = str(item["id"]), str(item["memory"])
            hits = await self._backend.search(text, scope, top_k=self._candidates + len(batch_ids))
            found = [hit for hit in hits if hit.id and hit.id not in batch_ids][: self._candidates]
            texts = [text, *(hit.memory for hit in found)]
            names_here = names | user_names(None, texts)
            mine = _Memory(memory_id, text, fact_shape(text, names_here), [])
            candidates = [
                *earlier,
                *(
                    _Memory(
                        str(hit.id),
                        hit.memory,
                        fact_shape(hit.memory, names_here),
                        _ids((hit.metadata or {}).get(DUPLICATES)),
                    )
                    for hit in found
                ),
            ]
            kept = await self._same_as(mine, candidates, names_here)
            if kept is None:
                earlier.append(mine)
                continue
            await self._backend.update_metadata(
                mine.id, {DUPLICATE_OF: kept.id, VALID_UNTIL: iso(said_at)}
            )
            kept.duplicates.append(mine.id)
            await self._backend.update_metadata(kept.id, {DUPLICATES: kept.duplicates})
            merged.add(mine.id)
            self._counts["merged"] += 1
            logger.info(
                "memory %s of user %s repeats memory %s: marked as its duplicate",
                mine.id,
                scope.user_id,
                kept.id,
            )

    async def _same_as(
        self, mine: _Memory, candidates: list[_Memory], names: frozenset[str]
    ) -> _Memory | None:
        """The first candidate stating ``mine``'s fact.

        Only the pairs the words leave open are embedded; without an embedder
        (hosted mem0) the words decide alone.
        """
        open_pairs: list[_Memory] = []
        for other in candidates:
            self._counts["compared"] += 1
            if same_fact(mine.shape, other.shape, similarity=1.0, rule=self._rule):
                open_pairs.append(other)
        if not open_pairs:
            return None
        vectors = await self._backend.embed(
            [as_user(mine.text, names), *(as_user(o.text, names) for o in open_pairs)]
        )
        if vectors is None:
            return next(
                (o for o in open_pairs if same_fact(mine.shape, o.shape, rule=self._rule)), None
            )
        self._counts["embedded"] += len(vectors)
        for other, vector in zip(open_pairs, vectors[1:], strict=True):
            similarity = cosine(vectors[0], vector)
            if similarity is not None and same_fact(
                mine.shape, other.shape, similarity=similarity, rule=self._rule
            ):
                return other
        return None


def _is_one_of(item: Any, ids: set[str]) -> bool:
    return isinstance(item, dict) and item.get("id") in ids


def _ids(value: Any) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v]
    return []
