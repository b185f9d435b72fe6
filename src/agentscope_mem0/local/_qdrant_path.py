"""A mem0 config's own on-disk Qdrant path: one locked client per path per process.

A ``mem0_config`` may name mem0's Qdrant provider with a local ``path`` (the
store an application built on AgentScope's built-in middleware often has).
qdrant-client's local mode is neither thread-safe nor shareable: mem0 calls
it from many worker threads at once (measured on mem0ai 2.2.1: 15-29 of 330
concurrent calls failed and deleted memories came back after a restart), and
it holds an exclusive lock on its folder, so a second client on the same
path fails. :func:`share_local_qdrant` hands every mem0 client of the process
that names one path the same :class:`LockedQdrantClient`, and turns another
process's folder lock into :class:`StoreLockedError`.

Clients stay open until :func:`close_qdrant_clients` or interpreter exit, so
that every middleware and mem0 client on the path can keep using it.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_client import QdrantClient

from .._exceptions import DimensionMismatchError, StoreLockedError
from .._vectors.size import qdrant_vector_size
from ._folder import DATA_DIR_ENV, ENTITY_SUFFIX
from ._lock_holder import describe_holder

if TYPE_CHECKING:
    from mem0.configs.base import MemoryConfig

__all__ = [
    "FOLDER_LOCKED",
    "LockedQdrantClient",
    "close_qdrant_clients",
    "share_local_qdrant",
]

logger = logging.getLogger(__name__)

FOLDER_LOCKED = "already accessed by another instance of Qdrant client"
"""How qdrant-client 1.x words its folder-lock failure (a bare ``RuntimeError``)."""


class LockedQdrantClient(QdrantClient):
    """An on-disk local ``QdrantClient`` whose every call holds one re-entrant lock.

    It is a real ``QdrantClient``, so mem0's ``QdrantConfig(client=...)`` accepts
    it. Copies are the client itself: it owns a folder lock and must not be
    duplicated (mem0 2.2 deep-copies its vector-store config for the entity
    store). Get one through :func:`share_local_qdrant` rather than directly.

    Args:
        path: The local Qdrant storage folder.

    Raises:
        StoreLockedError: Another Qdrant client, usually in another process,
            holds the folder.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._lock = threading.RLock()
        self._unusable: str | None = None  # why calls are refused, once closed
        self.path = Path(path)
        """The storage folder this client owns."""
        try:
            super().__init__(path=os.fspath(path))
        except RuntimeError as exc:
            if FOLDER_LOCKED not in str(exc):
                raise
            raise StoreLockedError(
                f"the vector store folder {self.path} is in use by "
                f"{describe_holder(self.path / '.lock')}: an "
                "on-disk (local) Qdrant store can be opened by one process at a time. "
                "Use the memory from one process only, or run a Qdrant server and point "
                "mem0_config's vector_store at its url, or give this process another "
                f"folder (for the embedded default: folder=... or ${DATA_DIR_ENV})"
            ) from None  # qdrant-client's own words add nothing to these

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the client came through ``fork()``)."""
        return self._unusable is not None

    def close(self, grpc_grace: float | None = None, **kwargs: Any) -> None:
        """Release the folder. Idempotent; later calls raise ``RuntimeError``."""
        with self._lock:
            if self._unusable is None:
                self._unusable = "was closed; build a new memory client to reopen it"
                if hasattr(self, "_client"):
                    self._client.close(grpc_grace=grpc_grace, **kwargs)

    def __copy__(self) -> LockedQdrantClient:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LockedQdrantClient:
        return self


def _serialise_public_methods() -> None:
    """Run every public method ``QdrantClient`` offers under the client's lock,
    refusing a closed client."""

    def serialised(method: Any) -> Any:
        @functools.wraps(method)
        def call(self: LockedQdrantClient, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                if self._unusable is not None:
                    raise RuntimeError(
                        f"QdrantClient.{method.__name__}: the shared client of {self.path} "
                        f"{self._unusable}"
                    )
                return method(self, *args, **kwargs)

        return call

    for name in dir(QdrantClient):
        if name.startswith("_") or name in vars(LockedQdrantClient):
            continue
        attribute = getattr(QdrantClient, name)
        # Plain functions only: properties, classmethods and constants stay as they are.
        if (
            callable(attribute)
            and not isinstance(attribute, type)
            and not hasattr(attribute, "__self__")
        ):
            setattr(LockedQdrantClient, name, serialised(attribute))


_serialise_public_methods()

# mem0 2.2 treats any client it is handed as a server and asks it for payload
# indexes; local Qdrant then warns that they do nothing. Only warnings raised
# through this module's wrappers are silenced.
warnings.filterwarnings(
    "ignore",
    message="Payload indexes have no effect in the local Qdrant",
    category=UserWarning,
    module=__name__,
)

_clients: dict[Path, LockedQdrantClient] = {}
_registry_lock = threading.Lock()


def close_qdrant_clients(under: str | os.PathLike[str] | None = None) -> None:
    """Close the shared clients of the paths inside folder ``under``, or every one."""
    root = Path(under).expanduser().resolve() if under is not None else None
    with _registry_lock:
        keys = [key for key in _clients if root is None or key == root or root in key.parents]
        closing = [_clients.pop(key) for key in keys]
    for client in closing:
        try:
            client.close()
        except Exception:
            logger.exception("closing the local Qdrant store in %s failed", client.path)


def _forget_after_fork() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for client in _clients.values():
        # The child must neither use nor unlock the parent's folder.
        client._unusable = (
            "was inherited through fork() and belongs to the parent process; open it "
            "again in this process (or use a Qdrant server)"
        )
    _clients.clear()


atexit.register(close_qdrant_clients)
os.register_at_fork(after_in_child=_forget_after_fork)


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
    storage = Path(store.path).expanduser().resolve()
    with _registry_lock:
        client = _clients.get(storage)
        if client is None or client.closed:
            client = _clients[storage] = LockedQdrantClient(storage)
            logger.debug("opened the local Qdrant store in %s", storage)
    dims = store.embedding_model_dims
    # A missing collection passes: mem0 creates it with the model's size.
    for name in (store.collection_name, f"{store.collection_name}{ENTITY_SUFFIX}"):
        size = qdrant_vector_size(client, name) if dims else None
        if size is not None and size != dims:
            raise DimensionMismatchError(
                f"the embedding model makes {dims}-dimensional vectors, but the collection "
                f"{name!r} in {storage} holds {size}-dimensional ones. Use the embedding "
                "model these memories were stored with, or another path, or delete the "
                "folder to start over"
            )
    vector_store = config.vector_store.model_copy(
        update={"config": store.model_copy(update={"client": client})}
    )
    return config.model_copy(update={"vector_store": vector_store})
