"""The time judgement against a model that misbehaves: one that never answers, one
that says yes to everything, and the scope it looks in. Real mem0 on the embedded
store; only the chat model is scripted."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg

from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0._write import judge as judge_module
from agentscope_mem0._write.judge import FollowUp
from agentscope_mem0._write.judge_prompt import READ_PROMPT
from agentscope_mem0.testing import (
    HashEmbedding,
    ScriptedChatModel,
    is_extraction_request,
    is_judge_request,
)

NOW = datetime(2024, 5, 1, tzinfo=UTC)


class SilentJudgeModel(ScriptedChatModel):
    """Extracts at once; its judgement calls never return."""

    async def _call_api(self, model_name: str, messages: list[Msg], **kwargs: Any) -> Any:
        if is_judge_request(messages):
            await asyncio.Event().wait()
        return await super()._call_api(model_name, messages, **kwargs)


def _obeying(prompt: str) -> str:
    """Says every memory answers its own question differently: "everything changed"."""
    memory = prompt.partition("\n")[0].removeprefix("Memory: ")
    if "\nQuestion: " in prompt:
        return memory
    return json.dumps({"question": f"What about {memory}?", "answer": memory})


def _middleware(tmp_path: Any, chat_model: ScriptedChatModel, **options: Any) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=chat_model,
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
        **options,
    )


async def _tell(mw: Mem0Middleware, text: str, *, agent: str = "helper") -> None:
    bot = Agent(name=agent, system_prompt="x", model=ScriptedChatModel("Noted."), middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text))


async def _current(mw: Mem0Middleware) -> dict[str, dict[str, Any]]:
    raw = await mw.client.get_all(filters={"user_id": "alice"}, top_k=100)
    return {item["memory"]: item for item in raw["results"]}


async def test_a_judge_that_never_answers_holds_up_no_write(tmp_path: Any) -> None:
    mw = _middleware(tmp_path, SilentJudgeModel())
    await _tell(mw, "I live in Hangzhou.")
    await _tell(mw, "I moved to Beijing.")
    await _tell(mw, "I live in Beijing now.")
    await _tell(mw, "I moved to Shanghai.")
    # Each write is stored while the judgement of the one before still waits for
    # the model (its timeout is two minutes per call).
    assert await mw.client_state.writer.flush(timeout=30)
    stats = mw.stats()
    assert stats["writes_stored"] == 4 and stats["writes_pending"] == 0
    assert stats["judge_superseded"] == 0
    assert len(await _current(mw)) == 4
    # Closing does not wait minutes for the silent model either.
    assert not await mw.aclose(timeout=0.5)


async def test_one_message_supersedes_at_most_two_memories_however_many_facts(
    tmp_path: Any,
) -> None:
    mw = _middleware(tmp_path, ScriptedChatModel(judge=_obeying))
    async with mw:
        for i in range(20):
            await mw.client.add(
                [{"role": "user", "content": f"User keeps habit number {i} daily"}],
                user_id="alice",
                agent_id="helper",
                infer=False,
            )
        eight = " ".join(f"I keep habit number {i} weekly." for i in range(8))
        await _tell(mw, eight)
        assert await mw.flush(timeout=60)
        stored = await _current(mw)
        hidden = [m for m, item in stored.items() if (item["metadata"] or {}).get("superseded_by")]
        assert len(stored) == 28
        assert len(hidden) == 2, hidden
        stats = mw.stats()
        assert stats["judge_superseded"] == 2 and stats["judge_capped"] > 0


async def test_user_wide_reads_make_a_user_wide_judgement(tmp_path: Any) -> None:
    mw = _middleware(tmp_path, ScriptedChatModel(), scope_search_by_agent=False)
    async with mw:
        await _tell(mw, "I live in Hangzhou.", agent="planner")
        await mw.flush(timeout=30)
        await _tell(mw, "I moved to Beijing.", agent="helper")
        assert await mw.flush(timeout=30)
        stored = await _current(mw)
        old, new = stored["User lives in Hangzhou."], stored["User moved to Beijing."]
        assert (old["agent_id"], new["agent_id"]) == ("planner", "helper")
        assert old["metadata"]["superseded_by"] == new["id"]

    # Searching by agent, each agent's memories are its own: nothing is changed.
    by_agent = _middleware(tmp_path / "by-agent", ScriptedChatModel())
    async with by_agent:
        await _tell(by_agent, "I live in Hangzhou.", agent="planner")
        await by_agent.flush(timeout=30)
        await _tell(by_agent, "I moved to Beijing.", agent="helper")
        assert await by_agent.flush(timeout=30)
        stored = await _current(by_agent)
        assert not stored["User lives in Hangzhou."]["metadata"].get("superseded_by")


async def test_a_question_asked_once_is_kept_with_the_memory(tmp_path: Any) -> None:
    model = ScriptedChatModel()
    mw = _middleware(tmp_path, model)
    async with mw:
        await _tell(mw, "I live in Hangzhou.")
        await mw.flush(timeout=30)
        await _tell(mw, "I moved to Beijing.")
        await mw.flush(timeout=30)
        await _tell(mw, "I moved to Shanghai.")
        assert await mw.flush(timeout=30)
        stored = await _current(mw)
        beijing = stored["User moved to Beijing."]["metadata"]
        assert beijing["fact_question"].startswith("What does the user say about their home")
        asked = [
            call[-1].get_text_content() or ""
            for call in model.judge_calls
            if call[0].get_text_content() != READ_PROMPT
        ]
        # Each memory's question was asked once, though Beijing was judged twice.
        assert sorted(asked) == sorted(set(asked))
        assert stored["User moved to Beijing."]["metadata"]["superseded_by"]


class _LaneRecordingEmbedding(HashEmbedding):
    """Embeds in mem0's thread as the offline e5 does, noting which calls a reply waits for."""

    accepts_background = True

    def __init__(self) -> None:
        super().__init__()
        self.searches: list[tuple[str, bool]] = []

    def embed_blocking(
        self, texts: list[str], memory_action: str | None, *, background: bool = False
    ) -> list[list[float]]:
        if memory_action == "search":
            self.searches += [(text, background) for text in texts]
        return [self.vector(text) for text in texts]


