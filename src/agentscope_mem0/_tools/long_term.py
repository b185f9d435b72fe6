"""The long-term memory tools: ``search_memory``, ``add_memory`` and ``forget_memory``.

They take no user or scope argument: the scope comes from the middleware
and from the calling agent's live state, never from what the model writes.
Called without that state (a custom executor, a direct call), they act for
the middleware's own user and fixed ``agent_id`` (the user alone when it has
none), as AgentScope's built-in tools do.
Each tool gets a :class:`ToolContext`: the client's backend, breaker and
write queue, the middleware's parameters (deadlines) and the scope rules. Searches (and
``forget_memory``) go through :meth:`ToolContext.call`, the same bounded call
as the automatic search; ``add_memory`` hands its facts to the write queue,
as the automatic writes are, and waits up to ``tool_timeout`` for mem0.
``forget_memory`` is opt-in; with it on, ``search_memory`` shows each
memory's id and date, which is what ``forget_memory`` takes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from .._exceptions import ConfigurationError, MemoryUnavailableError
from .._mem0.bounded import bounded
from .._memories.lifecycle import time_label
from .._memories.validity import check_as_of
from .._observe.tracing import traced_search
from .._recall.dedupe import dedupe_by_meaning
from .._scope import Scope
from .._text.escape import escape_memory

if TYPE_CHECKING:
    from agentscope.state import AgentState

    from .._client_state import ClientState
    from .._mem0.backend import Mem0Backend
    from .._mem0.breaker import CircuitBreaker
    from .._memories.hit import MemoryHit
    from .._parameters import Mem0MiddlewareParameters
    from .._write.queue import WriteQueue

__all__ = [
    "STATE_KEY",
    "STORED_THIS_REPLY",
    "AddMemoryTool",
    "ForgetMemoryTool",
    "MemoryToolBase",
    "SearchMemoryTool",
    "ToolContext",
    "tool_failed",
    "tool_result",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

STATE_KEY = "agentscope_mem0"
"""The middleware's entry in ``agent.state.middle_context``: it records the
agent's mem0 id there at each hook, and the tools read it back."""

STORED_THIS_REPLY = "stored_this_reply"
"""Key, in the middleware's entry of the agent's state, of what ``add_memory``
stored (or queued) during the reply under way, in mode ``both``: the reply's
automatic write leaves it to the tool (:func:`.._reply.told_beyond`)."""

UNAVAILABLE = "Memory is unavailable right now (mem0 failed repeatedly); go on without it."


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What the memory tools need from the middleware that offers them."""

    user_id: str
    """Whose memories the tools read and write."""
    agent_id: str | None = None
    """The middleware's fixed ``agent_id``: the scope of a call that brings no
    agent state. ``None`` (an id taken from each agent): the user alone."""
    backend: Mem0Backend
    """The door to mem0."""
    writer: WriteQueue
    """The client's durable write queue: ``add_memory`` writes go through it."""
    breaker: CircuitBreaker
    """The client's breaker; tool calls are reported to it and skipped while it is open."""
    parameters: Mem0MiddlewareParameters
    """The middleware's options: ``search_timeout`` bounds searches,
    ``tool_timeout`` writes."""
    threshold: float | None = None
    """Minimum search score; ``None`` leaves it to mem0."""
    scope_search_by_agent: bool = True
    """Searches read the calling agent's memories only."""
    after_write: Callable[[Scope], None] = lambda scope: None
    """Called after a tool changed the memories of a scope."""
    after_forget: Callable[[Scope], None] = lambda scope: None
    """Called after ``forget_memory`` forgot memories of a scope (the user's
    profile is distilled again, without them)."""
    writes_replies: bool = False
    """The middleware also writes each reply (mode ``both``): ``add_memory``
    notes what it stored in the agent's state (:data:`STORED_THIS_REPLY`), so
    that the reply's write does not ask mem0 for the same facts again."""

    @classmethod
    def of(
        cls,
        state: ClientState,
        parameters: Mem0MiddlewareParameters,
        *,
        user_id: str,
        agent_id: object,
        threshold: float | None,
        scope_search_by_agent: bool,
        writes_replies: bool = False,
    ) -> ToolContext:
        """The context for a middleware's tools: its client's state, its options
        and its built-in keywords (an ``agent_id`` that is a function is no fixed id)."""
        return cls(
            user_id=user_id,
            agent_id=agent_id if isinstance(agent_id, str) else None,
            backend=state.backend,
            breaker=state.breaker,
            parameters=parameters,
            threshold=threshold,
            scope_search_by_agent=scope_search_by_agent,
            after_write=state.profile_recall.invalidate,
            after_forget=state.profile.changed if state.profile is not None else lambda s: None,
            writer=state.writer,
            writes_replies=writes_replies,
        )

    def scope(self, state: AgentState | None, *, for_search: bool) -> Scope:
        """The scope of the agent whose live ``state`` called the tool.

        A call without the state, or from an agent this middleware never saw
        (nothing recorded its id), acts for the middleware's own user and
        ``agent_id``.
        """
        entry = state.middle_context.get(STATE_KEY) if state is not None else None
        recorded = entry.get("agent_id") if isinstance(entry, dict) else None
        scope = Scope(self.user_id, str(recorded) if recorded else self.agent_id)
        return scope.searched(by_agent=self.scope_search_by_agent) if for_search else scope

    async def call(self, call: Awaitable[_T], *, write: bool = False, check: bool = True) -> _T:
        """``await call`` bounded by the deadline and the breaker (see :func:`bounded`).

        Args:
            call: The mem0 call.
            write: It writes (``tool_timeout``, not counted as a search).
            check: Ask the breaker first (``False`` when the caller already did).

        Raises:
            MemoryUnavailableError: The breaker is open.
            TimeoutError: Over ``search_timeout`` (``tool_timeout`` for a write).
        """
        timeout = self.parameters.tool_timeout if write else self.parameters.search_timeout
        return await bounded(
            call, timeout=timeout, breaker=self.breaker, search=not write, check=check
        )


