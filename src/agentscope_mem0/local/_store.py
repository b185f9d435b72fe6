"""One locked local Qdrant client per data folder per process.

The on-disk local Qdrant client is neither thread-safe nor shareable: mem0
calls it from many worker threads at once (measured on mem0ai 2.2.1: 15-29 of
330 concurrent calls failed and deleted memories came back after a restart),
and it holds an exclusive lock on its folder, so a second client on the same
folder fails. This module keeps a process-wide registry that hands every
caller in one process the same :class:`LockedQdrantClient` for a folder, and
turns the folder lock of another process into :class:`StoreLockedError`.

Clients stay open until :func:`close_shared_clients` or interpreter exit, so
that every middleware and mem0 client on the folder can keep using it.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from qdrant_client import QdrantClient

from .._exceptions import DimensionMismatchError, StoreLockedError
from .._vectors.size import qdrant_vector_size
from ._folder import (
    COLLECTION,
    DATA_DIR_ENV,
    FolderLayout,
    data_dir,
    history_db_path,
    prepare_history_db,
    qdrant_dir,
)

if TYPE_CHECKING:
    from mem0.configs.base import MemoryConfig

__all__ = [
    "LockedQdrantClient",
    "check_collection_dims",
    "close_local_client",
    "close_shared_clients",
    "qdrant_local_store_config",
    "share_local_qdrant",
    "shared_qdrant_client",
]

logger = logging.getLogger(__name__)

_F = TypeVar("_F", bound=Callable[..., Any])

# qdrant-client 1.x words its folder-lock failure this way (a bare RuntimeError).
_FOLDER_LOCKED = "already accessed by another instance of Qdrant client"


def _serialised(method: _F) -> _F:
    """Run ``method`` under the client's lock, refusing a closed client."""

    @functools.wraps(method)
    def call(self: LockedQdrantClient, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._ensure_usable(method.__name__)
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]


