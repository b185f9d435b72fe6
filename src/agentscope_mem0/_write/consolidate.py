"""Consolidation: one current memory per fact.

mem0 2.2 only ever adds (and drops exact repeats), so the same fact said
twice in other words, or stored by both ``add_memory`` and the automatic
extraction of the same turn, would be two current memories. After each
stored write, every new memory is compared with the few most similar current
memories of the scope the reads search (the writing agent's memories, or all
of the user's with ``scope_search_by_agent=False``); one that states a fact
one of them already states is marked, not deleted: ``duplicate_of`` names
the one kept (the older), ``valid_until`` says when they were merged, and the
kept one lists it under ``duplicates`` (see :mod:`.._memories.lifecycle`). Reads
leave it out, ``export`` and ``history`` keep it, and forgetting the kept one
brings it back.

Who decides "the same fact":

* with a time judge (:mod:`.judge`), the judge, in the same background pass
  and on the same candidate search as its supersede/extend verdicts: the
  words when they already show it, else the model's readings, vetoed by the
  words (:func:`~.._text.same_fact.kept_apart`);
* without one (``judge=False``, hosted mem0, a client that extracts with
  another LLM), :class:`Consolidator`: the same-fact rule, then the
  embeddings' cosine similarity for the pairs the words leave open (the
  client's own embedder; none on hosted mem0, where the words decide alone).
  No model is asked.

Both ask :func:`~.._text.same_fact.first_repeat`, the one place that decides
a repeat. Either way it runs in the background after the write was stored, in
order per searched scope (:class:`~.judge.FollowUp`'s lanes), never on a
reply and never holding up the next write; a
failure or a late answer only leaves a repeat current. Hosted mem0 answers a
write with a pending event: the memories it became are looked up by the
write's key once the platform has them (:data:`HOSTED_WAITS`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._memories.lifecycle import DUPLICATE_OF, DUPLICATES, VALID_UNTIL, ids_of
from .._observe.latency import LatencyRecorder
from .._observe.tracing import span
from .._text.dates import iso
from .._text.same_fact import (
    DEFAULT_SAME_FACT_RULE,
    FactShape,
    SameFactRule,
    as_user,
    cosine,
    fact_shape,
    first_repeat,
    user_names,
)
from .delivery import METADATA_KEY

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .._scope import Scope

__all__ = [
    "DEFAULT_CONSOLIDATION_CANDIDATES",
    "HOSTED_WAITS",
    "Consolidator",
    "duplicate_marks",
    "new_memories",
]

logger = logging.getLogger(__name__)

DEFAULT_CONSOLIDATION_CANDIDATES = 5
"""Current memories compared per new memory."""

_TIMEOUT = 30.0

HOSTED_WAITS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Seconds between looks for a hosted write's memories (about a minute in all)."""


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


def duplicate_marks(
    repeat_id: str, kept_id: str, kept_duplicates: Sequence[str], said_at: datetime
) -> list[tuple[str, dict[str, Any]]]:
    """The metadata changes that merge memory ``repeat_id`` into ``kept_id``, in
    the order to store them: the kept one's list first, so that a stop halfway
    leaves two current memories rather than a hidden one nothing brings back."""
    return [
        (kept_id, {DUPLICATES: [*kept_duplicates, repeat_id]}),
        (repeat_id, {DUPLICATE_OF: kept_id, VALID_UNTIL: iso(said_at)}),
    ]


