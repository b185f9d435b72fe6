"""Exceptions raised by agentscope-mem0.

The hierarchy::

    Mem0MiddlewareError
    ├── ConfigurationError (also ValueError)      a usage mistake; the message
    │   ├── ModelTypeError (also TypeError)       says what to change
    │   ├── DimensionMismatchError
    │   ├── StoreLockedError                      another process owns the folder
    │   └── MigrationError                        a folder was not moved to Qdrant
    │                                             Edge or copied to a server; it
    │                                             is left as it was
    ├── InvalidStateError                         used in a state that cannot
    │                                             work: a closed middleware, a sync
    │                                             call on the bridge's own loop
    ├── BridgeError
    │   └── BridgeTimeoutError (also TimeoutError)
    ├── BackendError                              mem0 failed; wraps the original
    │   ├── TransientBackendError                 worth retrying
    │   │   ├── ExtractionFailedError             mem0's add swallowed a failure
    │   │   ├── DiskFullError                     the embedded store's disk is
    │   │   │                                     nearly full; nothing written
    │   │   └── EmbedderBusyError                 the offline embedder refused a
    │   │                                         reply's query (past its budget)
    │   ├── PermanentBackendError                 retrying will not help
    │   ├── MemoryUnavailableError                the circuit breaker is open
    │   └── EdgeEngineError                       Qdrant Edge failed or panicked
    ├── WorkingContentError (also ValueError)     working-memory content the
    │                                             format does not allow
    └── LocalFileError (also OSError)             a file of ours or mem0's on disk;
        ├── OutboxWriteError                      names it (``path``) and the way out
        └── DamagedFileError                      unreadable: zeroed, garbage, lost WAL
            └── StoreDamagedError                 the embedded store lost files since
                                                  it was last synced; not served

Every one of them can be imported from ``agentscope_mem0``.

``ConfigurationError`` subclasses ``ValueError`` (and ``ModelTypeError``
``TypeError`` too) so that code written for AgentScope's built-in middleware,
which raises ``ValueError`` and ``TypeError`` for the same mistakes, keeps
working.
"""

from __future__ import annotations

import os

__all__ = [
    "BackendError",
    "BridgeError",
    "BridgeTimeoutError",
    "ConfigurationError",
    "DamagedFileError",
    "DimensionMismatchError",
    "DiskFullError",
    "EdgeEngineError",
    "EmbedderBusyError",
    "ExtractionFailedError",
    "InvalidStateError",
    "LocalFileError",
    "Mem0MiddlewareError",
    "MemoryUnavailableError",
    "MigrationError",
    "ModelTypeError",
    "OutboxWriteError",
    "PermanentBackendError",
    "StoreDamagedError",
    "StoreLockedError",
    "TransientBackendError",
    "WorkingContentError",
]


class Mem0MiddlewareError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigurationError(Mem0MiddlewareError, ValueError):
    """The middleware or a helper was given arguments that cannot work."""


class ModelTypeError(ConfigurationError, TypeError):
    """A model or client argument is not an object of the kind asked for: an
    AgentScope model of its kind, an async mem0 client."""


class DimensionMismatchError(ConfigurationError):
    """The embedding model's vector size differs from the vector store's."""


class StoreLockedError(ConfigurationError):
    """Another process holds the embedded store's data folder."""


class MigrationError(ConfigurationError):
    """A folder could not be moved onto Qdrant Edge (from release 0.1) or copied
    into a Qdrant server (``migrate --to``); the folder was left as it was."""


class BridgeError(Mem0MiddlewareError):
    """The sync-to-async bridge could not run a call."""


class BridgeTimeoutError(BridgeError, TimeoutError):
    """A call through the bridge did not finish within its timeout."""


class InvalidStateError(Mem0MiddlewareError):
    """An object was used in a state where the call cannot work.

    A reply through a middleware after ``aclose()``, or a blocking bridge call
    made from the thread that would have to run it.
    """


class BackendError(Mem0MiddlewareError):
    """mem0 failed to search or store; ``__cause__`` holds the original."""


class TransientBackendError(BackendError):
    """A failure that may pass: connection, timeout, 5xx, rate limit."""


class PermanentBackendError(BackendError):
    """A failure that will repeat: bad request, validation, authentication."""


class ExtractionFailedError(TransientBackendError):
    """mem0's ``add`` returned normally but a step inside it failed.

    mem0 2.2 logs and swallows an extraction answer it cannot parse and an
    embedding that fails, returning fewer memories (or none) as if nothing was
    worth keeping. The writer counts such an attempt as failed and retries it.
    """


class DiskFullError(TransientBackendError):
    """The embedded store's disk is nearly full: nothing was written.

    Writing on a full disk crashes Qdrant Edge's process (SIGBUS), so the
    store refuses first; the write stays queued and is sent again.
    """


class EmbedderBusyError(TransientBackendError):
    """An in-process embedder refused a reply's query: it would wait past its budget.

    Raised by an embedding model's ``embed_blocking(..., may_refuse=True)``
    (the offline e5 does); the package's mem0 adapter turns it into a search
    by keywords alone on a store that can do one, so it never reaches a reply.
    """


class MemoryUnavailableError(BackendError):
    """The circuit breaker is open: mem0 failed repeatedly and is not asked now."""


class EdgeEngineError(BackendError):
    """Qdrant Edge failed or panicked; ``__cause__`` holds the original.

    Not a :class:`PermanentBackendError`: inputs are checked before they reach
    the engine, so what is left (a full disk, a transient I/O error) is worth
    the write queue's bounded retries.
    """


class WorkingContentError(Mem0MiddlewareError, ValueError):
    """An update the working memory's format does not accept; nothing changed."""


class LocalFileError(Mem0MiddlewareError, OSError):
    """A file on disk (the outbox, mem0's history) cannot be used as it is.

    Attributes:
        path: The file concerned.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str]) -> None:
        super().__init__(message)
        self.path = os.fspath(path)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OutboxWriteError(LocalFileError):
    """The outbox could not record or update a write (disk full, I/O error)."""


class DamagedFileError(LocalFileError):
    """A database file is damaged (zeroed, garbage, or its WAL lost)."""


class StoreDamagedError(DamagedFileError):
    """The embedded store opened with less than it held when last synced.

    Its write-ahead log or some of its segments are gone; it is refused
    rather than served (and written over). The message names the folder and
    the ways out.
    """
