"""The one place that talks to mem0: builds or checks the client, scopes
every call, normalises results and maps mem0's errors to ours."""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._bridge import caller_loop_scope
from ._exceptions import (
    ConfigurationError,
    PermanentBackendError,
    TransientBackendError,
)

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase

__all__ = ["Mem0Backend", "MemoryHit", "Scope", "check_user_id", "resolve_client"]

logger = logging.getLogger(__name__)


_WILDCARD = "*"


def check_user_id(user_id: Any) -> str:
    """Check that ``user_id`` names exactly one user in mem0 and return it.

    mem0 2.2 strips surrounding whitespace from ids (so ``"alice "`` would read
    and write Alice's memories) and reads ``"*"`` in a filter as "any value"
    (so it would read everybody's). Both are refused rather than passed on.

    Raises:
        ConfigurationError: ``user_id`` is not a string, is blank, has
            surrounding whitespace, or is the wildcard ``"*"``.
    """
    if not isinstance(user_id, str) or not user_id.strip():
        raise ConfigurationError(f"user_id must be a non-blank string, got {user_id!r}")
    if user_id != user_id.strip():
        raise ConfigurationError(
            f"user_id {user_id!r} has surrounding whitespace; mem0 trims ids, so it "
            "would share memories with another user id. Normalise ids before they get here"
        )
    if user_id == _WILDCARD:
        raise ConfigurationError(
            "user_id '*' is mem0's wildcard and would match every user's memories"
        )
    return user_id


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memories a call reads or writes."""

    user_id: str
    agent_id: str | None = None

    def filters(self) -> dict[str, str]:
        """mem0's search filters for this scope."""
        out = {"user_id": self.user_id}
        if self.agent_id:
            out["agent_id"] = self.agent_id
        return out


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One memory as mem0 returned it."""

    id: str | None
    memory: str
    score: float | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @property
    def date(self) -> str | None:
        """When the memory was last true: updated, else created."""
        return self.updated_at or self.created_at


def _is_async(method: Any) -> bool:
    # mem0's hosted client hides ``async def`` behind a plain functools.wraps
    # decorator; unwrap before asking.
    return method is not None and inspect.iscoroutinefunction(inspect.unwrap(method))


def resolve_client(
    *,
    client: Any,
    chat_model: ChatModelBase | None,
    embedding_model: EmbeddingModelBase | None,
    mem0_config: Any,
) -> Any:
    """Pick or build the async mem0 client from the constructor's keywords.

    Returns:
        The client.

    Raises:
        ConfigurationError: Nothing to build a client from, or only one model.
        TypeError: The client is synchronous.
    """
    if client is not None:
        ignored = [
            name
            for name, value in (
                ("chat_model", chat_model),
                ("embedding_model", embedding_model),
                ("mem0_config", mem0_config),
            )
            if value is not None
        ]
        if ignored:
            logger.warning(
                "a mem0 client was given, so these arguments are ignored: %s; "
                "configure the client itself instead",
                ", ".join(ignored),
            )
    else:
        if mem0_config is None and chat_model is None and embedding_model is None:
            raise ConfigurationError(
                "Mem0Middleware needs a mem0 backend: pass `client` (an "
                "AsyncMemory or AsyncMemoryClient), or `chat_model` and "
                "`embedding_model` (optionally with `mem0_config`), or a "
                "complete `mem0_config`"
            )
        if mem0_config is None and (chat_model is None) != (embedding_model is None):
            missing = "embedding_model" if embedding_model is None else "chat_model"
            raise ConfigurationError(
                f"`{missing}` is missing: without `mem0_config`, pass both "
                "`chat_model` and `embedding_model`"
            )
        if mem0_config is None:
            from .local import build_local_memory

            assert chat_model is not None
            client = build_local_memory(chat_model, embedding_model=embedding_model)
        else:
            from mem0 import AsyncMemory

            from ._adapters import build_mem0_config

            config = build_mem0_config(
                chat_model=chat_model,
                embedding_model=embedding_model,
                mem0_config=mem0_config,
            )
            client = AsyncMemory(config=config)

    if not (_is_async(getattr(client, "search", None)) and _is_async(getattr(client, "add", None))):
        raise TypeError(
            f"{type(client).__name__} is synchronous; Mem0Middleware needs an "
            "async mem0 client: mem0.AsyncMemory or mem0.AsyncMemoryClient"
        )
    return client


_TRANSIENT_NAMES = (
    "timeout",
    "connect",
    "network",
    "unavailable",
    "ratelimit",
    "rate limit",
    "too many requests",
    "temporarily",
    "locked",
    "busy",
)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status behind ``exc`` or the errors it was raised from, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # mem0's hosted client (mem0ai 2.2) raises mem0.exceptions.MemoryError
        # subclasses that keep the status only in `debug_info`.
        debug = getattr(current, "debug_info", None)
        for status in (
            getattr(current, "status_code", None),
            getattr(getattr(current, "response", None), "status_code", None),
            debug.get("status_code") if isinstance(debug, dict) else None,
        ):
            if isinstance(status, int) and not isinstance(status, bool):
                return status
        current = current.__cause__ or current.__context__
    return None


def classify_error(
    exc: BaseException,
) -> type[TransientBackendError | PermanentBackendError]:
    """Decide whether retrying ``exc`` may help."""
    if isinstance(
        exc,
        TransientBackendError | asyncio.TimeoutError | TimeoutError | ConnectionError,
    ):
        return TransientBackendError
    if isinstance(exc, PermanentBackendError):
        return PermanentBackendError
    status = http_status(exc)
    if status is not None:
        if status == 429 or status >= 500 or status == 408:
            return TransientBackendError
        return PermanentBackendError
    text = f"{type(exc).__name__} {exc}".lower()
    if any(word in text for word in _TRANSIENT_NAMES):
        return TransientBackendError
    if isinstance(exc, ValueError | TypeError | KeyError):
        return PermanentBackendError
    # An unknown failure is retried (a bounded number of times) rather than
    # dropped: losing a write is worse than a wasted attempt.
    return TransientBackendError


class Mem0Backend:
    """Scoped, normalised access to one async mem0 client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.hosted = is_hosted(client)

    def read_filters(self, scope: Scope) -> dict[str, str]:
        """The filters that read ``scope``'s memories from this client.

        The mem0 platform files each added message under the id of its role
        (the user's under ``user_id`` with ``agent_id`` null) and a search that
        names both ids finds nothing, so hosted reads name the user only.
        """
        return {"user_id": scope.user_id} if self.hosted else scope.filters()

    async def search(
        self,
        query: str,
        scope: Scope,
        *,
        top_k: int,
        threshold: float | None = None,
    ) -> list[MemoryHit]:
        """The memories of ``scope`` most related to ``query``, best first."""
        kwargs: dict[str, Any] = {"filters": self.read_filters(scope), "top_k": top_k}
        if threshold is not None:
            kwargs["threshold"] = threshold
        raw = await self._call(self.client.search, query, **kwargs)
        return normalise_hits(raw)

    async def get_all(self, scope: Scope, *, limit: int) -> list[MemoryHit]:
        """Up to ``limit`` memories of ``scope``, in mem0's order."""
        raw = await self._call(self.client.get_all, filters=self.read_filters(scope), top_k=limit)
        return normalise_hits(raw)

    async def add(
        self,
        messages: list[dict[str, str]],
        scope: Scope,
        *,
        infer: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Store ``messages`` in ``scope``; returns mem0's result entries."""
        kwargs: dict[str, Any] = {"user_id": scope.user_id}
        if scope.agent_id:
            kwargs["agent_id"] = scope.agent_id
        if not infer:
            kwargs["infer"] = False
        if metadata:
            kwargs["metadata"] = metadata
        raw = await self._call(self.client.add, messages, **kwargs)
        return _results(raw)

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        with caller_loop_scope():
            try:
                return await method(*args, **kwargs)
            except (asyncio.CancelledError, ConfigurationError):
                raise
            except Exception as exc:
                kind = classify_error(exc)
                raise kind(f"mem0 {method.__name__} failed: {exc}") from exc


def is_hosted(client: Any) -> bool:
    """Whether ``client`` is mem0's platform client (``mem0.AsyncMemoryClient``)."""
    try:
        from mem0 import AsyncMemoryClient
    except ImportError:  # pragma: no cover - mem0 is a dependency
        return False
    return isinstance(client, AsyncMemoryClient)


def _results(raw: Any) -> list[Any]:
    if isinstance(raw, dict):
        raw = raw.get("results", [])
    return list(raw) if isinstance(raw, list) else []


def normalise_hits(raw: Any) -> list[MemoryHit]:
    """Turn mem0's search/get_all answer (OSS or hosted shape) into hits."""
    hits: list[MemoryHit] = []
    for item in _results(raw):
        if isinstance(item, str):
            if item.strip():
                hits.append(MemoryHit(id=None, memory=item))
            continue
        if not isinstance(item, dict):
            continue
        text = item.get("memory") or item.get("text") or item.get("data")
        if not text:
            continue
        score = item.get("score")
        hits.append(
            MemoryHit(
                id=item.get("id"),
                memory=str(text),
                score=float(score) if isinstance(score, int | float) else None,
                created_at=_as_text(item.get("created_at")),
                updated_at=_as_text(item.get("updated_at")),
            )
        )
    return hits


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)
