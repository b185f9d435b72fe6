"""The opt-in ``forget_memory`` tool, and choosing which tools an agent gets.

AgentScope's built-in middleware offers ``search_memory`` and ``add_memory``;
that stays the default so the drop-in changes no agent's tool list. Other
tools are named in the middleware's ``tools`` keyword, e.g.
``tools=("search_memory", "add_memory", "forget_memory")``. With
``forget_memory`` on, ``search_memory`` shows each memory's id, which is what
``forget_memory`` takes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._bounded import MemoryUnavailableError
from ._exceptions import ConfigurationError
from ._time import time_label
from ._tools import (
    NOT_INSTALLED,
    UNAVAILABLE,
    AddMemoryTool,
    SearchMemoryTool,
    ToolContext,
    _chunk,
    _MemoryTool,
)

if TYPE_CHECKING:
    from agentscope.state import AgentState
    from agentscope.tool import ToolBase, ToolChunk

    from ._backend import MemoryHit


__all__ = ["DEFAULT_TOOLS", "TOOL_NAMES", "ForgetMemoryTool", "build_tools", "check_tool_names"]

logger = logging.getLogger(__name__)

DEFAULT_TOOLS = ("search_memory", "add_memory")
"""The built-in middleware's tools, offered when ``tools`` is not given."""


class ForgetMemoryTool(_MemoryTool):
    """Deletes memories of the calling agent's user and agent, by id."""

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
        if scope is None:
            return _chunk(NOT_INSTALLED, error=True)
        wanted = [i.strip() for i in memory_ids or [] if isinstance(i, str) and i.strip()]
        if not wanted:
            return _chunk("No memory ids were given, so nothing was forgotten.", error=True)
        backend = self._ctx.backend
        forgotten: list[str] = []
        refused: list[str] = []

        async def forget_all() -> None:
            for memory_id in dict.fromkeys(wanted):
                entry = await backend.get(memory_id)
                if entry is None or not _belongs(entry, scope.user_id, scope.agent_id):
                    # Someone else's memory reads the same as a missing one.
                    refused.append(memory_id)
                    continue
                await backend.delete(memory_id)
                forgotten.append(memory_id)

        try:
            await self._ctx.call(forget_all(), write=True)
        except MemoryUnavailableError:
            return _chunk(f"{UNAVAILABLE} Nothing was forgotten.", error=True)
        except TimeoutError:
            logger.warning("forget_memory took over %s s", self._ctx.deadlines.tool_timeout)
            return _chunk("Forgetting timed out; some memories may remain.", error=True)
        except Exception as exc:
            logger.warning("forget_memory failed: %s", exc)
            return _chunk(f"Forgetting failed: {exc}", error=True)
        if forgotten:
            self._ctx.after_write(scope)
        parts = []
        if forgotten:
            parts.append(f"Forgot {len(forgotten)} memories: {', '.join(forgotten)}.")
        if refused:
            parts.append(f"No memory of this user with id {', '.join(refused)}.")
        return _chunk(" ".join(parts), error=not forgotten)


def _belongs(entry: dict[str, Any], user_id: str, agent_id: str | None) -> bool:
    """Whether mem0's entry is the memory of ``user_id`` (and ``agent_id``, when set)."""
    if entry.get("user_id") != user_id:
        return False
    return agent_id is None or entry.get("agent_id") == agent_id


class SearchMemoryWithIdsTool(SearchMemoryTool):
    """``search_memory`` showing ids and dates, offered alongside ``forget_memory``."""

    def line(self, hit: MemoryHit) -> str:
        """``- [id] [said date] memory``: the id is what ``forget_memory`` takes."""
        label = time_label(hit)
        dated = f"[{label}] " if label else ""
        return f"- [{hit.id}] {dated}{hit.memory}" if hit.id else f"- {dated}{hit.memory}"


TOOL_NAMES: dict[str, Callable[[ToolContext], ToolBase]] = {
    "search_memory": SearchMemoryTool,
    "add_memory": AddMemoryTool,
    "forget_memory": ForgetMemoryTool,
}
"""Every tool the middleware can offer, by name."""


def check_tool_names(tools: Sequence[str] | None) -> tuple[str, ...]:
    """The ``tools`` keyword as a tuple of known names, in order, without repeats.

    Raises:
        ConfigurationError: ``tools`` is a bare string, empty, or names an unknown tool.
    """
    if tools is None:
        return DEFAULT_TOOLS
    if isinstance(tools, str):
        raise ConfigurationError(
            f"tools must be a sequence of tool names, such as ({tools!r},), not a string"
        )
    names = tuple(dict.fromkeys(tools))
    unknown = [n for n in names if n not in TOOL_NAMES]
    if unknown or not names:
        raise ConfigurationError(
            f"unknown tools {unknown!r}; choose from {', '.join(TOOL_NAMES)}"
            if unknown
            else "tools is empty; use mode='static_control' for an agent without memory tools"
        )
    return names


def build_tools(context: ToolContext, names: Sequence[str]) -> list[ToolBase]:
    """One tool per name, sharing ``context``; ``search_memory`` shows memory ids
    when ``forget_memory`` is offered too."""
    with_ids = "forget_memory" in names
    return [
        SearchMemoryWithIdsTool(context)
        if name == "search_memory" and with_ids
        else TOOL_NAMES[name](context)
        for name in names
    ]
