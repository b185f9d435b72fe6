"""What the commands do with the memories: one class per kind of mem0 client.

:class:`MemoryStore` wraps an open-source ``mem0.AsyncMemory`` (the embedded
folder, pgvector or a Qdrant server). Reads and writes of single memories go
through mem0's API; listing, export and import work on the vector store's
rows directly, so that ids, dates and metadata survive an export and import
unchanged. :class:`HostedStore` wraps the hosted platform's client, which only
offers mem0's API. :func:`open_store` builds the right one from the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._backend import classify_error
from .._bridge import caller_loop_scope
from .._exceptions import BackendError, ConfigurationError, StoreLockedError
from .._scope import Scope
from ._lock import lock_holder
from ._models import ChatChoice, embedding_model_from_spec, inert_chat_model
from ._records import MemoryRecord

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase

    from ._config import Settings

__all__ = ["HostedStore", "MemoryStore", "open_store", "pg_vector_size"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_PAGE = 1000
# Vector stores without paging (pgvector) are listed in one query of at most this many rows.
_LIST_ALL = 10_000_000
_CONNECT_TIMEOUT = 5


class UnsupportedError(ConfigurationError):
    """The backend cannot do what the command asks."""


def _scope_filters(scope: Scope) -> dict[str, str]:
    return scope.filters()


@contextlib.contextmanager
def _mapped(what: str) -> Any:
    """Turn a mem0 or vector-store failure into the package's BackendError kinds."""
    try:
        yield
    except (asyncio.CancelledError, ConfigurationError, BackendError):
        raise
    except Exception as exc:
        kind = classify_error(exc)
        raise kind(f"mem0 {what} failed: {type(exc).__name__}: {exc}") from exc


def _rows_of(listed: Any) -> list[Any]:
    # mem0 2.2 vector stores answer list() as [rows], (rows, next_offset) or rows.
    if isinstance(listed, tuple | list) and listed and isinstance(listed[0], list | tuple):
        return list(listed[0])
    return list(listed) if isinstance(listed, list | tuple) else []


