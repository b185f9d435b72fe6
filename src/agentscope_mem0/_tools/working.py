"""The ``update_working_memory`` tool.

Takes no user or scope argument: whose memory it writes comes from the
middleware and the calling agent's live state.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from .._exceptions import WorkingContentError
from .memory import _chunk, store_failed

if TYPE_CHECKING:
    from agentscope.state import AgentState

    from .._working.manager import WorkingMemoryManager

__all__ = ["UpdateWorkingMemoryTool"]

logger = logging.getLogger(__name__)


class UpdateWorkingMemoryTool(ToolBase):
    """Appends to or rewrites the working memory shown every turn."""

    name = "update_working_memory"
    is_state_injected = True
    is_external_tool = False
    is_mcp = False
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

    async def check_permissions(self, *args: Any, **kwargs: Any) -> PermissionDecision:
        """The agent's own scratchpad needs no permission."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="update_working_memory writes the agent's own working memory",
        )

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
            return _chunk(f"Working memory not changed: {exc}", error=True)
        except TimeoutError:
            logger.warning(
                "update_working_memory took over %s s", self._manager.options.update_timeout
            )
            return _chunk(
                "Updating working memory timed out; it may still be stored. "
                "It will show next turn if it was.",
                error=True,
            )
        except Exception as exc:
            return store_failed(
                "update_working_memory", exc, "Working memory not changed: the store failed."
            )
        return _chunk(report)