class Consolidator:
    """Marks new memories that repeat a current memory, without a model.

    Args:
        backend: The memories' mem0 client.
        candidates: Current memories compared per new memory.
        rule: The thresholds of the same-fact rule.
        timeout: Seconds the lookups, embeddings and marks may take per batch.
        search_by_agent: Compare with the writing agent's memories only
            (``scope_search_by_agent``), or with all of the user's.
    """

    def __init__(
        self,
        backend: Mem0Backend,
        *,
        candidates: int = DEFAULT_CONSOLIDATION_CANDIDATES,
        rule: SameFactRule = DEFAULT_SAME_FACT_RULE,
        timeout: float | None = _TIMEOUT,
        search_by_agent: bool = True,
    ) -> None:
        if not isinstance(candidates, int) or candidates < 1:
            raise ValueError(f"candidates must be a positive integer, got {candidates!r}")
        self._backend = backend
        self._candidates = candidates
        self._rule = rule
        self._timeout = timeout
        self._search_by_agent = search_by_agent
        self._latency = LatencyRecorder()
        self._counts = dict.fromkeys(("batches", "compared", "merged", "embedded", "skipped"), 0)
        self.enabled = True
        """``False`` leaves repeats current (to measure what consolidation costs)."""
        self.hosted_waits: Sequence[float] = HOSTED_WAITS
        """Seconds between looks for a hosted write's memories."""

    def stats(self) -> dict[str, Any]:
        """``consolidation_*`` counters and the background latency per batch."""
        out: dict[str, Any] = {f"consolidation_{k}": v for k, v in self._counts.items()}
        out.update(self._latency.summary("consolidation_latency"))
        return out

    def skip(self) -> None:
        """Count a write left unconsolidated: too many were waiting."""
        self._counts["skipped"] += 1

    async def consolidate(
        self, scope: Scope, results: Sequence[Any], said_at: datetime
    ) -> list[dict[str, Any]]:
        """Mark the new memories in ``results``, said at ``said_at``, that repeat a
        current one, now. Never raises.

        Returns:
            mem0's entries without those marked as duplicates.
        """
        started = time.perf_counter()
        new = new_memories(results) or await self._hosted_memories(scope, results)
        if not new:
            return list(results)
        self._counts["batches"] += 1
        merged: set[str] = set()
        searched = scope.searched(by_agent=self._search_by_agent)
        with span("consolidate", user_id=scope.user_id, agent_id=scope.agent_id) as handle:
            try:
                await asyncio.wait_for(
                    self._run(scope, searched, new, merged, said_at), self._timeout
                )
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

    async def _hosted_memories(self, scope: Scope, results: Sequence[Any]) -> list[dict[str, Any]]:
        """The memories a hosted write became, found by its key once the platform
        processed it (mem0's platform answers ``add`` with a pending event)."""
        keys = {item.get(METADATA_KEY) for item in results if isinstance(item, dict)}
        keys.discard(None)
        if not self._backend.hosted or len(keys) != 1:
            return []
        key = str(keys.pop())
        for wait in self.hosted_waits:
            await asyncio.sleep(wait)
            try:
                found = await self._backend.get_all_raw(
                    scope, limit=100, where={"metadata": {METADATA_KEY: key}}
                )
            except Exception as exc:
                logger.info("could not look up a hosted write of user %s: %s", scope.user_id, exc)
                return []
            mine = new_memories([item for item in found if _carries_key(item, key)])
            if mine:
                return mine
        logger.info(
            "hosted mem0 had not stored a write of user %s after %.0f s; not consolidated",
            scope.user_id,
            sum(self.hosted_waits),
        )
        return []

    async def _run(
        self,
        scope: Scope,
        searched: Scope,
        new: list[dict[str, Any]],
        merged: set[str],
        said_at: datetime,
    ) -> None:
        names = user_names(scope.user_id)
        batch_ids = {str(item["id"]) for item in new}
        earlier: list[_Memory] = []
        for item in new:
            memory_id, text = str(item["id"]), str(item["memory"])
            hits = await self._backend.search(
                text, searched, top_k=self._candidates + len(batch_ids)
            )
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
                        ids_of((hit.metadata or {}).get(DUPLICATES)),
                    )
                    for hit in found
                ),
            ]
            kept = await self._same_as(mine, candidates, names_here)
            if kept is None:
                earlier.append(mine)
                continue
            for memory_id_, changes in duplicate_marks(mine.id, kept.id, kept.duplicates, said_at):
                await self._backend.update_metadata(memory_id_, changes)
            kept.duplicates.append(mine.id)
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
        """The first candidate stating ``mine``'s fact (words, then the
        embeddings of the pairs the words leave open; without an embedder,
        on hosted mem0, the words decide alone)."""
        self._counts["compared"] += len(candidates)

        async def similarities(open_pairs: list[int]) -> list[float | None] | None:
            texts = [mine.text, *(candidates[i].text for i in open_pairs)]
            vectors = await self._backend.embed([as_user(text, names) for text in texts])
            if vectors is None:
                return None
            self._counts["embedded"] += len(vectors)
            return [cosine(vectors[0], vector) for vector in vectors[1:]]

        shapes = [other.shape for other in candidates]
        at = await first_repeat(mine.shape, shapes, similarities=similarities, rule=self._rule)
        return None if at is None else candidates[at]


def _is_one_of(item: Any, ids: set[str]) -> bool:
    return isinstance(item, dict) and item.get("id") in ids


def _carries_key(item: dict[str, Any], key: str) -> bool:
    metadata = item.get("metadata")
    return isinstance(metadata, dict) and metadata.get(METADATA_KEY) == key
