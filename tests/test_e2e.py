"""Two sessions, real mem0 built through the models path on an on-disk Qdrant."""

from __future__ import annotations

from typing import Any

from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel


def _model_input_text(messages: list[Any]) -> str:
    parts = []
    for msg in messages:
        for block in msg.content:
            parts.append(getattr(block, "text", None) or getattr(block, "hint", None) or "")
    return "\n".join(str(p) for p in parts)


async def test_second_session_recalls_the_first(store_config: dict[str, Any]) -> None:
    # one model instance serves the agents and mem0's extraction
    model = ScriptedChatModel(["Got it: dark mode, matplotlib, Hangzhou.", "Here is the chart."])
    mw = Mem0Middleware(
        user_id="alice",
        chat_model=model,
        embedding_model=HashEmbedding(),
        mem0_config=store_config,
        mode="static_control",
    )
    first = Agent(name="assistant", system_prompt="You make charts.", model=model, middlewares=[mw])
    await first.reply(
        UserMsg(
            "user",
            "Make my charts dark mode with matplotlib by default. I live in Hangzhou.",
        )
    )
    assert await mw.flush(timeout=30)
    assert len(model.extraction_calls) == 1

    second = Agent(
        name="assistant", system_prompt="You make charts.", model=model, middlewares=[mw]
    )
    assert second.state.context == []
    await second.reply(UserMsg("user", "Draw a bar chart of my monthly sales."))
    seen = _model_input_text(model.calls[-1])
    assert "dark mode" in seen
    assert "matplotlib" in seen
    assert "Hangzhou" in seen
    await mw.aclose()


async def test_another_user_does_not_see_those_facts(store_config: dict[str, Any]) -> None:
    model = ScriptedChatModel("ok")
    alice = Mem0Middleware(
        user_id="alice",
        chat_model=model,
        embedding_model=HashEmbedding(),
        mem0_config=store_config,
        await_write=True,
    )
    await Agent(name="a", system_prompt="", model=model, middlewares=[alice]).reply(
        UserMsg("user", "I live in Hangzhou and my charts are dark mode.")
    )
    bob = Mem0Middleware(user_id="bob", client=alice.client)
    await Agent(name="a", system_prompt="", model=model, middlewares=[bob]).reply(
        UserMsg("user", "Where do I live? Which chart mode do I like?")
    )
    assert "Hangzhou" not in _model_input_text(model.calls[-1])
