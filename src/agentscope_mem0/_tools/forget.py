"""The opt-in ``forget_memory`` tool, and the ``search_memory`` that shows
the ids it takes (offered together; see :mod:`.choose`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._exceptions import MemoryUnavailableError
from .._memories.lifecycle import time_label
from .._text.escape import escape_memory
from .memory import (
    UNAVAILABLE,
    SearchMemoryTool,
    _chunk,
    _MemoryTool,
    store_failed,
)

if TYPE_CHECKING:
    from agentscope.state import AgentState
    from agentscope.tool import ToolChunk

    from .._memories.hit import MemoryHit
    from .._scope import Scope


__all__ = ["ForgetMemoryTool", "SearchMemoryWithIdsTool"]

logger = logging.getLogger(__name__)


class ForgetMemoryTool(_MemoryTool):
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
            return _chunk("No memory ids were given, so nothing was forgotten.", error=True)
        backend = self._ctx.backend
        forgotten: list[str] = []
        refused: list[str] = []
        back: dict[str, str] = {}

        async def forget_all() -> None:
            for memory_id in dict.fromkeys(wanted):
                entry = await backend.get(memory_id)
                if entry is None or not _belongs(entry, scope):
                    # Someone else's memory reads the same as a missing one.
                    refused.append(memory_id)
                    continue
                done = await backend.forget(memory_id)
                forgotten.append(memory_id)
                back.pop(memory_id, None)
                for other_id in done.current_again:
                    other = await backend.get(other_id)
                    if other is not None:
                        back[other_id] = str(other.get("memory") or "")

        try:
            await self._ctx.call(forget_all(), write=True)
        except MemoryUnavailableError:
            return _chunk(f"{UNAVAILABLE} Nothing was forgotten.", error=True)
        except TimeoutError:
            logger.warning("forget_memory took over %s s", self._ctx.parameters.tool_timeout)
            return _chunk("Forgetting timed out; some memories may remain.", error=True)
        except Exception as exc:
            return store_failed(
                "forget_memory",
                exc,
                "Forgetting failed: the store failed; some memories may remain.",
            )
        if forgotten:
            self._ctx.after_write(scope)
        parts = []
        if forgotten:
            parts.append(f"Forgot {len(forgotten)} memories: {', '.join(forgotten)}.")
        if back:
            # A fact said twice (or replaced by the forgotten memory) is remembered
            # again: the model must know, to tell the user or forget it too.
            lines = "\n".join(f"- [{i}] {escape_memory(text)}" for i, text in back.items())
            parts.append(
                "These memories were hidden behind the forgotten ones and are current "
                f"again (the same fact said another time, or what it had replaced):\n{lines}\n"
                "Forget them too if the user wants the fact itself gone."
            )
        if refused:
            parts.append(f"No memory of this user with id {', '.join(refused)}.")
        return _chunk(" ".join(parts), error=not forgotten)


def _belongs(entry: dict[str, Any], scope: Scope) -> bool:
    """Whether mem0's entry is a memory ``scope``'s search can show."""
    if entry.get("user_id") != scope.user_id:
        return False
    agent = entry.get("agent_id")
    return scope.agent_id in (None, agent) or (scope.with_user_level and not agent)


class SearchMemoryWithIdsTool(SearchMemoryTool):
    """``search_memory`` showing ids and dates, offered alongside ``forget_memory``."""

    def line(self, hit: MemoryHit) -> str:
        """``- [id] [said date] memory``: the id is what ``forget_memory`` takes."""
        label = time_label(hit)
        dated = f"[{label}] " if label else ""
        return f"- [{hit.id}] {dated}{hit.memory}" if hit.id else f"- {dated}{hit.memory}"
