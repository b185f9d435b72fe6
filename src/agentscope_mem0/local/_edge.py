"""One Qdrant Edge shard per collection folder per process, shared and serialised.

Qdrant Edge (``qdrant-edge-py``) is Qdrant's storage engine in-process. A
shard holds an exclusive lock on its WAL, so a second ``EdgeShard.load`` of
the same folder fails, in this process or in another. This module keeps a
process-wide registry that hands every caller the same :class:`SharedShard`
for a folder and turns another process's lock into :class:`StoreLockedError`.

Before the engine touches a folder, the process takes the package's own lock
on it (:mod:`._edge_lock`: another process's refused ``EdgeShard.load`` used
to break the live process's flushes) and checks the folder against its
high-water mark (:mod:`._edge_mark`: a store that lost files is refused, not
served). Every write first checks the free space (:mod:`._edge_space`: on a
full disk the engine's memory-mapped files crash the process with SIGBUS).

Every call into the engine goes through :meth:`SharedShard.call`, which

* holds one re-entrant lock (the engine holds the GIL for the length of each
  call anyway, so nothing is lost, and a close can never race a call);
* maps the engine's errors to this package's: its Rust panics arrive as
  ``pyo3_runtime.PanicException``, a ``BaseException`` that would otherwise
  sail past ``except Exception`` and kill the write queue's task.

Building the HNSW index never happens here (it would hold the GIL for
seconds): see :mod:`._edge_index`.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .._exceptions import (
    ConfigurationError,
    DimensionMismatchError,
    DiskFullError,
    EdgeEngineError,
    StoreLockedError,
)
from ._edge_lock import ShardLock
from ._edge_mark import HighWaterMark, check_before_open
from ._edge_space import check_free_space, never_drop
from ._folder import DATA_DIR_ENV

__all__ = [
    "DENSE",
    "SPARSE",
    "SharedShard",
    "close_shards",
    "release_user",
    "shard_dims",
    "shared_shard",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

DENSE = ""
"""The dense vector's name in a shard (Qdrant's unnamed default)."""

SPARSE = "bm25"
"""The keyword vector's name; Qdrant applies the IDF part of BM25 to it."""

SCOPE_FIELDS = ("user_id", "agent_id", "run_id", "actor_id")
"""Payload fields with a keyword index: mem0 filters every call by them."""

TENANT_FIELD = "user_id"
"""The scope field indexed as the tenant key (``is_tenant``): memories are searched per user."""

FLUSH_EVERY = 5.0
"""Seconds between segment flushes while writing (Qdrant server's default too)."""