def tool_result(text: str, *, error: bool = False) -> ToolChunk:
    """A tool's answer to the model (``error``: the call failed)."""
    state = ToolResultState.ERROR if error else ToolResultState.SUCCESS
    return ToolChunk(content=[TextBlock(text=text)], state=state)


def tool_failed(
    tool: str, exc: Exception, *, timeout: float | None, timed_out: str, failed: str
) -> ToolChunk:
    """The error result of ``tool`` ended by ``exc``: the model is told that it
    ``timed_out`` (over ``timeout`` seconds) or that the store ``failed``, never
    the error itself (its text may name the server's files, hosts or
    settings); the log keeps it."""
    if isinstance(exc, TimeoutError):
        logger.warning("%s took over %s s", tool, timeout)
        return tool_result(timed_out, error=True)
    logger.warning("%s failed: %r", tool, exc)
    return tool_result(f"{failed} The details are in the server's log.", error=True)


class MemoryToolBase(ToolBase):
    """What the package's tools share: the live agent state comes in, and the
    user is never asked for permission (the tools touch the agent's own memory)."""

    is_state_injected = True
    is_external_tool = False
    is_mcp = False

    async def check_permissions(self, *args: Any, **kwargs: Any) -> PermissionDecision:
        """Memory tools never ask the user for permission."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{self.name} is part of the agent's own memory",
        )


class _LongTermTool(MemoryToolBase):
    def __init__(self, context: ToolContext) -> None:
        super().__init__()
        self._ctx = context


class SearchMemoryTool(_LongTermTool):
    """Searches the user's memories of the calling agent (of every agent without
    ``scope_search_by_agent``), one query per keyword.

    Args:
        context: What the tool needs from the middleware.
        show_ids: Show each memory's id and date (``forget_memory`` takes the ids).
    """

    name = "search_memory"
    description = (
        "Retrieve memories based on short, targeted search keywords. "
        "Each keyword is issued as an independent query; results are merged "
        "and deduplicated."
    )
    input_schema: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "keywords": {
                "type": "array",
                "items": {"type": "string"},
                "description": (
                    "Short, targeted search phrases such as a person's name, "
                    "a specific date, a location, or a phrase describing what "
                    "to retrieve from memory."
                ),
            },
            "limit": {
                "type": "integer",
                "description": "Maximum number of memories to retrieve per keyword.",
                "default": 5,
            },
            # Beyond the built-in's schema, optional: a call without it is the built-in's.
            "as_of": {
                "type": "string",
                "description": (
                    "Optional date (YYYY-MM-DD) or ISO 8601 time: retrieve what was "
                    "true then instead of what is true now."
                ),
            },
        },
        "required": ["keywords"],
    }
    is_concurrency_safe = True
    is_read_only = True

    def __init__(self, context: ToolContext, *, show_ids: bool = False) -> None:
        super().__init__(context)
        self.show_ids = show_ids

    async def call(
        self,
        keywords: list[str],
        limit: int = 5,
        as_of: str | None = None,
        _agent_state: AgentState | None = None,
    ) -> ToolChunk:
        """Run one search per keyword and merge the results without duplicates;
        with ``as_of``, of the memories current then."""
        scope = self._ctx.scope(_agent_state, for_search=True)
        queries = [k.strip() for k in keywords if isinstance(k, str) and k.strip()]
        if not queries:
            return tool_result("No keywords were given, so nothing was searched.", error=True)
        moment = None
        if as_of is not None and str(as_of).strip():
            try:
                moment = check_as_of(str(as_of).strip())
            except ConfigurationError as exc:
                return tool_result(f"{exc}; nothing was searched.", error=True)
        limit = max(1, min(int(limit), 50))
        backend, threshold = self._ctx.backend, self._ctx.threshold
        if self._ctx.breaker is not None and not self._ctx.breaker.allow():
            return tool_result(UNAVAILABLE, error=True)
        # Each search is bounded inside its span: the span ends when the tool
        # stops waiting, while a late search goes on for the breaker.
        searches = (
            traced_search(
                self._ctx.call(
                    backend.search(q, scope, top_k=limit, threshold=threshold, as_of=moment),
                    check=False,
                ),
                scope,
                query=q,
                top_k=limit,
                source="tool",
                breaker=self._ctx.breaker,
            )
            for q in queries
        )
        started = time.monotonic()
        timeout = self._ctx.parameters.search_timeout
        try:
            per_query = await asyncio.gather(*searches)
        except Exception as exc:
            return tool_failed(
                self.name,
                exc,
                timeout=timeout,
                timed_out="Memory search timed out; go on without it.",
                failed="Memory search failed: the store failed; go on without it.",
            )
        # Repeats across keywords, and memories saying the same in other words,
        # appear once (as in the note); escaped here, once.
        unique = await dedupe_by_meaning(
            (hit for hits in per_query for hit in hits),
            user_id=scope.user_id,
            embed=backend.embed,
            budget=None if timeout is None else timeout - (time.monotonic() - started),
        )
        lines = [self._line(replace(hit, memory=escape_memory(hit.memory))) for hit in unique]
        if not lines:
            return tool_result("No relevant memories found.")
        return tool_result("\n".join(lines))

    def _line(self, hit: MemoryHit) -> str:
        """``- memory``; with ids ``- [id] [said date] memory``."""
        if not self.show_ids:
            return f"- {hit.memory}"
        label = time_label(hit)
        dated = f"[{label}] " if label else ""
        return f"- [{hit.id}] {dated}{hit.memory}" if hit.id else f"- {dated}{hit.memory}"


class AddMemoryTool(_LongTermTool):
    """Stores facts in the calling agent's memory."""

    name = "add_memory"
    description = (
        "Record important, durable information that may be useful later. "
        "Only the provided content is persisted; thinking is retained in the "
        "tool result for auditability."
    )
    input_schema: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "thinking": {
                "type": "string",
                "description": (
                    "Reasoning about why this information is worth "
                    "remembering. This is not persisted to mem0."
                ),
            },
            "content": {
                "type": "array",
                "items": {"type": "string"},
                "description": (
                    "Specific facts to remember. Each item should be a "
                    "complete, standalone sentence."
                ),
            },
        },
        "required": ["thinking", "content"],
    }
    is_concurrency_safe = False
    is_read_only = False

    async def call(
        self,
        thinking: str,
        content: list[str],
        _agent_state: AgentState | None = None,
    ) -> ToolChunk:
        """Queue ``content`` for mem0 and wait up to ``tool_timeout`` for it to be stored.

        The write queue sends it through mem0's extraction, and stores each
        fact as written when the extraction finds nothing.
        """
        scope = self._ctx.scope(_agent_state, for_search=False)
        facts = [c.strip() for c in content if isinstance(c, str) and c.strip()]
        if not facts:
            return tool_result("`content` is empty, so nothing was recorded.", error=True)
        result = await self._ctx.writer.submit_facts(
            scope, facts, timeout=self._ctx.parameters.tool_timeout
        )
        if self._ctx.writes_replies and _agent_state is not None and result.state in _KEPT:
            entry = _agent_state.middle_context.setdefault(STATE_KEY, {})
            entry.setdefault(STORED_THIS_REPLY, []).extend([*facts, *result.memories])
        if result.state == "stored":
            self._ctx.after_write(scope)
            return tool_result(_recorded(result.memories or facts, thinking))
        if result.state == "queued" and not result.recorded:
            return tool_result(
                f"Queued for memory{_rationale(thinking)}: {'; '.join(facts)}, but it could "
                "not be saved to disk (is the disk full?), so it is kept in memory only until "
                "it is stored: if the service stops first, it is lost. Do not add it again."
            )
        if result.state == "queued":
            return tool_result(
                f"Queued for memory{_rationale(thinking)}: {'; '.join(facts)}. It is saved "
                "and will be stored shortly; do not add it again."
            )
        if result.state == "failed":
            return tool_result(
                "Recording to memory failed; the facts are kept as a failed write that "
                "can be retried later (agentscope-mem0 retry-failed). Go on without it.",
                error=True,
            )
        return tool_result("Could not record to memory: nothing was stored.", error=True)


