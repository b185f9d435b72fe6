"""The ``update_working_memory`` tool.

Takes no user or scope argument: whose memory it writes comes from the
middleware and the calling agent's live state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._exceptions import WorkingContentError
from .long_term import MemoryToolBase, tool_failed, tool_result

if TYPE_CHECKING:
    from agentscope.state import AgentState
    from agentscope.tool import ToolChunk

    from .._working.manager import WorkingMemoryManager

__all__ = ["UpdateWorkingMemoryTool"]


class UpdateWorkingMemoryTool(MemoryToolBase):
    """Appends to or rewrites the working memory shown every turn."""

    name = "update_working_memory"
    is_concurrency_safe = False
    is_read_only = False

    def __init__(self, manager: WorkingMemoryManager) -> None:
        super().__init__()
        self._manager = manager
        scope = (
            "this conversation"
            if manager.options.scope == "conversation"
            else "this user, shared by all your conversations with them"
        )
        self.description = (
            f"Update your working memory for {scope}: the notes shown to you in full "
            "every turn (the user's name, the task, decisions, the plan). "
            "mode='append' (default) adds to it"
            + (
                ": the JSON object is merged in, nested objects key by key and lists "
                "without duplicates"
                if manager.format.kind == "json"
                else ": text is added at the end, Markdown sections under their heading"
            )
            + ". mode='replace' OVERWRITES the whole working memory with `content`: "
            f"everything not in it is lost. It holds at most {manager.options.max_chars} "
            "characters. Content: " + manager.format.describe()
        )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "content": {
                    "type": "string",
                    "description": "What to write. " + manager.format.describe(),
                },
                "mode": {
                    "type": "string",
                    "enum": ["append", "replace"],
                    "default": "append",
                    "description": (
                        "'append' merges into the working memory; 'replace' overwrites all of it."
                    ),
                },
            },
            "required": ["content"],
        }

    async def call(
        self,
        content: Any,
        mode: str = "append",
        _agent_state: AgentState | None = None,
    ) -> ToolChunk:
        """Write ``content``; an invalid one is an error that says what to fix."""
        try:
            report = await self._manager.update(_agent_state, content, mode)  # type: ignore[arg-type]
        except WorkingContentError as exc:
            return tool_result(f"Working memory not changed: {exc}", error=True)
        except Exception as exc:
            return tool_failed(
                self.name,
                exc,
                timeout=self._manager.options.update_timeout,
                timed_out="Updating working memory timed out; it may still be stored. "
                "It will show next turn if it was.",
                failed="Working memory not changed: the store failed.",
            )
        return tool_result(report)
