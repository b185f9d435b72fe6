"""Long-term memory for AgentScope 2.x agents, backed by mem0."""

from __future__ import annotations

from . import _telemetry  # noqa: F401  (must run before mem0 is imported)
from ._adapters import AgentScopeEmbedding, AgentScopeLLM
from ._backend import MemoryHit
from ._clients import build_local_memory, build_mem0_config
from ._exceptions import (
    BackendError,
    BridgeError,
    BridgeTimeoutError,
    ConfigurationError,
    DimensionMismatchError,
    InvalidStateError,
    Mem0MiddlewareError,
    PermanentBackendError,
    StoreLockedError,
    TransientBackendError,
)
from ._middleware import DEFAULT_TOOL_INSTRUCTIONS, Mem0Middleware, Mode
from ._notes import (
    DEFAULT_MEMORY_RULES,
    DEFAULT_MEMORY_SECTION_HEADER,
    DEFAULT_MEMORY_SECTION_INTRO,
)
from ._recall import RecallMode
from ._scope import Scope

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022  (plain sorted order, checked by a test)
    "AgentScopeEmbedding",
    "AgentScopeLLM",
    "BackendError",
    "BridgeError",
    "BridgeTimeoutError",
    "ConfigurationError",
    "DEFAULT_MEMORY_RULES",
    "DEFAULT_MEMORY_SECTION_HEADER",
    "DEFAULT_MEMORY_SECTION_INTRO",
    "DEFAULT_TOOL_INSTRUCTIONS",
    "DimensionMismatchError",
    "InvalidStateError",
    "Mem0Middleware",
    "Mem0MiddlewareError",
    "MemoryHit",
    "Mode",
    "PermanentBackendError",
    "RecallMode",
    "Scope",
    "StoreLockedError",
    "TransientBackendError",
    "__version__",
    "build_local_memory",
    "build_mem0_config",
]
