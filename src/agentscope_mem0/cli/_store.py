"""What the commands do with memories in an open-source mem0 store.

:class:`MemoryStore` wraps an ``mem0.AsyncMemory`` (the embedded folder,
pgvector or a Qdrant server). mem0's API calls (search, add, delete,
history) go through :class:`~agentscope_mem0._mem0.backend.Mem0Backend`, the one
door to mem0. Listing, export and import work on the vector store's rows, so
that ids, dates and metadata survive an export and import unchanged; the
history database is in :mod:`._history_db`. :class:`~._hosted.HostedStore`
is the hosted platform's counterpart; :func:`~._open.open_store` builds either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import ConfigurationError
from .._mem0.backend import Mem0Backend
from .._mem0.call_context import caller_loop_scope
from .._mem0.errors import mapped_errors
from . import _history_db
from ._models import ChatChoice
from ._records import MemoryRecord

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase

    from .._scope import Scope
    from ._config import Settings

__all__ = ["Mem0Calls", "MemoryStore", "UnsupportedError", "scored"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_PAGE = 1000
# Vector stores without paging (pgvector) are listed in one query of at most this many rows.
_LIST_ALL = 10_000_000


class UnsupportedError(ConfigurationError):
    """The backend cannot do what the command asks."""


def scored(entries: Iterable[dict[str, Any]]) -> list[tuple[MemoryRecord, float | None]]:
    """mem0's search entries as records with their scores, in mem0's order."""
    out = []
    for item in entries:
        score = item.get("score")
        out.append(
            (
                MemoryRecord.from_result(item),
                float(score) if isinstance(score, int | float) else None,
            )
        )
    return out


def _rows_of(listed: Any) -> list[Any]:
    # mem0 2.2 vector stores answer list() as [rows], (rows, next_offset) or rows.
    if isinstance(listed, tuple | list) and listed and isinstance(listed[0], list | tuple):
        return list(listed[0])
    return list(listed) if isinstance(listed, list | tuple) else []


class Mem0Calls:
    """The commands' calls that go through mem0's API as they are (both kinds of store).

    Subclasses set ``backend`` (a :class:`~agentscope_mem0._mem0.backend.Mem0Backend`)
    and define ``records``.
    """

    backend: Mem0Backend

    async def records(self, scope: Scope | None) -> list[MemoryRecord]:
        """Every memory of ``scope``, oldest first."""
        raise NotImplementedError

    async def count(self, scope: Scope | None) -> int:
        """How many memories ``scope`` holds."""
        return len(await self.records(scope))

    async def search(
        self, query: str, scope: Scope, *, top_k: int, threshold: float | None
    ) -> list[tuple[MemoryRecord, float | None]]:
        """mem0's search in ``scope``, best first, with scores."""
        found = await self.backend.search_raw(query, scope, top_k=top_k, threshold=threshold)
        return scored(found)

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        """mem0's change history of one memory, oldest first."""
        return await self.backend.history(memory_id)

    async def add(self, text: str, scope: Scope, *, infer: bool) -> list[dict[str, Any]]:
        """Store ``text`` through mem0 (extracted, or verbatim without ``infer``)."""
        return await self.backend.add([{"role": "user", "content": text}], scope, infer=infer)

    async def delete(self, memory_id: str) -> tuple[str, ...]:
        """Delete one memory through mem0 (it records a DELETE in the history).

        Returns:
            The ids of the memories it hid that are current again (those it
            superseded, the oldest repeat merged into it).
        """
        return (await self.backend.forget(memory_id)).current_again


