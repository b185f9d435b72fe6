"""A fact told again is current again, and one scope for judging and reading:
real mem0 on the embedded store, only the chat model scripted."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

HOMES = ("Hangzhou", "Beijing")


def _middleware(tmp_path: Path, model: ScriptedChatModel | None = None, **options: Any) -> Any:
    options.setdefault("mode", "static_control")
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=model or ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        **options,
    )


async def _turn(mw: Mem0Middleware, text: str, when: str, agent: str = "helper") -> None:
    bot = Agent(name=agent, system_prompt="x", model=ScriptedChatModel("Noted."), middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text, created_at=when))
    assert await mw.flush(timeout=60)


async def _current(mw: Mem0Middleware, scope: Scope) -> list[str]:
    return sorted(h.memory for h in await mw.client_state.backend.get_all(scope, limit=50))


async def _everything(mw: Mem0Middleware) -> dict[str, dict[str, Any]]:
    raw = await mw.client.get_all(filters={"user_id": "alice"})
    return {item["memory"]: item for item in raw["results"]}


def _places(memories: list[str]) -> list[str]:
    return [m for m in memories if any(home in m for home in HOMES)]


@pytest.mark.parametrize("extraction", ["mem0", "compact"])
@pytest.mark.parametrize(
    ("told", "stored"),
    [
        ("I live in Hangzhou.", "User lives in Hangzhou."),
        ("I moved back to Hangzhou.", "User moved back to Hangzhou."),
    ],
)
async def test_a_fact_told_again_is_current_again(
    tmp_path: Path, extraction: str, told: str, stored: str
) -> None:
    model = ScriptedChatModel()
    mw = _middleware(tmp_path, model, parameters=Mem0Middleware.Parameters(extraction=extraction))
    scope = Scope("alice", "helper", with_user_level=True)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing last month.", "2024-03-10T10:00:00+00:00")
        assert _places(await _current(mw, scope)) == ["User moved to Beijing last month."]

        await _turn(mw, told, "2024-06-01T10:00:00+00:00")
        # The extraction was not shown the superseded memory as one it already has.
        prompt = "\n".join(
            m.get_text_content() or "" for m in model.extraction_calls[-1] if m.role == "user"
        )
        existing = prompt.split("## New Messages")[0]
        assert "Beijing" in existing and "User lives in Hangzhou." not in existing

        assert _places(await _current(mw, scope)) == [stored]
        everything = (await mw.client.get_all(filters={"user_id": "alice"}))["results"]
        (beijing,) = [m for m in everything if "Beijing" in m["memory"]]
        first, again = sorted(
            (m for m in everything if "Hangzhou" in m["memory"]), key=lambda m: m["created_at"]
        )
        assert again["memory"] == stored
        assert beijing["metadata"]["superseded_by"] == again["id"]
        assert beijing["metadata"]["valid_until"].startswith("2024-06-01")
        assert beijing["id"] in again["metadata"]["supersedes"]
        # The first Hangzhou memory keeps its place in the timeline.
        assert first["metadata"]["superseded_by"] == beijing["id"]


async def test_told_again_without_a_model_the_words_bring_it_back(tmp_path: Path) -> None:
    """Superseded by an earlier judgement, then told again with the judge off."""
    mw = _middleware(tmp_path)
    scope = Scope("alice", "helper", with_user_level=True)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing last month.", "2024-03-10T10:00:00+00:00")
    words_only = _middleware(tmp_path, parameters=Mem0Middleware.Parameters(judge=False))
    async with words_only:
        await _turn(words_only, "I live in Hangzhou.", "2024-06-01T10:00:00+00:00")
        assert _places(await _current(words_only, scope)) == ["User lives in Hangzhou."]


async def test_a_change_told_without_an_agent_supersedes_every_agents_memory(
    tmp_path: Path,
) -> None:
    """Every agent's reads show the user's memories of no agent: a change told
    there replaces what any agent's memory said, and every read sees one place."""
    mw = _middleware(tmp_path)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00", agent="planner")
        await _turn(mw, "I moved to Beijing last month.", "2024-03-10T10:00:00+00:00")
        state = mw.client_state
        said = datetime(2024, 6, 1, tzinfo=UTC)
        user_level = Scope("alice")
        await state.writer.submit(
            user_level, [{"role": "user", "content": "I moved back to Hangzhou."}], said_at=said
        )
        assert await mw.flush(timeout=60)
        for scope in (
            Scope("alice"),
            Scope("alice", "helper", with_user_level=True),
            Scope("alice", "planner", with_user_level=True),
        ):
            assert _places(await _current(mw, scope)) == ["User moved back to Hangzhou."], scope


async def test_a_repeat_merges_only_into_a_memory_every_read_showing_it_shows(
    tmp_path: Path,
) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        # Only the planner's reads show the planner's memory.
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00", agent="planner")
        state = mw.client_state
        said = datetime(2024, 2, 1, tzinfo=UTC)
        await state.writer.submit(
            Scope("alice"), [{"role": "user", "content": "I live in Hangzhou."}], said_at=said
        )
        assert await mw.flush(timeout=60)
        # The user's own memory is stored and stays current: the helper sees it.
        helper = Scope("alice", "helper", with_user_level=True)
        assert _places(await _current(mw, helper)) == ["User lives in Hangzhou."]
        planner = Scope("alice", "planner", with_user_level=True)
        assert _places(await _current(mw, planner)) == ["User lives in Hangzhou."] * 2

        # The other way round, the planner's repeat of a memory it sees is merged.
        await _turn(mw, "I live in Hangzhou!", "2024-03-01T10:00:00+00:00", agent="planner")
        everything = await _everything(mw)
        repeat = everything["User lives in Hangzhou!"]
        assert repeat["metadata"]["duplicate_of"]