class _Mem0Writes:
    """Writes that go through mem0's own API, the same for every store."""

    memory: Any

    async def _api(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        raise NotImplementedError

    async def add(self, text: str, scope: Scope, *, infer: bool) -> list[dict[str, Any]]:
        """Store ``text`` through mem0 (extracted, or verbatim without ``infer``)."""
        kwargs: dict[str, Any] = {"user_id": scope.user_id, "infer": infer}
        if scope.agent_id:
            kwargs["agent_id"] = scope.agent_id
        message = [{"role": "user", "content": text}]
        raw = await self._api("add", lambda: self.memory.add(message, **kwargs))
        results = raw.get("results", []) if isinstance(raw, dict) else raw
        return [r for r in results or [] if isinstance(r, dict)]

    async def delete(self, memory_id: str) -> None:
        """Delete one memory through mem0 (it records a DELETE in the history)."""
        await self._api("delete", lambda: self.memory.delete(memory_id))

    async def delete_scope(self, scope: Scope) -> None:
        """Delete every memory of ``scope`` through mem0."""
        kwargs: dict[str, Any] = {"user_id": scope.user_id}
        if scope.agent_id:
            kwargs["agent_id"] = scope.agent_id
        await self._api("delete_all", lambda: self.memory.delete_all(**kwargs))


class MemoryStore(_Mem0Writes):
    """An open-source mem0 client (``AsyncMemory``) and its vector store.

    Args:
        memory: The mem0 client; this store closes it.
        settings: Where it came from.
        embedding_model: The AgentScope embedder behind it.
        chat: The extraction model, when the command extracts.
        on_close: Releases what building the client opened.
    """

    hosted = False

    def __init__(
        self,
        memory: Any,
        *,
        settings: Settings,
        embedding_model: EmbeddingModelBase,
        chat: ChatChoice | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.memory = memory
        self.settings = settings
        self.embedding_model = embedding_model
        self.chat = chat
        self._on_close = on_close
        self._closed = False

    # -- plumbing -----------------------------------------------------------

    async def _io(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        with _mapped(what), caller_loop_scope():
            return await asyncio.to_thread(fn, *args, **kwargs)

    async def _api(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        with _mapped(what), caller_loop_scope():
            return await call()

    @property
    def _vectors(self) -> Any:
        return self.memory.vector_store

    def _qdrant(self) -> Any | None:
        from qdrant_client import QdrantClient

        client = getattr(self._vectors, "client", None)
        return client if isinstance(client, QdrantClient) else None

    # -- reading ------------------------------------------------------------

    def _scan(self, scope: Scope | None) -> list[MemoryRecord]:
        filters = _scope_filters(scope) if scope else None
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
        """How many memories ``scope`` holds."""
        return len(await self.records(scope))

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """One memory by id, or ``None``."""
        row = await self._io("get", self._vectors.get, vector_id=memory_id)
        return None if row is None else MemoryRecord.from_payload(row.id, row.payload)

    async def search(
        self, query: str, scope: Scope, *, top_k: int, threshold: float | None
    ) -> list[tuple[MemoryRecord, float | None]]:
        """mem0's search in ``scope``, best first, with scores."""
        kwargs: dict[str, Any] = {"filters": _scope_filters(scope), "top_k": top_k}
        if threshold is not None:
            kwargs["threshold"] = threshold
        raw = await self._api("search", lambda: self.memory.search(query, **kwargs))
        return _scored(raw)

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        """mem0's change history of one memory, oldest first."""
        raw = await self._api("history", lambda: self.memory.history(memory_id))
        return list(raw or [])

    # -- writing ------------------------------------------------------------

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
            await self._io("history", self._add_missing_history, records)

    def _history_db(self) -> tuple[Any, Any] | None:
        db = getattr(self.memory, "db", None)
        connection = getattr(db, "connection", None)
        if connection is None:
            return None
        return db, getattr(db, "_lock", None) or contextlib.nullcontext()

    def _add_missing_history(self, records: Sequence[MemoryRecord]) -> None:
        found = self._history_db()
        if found is None:
            return
        db, lock = found
        marks = ",".join("?" * len(records))
        with lock:
            have = {
                row[0]
                for row in db.connection.execute(
                    f"SELECT DISTINCT memory_id FROM history WHERE memory_id IN ({marks})",
                    [r.id for r in records],
                )
            }
        missing = [r for r in records if r.id not in have]
        if missing:
            db.batch_add_history(
                [
                    {
                        "memory_id": r.id,
                        "old_memory": None,
                        "new_memory": r.text,
                        "event": "ADD",
                        "created_at": r.created_at,
                        "updated_at": r.updated_at,
                        "actor_id": r.actor_id,
                        "role": r.role,
                    }
                    for r in missing
                ]
            )

    async def purge_history(self, ids: Iterable[str]) -> int:
        """Delete mem0's history entries of ``ids``; returns how many."""
        return await self._io("purge history", self._purge_history, list(ids))

    def _purge_history(self, ids: list[str]) -> int:
        found = self._history_db()
        if found is None or not ids:
            return 0
        db, lock = found
        removed = 0
        with lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                cursor = db.connection.execute(
                    f"DELETE FROM history WHERE memory_id IN ({marks})", chunk
                )
                removed += cursor.rowcount
            db.connection.commit()
        return removed

    async def purge_messages(self, scope: Scope) -> int:
        """Delete the conversation messages mem0 keeps for extraction in ``scope``."""
        return await self._io("purge messages", self._purge_messages, scope)

    def _purge_messages(self, scope: Scope) -> int:
        found = self._history_db()
        if found is None:
            return 0
        db, lock = found
        wanted = _scope_filters(scope)
        with lock:
            try:
                scopes = [
                    r[0]
                    for r in db.connection.execute("SELECT DISTINCT session_scope FROM messages")
                ]
            except Exception:  # no messages table: nothing kept
                return 0
            matching = [s for s in scopes if _scope_matches(s, wanted)]
            removed = 0
            for session_scope in matching:
                cursor = db.connection.execute(
                    "DELETE FROM messages WHERE session_scope = ?", (session_scope,)
                )
                removed += cursor.rowcount
            db.connection.commit()
        return removed

    # -- facts for status ----------------------------------------------------

    def vector_size(self) -> int | None:
        """The vector size the store holds (``None`` when it cannot tell)."""
        qdrant = self._qdrant()
        name = getattr(self._vectors, "collection_name", None)
        try:
            if qdrant is not None:
                if not qdrant.collection_exists(name):
                    return None
                from qdrant_client.models import VectorParams

                vectors = qdrant.get_collection(name).config.params.vectors
                return vectors.size if isinstance(vectors, VectorParams) else None
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


def _scope_matches(session_scope: str, wanted: dict[str, str]) -> bool:
    from urllib.parse import unquote

    parts = dict(
        (key, unquote(value))
        for key, _, value in (p.partition("=") for p in session_scope.split("&"))
    )
    return all(parts.get(key) == value for key, value in wanted.items())


def _scored(raw: Any) -> list[tuple[MemoryRecord, float | None]]:
    items = raw.get("results", []) if isinstance(raw, dict) else raw
    out = []
    for item in items or []:
        if isinstance(item, dict):
            score = item.get("score")
            out.append(
                (
                    MemoryRecord.from_result(item),
                    float(score) if isinstance(score, int | float) else None,
                )
            )
    return out


class HostedStore(_Mem0Writes):
    """The hosted mem0 platform (``AsyncMemoryClient``), through mem0's API only.

    Ids and dates are the platform's own, so memories cannot be imported with
    their ids; listing and export page through ``get_all``.
    """

    hosted = True

    def __init__(self, client: Any, *, settings: Settings, chat: ChatChoice | None = None) -> None:
        self.memory = client
        self.settings = settings
        self.chat = chat
        self.embedding_model = None

    async def _api(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        with _mapped(what):
            return await call()

    async def records(self, scope: Scope | None) -> list[MemoryRecord]:
        """Every memory of ``scope``, oldest first (``scope`` is required here)."""
        if scope is None:
            raise UnsupportedError(
                "the hosted platform lists memories per user: export with --user"
            )
        found: list[MemoryRecord] = []
        page = 1
        while True:
            raw = await self._api("get_all", functools.partial(self._page, scope, page))
            items = raw.get("results", []) if isinstance(raw, dict) else raw
            found.extend(MemoryRecord.from_result(i) for i in items or [] if isinstance(i, dict))
            if not (isinstance(raw, dict) and raw.get("next")) or not items:
                break
            page += 1
        return sorted(found, key=lambda r: (r.created_at or "", r.id))

    def _page(self, scope: Scope, page: int) -> Awaitable[Any]:
        return self.memory.get_all(filters=_scope_filters(scope), page=page, page_size=100)

    async def count(self, scope: Scope | None) -> int:
        """How many memories ``scope`` holds."""
        return len(await self.records(scope))

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """One memory by id, or ``None``."""
        try:
            raw = await self._api("get", lambda: self.memory.get(memory_id))
        except BackendError as exc:
            if "notfound" in type(exc.__cause__).__name__.lower() or "404" in str(exc):
                return None
            raise
        return MemoryRecord.from_result(raw) if isinstance(raw, dict) and raw else None

    async def search(
        self, query: str, scope: Scope, *, top_k: int, threshold: float | None
    ) -> list[tuple[MemoryRecord, float | None]]:
        """The platform's search in ``scope``."""
        kwargs: dict[str, Any] = {"filters": _scope_filters(scope), "top_k": top_k}
        if threshold is not None:
            kwargs["threshold"] = threshold
        return _scored(await self._api("search", lambda: self.memory.search(query, **kwargs)))

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The platform's change history of one memory."""
        return list(await self._api("history", lambda: self.memory.history(memory_id)) or [])

    async def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Not available: imports need an open-source store."""
        raise UnsupportedError(_NO_HOSTED_IMPORT)

    async def insert(self, records: Sequence[MemoryRecord]) -> None:
        """Not available: imports need an open-source store."""
        raise UnsupportedError(_NO_HOSTED_IMPORT)

    async def ensure_history(self, records: Sequence[MemoryRecord]) -> None:
        """Not available: imports need an open-source store."""
        raise UnsupportedError(_NO_HOSTED_IMPORT)

    async def purge_history(self, ids: Iterable[str]) -> int:
        """The platform keeps its own history; nothing to purge here."""
        return 0

    async def purge_messages(self, scope: Scope) -> int:
        """The platform keeps its own messages; nothing to purge here."""
        return 0

    def vector_size(self) -> int | None:
        """Unknown: the platform embeds on its side."""
        return None

    def close(self) -> None:
        """Nothing to release."""


_NO_HOSTED_IMPORT = (
    "import into the hosted mem0 platform is not supported: the platform assigns its "
    "own ids and dates, so an exact and idempotent import is impossible. Import into "
    "an open-source backend (embedded, pgvector, qdrant) instead"
)


def _locked_message(exc: StoreLockedError, settings: Settings) -> str:
    holder = lock_holder(settings.folder)
    if holder is None:
        return f"{exc} (the holding process could not be identified)"
    return f"{exc}. It is held by {holder.describe()}"


def open_store(settings: Settings, *, chat: ChatChoice | None = None) -> MemoryStore | HostedStore:
    """Build the store the settings name.

    Args:
        settings: From :func:`~._config.load_settings`.
        chat: The extraction model; ``None`` for commands that do not extract.

    Raises:
        ConfigurationError: Bad settings, or an embedder that does not fit.
        StoreLockedError: Another process holds the embedded folder.
        TransientBackendError: A server backend could not be reached.
    """
    if settings.backend == "hosted":
        return _open_hosted(settings, chat)
    embedding = embedding_model_from_spec(settings.embedding_model)
    chat_model = chat.model if chat is not None else inert_chat_model()
    if settings.backend == "embedded":
        from .._clients import build_local_memory
        from ..local import close_shared_clients

        # A command is a process of its own and hands the folder back when it is
        # done; run inside a process that already holds the folder, it leaves
        # that process's client open.
        holder = lock_holder(settings.folder)
        held_here = holder is not None and holder.is_self
        try:
            memory = build_local_memory(
                chat_model, embedding_model=embedding, folder=settings.folder
            )
        except StoreLockedError as exc:
            raise StoreLockedError(_locked_message(exc, settings)) from exc
        folder = settings.folder
        return MemoryStore(
            memory,
            settings=settings,
            embedding_model=embedding,
            chat=chat,
            on_close=None if held_here else lambda: close_shared_clients(folder),
        )
    return _open_server(settings, embedding, chat_model, chat)


def _open_server(
    settings: Settings, embedding: EmbeddingModelBase, chat_model: Any, chat: ChatChoice | None
) -> MemoryStore:
    from mem0 import AsyncMemory

    from .._clients import build_mem0_config
    from ..backends import pgvector_config, prepare_pgvector, qdrant_server_config

    history = str(settings.history_db) if settings.history_db else None
    if settings.backend == "pgvector":
        assert settings.dsn is not None
        _check_postgres(settings.dsn)
        fields = pgvector_config(
            settings.dsn,
            dims=embedding.dimensions,
            collection=settings.collection,
            history_db_path=history,
        )
        with _mapped("preparing the pgvector tables"):
            prepare_pgvector(fields)
    else:
        assert settings.url is not None
        fields = qdrant_server_config(
            settings.url,
            dims=embedding.dimensions,
            api_key=settings.api_key,
            collection=settings.collection,
            history_db_path=history,
        )
    config = build_mem0_config(chat_model=chat_model, embedding_model=embedding, mem0_config=fields)
    with _mapped(f"connecting to the {settings.backend} backend"):
        memory = AsyncMemory(config=config)
    store = MemoryStore(
        memory,
        settings=settings,
        embedding_model=embedding,
        chat=chat,
        on_close=lambda: _close_vector_store(memory),
    )
    size = store.vector_size()
    if size is not None and size != embedding.dimensions:
        from .._exceptions import DimensionMismatchError

        store.close()
        raise DimensionMismatchError(
            f"the embedding model makes {embedding.dimensions}-dimensional vectors but "
            f"{settings.backend} collection {settings.collection!r} holds {size}-dimensional "
            "ones; configure the embedder these memories were stored with "
            "(embedding_model in the config file, or $AGENTSCOPE_MEM0_EMBEDDER)"
        )
    return store


def pg_vector_size(dsn: str, table: str) -> int | None:
    """The size of the ``vector`` column of a pgvector table; ``None`` if there is none."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT) as conn:
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attname = 'vector'",
            (table,),
        ).fetchone()
    return int(row[0]) if row and row[0] and row[0] > 0 else None


def _check_postgres(dsn: str) -> None:
    """Fail fast on an unreachable server: mem0's pool would wait 30 s per call."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            "the pgvector backend needs psycopg 3: pip install 'agentscope-mem0[pgvector]'"
        ) from exc
    with _mapped("connecting to PostgreSQL"):
        psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT).close()


def _close_vector_store(memory: Any) -> None:
    store = getattr(memory, "vector_store", None)
    for closer in (
        getattr(getattr(store, "connection_pool", None), "close", None),
        getattr(getattr(store, "client", None), "close", None),
    ):
        if callable(closer):
            with contextlib.suppress(Exception):
                closer()


def _open_hosted(settings: Settings, chat: ChatChoice | None) -> HostedStore:
    key = settings.api_key
    if not key:
        raise ConfigurationError(
            f"backend 'hosted' needs an API key in ${settings.api_key_env}; "
            "get one at https://app.mem0.ai"
        )
    from mem0 import AsyncMemoryClient

    with _mapped("connecting to the hosted platform"):
        client = AsyncMemoryClient(api_key=key, host=settings.url)
    return HostedStore(client, settings=settings, chat=chat)