class MemoryStore(Mem0Calls):
    """An open-source mem0 client (``AsyncMemory``) and its vector store.

    Args:
        memory: The mem0 client; this store closes it.
        settings: Where it came from.
        embedding_model: The AgentScope embedder behind it (``None`` when the
            client was built elsewhere, as for the inspector a service mounts).
        chat: The extraction model, when the command extracts.
        on_close: Releases what building the client opened.
    """

    hosted = False

    def __init__(
        self,
        memory: Any,
        *,
        settings: Settings,
        embedding_model: EmbeddingModelBase | None,
        chat: ChatChoice | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.memory = memory
        self.backend = Mem0Backend(memory)
        self.settings = settings
        self.embedding_model = embedding_model
        self.chat = chat
        self._on_close = on_close
        self._closed = False

    async def _io(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        with mapped_errors(what), caller_loop_scope():
            return await asyncio.to_thread(fn, *args, **kwargs)

    @property
    def _vectors(self) -> Any:
        return self.memory.vector_store

    def _qdrant(self) -> Any | None:
        from qdrant_client import QdrantClient

        client = getattr(self._vectors, "client", None)
        return client if isinstance(client, QdrantClient) else None

    # -- reading ------------------------------------------------------------

    def _scan(self, scope: Scope | None) -> list[MemoryRecord]:
        filters = self.backend.read_filters(scope) if scope else None
        qdrant = self._qdrant()
        if qdrant is None:
            listed = self._vectors.list(filters=filters, top_k=_LIST_ALL)
            return [MemoryRecord.from_payload(row.id, row.payload) for row in _rows_of(listed)]
        from qdrant_client import models

        condition = (
            models.Filter(
                must=[
                    models.FieldCondition(key=key, match=models.MatchValue(value=value))
                    for key, value in filters.items()
                ]
            )
            if filters
            else None
        )
        records: list[MemoryRecord] = []
        offset: Any = None
        while True:
            points, offset = qdrant.scroll(
                collection_name=self._vectors.collection_name,
                scroll_filter=condition,
                limit=_PAGE,
                offset=offset,
                with_payload=True,
                with_vectors=False,
            )
            records.extend(MemoryRecord.from_payload(p.id, p.payload) for p in points)
            if offset is None:
                return records

    async def records(self, scope: Scope | None) -> list[MemoryRecord]:
        """Every memory of ``scope`` (of everyone when ``None``), oldest first."""
        found = await self._io("list", self._scan, scope)
        return sorted(found, key=lambda r: (r.created_at or "", r.id))

    async def count(self, scope: Scope | None) -> int:
        """How many memories ``scope`` holds (of everyone when ``None``)."""
        counter = getattr(self._vectors, "count", None)  # the Qdrant Edge store
        if counter is None:
            return await super().count(scope)
        filters = self.backend.read_filters(scope) if scope else None
        return int(await self._io("count", counter, filters))

    async def facet(self, key: str, *, limit: int = 1_000_000) -> dict[str, int] | None:
        """Memories per value of payload field ``key`` (``user_id``, ``agent_id``),
        read from the engine's index without scanning the memories; ``None``
        when the store cannot (only the Qdrant Edge store can)."""
        shard = getattr(self._vectors, "shard", None)
        if shard is None:
            return None
        from qdrant_edge import FacetRequest

        request = FacetRequest(key=key, limit=limit, exact=True)
        answer = await self._io("facet", shard.call, "facet", lambda s: s.facet(request))
        return {str(hit.value): int(hit.count) for hit in answer.hits}

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """One memory by id (with its whole payload), or ``None``."""
        row = await self._io("get", self._vectors.get, vector_id=memory_id)
        return None if row is None else MemoryRecord.from_payload(row.id, row.payload)

    # -- writing through mem0 -------------------------------------------------

    async def delete_scope(self, scope: Scope, records: Sequence[MemoryRecord]) -> None:
        """Delete every memory of ``scope`` (``records``, as listed) through mem0."""
        await self.backend.delete_all(scope)

    # -- rows with their own ids (import) -------------------------------------

    async def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the store holds."""
        qdrant = self._qdrant()
        if qdrant is not None:
            points = await self._io(
                "retrieve",
                qdrant.retrieve,
                collection_name=self._vectors.collection_name,
                ids=list(ids),
                with_payload=False,
                with_vectors=False,
            )
            return {str(p.id) for p in points}
        known = getattr(self._vectors, "existing_ids", None)  # the Qdrant Edge store
        if known is not None:
            return set(await self._io("retrieve", known, list(ids)))
        found = set()
        for memory_id in ids:
            if await self._io("get", self._vectors.get, vector_id=memory_id) is not None:
                found.add(memory_id)
        return found

    async def insert(self, records: Sequence[MemoryRecord]) -> None:
        """Store ``records`` with their own ids, dates and metadata.

        Embeds the texts with this store's embedder and writes the rows in
        one call; see :meth:`ensure_history` for their history.
        """
        if not records:
            return
        from mem0.utils.lemmatization import lemmatize_for_bm25

        texts = [r.text for r in records]
        vectors = await self._io("embed", self.memory.embedding_model.embed_batch, texts, "add")
        payloads = [r.to_payload(lemmatized=lemmatize_for_bm25(r.text)) for r in records]
        await self._io(
            "insert",
            self._vectors.insert,
            vectors=vectors,
            payloads=payloads,
            ids=[r.id for r in records],
        )

    async def ensure_history(self, records: Sequence[MemoryRecord]) -> None:
        """Give each of ``records`` without history an ``ADD`` entry dated ``created_at``.

        That is what mem0 records when it adds a memory; doing it after the
        rows are written means an interrupted import leaves no entry for a
        memory it did not store, and the next run adds what is missing.
        """
        if records:
            await self._io("history", _history_db.add_missing_history, self.memory, records)

    async def purge_history(self, ids: Iterable[str]) -> int:
        """Delete mem0's history entries of ``ids``; returns how many."""
        return await self._io("purge history", _history_db.purge_history, self.memory, list(ids))

    async def purge_messages(self, scope: Scope) -> int:
        """Delete the conversation messages mem0 keeps for extraction in ``scope``."""
        wanted = self.backend.read_filters(scope)
        return await self._io("purge messages", _history_db.purge_messages, self.memory, wanted)

    # -- facts for status and closing -----------------------------------------

    def vector_size(self) -> int | None:
        """The vector size the store holds (``None`` when it cannot tell)."""
        from .._vectors.size import pg_vector_size, qdrant_vector_size

        qdrant = self._qdrant()
        name = getattr(self._vectors, "collection_name", None)
        try:
            if qdrant is not None:
                return qdrant_vector_size(qdrant, name) if name else None
            if getattr(self._vectors, "shard", None) is not None:  # the Qdrant Edge store
                return int(self._vectors.embedding_model_dims)
            dsn = getattr(self.settings, "dsn", None)
            if self.settings.backend == "pgvector" and dsn:
                return pg_vector_size(dsn, self.settings.collection)
            return None
        except Exception as exc:
            logger.debug("could not read the vector size: %s", exc)
            return None

    def close(self) -> None:
        """Close the mem0 client and what was opened for it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.memory.close()
        if self._on_close is not None:
            self._on_close()