_CONFIG_FILE = "edge_config.json"
# qdrant-edge 0.9 words the WAL lock failure this way (a plain Exception).
_WAL_LOCKED = ("WouldBlock", "Resource temporarily unavailable")


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic surfaced by pyo3 (``pyo3_runtime.PanicException``)."""
    return type(exc).__name__ == "PanicException"


def shard_dims(path: Path) -> int | None:
    """The dense vector size a shard folder was created with, or ``None`` if it has none."""
    try:
        config = json.loads((path / _CONFIG_FILE).read_text(encoding="utf-8"))
        return int(config["vectors"][DENSE]["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def shard_exists(path: Path) -> bool:
    """Whether ``path`` holds a shard (its config file is written at creation)."""
    return (path / _CONFIG_FILE).is_file()


def _new_config(dims: int) -> Any:
    from qdrant_edge import (
        Distance,
        EdgeConfig,
        EdgeSparseVectorParams,
        EdgeVectorParams,
        Modifier,
    )

    return EdgeConfig(
        vectors=EdgeVectorParams(size=dims, distance=Distance.Cosine),
        sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
    )


def _dims_message(path: Path, dims: int, existing: int) -> str:
    return (
        f"the embedding model makes {dims}-dimensional vectors, but the collection "
        f"{path.name!r} in {path.parent} holds {existing}-dimensional ones. Use the "
        "embedding model these memories were stored with, or another data folder "
        f"(folder=... or ${DATA_DIR_ENV}), or delete the folder to start over"
    )


def _locked_message(path: Path) -> str:
    return (
        f"the memory store {path} is in use by another process: the embedded "
        "store (Qdrant Edge) can be opened by one process at a time. Use the "
        "memory from one process only (the agentscope-mem0 service shares one "
        "store between all its users), or run a Qdrant server and point "
        "mem0_config's vector_store at its url, or give this process another "
        f"data folder (folder=... or ${DATA_DIR_ENV})"
    )


class SharedShard:
    """A Qdrant Edge shard shared by every store object on one folder in the process.

    Get one through :func:`shared_shard`; do not build it directly.

    Args:
        path: The shard folder.
        dims: The dense vector size; a new shard is created with it, an
            existing one must match.

    Raises:
        StoreLockedError: Another process holds the shard.
        DimensionMismatchError: The shard holds vectors of another size.
    """

    def __init__(self, path: Path, dims: int) -> None:
        self.path = path
        """The shard folder."""
        self.dims = dims
        """The dense vector size."""
        self._lock = threading.RLock()
        self._closed = False
        self._abandoned = False
        self._flushed_at = time.monotonic()
        self._unsynced = False  # written since the last flush
        self.users: weakref.WeakSet[object] = weakref.WeakSet()
        """The live stores on this shard that :func:`release_user` has not released."""
        self._folder_lock = ShardLock(path)
        if not self._folder_lock.acquire():  # before the engine reads a byte of it
            raise StoreLockedError(_locked_message(path))
        try:
            self.mark = self._open_checked()
        except BaseException:
            self._folder_lock.release()
            raise

    def _open_checked(self) -> HighWaterMark:
        """Open the shard, refusing one that lost files; returns its mark."""
        existing = shard_dims(self.path) if shard_exists(self.path) else None
        if existing is not None and existing != self.dims:
            raise DimensionMismatchError(_dims_message(self.path, self.dims, existing))
        if existing is not None:
            check_before_open(self.path)
        else:
            check_free_space(self.path.parent, "create")
        mark = HighWaterMark(self.path)
        self._shard = self._open(existing is not None)
        try:
            mark.check_opened(self._points())
            self.ensure_scope_indexes()
            mark.synced(self._points())
        except BaseException:
            self._shard.close()
            raise
        return mark

    def _open(self, existing: bool) -> Any:
        try:
            from qdrant_edge import EdgeShard
        except ImportError as exc:
            raise ConfigurationError(
                f"the embedded store needs qdrant-edge-py ({exc}): pip install "
                "'qdrant-edge-py>=0.9,<0.10', or point mem0_config at a server "
                "(agentscope_mem0.backends)"
            ) from exc

        try:
            if existing:
                return EdgeShard.load(os.fspath(self.path))
            self.path.mkdir(parents=True, exist_ok=True)
            return EdgeShard.create(os.fspath(self.path), _new_config(self.dims))
        except BaseException as exc:
            if any(marker in str(exc) for marker in _WAL_LOCKED):
                raise StoreLockedError(_locked_message(self.path)) from exc
            if isinstance(exc, Exception) or is_panic(exc):
                raise EdgeEngineError(
                    f"Qdrant Edge could not open the store {self.path}: {exc}. If the "
                    "folder was damaged, restore it from an export "
                    "(agentscope-mem0 import) or move it away to start over"
                ) from exc
            raise

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def call(self, what: str, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run ``method(shard, *args, **kwargs)`` under the lock, mapping engine errors.

        Args:
            what: What the call does, for error messages ("search", "upsert").
            method: A function taking the raw ``EdgeShard`` first.

        Raises:
            EdgeEngineError: The engine raised or panicked.
            RuntimeError: The shard was closed or belongs to the parent process.
        """
        with self._lock:
            self._ensure_usable(what)
            try:
                return method(self._shard, *args, **kwargs)
            except Exception as exc:
                raise EdgeEngineError(f"Qdrant Edge {what} failed in {self.path}: {exc}") from exc
            except BaseException as exc:
                if not is_panic(exc):
                    raise
                logger.error("Qdrant Edge panicked during %s in %s: %s", what, self.path, exc)
                raise EdgeEngineError(
                    f"Qdrant Edge panicked during {what} in {self.path}: {exc}"
                ) from exc

    def write(self, what: str, operation: Any, *, removing: int | Callable[[], int] = 0) -> None:
        """Apply one ``UpdateOperation``; flush the segments every :data:`FLUSH_EVERY` s.

        The write-ahead log makes the write durable when this returns; the
        periodic flush lets the engine trim that log, so that reopening after
        a crash replays seconds of writes, not the whole history.

        Args:
            what: What it does, for messages.
            operation: The engine operation.
            removing: The most points it deletes, or a function counting them
                (called under the lock, so no write slips in between); the
                high-water mark is lowered by that much first.

        Raises:
            DiskFullError: The disk is nearly full; nothing was written.
            EdgeEngineError: The engine failed.
        """
        with self._lock:
            self._ensure_usable(what)
            check_free_space(self.path, what)
            self.mark.lower(removing() if callable(removing) else removing)
            self.call(what, lambda s: s.update(operation))
            self._unsynced = True
            if time.monotonic() - self._flushed_at >= FLUSH_EVERY:
                try:
                    self.sync()
                except DiskFullError:  # the write is in the log; the flush waits for space
                    logger.warning("not flushing %s: its disk is nearly full", self.path)

    def sync(self) -> None:
        """Flush the segments to disk and record the high-water mark; nothing
        when nothing was written since the last flush (a flush holds the GIL
        for tens of milliseconds, stalling every coroutine of the process)."""
        with self._lock:
            if not self._unsynced:
                return
            check_free_space(self.path, "flush")
            self._flushed_at = time.monotonic()
            self.call("flush", lambda s: s.flush())
            self.mark.synced(self._points())
            self._unsynced = False

    def _points(self) -> int:
        return int(self.call("info", lambda s: s.info().points_count))

    def ensure_scope_indexes(self) -> None:
        """Create the keyword payload indexes on the scope fields (idempotent).

        ``user_id`` is the tenant key; a folder from release 0.2 indexed it as
        a plain keyword, and the index is rebuilt as a tenant index once.
        """
        from qdrant_edge import KeywordIndexParams, PayloadSchemaType, UpdateOperation

        schema = self.call("info", lambda s: s.info().payload_schema)
        for field in SCOPE_FIELDS:
            if field == TENANT_FIELD:
                params = getattr(schema.get(field), "params", None)
                if getattr(params, "is_tenant", None) is not True:
                    self._unsynced = True
                    index: Any = KeywordIndexParams(is_tenant=True)
                    self.call(
                        "create_field_index",
                        lambda s, f=field, i=index: s.update(
                            UpdateOperation.create_field_index(f, i)
                        ),
                    )
            elif field not in schema:
                self._unsynced = True
                self.call(
                    "create_field_index",
                    lambda s, f=field: s.update(
                        UpdateOperation.create_field_index(f, PayloadSchemaType.Keyword)
                    ),
                )

    def close(self) -> None:
        """Flush and release the shard. Idempotent; later calls raise ``RuntimeError``.

        On a nearly full disk it is released without the flush (which could
        crash the process): the write-ahead log keeps every write.
        """
        with self._lock:
            if self._closed or self._abandoned:
                self._closed = True
                return
            self._closed = True
            try:
                check_free_space(self.path, "flush")
            except DiskFullError:
                logger.warning("closing %s without a flush: its disk is nearly full", self.path)
                never_drop(self._shard)  # dropping it would write, and SIGBUS
                self._folder_lock.release()
                return  # the engine's own lock ends with the process
            try:
                self._shard.flush()
                self.mark.synced(int(self._shard.info().points_count))
            finally:
                try:
                    self._shard.close()
                finally:
                    self._folder_lock.release()

    def _ensure_usable(self, what: str) -> None:
        if self._abandoned:
            raise RuntimeError(
                f"Qdrant Edge {what}: this store was inherited through fork() and belongs "
                f"to the parent process; open {self.path} again in this process"
            )
        if self._closed:
            raise RuntimeError(
                f"Qdrant Edge {what}: the shared store {self.path} was closed; build a "
                "new memory client to reopen it"
            )