async def test_the_judgements_searches_wait_for_the_replies(tmp_path: Any) -> None:
    """The judge's and consolidation's searches are embedded as background work,
    the reply's query is not (the offline embedder serves the replies first)."""
    embedder = _LaneRecordingEmbedding()
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=embedder,
        folder=tmp_path / "data",
        mode="static_control",
    )
    async with mw:
        await _tell(mw, "I live in Hangzhou.")
        assert await mw.flush(timeout=30)
        embedder.searches.clear()
        await _tell(mw, "I moved to Beijing.")
        assert await mw.flush(timeout=30)
        assert (await _current(mw))["User lives in Hangzhou."]["metadata"]["superseded_by"]
    replies = [b for text, b in embedder.searches if text == "I moved to Beijing."]
    judged = [b for text, b in embedder.searches if text.startswith("User moved to Beijing")]
    assert replies and not any(replies)  # the reply's own query
    assert judged and all(judged)  # the judgement's search for the new memory


class _GatedJudge:
    """A judgement that waits at a gate and notes what it was asked."""

    model = object()  # a model judges: a write past the backlog is only dated
    consolidates = True
    prefix = "judge"
    stopped = False

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.seen: list[tuple[str, int, bool]] = []

    def searched(self, scope: Scope) -> Scope:
        return scope

    def stats(self) -> dict[str, Any]:
        return {}

    async def judge(self, scope: Scope, results: Any, said_at: Any, *, ask: bool) -> bool:
        await self.gate.wait()
        self.seen.append((scope.user_id, results[0]["n"], ask))
        return False


class _Profiles:
    def invalidate(self, scope: Scope) -> None:
        pass


