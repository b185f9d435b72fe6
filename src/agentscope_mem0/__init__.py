"""Long-term memory for AgentScope 2.x agents, backed by mem0.

The public names below are imported on first use (:func:`__getattr__`), so
``import agentscope_mem0`` does not import agentscope, mem0 or qdrant; the
command line starts at once because of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import (
    _quiet,  # noqa: F401  (demotes mem0's missing-extra notices; imports nothing)
    _telemetry,  # noqa: F401  (must run before mem0 is imported)
)

if TYPE_CHECKING:
    from ._adapters import AgentScopeEmbedding, AgentScopeLLM
    from ._backend import Mem0Backend, MemoryHit
    from ._client_state import ClientState
    from ._clients import build_local_memory, build_mem0_config
    from ._delivery import RetryPolicy
    from ._exceptions import (
        BackendError,
        BridgeError,
        BridgeTimeoutError,
        ConfigurationError,
        DamagedFileError,
        DimensionMismatchError,
        ExtractionFailedError,
        InvalidStateError,
        LocalFileError,
        Mem0MiddlewareError,
        OutboxWriteError,
        PermanentBackendError,
        StoreLockedError,
        TransientBackendError,
    )
    from ._middleware import Mem0Middleware
    from ._modes import Mode
    from ._notes import (
        DEFAULT_MEMORY_RULES,
        DEFAULT_MEMORY_SECTION_HEADER,
        DEFAULT_MEMORY_SECTION_INTRO,
    )
    from ._options import (
        DEFAULT_TOOL_INSTRUCTIONS,
        Deadlines,
        FlatOptions,
        NoteOptions,
        RecallMode,
        RecallOptions,
        WriteOptions,
    )
    from ._outbox import Outbox, OutboxRow
    from ._scope import Scope
    from ._working import WorkingMemory, WorkingScope
    from ._working_remote import PostgresWorkingStore, QdrantWorkingStore
    from ._working_store import SqliteWorkingStore, WorkingRecord, WorkingStore
    from ._writer import WriteQueue, WriteResult

__version__ = "0.2.0"

# Public name -> the private module defining it. Keep in step with __all__
# (tests/test_lazy_import.py checks the two) and the TYPE_CHECKING imports above.
_LAZY: dict[str, str] = {
    "AgentScopeEmbedding": "._adapters",
    "AgentScopeLLM": "._adapters",
    "BackendError": "._exceptions",
    "BridgeError": "._exceptions",
    "BridgeTimeoutError": "._exceptions",
    "ClientState": "._client_state",
    "ConfigurationError": "._exceptions",
    "DEFAULT_MEMORY_RULES": "._notes",
    "DEFAULT_MEMORY_SECTION_HEADER": "._notes",
    "DEFAULT_MEMORY_SECTION_INTRO": "._notes",
    "DEFAULT_TOOL_INSTRUCTIONS": "._options",
    "DamagedFileError": "._exceptions",
    "Deadlines": "._options",
    "DimensionMismatchError": "._exceptions",
    "ExtractionFailedError": "._exceptions",
    "FlatOptions": "._options",
    "InvalidStateError": "._exceptions",
    "LocalFileError": "._exceptions",
    "Mem0Backend": "._backend",
    "Mem0Middleware": "._middleware",
    "Mem0MiddlewareError": "._exceptions",
    "MemoryHit": "._backend",
    "Mode": "._modes",
    "NoteOptions": "._options",
    "Outbox": "._outbox",
    "OutboxRow": "._outbox",
    "OutboxWriteError": "._exceptions",
    "PermanentBackendError": "._exceptions",
    "PostgresWorkingStore": "._working_remote",
    "QdrantWorkingStore": "._working_remote",
    "RecallMode": "._options",
    "RecallOptions": "._options",
    "RetryPolicy": "._delivery",
    "Scope": "._scope",
    "SqliteWorkingStore": "._working_store",
    "StoreLockedError": "._exceptions",
    "TransientBackendError": "._exceptions",
    "WorkingMemory": "._working",
    "WorkingRecord": "._working_store",
    "WorkingScope": "._working",
    "WorkingStore": "._working_store",
    "WriteOptions": "._options",
    "WriteQueue": "._writer",
    "WriteResult": "._writer",
    "build_local_memory": "._clients",
    "build_mem0_config": "._clients",
}

__all__ = [  # noqa: RUF022  (plain sorted order, checked by a test)
    "AgentScopeEmbedding",
    "AgentScopeLLM",
    "BackendError",
    "BridgeError",
    "BridgeTimeoutError",
    "ClientState",
    "ConfigurationError",
    "DEFAULT_MEMORY_RULES",
    "DEFAULT_MEMORY_SECTION_HEADER",
    "DEFAULT_MEMORY_SECTION_INTRO",
    "DEFAULT_TOOL_INSTRUCTIONS",
    "DamagedFileError",
    "Deadlines",
    "DimensionMismatchError",
    "ExtractionFailedError",
    "FlatOptions",
    "InvalidStateError",
    "LocalFileError",
    "Mem0Backend",
    "Mem0Middleware",
    "Mem0MiddlewareError",
    "MemoryHit",
    "Mode",
    "NoteOptions",
    "Outbox",
    "OutboxRow",
    "OutboxWriteError",
    "PermanentBackendError",
    "PostgresWorkingStore",
    "QdrantWorkingStore",
    "RecallMode",
    "RecallOptions",
    "RetryPolicy",
    "Scope",
    "SqliteWorkingStore",
    "StoreLockedError",
    "TransientBackendError",
    "WorkingMemory",
    "WorkingRecord",
    "WorkingScope",
    "WorkingStore",
    "WriteOptions",
    "WriteQueue",
    "WriteResult",
    "__version__",
    "build_local_memory",
    "build_mem0_config",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