_KEPT = ("stored", "queued")
"""Where an ``add_memory`` write stands once mem0 has it or will (the outbox holds it)."""


def _rationale(thinking: str) -> str:
    # The agent's reason stays in the transcript, worded as AgentScope's built-in does.
    return f" (rationale: {thinking})" if thinking else ""


def _recorded(memories: Iterable[str], thinking: str) -> str:
    """``add_memory``'s answer once stored; it starts as the built-in's does."""
    summary = "; ".join(m.rstrip(". ") for m in memories if m)
    return f"Successfully recorded to memory{_rationale(thinking)}: {summary}."


class ForgetMemoryTool(_LongTermTool):
    """Deletes memories by id: only those ``search_memory`` can show this agent
    (the user's, of this agent unless ``scope_search_by_agent`` is off)."""

    name = "forget_memory"
    description = (
        "Forget memories the user asked you to forget or that are wrong. Pass the "
        "ids shown by search_memory; only this user's memories can be forgotten."
    )
    input_schema: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "memory_ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Ids of the memories to forget, as search_memory shows them.",
            },
        },
        "required": ["memory_ids"],
    }
    is_concurrency_safe = False
    is_read_only = False

    async def call(
        self,
        memory_ids: list[str],
        _agent_state: AgentState | None = None,
    ) -> ToolChunk:
        """Delete each memory that belongs to the calling agent's scope."""
        # The memories search_memory can show are the ones it may forget.
        scope = self._ctx.scope(_agent_state, for_search=True)
        wanted = [i.strip() for i in memory_ids or [] if isinstance(i, str) and i.strip()]
        if not wanted:
            return tool_result("No memory ids were given, so nothing was forgotten.", error=True)
        backend = self._ctx.backend
        forgotten: list[str] = []
        repeats: list[str] = []
        refused: list[str] = []
        back: dict[str, str] = {}

        async def forget_all() -> None:
            for memory_id in dict.fromkeys(wanted):
                if memory_id in repeats:
                    continue  # forgotten already, with the memory it repeats
                entry = await backend.get(memory_id)
                if entry is None or not _belongs(entry, scope):
                    # Someone else's memory reads the same as a missing one.
                    refused.append(memory_id)
                    continue
                done = await backend.forget(memory_id)
                forgotten.append(memory_id)
                repeats.extend(hit.id for hit in done.repeats if hit.id)
                back.pop(memory_id, None)
                for other_id in done.current_again:
                    other = await backend.get(other_id)
                    if other is not None:
                        back[other_id] = str(other.get("memory") or "")

        try:
            await self._ctx.call(forget_all(), write=True)
        except MemoryUnavailableError:
            return tool_result(f"{UNAVAILABLE} Nothing was forgotten.", error=True)
        except Exception as exc:
            return tool_failed(
                self.name,
                exc,
                timeout=self._ctx.parameters.tool_timeout,
                timed_out="Forgetting timed out; some memories may remain.",
                failed="Forgetting failed: the store failed; some memories may remain.",
            )
        if forgotten:
            self._ctx.after_write(scope)
            self._ctx.after_forget(scope)
        parts = []
        if forgotten:
            parts.append(f"Forgot {len(forgotten)} memories: {', '.join(forgotten)}.")
        if repeats:
            parts.append(
                f"Forgot their repeats too (the same fact said again): {', '.join(repeats)}."
            )
        if back:
            # What the forgotten memory had replaced is true again as far as the
            # store knows: the model must know, to tell the user or forget it too.
            lines = "\n".join(f"- [{i}] {escape_memory(text)}" for i, text in back.items())
            parts.append(
                "These memories had been replaced by the forgotten ones and are current "
                f"again:\n{lines}\nForget them too if they are not true either."
            )
        if refused:
            parts.append(f"No memory of this user with id {', '.join(refused)}.")
        return tool_result(" ".join(parts), error=not forgotten)


def _belongs(entry: dict[str, Any], scope: Scope) -> bool:
    """Whether mem0's entry is a memory ``scope``'s search can show."""
    if entry.get("user_id") != scope.user_id:
        return False
    return scope.shows(entry.get("agent_id") or None)
