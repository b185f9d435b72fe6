"""A reply whose query would wait too long for the embedder searches by keywords alone.

Real mem0 ``AsyncMemory``, real Qdrant Edge store, real middleware; the
embedders are fakes that say "busy" on purpose, and the engine's turns are
driven with fake engine calls.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import ConfigurationError, EmbedderBusyError, Mem0Middleware
from agentscope_mem0._mem0.adapters import AgentScopeEmbedding
from agentscope_mem0._mem0.call_context import no_reply_waits
from agentscope_mem0._vectors.keywords_only import allow_keywords_only
from agentscope_mem0.local import OfflineE5Embedding
from agentscope_mem0.local._embedder import EngineTurns, Rank
from agentscope_mem0.testing import ScriptedChatModel
from fakes import BusyEmbedding, note_text


def busy_middleware(folder: Path, embedder: BusyEmbedding) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=embedder,
        folder=folder,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(judge=False),
    )


async def test_a_refused_query_is_answered_by_keywords(tmp_path: Path) -> None:
    embedder = BusyEmbedding()
    mw = busy_middleware(tmp_path / "data", embedder)
    async with mw:
        for text in ("User's cat is called Tomasz.", "User works as a nurse in Lyon."):
            await mw.client.add(
                [{"role": "user", "content": text}], user_id="alice", agent_id="a", infer=False
            )
        for turn in range(2):  # the second time too: no refusal is remembered as a vector
            model = ScriptedChatModel("Sure.")
            agent = Agent(name="a", system_prompt="x", model=model, middlewares=[mw])
            await agent.reply(UserMsg("user", "What is the name of my cat?"))
            note = note_text(model.calls[0])
            assert "Tomasz" in note and "nurse" not in note, note
            assert mw.stats()["searches_by_keywords_alone"] == turn + 1
        assert await mw.flush(timeout=30)
    refused = [call for call in embedder.calls if call[2]]
    assert refused and all(action == "search" and not bg for action, bg, _ in refused)
    # The writes' embeddings (the exchanges mem0 stored) were never refused.
    assert any(not may_refuse for _, _, may_refuse in embedder.calls)
    assert mw.stats()["writes_failed"] == 0


def test_only_a_store_that_searches_by_keywords_lets_queries_be_refused() -> None:
    adapter = AgentScopeEmbedding({"model": BusyEmbedding()})
    without = SimpleNamespace(vector_store=object(), embedding_model=adapter)
    assert allow_keywords_only(without) is False
    assert adapter.keywords_when_busy is False
    store = SimpleNamespace(searches_keywords_alone=True)
    wrapped = SimpleNamespace(inner=adapter)  # the query cache's wrapper
    assert allow_keywords_only(SimpleNamespace(vector_store=store, embedding_model=wrapped))
    assert adapter.keywords_when_busy is True


def _call_of(seconds: float, started: threading.Event | None = None) -> Any:
    def encode(texts: list[str]) -> Any:
        if started is not None:
            started.set()
        time.sleep(seconds)
        return [SimpleNamespace(tolist=lambda: [0.0]) for _ in texts]

    return encode


def test_the_turns_refuse_a_query_that_would_wait_past_its_budget() -> None:
    turns = EngineTurns()
    # Before any pace is known a query is never refused; this one sets the pace
    # (at least 0.005 s per token: sleeping never takes less than asked).
    turns.run(["q"], 10, Rank.QUERY, _call_of(0.05), budget=0.001)
    started = threading.Event()
    long_call = (["long"], 100, Rank.QUERY, _call_of(0.5, started))
    busy = threading.Thread(target=turns.run, args=long_call)
    busy.start()
    try:
        assert started.wait(10)
        # 100 tokens ahead and 10 of its own: >= 0.55 s at that pace.
        with pytest.raises(EmbedderBusyError, match=r"budget 0\.20 s"):
            turns.run(["q"], 10, Rank.QUERY, _call_of(0.0), budget=0.2)
        # Without a budget, or as background work, it waits its turn.
        assert turns.run(["q"], 10, Rank.QUERY, _call_of(0.0)) == [[0.0]]
        assert turns.run(["w"], 10, Rank.BACKGROUND, _call_of(0.0), budget=0.2) == [[0.0]]
    finally:
        busy.join()
    assert turns.run(["q"], 10, Rank.QUERY, _call_of(0.0), budget=60.0) == [[0.0]]


def test_one_slow_call_does_not_refuse_the_queries_after_it() -> None:
    turns = EngineTurns()
    # A cold start or a stall: 0.3 s for 10 tokens, past any later query's budget.
    turns.run(["q"], 10, Rank.QUERY, _call_of(0.3))
    # With nothing ahead of them the next queries go through and measure the pace
    # again, until it is back to what the engine takes now.
    for _ in range(20):
        assert turns.run(["q"], 10, Rank.QUERY, _call_of(0.0), budget=0.05) == [[0.0]]
    started = threading.Event()
    busy = threading.Thread(
        target=turns.run, args=(["long"], 10, Rank.QUERY, _call_of(0.3, started))
    )
    busy.start()
    try:
        assert started.wait(10)
        # Behind another query, the pace measured since admits it within budget.
        assert turns.run(["q"], 10, Rank.QUERY, _call_of(0.0), budget=0.05) == [[0.0]]
    finally:
        busy.join()


@pytest.mark.parametrize("budget", [0, -1.0, True, "1"])
def test_a_bad_query_budget_is_refused(budget: Any) -> None:
    with pytest.raises(ConfigurationError, match="query_budget"):
        OfflineE5Embedding(query_budget=budget)


async def test_a_busy_embedder_leaves_the_notes_repeats_to_the_words(tmp_path: Path) -> None:
    embedder = BusyEmbedding()
    mw = busy_middleware(tmp_path / "data", embedder)
    async with mw:
        backend = mw.client_state.backend
        assert await backend.embed(["User likes tea.", "User enjoys tea."]) is None
        assert embedder.calls[-1] == ("search", False, True)
        # A background caller (consolidation) is never refused.
        with no_reply_waits():
            vectors = await backend.embed(["User likes tea."])
        assert vectors is not None and len(vectors[0]) == 64
        assert embedder.calls[-1] == ("search", True, False)
