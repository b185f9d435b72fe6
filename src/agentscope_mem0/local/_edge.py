"""One Qdrant Edge shard per collection folder per process, shared, serialised and guarded.

Qdrant Edge (``qdrant-edge-py``) is Qdrant's storage engine in-process. A
shard holds an exclusive lock on its WAL, so a second ``EdgeShard.load`` of
the same folder fails, in this process or in another. This module keeps a
process-wide registry that hands every caller the same :class:`SharedShard`
for a folder and turns another process's lock into :class:`StoreLockedError`.

Every call into the engine goes through :meth:`SharedShard.call`, which

* holds one re-entrant lock (the engine holds the GIL for the length of each
  call anyway, so nothing is lost, and a close can never race a call);
* maps the engine's errors to this package's: its Rust panics arrive as
  ``pyo3_runtime.PanicException``, a ``BaseException`` that would otherwise
  sail past ``except Exception`` and kill the write queue's task.

Three guards, each against a failure measured on qdrant-edge-py 0.9:

* **The folder lock.** ``EdgeShard.load`` opens the segments before it
  reaches its WAL lock: a second process's refused ``load`` of a live folder
  left the live process's next flush failing ("Tracker journal ... is shorter
  than expected") and its close logging an error. So a process first takes an
  exclusive ``flock`` on ``.<shard folder name>.lock`` beside the shard folder
  (not inside it: the folder is the engine's); a second process is refused
  there, with the engine's files untouched. The kernel drops the lock when the
  process ends, however it ends; ``/proc/locks`` names its holder (see
  :mod:`agentscope_mem0.cli._lock`).
* **The high-water mark.** The engine reopens whatever files it finds: a
  shard whose ``wal/`` was deleted after a crash opened empty (30 of 30
  memories gone), one whose ``segments/`` were deleted after a clean close
  opened with 1 of 30, both without a word. So ``.<shard folder name>.mark.json``
  beside the shard records the points it held at its last sync (a flush or a
  close), lowered before a deletion by the most it can remove (so that a
  deletion the WAL replays never looks like a loss). A shard that opens with
  fewer points, or without its WAL while a mark exists, is refused with
  :class:`StoreDamagedError` instead of being served (and then written over).
* **Free space.** The segments are memory-mapped files that grow as points
  arrive; on a full filesystem a write into a new page is not an error the
  engine can return: the kernel sends SIGBUS and the process dies (with the
  data folder on a full tmpfs, at the first write). So every open and every
  write first checks the free space and refuses with :class:`DiskFullError`
  (transient: the write stays queued) while less than a reserve is left:
  ``$AGENTSCOPE_MEM0_MIN_FREE_MB``, by default :data:`DEFAULT_RESERVE`. An
  ``add`` took at most 0.4 MB, but opening a shard can give it a new
  appendable segment (measured on tmpfs: up to 60 MB touched at once, before
  any write; the process died with SIGBUS at 50 MB free), a write can start a
  new WAL segment (32 MB), and flushes and optimizations rewrite segments. A shard closed
  on a nearly full disk is never released either: dropping it writes into
  those files too (SIGBUS while the interpreter's exit garbage-collected a
  shard left on a full tmpfs); its WAL holds every write.

Building the HNSW index never happens here (it would hold the GIL for
seconds): see :func:`~._embedded.optimize_store`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import logging
import os
import shutil
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
    StoreDamagedError,
    StoreLockedError,
)
from ._folder import DATA_DIR_ENV
from ._lock_holder import describe_holder

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the engine's own WAL lock only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DENSE",
    "SPARSE",
    "SharedShard",
    "close_shards",
    "index_state",
    "lock_path",
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

RESERVE_ENV = "AGENTSCOPE_MEM0_MIN_FREE_MB"
"""Environment variable: megabytes the embedded store leaves free on its filesystem."""

DEFAULT_RESERVE = 128 * 1024 * 1024
"""Bytes left free by default: what opening a shard may claim (a new
appendable segment, ~60 MB) and a new write-ahead-log segment (32 MB), with
room to spare."""

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


def lock_path(shard: Path) -> Path:
    """The lock file of the shard folder ``shard``."""
    return shard.parent / f".{shard.name}.lock"


def check_free_space(folder: Path, what: str) -> None:
    """Refuse an engine write (:class:`DiskFullError`) while ``folder``'s filesystem
    has less than the reserve free."""
    raw = os.environ.get(RESERVE_ENV, "").strip()
    try:
        needed = int(float(raw) * 1024 * 1024) if raw else DEFAULT_RESERVE
    except ValueError:
        needed = -1
    if needed < 0:
        raise ConfigurationError(f"${RESERVE_ENV} must be a number of megabytes >= 0, got {raw!r}")
    if needed == 0:
        return
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:  # the folder is gone or unreadable: the engine will say so
        logger.debug("free space of %s unknown: %s", folder, exc)
        return
    if free < needed:
        raise DiskFullError(
            f"the memory store {folder} refused to {what}: its disk has "
            f"{free / 1e6:.1f} MB free and the store keeps {needed / 1e6:.0f} MB free "
            f"(${RESERVE_ENV}), because writing on a full disk crashes its engine. The "
            "write stays queued and is sent again once space is freed"
        )


class HighWaterMark:
    """The mark of one shard folder: the points it must hold when it opens.

    Args:
        shard: The shard folder.
    """

    def __init__(self, shard: Path) -> None:
        self.shard = shard
        self.path = shard.parent / f".{shard.name}.mark.json"
        self.points = self._read()
        """The points the shard held at its last sync (``None``: no mark yet)."""

    def _read(self) -> int | None:
        try:
            return int(json.loads(self.path.read_text(encoding="utf-8"))["points"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # A mark that cannot be read protects nothing; it is rewritten at the next sync.
            logger.warning(
                "the store's mark %s is unreadable (%s); starting a new one", self.path, exc
            )
            return None

    def _damaged(self, what: str) -> StoreDamagedError:
        return StoreDamagedError(
            f"the memory store {self.shard} {what}. Restore the folder from a copy, or its "
            "memories from an export (agentscope-mem0 import); or, to serve what is left "
            f"and accept the loss, delete {self.path} and open it again. Writes still in "
            "the outbox are stored again once it opens",
            path=self.shard,
        )

    def check_before_open(self) -> None:
        """Refuse a shard whose WAL is gone while a mark exists (the engine would
        start an empty log and serve the store without the writes the old one held)."""
        if self.path.exists() and not (self.shard / "wal").is_dir():
            raise self._damaged(
                "lost its write-ahead log (wal/ is missing): the writes it held are gone"
            )

    def check_opened(self, points: int) -> None:
        """Refuse a shard that opened with fewer points than the mark."""
        if self.points is not None and points < self.points:
            raise self._damaged(
                f"holds {points} memories but held {self.points} when it was last synced: "
                "some of its files are missing or older than the rest"
            )

    def synced(self, points: int) -> None:
        """Record that the shard holds ``points`` points, all of them on disk."""
        if points != self.points:
            self._write(points)

    def lower(self, removable: int) -> None:
        """Lower the mark before a deletion that removes at most ``removable`` points."""
        if self.points is not None and removable > 0:
            self._write(max(0, self.points - removable))

    def _write(self, points: int) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        try:
            temporary.write_text(json.dumps({"points": points}) + "\n", encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError as exc:  # a full disk: an older mark only misses a loss, never invents one
            logger.warning("could not update the store's mark %s: %s", self.path, exc)
            return
        self.points = points


def _dims_message(path: Path, dims: int, existing: int) -> str:
    return (
        f"the embedding model makes {dims}-dimensional vectors, but the collection "
        f"{path.name!r} in {path.parent} holds {existing}-dimensional ones. Use the "
        "embedding model these memories were stored with, or another data folder "
        f"(folder=... or ${DATA_DIR_ENV}), or delete the folder to start over"
    )


def _locked_message(path: Path, lock: Path) -> str:
    """Why the shard folder ``path`` cannot be opened, naming who holds ``lock``."""
    return (
        f"the memory store {path} is in use by {describe_holder(lock)}: the embedded "
        "store (Qdrant Edge) can be opened by one process at a time. Use the "
        "memory from one process only (the agentscope-mem0 service shares one "
        "store between all its users), or run a Qdrant server and point "
        "mem0_config's vector_store at its url, or give this process another "
        f"data folder (folder=... or ${DATA_DIR_ENV})"
    )


def _lock_folder(path: Path) -> int | None:
    """Take the folder lock of shard folder ``path`` without waiting; its descriptor."""
    if fcntl is None:
        return None
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException as exc:
        os.close(fd)
        if not isinstance(exc, BlockingIOError):
            raise
        raise StoreLockedError(_locked_message(path, lock)) from None
    # Who holds it, for a person reading the file (the kernel knows anyway).
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


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
        StoreDamagedError: The shard lost files since its last sync.
    """

    def __init__(self, path: Path, dims: int) -> None:
        self.path = path
        """The shard folder."""
        self.dims = dims
        """The dense vector size."""
        self._lock = threading.RLock()
        self._unusable: str | None = None  # why calls are refused, once closed
        self._flushed_at = time.monotonic()
        self._unsynced = False  # written since the last flush
        self.users: weakref.WeakSet[object] = weakref.WeakSet()
        """The live stores on this shard that :func:`release_user` has not released."""
        self._lock_fd = _lock_folder(path)  # before the engine reads a byte of it
        try:
            self.mark = HighWaterMark(path)
            self._shard = self._open()
            try:
                self.mark.check_opened(self._points())
                self._ensure_scope_indexes()
                self.mark.synced(self._points())
            except BaseException:
                self._shard.close()
                raise
        except BaseException:
            self._unlock_folder()
            raise

    def _open(self) -> Any:
        """The engine's shard, created, or loaded once it passed the mark's check."""
        try:
            from qdrant_edge import EdgeShard
        except ImportError as exc:
            raise ConfigurationError(
                f"the embedded store needs qdrant-edge-py ({exc}): pip install "
                "'qdrant-edge-py>=0.9,<0.10', or point mem0_config at a server "
                "(agentscope_mem0.backends)"
            ) from exc

        existing = shard_dims(self.path) if shard_exists(self.path) else None
        if existing is not None and existing != self.dims:
            raise DimensionMismatchError(_dims_message(self.path, self.dims, existing))
        if existing is not None:
            self.mark.check_before_open()
        check_free_space(self.path.parent, "create" if existing is None else "open")
        try:
            if existing is not None:
                return EdgeShard.load(os.fspath(self.path))
            self.path.mkdir(parents=True, exist_ok=True)
            return EdgeShard.create(os.fspath(self.path), _new_config(self.dims))
        except BaseException as exc:
            if any(marker in str(exc) for marker in _WAL_LOCKED):
                raise StoreLockedError(_locked_message(self.path, self.path / "wal")) from None
            if isinstance(exc, Exception) or is_panic(exc):
                raise EdgeEngineError(
                    f"Qdrant Edge could not open the store {self.path}: {exc}. If the "
                    "folder was damaged, restore it from an export "
                    "(agentscope-mem0 import) or move it away to start over"
                ) from exc
            raise

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the shard came through ``fork()``)."""
        return self._unusable is not None

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

    def _ensure_scope_indexes(self) -> None:
        """Create the keyword payload indexes on the scope fields (idempotent).

        ``user_id`` is the tenant key; a folder from release 0.2 indexed it as
        a plain keyword, and the index is rebuilt as a tenant index once.
        """
        from qdrant_edge import KeywordIndexParams, PayloadSchemaType, UpdateOperation

        schema = self.call("info", lambda s: s.info().payload_schema)
        for field in SCOPE_FIELDS:
            index: Any = PayloadSchemaType.Keyword
            if field == TENANT_FIELD:
                params = getattr(schema.get(field), "params", None)
                if getattr(params, "is_tenant", None) is True:
                    continue
                index = KeywordIndexParams(is_tenant=True)
            elif field in schema:
                continue
            self._unsynced = True
            self.call(
                "create_field_index",
                lambda s, f=field, i=index: s.update(UpdateOperation.create_field_index(f, i)),
            )

    def close(self) -> None:
        """Flush and release the shard. Idempotent; later calls raise ``RuntimeError``.

        On a nearly full disk it is released without the flush (which could
        crash the process): the write-ahead log keeps every write.
        """
        with self._lock:
            if self._unusable is not None:
                return
            self._unusable = "was closed; build a new memory client to reopen it"
            try:
                check_free_space(self.path, "flush")
            except DiskFullError:
                logger.warning("closing %s without a flush: its disk is nearly full", self.path)
                # Kept alive until the process ends, through the interpreter's final
                # garbage collection too: dropping it would write, and SIGBUS.
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._shard))
                self._unlock_folder()
                return  # the engine's own lock ends with the process
            try:
                self._shard.flush()
                self.mark.synced(int(self._shard.info().points_count))
            finally:
                try:
                    self._shard.close()
                finally:
                    self._unlock_folder()

    def _unlock_folder(self) -> None:
        """Close the folder lock's descriptor: the lock goes with it, except after
        ``fork()``, where the parent's descriptor keeps holding it."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _ensure_usable(self, what: str) -> None:
        if self._unusable is not None:
            raise RuntimeError(f"Qdrant Edge {what}: the shared store {self.path} {self._unusable}")


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


