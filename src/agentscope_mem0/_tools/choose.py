"""Which tools an agent gets.

AgentScope's built-in middleware offers ``search_memory`` and ``add_memory``;
that stays the default so the drop-in changes no agent's tool list. Other
tools are named in the middleware's ``tools`` keyword, e.g.
``tools=("search_memory", "add_memory", "forget_memory")``. With
``forget_memory`` on, ``search_memory`` shows each memory's id, which is what
``forget_memory`` takes. ``update_working_memory`` comes with working memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._exceptions import ConfigurationError
from .long_term import AddMemoryTool, ForgetMemoryTool, SearchMemoryTool, ToolContext
from .working import UpdateWorkingMemoryTool

if TYPE_CHECKING:
    from agentscope.tool import ToolBase

    from .._working.manager import WorkingMemoryManager

__all__ = ["DEFAULT_TOOLS", "TOOL_NAMES", "build_tools", "check_tool_names"]

DEFAULT_TOOLS = ("search_memory", "add_memory")
"""The built-in middleware's tools, offered when ``tools`` is not given."""

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


def build_tools(
    context: ToolContext,
    names: Sequence[str],
    working: WorkingMemoryManager | None = None,
) -> list[ToolBase]:
    """One tool per name, sharing ``context``; ``search_memory`` shows memory ids
    when ``forget_memory`` is offered too; then ``update_working_memory`` when
    ``working`` memory is on and the agent may update it."""
    with_ids = "forget_memory" in names
    tools = [
        SearchMemoryTool(context, show_ids=with_ids)
        if name == "search_memory"
        else TOOL_NAMES[name](context)
        for name in names
    ]
    if working is not None and working.tools_offered:
        tools.append(UpdateWorkingMemoryTool(working))
    return tools