class LockedQdrantClient(QdrantClient):
    """An on-disk local ``QdrantClient`` whose every call holds one re-entrant lock.

    It is a real ``QdrantClient``, so mem0's ``QdrantConfig(client=...)`` accepts
    it. Copies are the client itself: it owns a folder lock and must not be
    duplicated (mem0 2.2 deep-copies its vector-store config for the entity
    store). Get one through :func:`shared_qdrant_client` rather than directly.

    Args:
        path: The local Qdrant storage folder.

    Raises:
        StoreLockedError: Another Qdrant client, usually in another process,
            holds the folder.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._lock = threading.RLock()
        self._closed = False
        self._abandoned = False
        self.path = Path(path)
        """The storage folder this client owns."""
        try:
            super().__init__(path=os.fspath(path))
        except RuntimeError as exc:
            if _FOLDER_LOCKED not in str(exc):
                raise
            raise StoreLockedError(_locked_message(self.path)) from exc

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self, grpc_grace: float | None = None, **kwargs: Any) -> None:
        """Release the folder. Idempotent; later calls raise ``RuntimeError``."""
        with self._lock:
            if self._closed or self._abandoned:
                self._closed = True
                return
            self._closed = True
            if hasattr(self, "_client"):
                self._client.close(grpc_grace=grpc_grace, **kwargs)

    def _ensure_usable(self, name: str) -> None:
        if self._abandoned:
            raise RuntimeError(
                f"QdrantClient.{name}: this client was inherited through fork() and "
                f"belongs to the parent process; open the folder {self.path.parent} "
                "again in this process (or use a Qdrant server)"
            )
        if self._closed:
            raise RuntimeError(
                f"QdrantClient.{name}: the shared client of {self.path.parent} was "
                "closed; build a new memory client to reopen the folder"
            )

    def _abandon(self) -> None:
        # After fork() the child must neither use nor unlock the parent's folder.
        self._abandoned = True

    def __copy__(self) -> LockedQdrantClient:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LockedQdrantClient:
        return self


def _lock_public_methods(cls: type[LockedQdrantClient]) -> None:
    """Wrap every public method ``QdrantClient`` offers in :func:`_serialised`."""
    for name in dir(QdrantClient):
        if name.startswith("_") or name in vars(cls):
            continue
        attribute = getattr(QdrantClient, name)
        # Plain functions only: properties, classmethods and constants stay as they are.
        if (
            callable(attribute)
            and not isinstance(attribute, type)
            and not hasattr(attribute, "__self__")
        ):
            setattr(cls, name, _serialised(attribute))


_lock_public_methods(LockedQdrantClient)

# mem0 2.2 treats any client it is handed as a server and asks it for payload
# indexes; local Qdrant then warns that they do nothing. Only warnings raised
# through this module's wrappers are silenced.
warnings.filterwarnings(
    "ignore",
    message="Payload indexes have no effect in the local Qdrant",
    category=UserWarning,
    module=__name__,
)


def _locked_message(storage: Path) -> str:
    return (
        f"the vector store folder {storage} is in use by another process: an "
        "embedded (local) Qdrant store can be opened by one process at a time. "
        "Use the memory from one process only, or run a Qdrant server and point "
        "mem0_config's vector_store at its url, or give this process another "
        f"data folder (folder=... or ${DATA_DIR_ENV})"
    )


_clients: dict[Path, LockedQdrantClient] = {}
_registry_lock = threading.Lock()


def shared_qdrant_client(folder: str | os.PathLike[str] | None = None) -> LockedQdrantClient:
    """This process's client for the data folder's local Qdrant, opened on first use.

    Every caller in the process that names the same folder (after resolving
    symlinks) gets the same client.

    Args:
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        The shared, locked client.

    Raises:
        StoreLockedError: Another process holds the folder.
    """
    return _shared_at(qdrant_dir(folder))


def _shared_at(storage: Path) -> LockedQdrantClient:
    with _registry_lock:
        client = _clients.get(storage)
        if client is None or client.closed:
            client = LockedQdrantClient(storage)
            _clients[storage] = client
            logger.debug("opened the local Qdrant store in %s", storage)
        return client


def close_shared_clients(folder: str | os.PathLike[str] | None = None) -> None:
    """Close the shared stores of data folder ``folder``, or every shared store.

    Both engines: the Qdrant Edge shards and the qdrant-client local mode
    client. mem0 clients built on a closed store fail on their next call;
    build new ones. Mostly for tests and for handing a folder to another process.
    """
    from ._edge import close_shards

    close_shards(None if folder is None else FolderLayout.of(folder).edge)
    close_local_client(folder)


def close_local_client(folder: str | os.PathLike[str] | None = None) -> None:
    """Close the qdrant-client local mode client of data folder ``folder`` (or all of them)."""
    with _registry_lock:
        if folder is None:
            closing = list(_clients.values())
            _clients.clear()
        else:
            client = _clients.pop(FolderLayout.of(folder).qdrant, None)
            closing = [client] if client is not None else []
    for client in closing:
        try:
            client.close()
        except Exception:
            logger.exception("closing the local Qdrant store in %s failed", client.path)


def _forget_after_fork() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for client in _clients.values():
        client._abandon()
    _clients.clear()


atexit.register(close_shared_clients)
os.register_at_fork(after_in_child=_forget_after_fork)


def check_collection_dims(client: QdrantClient, collection: str, dims: int) -> None:
    """Fail when ``collection`` exists with vectors of another size than ``dims``.

    A missing collection passes: mem0 creates it with ``dims``.

    Raises:
        DimensionMismatchError: The sizes differ.
    """
    size = qdrant_vector_size(client, collection)
    if size is not None and size != dims:
        raise DimensionMismatchError(
            f"the embedding model makes {dims}-dimensional vectors, but the collection "
            f"{collection!r} in {getattr(client, 'path', 'the store')} holds "
            f"{size}-dimensional ones. Use the embedding model these memories were "
            f"stored with, or another data folder (folder=... or ${DATA_DIR_ENV}), "
            "or delete the folder to start over"
        )


def share_local_qdrant(config: MemoryConfig) -> MemoryConfig:
    """Route a mem0 config's on-disk Qdrant through this process's shared client.

    A ``MemoryConfig`` naming a local Qdrant ``path`` would make mem0 open its
    own, unlocked client there, which fails when a second one opens the same
    path and loses writes under concurrency. The returned config hands mem0
    the shared :class:`LockedQdrantClient` of that path instead. Configs for a
    Qdrant server, with a client of their own, or for another store come back
    unchanged; the given config is never modified.

    Args:
        config: The mem0 config.

    Returns:
        The config to build ``AsyncMemory`` from.

    Raises:
        StoreLockedError: Another process holds the path.
        DimensionMismatchError: A collection there has another vector size than
            ``embedding_model_dims``.
    """
    from mem0.configs.vector_stores.qdrant import QdrantConfig

    store = config.vector_store.config
    # mem0's Qdrant store, or this package's server provider (a QdrantConfig too).
    if not isinstance(store, QdrantConfig):
        return config
    # The same test mem0 2.2's Qdrant store uses to pick a server over a path.
    remote = store.api_key or store.url or (store.host and store.port) or store.https is not None
    if store.client is not None or remote or not store.path:
        return config
    client = _shared_at(Path(store.path).expanduser().resolve())
    if store.embedding_model_dims:
        for name in (store.collection_name, f"{store.collection_name}_entities"):
            check_collection_dims(client, name, store.embedding_model_dims)
    vector_store = config.vector_store.model_copy(
        update={"config": store.model_copy(update={"client": client})}
    )
    return config.model_copy(update={"vector_store": vector_store})


def qdrant_local_store_config(
    *, dims: int, folder: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields for qdrant-client's local mode in one data folder.

    Release 0.1's embedded store, selectable for one more release with
    ``AGENTSCOPE_MEM0_ENGINE=qdrant-local``. Opens (or reuses) the folder's
    shared Qdrant client, checks ``dims`` against the collections already
    there and puts the history database in WAL mode.

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        ``vector_store`` and ``history_db_path`` entries for ``MemoryConfig``.

    Raises:
        StoreLockedError: Another process holds the folder.
        DimensionMismatchError: A collection there has another vector size.
    """
    root = data_dir(folder)
    client = shared_qdrant_client(root)
    # mem0 2.2 keeps entity links in a second collection, "<name>_entities".
    for name in (COLLECTION, f"{COLLECTION}_entities"):
        check_collection_dims(client, name, dims)
    history = history_db_path(root)
    prepare_history_db(history)
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": COLLECTION,
                "embedding_model_dims": dims,
                "client": client,
                # Ignored when a client is given, but mem0's QdrantConfig wants one.
                "path": str(client.path),
                "on_disk": True,
            },
        },
        "history_db_path": str(history),
    }
