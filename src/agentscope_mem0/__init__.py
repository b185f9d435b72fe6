"""Long-term memory for AgentScope 2.x agents, backed by mem0.

The public names below are imported on first use (:func:`__getattr__`), so
``import agentscope_mem0`` does not import agentscope, mem0 or qdrant; the
command line starts at once because of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._mem0 import quiet  # noqa: F401  (telemetry off, notices demoted: before mem0 is imported)

if TYPE_CHECKING:
    from ._client_state import ClientState
    from ._exceptions import (
        BackendError,
        BridgeError,
        BridgeTimeoutError,
        ConfigurationError,
        DamagedFileError,
        DimensionMismatchError,
        DiskFullError,
        EdgeEngineError,
        EmbedderBusyError,
        ExtractionFailedError,
        InvalidStateError,
        LocalFileError,
        Mem0MiddlewareError,
        MemoryUnavailableError,
        MigrationError,
        ModelTypeError,
        OutboxWriteError,
        PermanentBackendError,
        StoreDamagedError,
        StoreLockedError,
        TransientBackendError,
        WorkingContentError,
    )
    from ._formatter import StringContentFormatter
    from ._mem0.adapters import AgentScopeEmbedding, AgentScopeLLM
    from ._mem0.backend import Mem0Backend
    from ._mem0.clients import build_local_memory, build_mem0_config, build_memory
    from ._mem0.extraction import ExtractionStyle
    from ._memories.hit import MemoryHit
    from ._memories.release import Forgotten, Restored
    from ._middleware import Mem0Middleware
    from ._modes import Mode
    from ._parameters import (
        DEFAULT_TOOL_INSTRUCTIONS,
        Mem0MiddlewareKeywords,
        Mem0MiddlewareParameters,
        ToolName,
    )
    from ._recall.note import (
        DEFAULT_MEMORY_RULES,
        DEFAULT_MEMORY_SECTION_HEADER,
        DEFAULT_MEMORY_SECTION_INTRO,
    )
    from ._recall.recall import RecallMode
    from ._scope import Scope
    from ._text.periods import EventPeriod, Period, time_in
    from ._working.manager import WorkingMemory, WorkingScope
    from ._working.stores import (
        PostgresWorkingStore,
        QdrantWorkingStore,
        SqliteWorkingStore,
        WorkingRecord,
        WorkingStore,
    )
    from ._write.delivery import RetryPolicy
    from ._write.outbox import BaseOutbox, Outbox, OutboxRow
    from ._write.outbox_postgres import PostgresOutbox
    from ._write.queue import AfterStore, WriteQueue, WriteResult

__version__ = "0.2.0"

# Public name -> the private module defining it. Keep in step with __all__
# (tests/test_lazy_import.py checks the two) and the TYPE_CHECKING imports above.
_LAZY: dict[str, str] = {
    "AfterStore": "._write.queue",
    "BaseOutbox": "._write.outbox",
    "AgentScopeEmbedding": "._mem0.adapters",
    "AgentScopeLLM": "._mem0.adapters",
    "BackendError": "._exceptions",
    "BridgeError": "._exceptions",
    "BridgeTimeoutError": "._exceptions",
    "ClientState": "._client_state",
    "ConfigurationError": "._exceptions",
    "DEFAULT_MEMORY_RULES": "._recall.note",
    "DEFAULT_MEMORY_SECTION_HEADER": "._recall.note",
    "DEFAULT_MEMORY_SECTION_INTRO": "._recall.note",
    "DEFAULT_TOOL_INSTRUCTIONS": "._parameters",
    "DamagedFileError": "._exceptions",
    "DimensionMismatchError": "._exceptions",
    "DiskFullError": "._exceptions",
    "EdgeEngineError": "._exceptions",
    "EmbedderBusyError": "._exceptions",
    "EventPeriod": "._text.periods",
    "ExtractionFailedError": "._exceptions",
    "ExtractionStyle": "._mem0.extraction",
    "Forgotten": "._memories.release",
    "InvalidStateError": "._exceptions",
    "LocalFileError": "._exceptions",
    "Mem0Backend": "._mem0.backend",
    "Mem0Middleware": "._middleware",
    "Mem0MiddlewareError": "._exceptions",
    "Mem0MiddlewareKeywords": "._parameters",
    "Mem0MiddlewareParameters": "._parameters",
    "MemoryHit": "._memories.hit",
    "MemoryUnavailableError": "._exceptions",
    "MigrationError": "._exceptions",
    "Mode": "._modes",
    "ModelTypeError": "._exceptions",
    "Outbox": "._write.outbox",
    "OutboxRow": "._write.outbox",
    "OutboxWriteError": "._exceptions",
    "Period": "._text.periods",
    "PermanentBackendError": "._exceptions",
    "PostgresOutbox": "._write.outbox_postgres",
    "PostgresWorkingStore": "._working.stores",
    "QdrantWorkingStore": "._working.stores",
    "RecallMode": "._recall.recall",
    "Restored": "._memories.release",
    "RetryPolicy": "._write.delivery",
    "Scope": "._scope",
    "SqliteWorkingStore": "._working.stores",
    "StoreDamagedError": "._exceptions",
    "StoreLockedError": "._exceptions",
    "StringContentFormatter": "._formatter",
    "ToolName": "._parameters",
    "TransientBackendError": "._exceptions",
    "WorkingContentError": "._exceptions",
    "WorkingMemory": "._working.manager",
    "WorkingRecord": "._working.stores",
    "WorkingScope": "._working.manager",
    "WorkingStore": "._working.stores",
    "WriteQueue": "._write.queue",
    "WriteResult": "._write.queue",
    "build_local_memory": "._mem0.clients",
    "build_mem0_config": "._mem0.clients",
    "build_memory": "._mem0.clients",
    "time_in": "._text.periods",
}

__all__ = [  # noqa: RUF022  (plain sorted order, checked by a test)
    "AfterStore",
    "AgentScopeEmbedding",
    "AgentScopeLLM",
    "BackendError",
    "BaseOutbox",
    "BridgeError",
    "BridgeTimeoutError",
    "ClientState",
    "ConfigurationError",
    "DEFAULT_MEMORY_RULES",
    "DEFAULT_MEMORY_SECTION_HEADER",
    "DEFAULT_MEMORY_SECTION_INTRO",
    "DEFAULT_TOOL_INSTRUCTIONS",
    "DamagedFileError",
    "DimensionMismatchError",
    "DiskFullError",
    "EdgeEngineError",
    "EmbedderBusyError",
    "EventPeriod",
    "ExtractionFailedError",
    "ExtractionStyle",
    "Forgotten",
    "InvalidStateError",
    "LocalFileError",
    "Mem0Backend",
    "Mem0Middleware",
    "Mem0MiddlewareError",
    "Mem0MiddlewareKeywords",
    "Mem0MiddlewareParameters",
    "MemoryHit",
    "MemoryUnavailableError",
    "MigrationError",
    "Mode",
    "ModelTypeError",
    "Outbox",
    "OutboxRow",
    "OutboxWriteError",
    "Period",
    "PermanentBackendError",
    "PostgresOutbox",
    "PostgresWorkingStore",
    "QdrantWorkingStore",
    "RecallMode",
    "Restored",
    "RetryPolicy",
    "Scope",
    "SqliteWorkingStore",
    "StoreDamagedError",
    "StoreLockedError",
    "StringContentFormatter",
    "ToolName",
    "TransientBackendError",
    "WorkingContentError",
    "WorkingMemory",
    "WorkingRecord",
    "WorkingScope",
    "WorkingStore",
    "WriteQueue",
    "WriteResult",
    "__version__",
    "build_local_memory",
    "build_mem0_config",
    "build_memory",
    "time_in",
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
