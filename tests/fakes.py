"""Test helpers that wrap real components; only models and hosted services are faked."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from mem0 import AsyncMemory

from agentscope_mem0 import build_mem0_config
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel


def real_memory(
    store_config: dict[str, Any],
    chat_model: ScriptedChatModel | None = None,
    embedding: HashEmbedding | None = None,
) -> AsyncMemory:
    """A real mem0 AsyncMemory on local Qdrant, driven by the offline fakes."""
    return AsyncMemory(
        config=build_mem0_config(
            chat_model=chat_model or ScriptedChatModel(),
            embedding_model=embedding or HashEmbedding(),
            mem0_config=store_config,
        )
    )


def close_memory(memory: AsyncMemory) -> None:
    """Release the on-disk Qdrant folder lock, for the next client on that folder."""
    memory.vector_store.client.close()


class RecordingClient:
    """Forwards to a real async mem0 client and records every call."""

    def __init__(self, inner: Any, *, search_delay: float = 0.0) -> None:
        self.inner = inner
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.search_delay = search_delay

    def named(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for n, a, k in self.calls if n == name]

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("search", args, kwargs))
        if self.search_delay:
            await asyncio.sleep(self.search_delay)
        return await self.inner.search(*args, **kwargs)

    async def add(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("add", args, kwargs))
        return await self.inner.add(*args, **kwargs)

    async def get_all(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("get_all", args, kwargs))
        return await self.inner.get_all(*args, **kwargs)

    async def delete_all(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("delete_all", args, kwargs))
        return await self.inner.delete_all(*args, **kwargs)


async def one_session(mw: Any, text: str, *, agent: str = "helper") -> ScriptedChatModel:
    """One reply of a fresh agent (empty context) with ``mw``; returns its model."""
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    model = ScriptedChatModel("Noted.")
    bot = Agent(name=agent, system_prompt="You help.", model=model, middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text))
    return model


def note_text(messages: Sequence[Any]) -> str:
    """The text of the memory note among the messages a model was given."""
    from agentscope.message import HintBlock

    from agentscope_mem0._notes import is_memory_note

    return "\n".join(
        str(block.hint)
        for msg in messages
        if is_memory_note(msg)
        for block in msg.content
        if isinstance(block, HintBlock)
    )
