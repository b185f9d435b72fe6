"""The read path's one dedupe: each fact once however it was worded, the user's own
name read as "the user", meaning within the search budget and never past it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware, MemoryHit
from agentscope_mem0._recall.dedupe import dedupe_by_meaning, dedupe_hits
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import note_text


def _hit(text: str, date: str, score: float) -> MemoryHit:
    return MemoryHit(id=text[:10], memory=text, score=score, created_at=date)


class SynonymEmbedding(HashEmbedding):
    """Reads "practices" as "does": those paraphrases get one vector, as a real
    sentence embedder puts them close."""

    def vector(self, text: str) -> list[float]:
        return super().vector(text.replace("practices", "does"))


def test_the_users_own_name_counts_as_the_user() -> None:
    hits = [
        _hit("Alice lives in Hangzhou.", "2024-01-01T00:00:00Z", 0.9),
        _hit("User likes tea.", "2024-02-01T00:00:00Z", 0.5),
        _hit("The user lives in Hangzhou.", "2024-05-01T00:00:00Z", 0.7),
    ]
    unique = dedupe_hits(hits, user_id="alice")
    assert [h.memory for h in unique] == ["The user lives in Hangzhou.", "User likes tea."]
    assert unique[0].score == 0.9
    # For another user "Alice" is someone else: both stay.
    assert len(dedupe_hits(hits, user_id="bob")) == 3
    # A "name is" memory names the user too.
    named = [_hit("User's name is Mia.", "2024-01-01T00:00:00Z", 0.1), *hits[:1]]
    named.append(_hit("Mia lives in Hangzhou.", "2024-03-01T00:00:00Z", 0.3))
    assert [h.memory for h in dedupe_hits(named, user_id="u-1")] == [
        "User's name is Mia.",
        "Alice lives in Hangzhou.",
        "Mia lives in Hangzhou.",
    ]
    assert len(dedupe_hits([*named, hits[2]], user_id="u-1")) == 3


async def test_paraphrases_the_words_leave_open_merge_by_their_embeddings() -> None:
    hits = [
        _hit("User practices yoga.", "2024-01-01T00:00:00Z", 0.9),
        _hit("User does yoga.", "2024-05-01T00:00:00Z", 0.7),
        _hit("User lives in Hangzhou.", "2024-02-01T00:00:00Z", 0.5),
    ]
    embedder = SynonymEmbedding()
    embedded: list[list[str]] = []

    async def embed(texts: list[str]) -> list[list[float]]:
        embedded.append(texts)
        return [embedder.vector(t) for t in texts]

    assert len(dedupe_hits(hits)) == 3  # the words alone leave them apart
    unique = await dedupe_by_meaning(hits, user_id="alice", embed=embed, budget=5.0)
    assert [h.memory for h in unique] == ["User does yoga.", "User lives in Hangzhou."]
    # Only the texts of the open pair were embedded.
    assert embedded == [["User practices yoga.", "User does yoga."]]

    # A pair the words keep apart is never embedded, however close its vectors.
    apart = [hits[0], _hit("User's sister practices yoga.", "2024-03-01T00:00:00Z", 0.8)]
    embedded.clear()
    assert len(await dedupe_by_meaning(apart, user_id="alice", embed=embed, budget=5.0)) == 2
    assert embedded == []


async def test_an_embedding_past_the_budget_leaves_the_words_to_decide() -> None:
    hits = [
        _hit("User practices yoga.", "2024-01-01T00:00:00Z", 0.9),
        _hit("User does yoga.", "2024-05-01T00:00:00Z", 0.7),
    ]

    async def slow(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(30)
        return [[1.0, 0.0] for _ in texts]

    async def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedder down")

    started = time.perf_counter()
    unique = await dedupe_by_meaning(hits, user_id="alice", embed=slow, budget=0.2)
    assert time.perf_counter() - started < 10  # the budget, not the embedder's 30 s
    assert len(unique) == 2
    assert len(await dedupe_by_meaning(hits, user_id="alice", embed=broken, budget=1)) == 2
    assert len(await dedupe_by_meaning(hits, user_id="alice", embed=slow, budget=0)) == 2
    assert len(await dedupe_by_meaning(hits, user_id="alice", embed=None, budget=None)) == 2


async def test_the_note_shows_a_fact_once_however_it_was_worded(tmp_path: Path) -> None:
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=SynonymEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
        parameters=Mem0Middleware.Parameters(judge=False),
    )
    async with mw:
        # Stored before consolidation existed (or by another writer): all current.
        for text in (
            "Alice lives in Hangzhou.",
            "The user lives in Hangzhou.",
            "User practices yoga.",
            "User does yoga.",
        ):
            await mw.client.add(
                [{"role": "user", "content": text}], user_id="alice", agent_id="a", infer=False
            )
        model = ScriptedChatModel("Sure.")
        agent = Agent(name="a", system_prompt="x", model=model, middlewares=[mw])
        await agent.reply(UserMsg("user", "Where do I live and what sport do I do, yoga?"))
        note = note_text(model.calls[0])
        lines = [line for line in note.splitlines() if line.startswith("- ")]
        assert sum("Hangzhou" in line for line in lines) == 1, note
        assert sum("yoga" in line for line in lines) == 1, note

        # search_memory shows each fact once as well.
        tool_mw = Mem0Middleware(
            user_id="alice", client_state=mw.client_state, mode="agent_control"
        )
        tools = {tool.name: tool for tool in await tool_mw.list_tools()}
        tool_mw._bind_agent(agent)
        found = await tools["search_memory"].call(
            keywords=["where the user lives", "yoga"], _agent_state=agent.state
        )
        text = found.content[0].text
        assert text.count("Hangzhou") == 1 and text.count("yoga") == 1, text
        await tool_mw.aclose()