async def test_writes_are_judged_in_order_per_scope_and_past_the_backlog_only_dated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(judge_module, "_JUDGE_BACKLOG", 2)
    judge = _GatedJudge()
    follow = FollowUp(_Profiles(), judge)  # type: ignore[arg-type]

    def store(user: str, n: int) -> None:
        follow.stored(Scope(user), [{"id": f"{user}{n}", "memory": "m", "n": n}], NOW)

    store("a", 0)
    await asyncio.sleep(0)  # a's first write is judged and waits at the gate
    for n in (1, 2, 3):
        store("a", n)
    store("b", 0)
    await asyncio.sleep(0)
    assert follow.stats()["judge_waiting"] == 3  # b's runs beside a's: scopes do not wait
    assert not await follow.flush(timeout=0.05)
    judge.gate.set()
    assert await follow.flush(timeout=5)
    ran = [(n, ask) for user, n, ask in judge.seen if user == "a"]
    assert ran == [(0, True), (1, True), (2, True), (3, False)]  # the last one only dated
    assert ("b", 0, True) in judge.seen
    assert follow.stop() == 0
    store("a", 9)  # after stop: nothing more is judged
    assert follow.stats()["judge_waiting"] == 0


def _not_said(prompt: str) -> str:
    """A model that reads every memory for its own question only: "not said"."""
    memory = prompt.partition("\n")[0].removeprefix("Memory: ")
    if "\nQuestion: " in prompt:
        return "not said"
    return json.dumps({"question": f"What does the user say in {memory}?", "answer": memory})


async def test_a_change_told_later_in_the_same_message_supersedes_the_earlier_fact(
    tmp_path: Any,
) -> None:
    mw = _middleware(tmp_path, ScriptedChatModel())
    async with mw:
        await _tell(mw, "I live in Hangzhou. I moved to Beijing.")
        assert await mw.flush(timeout=30)
        stored = await _current(mw)
        old, new = stored["User lives in Hangzhou."], stored["User moved to Beijing."]
        assert old["metadata"]["superseded_by"] == new["id"]
        assert new["metadata"]["supersedes"] == [old["id"]]
        assert not new["metadata"].get("superseded_by")

    # A model that reads nothing: both stay, nothing is hidden.
    reads_nothing = _middleware(tmp_path / "not-said", ScriptedChatModel(judge=_not_said))
    async with reads_nothing:
        await _tell(reads_nothing, "I live in Hangzhou. I moved to Beijing.")
        assert await reads_nothing.flush(timeout=30)
        stored = await _current(reads_nothing)
        assert len(stored) == 2
        assert not any(item["metadata"].get("superseded_by") for item in stored.values())


class FirstExtractionWaits(ScriptedChatModel):
    """Its first extraction waits until ``release`` is set: the scope is busy."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self._waited = False

    async def _call_api(self, model_name: str, messages: list[Msg], **kwargs: Any) -> Any:
        if not self._waited and is_extraction_request(messages):
            self._waited = True
            self.waiting.set()
            await self.release.wait()
        return await super()._call_api(model_name, messages, **kwargs)


async def test_a_change_told_in_two_quick_turns_joined_in_one_write_supersedes(
    tmp_path: Any,
) -> None:
    # The first turn's extraction waits, so the next two wait behind it and go to
    # mem0 as one call: their memories are one write, in turn order.
    model = FirstExtractionWaits()
    mw = _middleware(tmp_path, model)
    async with mw:
        await _tell(mw, "I like green tea.")
        # On a loaded machine the worker may not have taken the first turn yet;
        # the next two must find it busy, not join it.
        await asyncio.wait_for(model.waiting.wait(), timeout=60)
        await _tell(mw, "I live in Hangzhou.")
        await _tell(mw, "I moved to Beijing.")
        model.release.set()
        assert await mw.flush(timeout=60)
        assert mw.stats()["write_batches"] == 2
        stored = await _current(mw)
        old, new = stored["User lives in Hangzhou."], stored["User moved to Beijing."]
        assert old["metadata"]["superseded_by"] == new["id"]
        assert not stored["User likes green tea."]["metadata"].get("superseded_by")
