"""Exceptions raised by agentscope-mem0.

The hierarchy::

    Mem0MiddlewareError
    ├── ConfigurationError (also ValueError)      a usage mistake; the message
    │   ├── DimensionMismatchError                says what to change
    │   └── StoreLockedError                      another process owns the folder
    ├── BridgeError
    │   ├── BridgeTimeoutError (also TimeoutError)
    │   └── InvalidStateError                     sync call on the bridge's own loop
    └── BackendError                              mem0 failed; wraps the original
        ├── TransientBackendError                 worth retrying
        └── PermanentBackendError                 retrying will not help

``ConfigurationError`` subclasses ``ValueError`` so that code written for
AgentScope's built-in middleware, which raises ``ValueError`` for the same
mistakes, keeps working.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BridgeError",
    "BridgeTimeoutError",
    "ConfigurationError",
    "DimensionMismatchError",
    "InvalidStateError",
    "Mem0MiddlewareError",
    "PermanentBackendError",
    "StoreLockedError",
    "TransientBackendError",
]


class Mem0MiddlewareError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigurationError(Mem0MiddlewareError, ValueError):
    """The middleware or a helper was given arguments that cannot work."""


class DimensionMismatchError(ConfigurationError):
    """The embedding model's vector size differs from the vector store's."""


class StoreLockedError(ConfigurationError):
    """Another process holds the embedded store's data folder."""


class BridgeError(Mem0MiddlewareError):
    """The sync-to-async bridge could not run a call."""


class BridgeTimeoutError(BridgeError, TimeoutError):
    """A call through the bridge did not finish within its timeout."""


class InvalidStateError(BridgeError):
    """A blocking bridge call was made from the thread that would run it."""


class BackendError(Mem0MiddlewareError):
    """mem0 failed to search or store; ``__cause__`` holds the original."""


class TransientBackendError(BackendError):
    """A failure that may pass: connection, timeout, 5xx, rate limit."""


class PermanentBackendError(BackendError):
    """A failure that will repeat: bad request, validation, authentication."""