def _segment_kinds(path: Path) -> dict[str, int]:
    kinds = {"hnsw": 0, "plain": 0}
    for segment in (path / "segments").glob("*/segment.json"):
        try:
            config = json.loads(segment.read_text(encoding="utf-8"))["config"]
            kind = config["vector_data"][DENSE]["index"]["type"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        kinds["hnsw" if kind == "hnsw" else "plain"] += 1
    return kinds


def index_state(shard: SharedShard) -> dict[str, Any]:
    """Points, indexed vectors and segment kinds of one open shard.

    ``index`` is ``"exact"`` (no HNSW segment: every search scans its scope)
    or ``"hnsw"`` (an optimized segment has HNSW; points written since land in
    a plain appendable segment and are searched exactly, see ``plain_segments``).
    """
    info = shard.call("info", lambda s: s.info())
    kinds = _segment_kinds(shard.path)
    state = "hnsw" if kinds["hnsw"] else "exact"
    return {
        "points": int(info.points_count),
        "indexed_vectors": int(info.indexed_vectors_count),
        "segments": int(info.segments_count),
        "hnsw_segments": kinds["hnsw"],
        "plain_segments": kinds["plain"],
        "index": state,
        "payload_indexes": sorted(info.payload_schema),
        "tenant_key": next(
            (
                name
                for name, index in info.payload_schema.items()
                if getattr(index.params, "is_tenant", None)
            ),
            None,
        ),
    }


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
        shard._unusable = (
            "was inherited through fork() and belongs to the parent process; open it "
            "again in this process"
        )
        shard._unlock_folder()
    _shards.clear()


atexit.register(close_shards)
os.register_at_fork(after_in_child=_forget_after_fork)
