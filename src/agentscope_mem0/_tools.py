"""The agent-control tools: ``search_memory`` and ``add_memory``.

Both take no user or scope argument: the scope comes from the middleware
and from the calling agent's live state, never from what the model writes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from ._escape import escape_memory

if TYPE_CHECKING:
    from agentscope.state import AgentState

    from ._middleware import Mem0Middleware
    from ._scope import Scope

__all__ = ["AddMemoryTool", "SearchMemoryTool"]

logger = logging.getLogger(__name__)


def _chunk(text: str, *, error: bool = False) -> ToolChunk:
    state = ToolResultState.ERROR if error else ToolResultState.SUCCESS
    return ToolChunk(content=[TextBlock(text=text)], state=state)


class _MemoryTool(ToolBase):
    is_state_injected = True
    is_external_tool = False
    is_mcp = False

    def __init__(self, middleware: Mem0Middleware) -> None:
        super().__init__()
        self._mw = middleware

    async def check_permissions(self, *args: Any, **kwargs: Any) -> PermissionDecision:
        """Memory tools never ask the user for permission."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{self.name} is part of the agent's long-term memory",
        )


class SearchMemoryTool(_MemoryTool):
    """Searches the calling agent's memories, one query per keyword."""

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
        },
        "required": ["keywords"],
    }
    is_concurrency_safe = True
    is_read_only = True

    async def call(
        self,
        keywords: list[str],
        limit: int = 5,
        _agent_state: AgentState | None = None,
    ) -> ToolChunk:
        """Run one search per keyword and merge the results without duplicates."""
        scope = self._mw._tool_scope(_agent_state, for_search=True)
        if scope is None:
            return _chunk(self._mw._NOT_INSTALLED, error=True)
        queries = [k.strip() for k in keywords if isinstance(k, str) and k.strip()]
        if not queries:
            return _chunk("No keywords were given, so nothing was searched.", error=True)
        limit = max(1, min(int(limit), 50))
        try:
            per_query = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        self._mw._backend.search(
                            q, scope, top_k=limit, threshold=self._mw._threshold
                        )
                        for q in queries
                    )
                ),
                timeout=self._mw._search_timeout,
            )
        except TimeoutError:
            logger.warning("search_memory took over %s s", self._mw._search_timeout)
            return _chunk("Memory search timed out; go on without it.", error=True)
        except Exception as exc:
            logger.warning("search_memory failed: %s", exc)
            return _chunk(f"Memory search failed: {exc}", error=True)
        seen: set[str] = set()
        lines: list[str] = []
        for hits in per_query:
            for hit in hits:
                if hit.memory not in seen:
                    seen.add(hit.memory)
                    lines.append(f"- {escape_memory(hit.memory)}")
        if not lines:
            return _chunk("No relevant memories found.")
        return _chunk("\n".join(lines))


class AddMemoryTool(_MemoryTool):
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
        """Store ``content`` through mem0's extraction, verbatim if it finds nothing."""
        scope = self._mw._tool_scope(_agent_state, for_search=False)
        if scope is None:
            return _chunk(self._mw._NOT_INSTALLED, error=True)
        facts = [c.strip() for c in content if isinstance(c, str) and c.strip()]
        if not facts:
            return _chunk("`content` is empty, so nothing was recorded.", error=True)
        try:
            stored = await asyncio.wait_for(
                self._store(facts, scope), timeout=self._mw._tool_timeout
            )
        except TimeoutError:
            logger.warning("add_memory took over %s s", self._mw._tool_timeout)
            return _chunk(
                "Recording to memory timed out; it may still be stored. Do not retry now.",
                error=True,
            )
        except Exception as exc:
            logger.warning("add_memory failed: %s", exc)
            return _chunk(f"Recording to memory failed: {exc}", error=True)
        self._mw._after_write(scope)
        saved = [str(item.get("memory", "")) for item in stored if isinstance(item, dict)]
        summary = "; ".join(s.rstrip(". ") for s in saved if s) or "; ".join(facts)
        reason = f" Reason given: {thinking}" if thinking else ""
        return _chunk(f"Recorded to memory: {summary}.{reason}")

    async def _store(self, facts: list[str], scope: Scope) -> list[Any]:
        joined = [{"role": "user", "content": "\n".join(facts)}]
        stored = await self._mw._backend.add(joined, scope)
        if not stored:
            # Extraction judged nothing worth keeping, but the agent asked
            # explicitly: keep each fact as written, one memory each.
            verbatim = [{"role": "user", "content": fact} for fact in facts]
            stored = await self._mw._backend.add(verbatim, scope, infer=False)
        return stored
