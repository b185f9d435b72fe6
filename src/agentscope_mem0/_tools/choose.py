"""Which tools an agent gets.

AgentScope's built-in middleware offers ``search_memory`` and ``add_memory``;
that stays the default so the drop-in changes no agent's tool list. Other
tools are named in ``Mem0Middleware.Parameters(tools=...)``, e.g.
``tools=("search_memory", "add_memory", "forget_memory")``. With
``forget_memory`` on, ``search_memory`` shows each memory's id, which is what
``forget_memory`` takes. ``update_working_memory`` comes with working memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .long_term import AddMemoryTool, ForgetMemoryTool, SearchMemoryTool, ToolContext
from .working import UpdateWorkingMemoryTool

if TYPE_CHECKING:
    from agentscope.tool import ToolBase

    from .._parameters import ToolName
    from .._working.manager import WorkingMemoryManager

__all__ = ["TOOL_NAMES", "build_tools"]

TOOL_NAMES: dict[ToolName, Callable[[ToolContext], ToolBase]] = {
    "search_memory": SearchMemoryTool,
    "add_memory": AddMemoryTool,
    "forget_memory": ForgetMemoryTool,
}
"""Every tool the middleware can offer, by its name (a ``ToolName``)."""


def build_tools(
    context: ToolContext,
    names: Sequence[ToolName],
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
