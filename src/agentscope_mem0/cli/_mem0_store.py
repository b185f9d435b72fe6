"""The store a command opens: a mem0 client, and what the commands and the
inspector do with its memories.

mem0's API calls go through :class:`~agentscope_mem0._mem0.backend.Mem0Backend`,
the one door to mem0. On an open-source client (the embedded folder, pgvector,
a Qdrant server) listing, export and import read and write the vector store's
rows, so that ids, dates and metadata survive an export and import unchanged;
mem0's history database is in :mod:`._history_db`. The hosted platform is read
through its API only, and takes no import: it assigns its own ids and dates.
It also files a user's memories without the agent's id, and a read naming both
ids finds nothing, so reads of a user and agent name the user only there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import (
    ConfigurationError,
    DimensionMismatchError,
    PermanentBackendError,
    StoreLockedError,
)
from .._mem0.call_context import caller_loop_scope
from .._mem0.errors import mapped_errors
from .._memories.hit import normalise_hits
from .._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATE_REASON,
    RESTORED,
    SUPERSEDED_BY,
    SUPERSEDED_REASON,
    overfetch,
)
from .._memories.release import Restored
from .._memories.validity import current_as_of, time_window
from .._postgres.connection import psycopg_for
from .._scope import Scope, is_hosted
from . import _history_db
from ._folder_rows import FolderRows
from ._lock import lock_holder
from ._models import (
    ChatChoice,
    embedder_size,
    embedding_model_from_spec,
    inert_chat_model,
    inert_embedding_model,
)
from ._records import MemoryRecord, timeline_links

if TYPE_CHECKING:
    from .._mem0.backend import Mem0Backend
    from .._memories.release import Restored
    from .._working.stores import WorkingRecord
    from ._config import Settings

__all__ = ["MemoryStore", "open_store"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_PAGE = 1000
# Vector stores without paging (pgvector) are listed in one query of at most this many rows.
_LIST_ALL = 10_000_000
_HOSTED_PAGE = 100
_CONNECT_TIMEOUT = 5
# History events whose other memory is the newer one.
_NEWER = frozenset({"SUPERSEDED_BY", "EXTENDED_BY", "DUPLICATES"})
# Where the reason of a link is kept: on which of the two memories, in which field.
_REASONS = {
    "SUPERSEDED_BY": (True, SUPERSEDED_REASON),
    "SUPERSEDES": (False, SUPERSEDED_REASON),
    "DUPLICATE_OF": (True, DUPLICATE_REASON),
    "DUPLICATES": (False, DUPLICATE_REASON),
}


def _reason(event: str, record: MemoryRecord, other: MemoryRecord | None) -> str | None:
    """Why ``record`` and ``other`` are linked by ``event``: the readings or the rule
    the judgement kept on the memory it hid (``None`` when none was kept)."""
    if event not in _REASONS:
        return None
    on_record, field = _REASONS[event]
    holder = record if on_record else other
    reason = holder.metadata.get(field) if holder is not None else None
    return reason if isinstance(reason, str) else None


class MemoryStore:
    """A mem0 client (``AsyncMemory``, or the hosted ``AsyncMemoryClient``) as
    the commands use it.

    On the embedded folder a store reads through :class:`~._folder_rows.FolderRows`
    and builds its mem0 client on first use (a search, a write): reading
    commands start without importing mem0 or loading the embedder.

    Args:
        client: The mem0 client; ``None`` to build it with ``build`` when first needed.
        settings: Where it came from.
        on_close: Releases what opening it took; ``None`` for a client that
            belongs to someone else (the inspector a service mounts).
        rows: Reads the embedded folder without mem0 (``None``: through the client).
        build: Builds the client and what releases it, for ``client=None``.
    """

    def __init__(
        self,
        client: Any,
        settings: Settings,
        *,
        on_close: Callable[[], None] | None = None,
        rows: FolderRows | None = None,
        build: Callable[[], tuple[Any, Callable[[], None]]] | None = None,
    ) -> None:
        if client is None and build is None:
            raise ValueError("give a mem0 client, or build to make one")
        self._client = client
        self._build = build
        self._rows = rows
        self.settings = settings
        self.hosted = settings.backend == "hosted" if client is None else is_hosted(client)
        self._on_close = on_close
        self._backend: Mem0Backend | None = None
        self._on_client_close: Callable[[], None] | None = None
        self._building = threading.Lock()

    @property
    def client(self) -> Any:
        """The mem0 client, built now if it was not yet."""
        with self._building:
            if self._client is None:
                assert self._build is not None
                self._client, self._on_client_close = self._build()
        return self._client

    async def ready(self) -> None:
        """Build the client off the event loop (seconds of imports), once."""
        if self._client is None:
            await asyncio.to_thread(lambda: self.client)

    @property
    def backend(self) -> Mem0Backend:
        """The one door to the client (:class:`Mem0Backend`)."""
        if self._backend is None:
            from .._mem0.backend import Mem0Backend

            self._backend = Mem0Backend(self.client)
            self._backend.grounded = True  # `add` keeps what the text grounds, as a middleware does
        return self._backend

    async def _io(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        with mapped_errors(what), caller_loop_scope():
            return await asyncio.to_thread(fn, *args, **kwargs)

    @property
    def _vectors(self) -> Any:
        """The client's vector store (building the client): for writes."""
        return self.client.vector_store

    @property
    def _reads(self) -> Any:
        """What reads the stored rows: the folder reader, else the client's vector store."""
        return self._rows if self._rows is not None else self._vectors

    def _filters(self, scope: Scope) -> dict[str, Any]:
        """The filters reading ``scope`` in one call."""
        if not scope.with_user_level:
            return scope.filters(hosted=self.hosted)  # no client needed to say them
        return self.backend.read_filters(scope)

    def _qdrant(self) -> Any | None:
        """The Qdrant server's client, when that is the vector store."""
        if self._rows is not None or self.settings.backend != "qdrant":
            return None  # checked first: importing qdrant-client alone takes seconds
        from qdrant_client import QdrantClient

        client = getattr(self._vectors, "client", None)
        return client if isinstance(client, QdrantClient) else None

    # -- reading ------------------------------------------------------------

    async def records(self, scope: Scope | None) -> list[MemoryRecord]:
        """Every memory of ``scope`` (of everyone when ``None``), oldest first."""
        if self.hosted:
            found = await self._hosted_records(scope)
        else:
            found = await self._io("list", self._scan, scope)
        return sorted(found, key=lambda r: (r.created_at or "", r.id))

    async def _hosted_records(self, scope: Scope | None) -> list[MemoryRecord]:
        if scope is None:
            raise ConfigurationError("the hosted platform lists memories per user: give --user")
        found: list[MemoryRecord] = []
        page, more = 1, True
        while more:
            items, more = await self.backend.get_page(scope, page=page, page_size=_HOSTED_PAGE)
            found += [MemoryRecord.from_result(i) for i in items]
            page, more = page + 1, more and bool(items)
        return found

    def _scan(self, scope: Scope | None) -> list[MemoryRecord]:
        filters = self._filters(scope) if scope else None
        qdrant = self._qdrant()
        if qdrant is None:
            listed = self._reads.list(filters=filters, top_k=_LIST_ALL)
            # mem0 2.2 vector stores answer list() as [rows], (rows, next_offset) or rows.
            if listed and isinstance(listed[0], list | tuple):
                listed = listed[0]
            return [MemoryRecord.from_payload(row.id, row.payload) for row in listed or []]
        from qdrant_client import models

        condition = models.Filter(
            must=[
                models.FieldCondition(key=key, match=models.MatchValue(value=value))
                for key, value in (filters or {}).items()
            ]
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
            records += [MemoryRecord.from_payload(p.id, p.payload) for p in points]
            if offset is None:
                return records

    async def count(self, scope: Scope | None, *, current_only: bool = False) -> int:
        """How many memories ``scope`` holds (of everyone when ``None``); with
        ``current_only``, leaving out those superseded or merged as repeats."""
        counter = None if self.hosted else getattr(self._reads, "count", None)
        shard = None if self.hosted else getattr(self._reads, "shard", None)
        if counter is None or (current_only and shard is None):
            # Only the Qdrant Edge store counts without listing.
            return sum(1 for r in await self.records(scope) if not (current_only and r.hidden))
        filters = self._filters(scope) if scope else None
        if not current_only:
            return int(await self._io("count", counter, filters))
        from qdrant_edge import CountRequest

        request = CountRequest(exact=True, filter=_current_filter(filters))
        assert shard is not None  # checked above
        return int(await self._io("count", shard.call, "count", lambda s: s.count(request)))

    async def facet(self, key: str, *, current_only: bool = False) -> dict[str, int] | None:
        """Memories per value of payload field ``key`` (``user_id``, ``agent_id``),
        from the engine's index without reading the memories (with
        ``current_only``, the current ones only); ``None`` when the store
        cannot (only the Qdrant Edge store can)."""
        shard = None if self.hosted else getattr(self._reads, "shard", None)
        if shard is None:
            return None
        from qdrant_edge import FacetRequest

        wanted = _current_filter(None) if current_only else None
        request = FacetRequest(key=key, limit=1_000_000, exact=True, filter=wanted)
        answer = await self._io("facet", shard.call, "facet", lambda s: s.facet(request))
        return {str(hit.value): int(hit.count) for hit in answer.hits}

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """One memory by id (with its whole payload), or ``None``."""
        if self.hosted:
            raw = await self.backend.get(memory_id)
            return None if raw is None else MemoryRecord.from_result(raw)
        row = await self._io("get", self._reads.get, vector_id=memory_id)
        return None if row is None else MemoryRecord.from_payload(row.id, row.payload)

    async def search(
        self,
        query: str,
        scope: Scope,
        *,
        top_k: int,
        threshold: float | None,
        show_all: bool,
        as_of: datetime | None = None,
    ) -> list[tuple[MemoryRecord, float | None]]:
        """mem0's search in ``scope``, best first, with scores; as for an agent
        (:meth:`Mem0Backend.search`), superseded and repeated memories are left
        out unless ``show_all``; with ``as_of``, what was current then."""

        await self.ready()

        async def fetch(n: int) -> list[tuple[MemoryRecord, float | None]]:
            found = await self.backend.search_raw(query, scope, top_k=n, threshold=threshold)
            return [(MemoryRecord.from_result(item), _score(item)) for item in found]

        if as_of is not None:
            wide = await self.backend.search_raw(
                query, scope, top_k=time_window(top_k), threshold=threshold
            )
            then = [i for i in wide if any(current_as_of(h, as_of) for h in normalise_hits([i]))]
            return [(MemoryRecord.from_result(item), _score(item)) for item in then[:top_k]]
        hits = await fetch(top_k)
        if show_all:
            return hits
        current = [hit for hit in hits if not hit[0].hidden]
        if len(current) < len(hits) and len(hits) >= top_k:
            current = [hit for hit in await fetch(overfetch(top_k)) if not hit[0].hidden]
        return current[:top_k]

    async def history(self, memory_id: str) -> tuple[MemoryRecord | None, list[dict[str, Any]]]:
        """One memory, and its history: mem0's changes, then the memories it
        supersedes, extends or repeats and those that supersede, extend or repeat it."""
        record = await self.get(memory_id)
        if self._rows is not None:
            entries = await self._io("history", self._rows.history, memory_id)
        else:
            entries = await self.backend.history(memory_id)
        if record is None or not record.user_id:
            return record, entries
        mine = {r.id: r for r in await self.records(Scope(record.user_id))}
        mine[record.id] = record
        for event, other_id in timeline_links(list(mine.values()))[record.id]:
            other = mine.get(other_id)
            text = other.text if other else None
            newer = event in _NEWER
            entries.append(
                {
                    "event": event,
                    "memory_id": other_id,
                    "memory": text,
                    "created_at": other.created_at if other else None,
                    "old_memory": record.text if newer else text,
                    "new_memory": text if newer else record.text,
                    "reason": _reason(event, record, other),
                }
            )
        for undone in record.metadata.get(RESTORED) or []:
            if not isinstance(undone, dict):
                continue
            other = mine.get(str(undone.get("by")))
            reason = undone.get("reason")
            entries.append(
                {
                    "event": "RESTORED",
                    "memory_id": undone.get("by"),
                    "memory": other.text if other else None,
                    "created_at": undone.get("at"),
                    "old_memory": other.text if other else None,
                    "new_memory": record.text,
                    "reason": f"was {undone.get('was')}" + (f" ({reason})" if reason else ""),
                }
            )
        return record, entries

    async def restore(self, memory_id: str) -> Restored | None:
        """Make a superseded or merged memory current again (see
        :func:`agentscope_mem0._memories.release.restore`)."""
        await self.ready()
        return await self.backend.restore(memory_id)

    # -- writing through mem0 -------------------------------------------------

    async def add(self, text: str, scope: Scope, *, infer: bool) -> list[dict[str, Any]]:
        """Store ``text`` through mem0 (extracted, or verbatim without ``infer``),
        then judge the new memories as the middleware does after a write.

        The judgement (:mod:`.._write.judge`) looks at what the reads of
        ``scope`` show: every memory of the user without an agent, the agent's
        and the user's own with one. It asks the extraction model; a verbatim
        add only merges repeats. The hosted platform keeps its own timeline.

        Returns:
            mem0's result entries, each with the memory's ``metadata`` after
            the judgement (``supersedes``, ``duplicate_of``, ...).
        """
        await self.ready()
        said = datetime.now(UTC)
        message = [{"role": "user", "content": text}]
        results = await self.backend.add(message, scope, infer=infer, said_at=said)
        if self.hosted or not results:
            return results
        from .._write.judge import build_time_judge

        await build_time_judge(self.backend, infer).judge(scope, results, said)
        for result in results:
            record = await self.get(str(result.get("id")))
            if record is not None:
                result["metadata"] = record.metadata
        return results

    async def forget(
        self, record: MemoryRecord, *, keep_history: bool = False
    ) -> tuple[int, list[MemoryRecord], list[MemoryRecord]]:
        """Forget ``record`` and its repeats (and their change history, unless
        ``keep_history``), then check that they are gone.

        Returns:
            How many history entries were removed, the memories it hid that
            are current again (what it superseded, when nothing newer
            replaces them), and the repeats forgotten with it.

        Raises:
            PermanentBackendError: A memory is still there.
        """
        await self.ready()
        done = await self.backend.forget(record.id)
        repeats = [
            MemoryRecord(id=str(hit.id), text=hit.memory, agent_id=hit.agent_id)
            for hit in done.repeats
        ]
        ids = [record.id, *(r.id for r in repeats)]
        purged = 0 if keep_history else await self._purge_history(ids)
        for memory_id in ids:
            if await self.get(memory_id) is not None:
                raise PermanentBackendError(f"memory {memory_id} is still there after deleting it")
        back = [await self.get(i) for i in done.current_again]
        if record.user_id:
            await self.clear_profile(record.user_id)  # it may carry the forgotten fact
        return purged, [r for r in back if r is not None], repeats

    async def forget_all(
        self, scope: Scope, records: Sequence[MemoryRecord], *, keep_history: bool = False
    ) -> tuple[int, int, int]:
        """Forget every memory of ``scope`` (``records``, as listed), their change
        history and the messages mem0 kept for the scope, unless ``keep_history``.

        Returns:
            History entries removed, kept messages removed, memories remaining.
        """
        await self.ready()
        if self.hosted and scope.agent_id is not None:
            # A delete_all naming user and agent matches nothing in the user's
            # space; delete what the listing showed instead.
            for record in records:
                await self.backend.delete(record.id)
        else:
            await self.backend.delete_all(scope)
        history = messages = 0
        if not keep_history:
            history = await self._purge_history([r.id for r in records])
            if not self.hosted:
                wanted = self.backend.read_filters(scope)
                messages = await self._io(
                    "purge messages", _history_db.purge_messages, self.client, wanted
                )
        await self.clear_profile(scope.user_id)  # distilled from what was forgotten
        return history, messages, await self.count(scope)

    # -- the user's profile (a record of the working-memory store) ------------

    async def _on_profiles(self, what: str, fn: Callable[..., T], /, *args: Any) -> T:
        from ._working_store import open_working_store

        def run() -> T:
            store = open_working_store(self.settings)
            try:
                return fn(store, *args)
            finally:
                store.close()

        return await self._io(what, run)

    async def profile(self, user_id: str) -> WorkingRecord | None:
        """The user's profile record; ``None`` when there is none or it is empty."""
        from .._profile.record import load_profile

        return await self._on_profiles("read the profile", load_profile, user_id)

    async def clear_profile(self, user_id: str) -> WorkingRecord | None:
        """Empty the user's profile; ``None`` when there was none."""
        from .._profile.record import clear_profile

        return await self._on_profiles("clear the profile", clear_profile, user_id)

    async def _purge_history(self, ids: Iterable[str]) -> int:
        if self.hosted:  # the platform keeps its own history
            return 0
        return await self._io("purge history", _history_db.purge_history, self.client, list(ids))

    # -- rows with their own ids (import) -------------------------------------

    async def import_batch(self, records: Sequence[MemoryRecord]) -> int:
        """Store those of ``records`` the store does not hold, with their own
        ids, dates and metadata; returns how many were new.

        Each without history gets an ``ADD`` entry dated ``created_at``, as mem0
        records an add; written after the rows, so an interrupted import leaves
        no entry for a memory it did not store, and the next run adds it.
        """
        if self.hosted:
            raise ConfigurationError(
                "import into the hosted mem0 platform is not supported: the platform assigns "
                "its own ids and dates, so an exact and idempotent import is impossible. "
                "Import into an open-source backend (embedded, pgvector, qdrant) instead"
            )
        await self.ready()
        held = await self._existing_ids([r.id for r in records])
        new = [r for r in records if r.id not in held]
        await self.insert(new)
        await self._io("history", _history_db.add_missing_history, self.client, records)
        return len(new)

    async def _existing_ids(self, ids: list[str]) -> set[str]:
        qdrant = self._qdrant()
        if qdrant is not None:
            points = await self._io(
                "retrieve",
                qdrant.retrieve,
                collection_name=self._vectors.collection_name,
                ids=ids,
                with_payload=False,
                with_vectors=False,
            )
            return {str(p.id) for p in points}
        known = getattr(self._vectors, "existing_ids", None)  # the Qdrant Edge store
        if known is not None:
            return set(await self._io("retrieve", known, ids))
        found = [await self._io("get", self._vectors.get, vector_id=i) for i in ids]
        return {i for i, row in zip(ids, found, strict=True) if row is not None}

    async def insert(self, records: Sequence[MemoryRecord]) -> None:
        """Write ``records`` as rows, embedded with this store's embedder, in one call."""
        if not records:
            return
        from mem0.utils.lemmatization import lemmatize_for_bm25

        texts = [r.text for r in records]
        vectors = await self._io("embed", self.client.embedding_model.embed_batch, texts, "add")
        payloads = [r.to_payload(lemmatized=lemmatize_for_bm25(r.text)) for r in records]
        await self._io(
            "insert",
            self._vectors.insert,
            vectors=vectors,
            payloads=payloads,
            ids=[r.id for r in records],
        )

    def close(self) -> None:
        """Close the mem0 client and what opening it took, if it is ours. Idempotent."""
        release, self._on_client_close = self._on_client_close, None
        if release is not None:
            release()
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def _current_filter(filters: dict[str, Any] | None) -> Any:
    """The Qdrant Edge filter of the memories under mem0 ``filters`` that are
    current: neither superseded nor merged into another as a repeat."""
    from qdrant_edge import Filter, IsEmptyCondition

    from ..local._edge_filters import build_filter

    # The judgement clears these fields (None) when it undoes a link: empty either way.
    must: list[Any] = [IsEmptyCondition(SUPERSEDED_BY), IsEmptyCondition(DUPLICATE_OF)]
    scoped = build_filter(filters)
    if scoped is not None:
        must.append(scoped)
    return Filter(must=must)


def _score(item: Any) -> float | None:
    score = item.get("score") if isinstance(item, dict) else None
    return float(score) if isinstance(score, int | float) else None


# -- opening --------------------------------------------------------------------


def open_store(
    settings: Settings, *, chat: ChatChoice | None = None, embeds: bool = False
) -> MemoryStore:
    """Open the store the settings name.

    Args:
        settings: From :func:`~._config.load_settings`.
        chat: The extraction model; ``None`` for commands that do not extract.
        embeds: The command embeds (searches, adds, imports, forgetting one
            memory); the others get a
            stand-in of the configured embedder's size.

    Raises:
        ConfigurationError: Bad settings, or an embedder that does not fit.
        StoreLockedError: Another process holds the embedded folder.
        TransientBackendError: A server backend could not be reached.
    """
    if settings.backend == "hosted":
        if not settings.api_key:
            raise ConfigurationError(
                f"backend 'hosted' needs an API key in ${settings.api_key_env}; "
                "get one at https://app.mem0.ai"
            )
        from mem0 import AsyncMemoryClient

        with mapped_errors("connecting to the hosted platform"):
            client = AsyncMemoryClient(api_key=settings.api_key, host=settings.url)
        return MemoryStore(client, settings)
    if settings.backend == "embedded":
        return _open_folder(settings, chat=chat, embeds=embeds)
    embedding = _embedding_model(settings, embeds=embeds)
    chat_model = chat.model if chat is not None else inert_chat_model()
    from .._mem0.clients import build_memory, close_memory
    from ..backends import prepare_pgvector

    history = str(settings.history_db) if settings.history_db else None
    fields = settings.server_fields(dims=embedding.dimensions, history_db_path=history)
    if settings.backend == "pgvector":
        _check_postgres(settings.dsn or "")
        with mapped_errors("preparing the pgvector tables"):
            prepare_pgvector(fields)
    with mapped_errors(f"connecting to the {settings.backend} backend"):
        # The client the middleware builds: history (and so the outbox) in the same place.
        memory = build_memory(chat_model=chat_model, embedding_model=embedding, mem0_config=fields)
    store = MemoryStore(memory, settings, on_close=lambda: close_memory(memory))
    size = _server_vector_size(store)
    if size is not None and size != embedding.dimensions:
        store.close()
        raise DimensionMismatchError(
            f"the embedding model makes {embedding.dimensions}-dimensional vectors but "
            f"{settings.backend} collection {settings.collection!r} holds {size}-dimensional "
            "ones; configure the embedder these memories were stored with "
            "(embedding_model in the config file, or $AGENTSCOPE_MEM0_EMBEDDER)"
        )
    return store


def _embedding_model(settings: Settings, *, embeds: bool) -> Any:
    """The configured embedder, or a stand-in of its size for a command that never embeds."""
    spec = settings.embedding_model
    if embeds:
        return embedding_model_from_spec(spec)
    return inert_embedding_model(embedder_size(spec)[0])


def _open_folder(settings: Settings, *, chat: ChatChoice | None, embeds: bool) -> MemoryStore:
    """The embedded folder's store: read without mem0, its client built on first use."""
    from ..local._embedded import close_shared_clients, refuse_retired_engine

    refuse_retired_engine()
    folder = settings.folder
    # A command is a process of its own and hands the folder back when it is
    # done; run inside a process that already holds the folder, it gives
    # back only its own use of it (that process's clients stay open).
    holder = lock_holder(folder)
    held_here = holder is not None and holder.is_self

    def build() -> tuple[Any, Callable[[], None]]:
        from .._mem0.clients import build_local_memory, close_memory

        embedding = _embedding_model(settings, embeds=embeds)
        chat_model = chat.model if chat is not None else inert_chat_model()
        try:
            memory = build_local_memory(chat_model, embedding_model=embedding, folder=folder)
        except StoreLockedError as exc:
            raise StoreLockedError(_locked_message(settings)) from exc
        return memory, lambda: close_memory(memory)

    def release() -> None:
        if not held_here:
            close_shared_clients(folder)

    try:
        # The embedder's size is known without loading it (see embedder_size).
        rows = FolderRows.open(folder, embedder_size(settings.embedding_model)[0])
    except StoreLockedError as exc:
        raise StoreLockedError(_locked_message(settings)) from exc
    store = MemoryStore(None, settings, on_close=release, rows=rows, build=build)
    if rows is None:
        try:  # a new or release-0.1 folder: mem0 creates or migrates it now
            store.client  # noqa: B018
        except BaseException:
            store.close()
            raise
    return store


def _locked_message(settings: Settings) -> str:
    """Why a command cannot open the embedded folder, and what to do, in flags."""
    holder = lock_holder(settings.folder)
    who = holder.describe() if holder else "another process (which could not be identified)"
    return (
        f"the data folder {settings.folder} is in use by {who}: the embedded store "
        "serves one process at a time. Stop that process first, or use another "
        "--folder, or keep the memories where both can reach them (pgvector or a "
        "Qdrant server, named with --config)"
    )


def _server_vector_size(store: MemoryStore) -> int | None:
    """The vector size a server store holds (``None`` when it cannot tell)."""
    from .._vectors.size import pg_vector_size, qdrant_vector_size

    qdrant = store._qdrant()
    try:
        if qdrant is not None:
            return qdrant_vector_size(qdrant, store._vectors.collection_name)
        settings = store.settings
        return pg_vector_size(settings.dsn or "", settings.collection)
    except Exception as exc:
        logger.debug("could not read the vector size: %s", exc)
        return None


def _check_postgres(dsn: str) -> None:
    """Fail fast on an unreachable server: mem0's pool would wait 30 s per call."""
    psycopg = psycopg_for("the pgvector backend")
    with mapped_errors("connecting to PostgreSQL"):
        psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT).close()