_shards: dict[Path, SharedShard] = {}
_registry_lock = threading.Lock()


def shared_shard(
    path: str | os.PathLike[str], dims: int, *, user: object | None = None
) -> SharedShard:
    """This process's shard in folder ``path``, opened (or created) on first use.

    Args:
        path: The shard folder; symlinks are resolved, so spellings share one shard.
        dims: The dense vector size.
        user: The store object that will use the shard, counted until
            :func:`release_user` (or until it is garbage).

    Raises:
        StoreLockedError: Another process holds the shard.
        DimensionMismatchError: The shard holds vectors of another size.
    """
    key = Path(path).expanduser().resolve()
    with _registry_lock:
        shard = _shards.get(key)
        if shard is None or shard.closed:
            shard = SharedShard(key, dims)
            _shards[key] = shard
            logger.debug("opened the Qdrant Edge store in %s", key)
        elif shard.dims != dims:
            raise DimensionMismatchError(_dims_message(key, dims, shard.dims))
        if user is not None:
            shard.users.add(user)
        return shard


def release_user(user: object) -> Path | None:
    """Stop counting ``user`` on its shards; close its folder's shards when no user is left.

    The folder is the parent of the shard folders (``<data folder>/edge``);
    while a user remains on any of its shards, every shard there stays open.

    Returns:
        The folder whose shards were closed, or ``None``.
    """
    with _registry_lock:
        held = [shard for shard in _shards.values() if user in shard.users]
        for shard in held:
            shard.users.discard(user)
        if not held:
            return None
        folder = held[0].path.parent
        siblings = [key for key in _shards if key.parent == folder]
        if any(_shards[key].users for key in siblings):
            return None
        # Closed under the lock: a store built meanwhile opens the folder afresh
        # only after these have let go of it.
        for key in siblings:
            _close(_shards.pop(key))
    logger.debug("closed the Qdrant Edge store in %s: its last user was closed", folder)
    return folder


def close_shards(under: str | os.PathLike[str] | None = None) -> None:
    """Close the shared shards inside folder ``under``, or every shared shard."""
    root = Path(under).expanduser().resolve() if under is not None else None
    with _registry_lock:
        closing = [key for key in _shards if root is None or key == root or root in key.parents]
        shards = [_shards.pop(key) for key in closing]
    for shard in shards:
        _close(shard)


def _close(shard: SharedShard) -> None:
    try:
        shard.close()
    except BaseException as exc:  # a panic while closing must not stop the others
        if not (isinstance(exc, Exception) or is_panic(exc)):
            raise
        logger.exception("closing the Qdrant Edge store in %s failed", shard.path)


def _forget_after_fork() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for shard in _shards.values():
        shard._abandoned = True
        shard._folder_lock.forget()
    _shards.clear()


atexit.register(close_shards)
os.register_at_fork(after_in_child=_forget_after_fork)
