"""Recall: the search query, profile recall and its cache, the three modes on real mem0."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import AssistantMsg, Msg, ToolCallBlock, UserMsg

from agentscope_mem0 import (
    Mem0Backend,
    Mem0Middleware,
    MemoryHit,
    Scope,
)
from agentscope_mem0._recall.note import is_memory_note, note_text, render_note
from agentscope_mem0._recall.profile import ProfileCache, recall_profile
from agentscope_mem0._recall.recall import build_query, retrieve
from agentscope_mem0.testing import ScriptedChatModel
from fakes import RecordingClient, real_memory

FACTS = [
    "User lives in Beijing",
    "User likes green tea",
    "User has a cat named Mochi",
    "User plays the piano",
    "User works as a nurse",
    "User moved to Hangzhou",
]
"""Stored in this order, so the last ones are the newest."""


async def _memory(store_config: dict[str, Any], facts: list[str] = FACTS) -> Any:
    memory = real_memory(store_config)
    for fact in facts:
        await memory.add(fact, user_id="u", agent_id="a", infer=False)
    return memory


# -- the query ----------------------------------------------------------------


def _chat() -> list[Msg]:
    note = render_note([MemoryHit(id="m", memory="User likes tea")])
    assert note is not None
    return [
        UserMsg("user", "I am planning a trip to Kyoto"),
        AssistantMsg("assistant", "Kyoto is lovely in spring. " + "x" * 1000),
        note,
        AssistantMsg("assistant", [ToolCallBlock(id="1", name="t", input="{}")]),
        UserMsg("user", "Which temples should I see?"),
        AssistantMsg("assistant", "Kinkaku-ji and Fushimi Inari."),
    ]


def test_query_is_the_message_alone_by_default() -> None:
    assert build_query("And the food?", _chat(), turns=0) == "And the food?"


def test_query_carries_recent_text_but_no_notes_or_tool_calls() -> None:
    query = build_query("And the food?", _chat(), turns=3)
    lines = query.split("\n")
    assert lines[-1] == "And the food?"
    assert lines[1:-1] == ["Which temples should I see?", "Kinkaku-ji and Fushimi Inari."]
    assert lines[0].startswith("Kyoto is lovely in spring.") and len(lines[0]) == 300
    assert "User likes tea" not in query


def test_query_can_take_user_messages_only_and_skips_the_message_itself() -> None:
    chat = [*_chat(), UserMsg("user", "And the food?")]
    query = build_query("And the food?", chat, turns=1, roles=("user",))
    assert query == "Which temples should I see?\nAnd the food?"


# -- the cache ----------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _hits(*texts: str) -> list[MemoryHit]:
    return [MemoryHit(id=t, memory=t) for t in texts]


def test_cache_expires_after_ttl() -> None:
    clock = _Clock()
    cache = ProfileCache(ttl=30, clock=clock)
    scope = Scope("u", "a")
    cache.put(scope, _hits("x"), cache.epoch(scope))
    clock.now += 29
    assert cache.get(scope) == _hits("x")
    clock.now += 1
    assert cache.get(scope) is None


def test_invalidate_drops_the_scope_and_the_user_wide_entry_only() -> None:
    cache = ProfileCache(ttl=30)
    scopes = [Scope("u", "a"), Scope("u", "b"), Scope("u"), Scope("v", "a")]
    for scope in scopes:
        cache.put(scope, _hits(str(scope)), cache.epoch(scope))
    cache.invalidate(Scope("u", "a"))
    assert [cache.get(s) is not None for s in scopes] == [False, True, False, True]
    cache.invalidate(Scope("u"))
    assert cache.get(Scope("u", "b")) is None


def test_a_refresh_that_started_before_a_write_is_not_cached() -> None:
    cache = ProfileCache(ttl=30)
    scope = Scope("u", "a")
    epoch = cache.epoch(scope)
    cache.invalidate(scope)  # a write lands while get_all is running
    cache.put(scope, _hits("stale"), epoch)
    assert cache.get(scope) is None


def test_ttl_zero_caches_nothing_and_size_is_bounded() -> None:
    off = ProfileCache(ttl=0)
    off.put(Scope("u"), _hits("x"), off.epoch(Scope("u")))
    assert off.get(Scope("u")) is None
    small = ProfileCache(ttl=30, max_scopes=2)
    for user in "abc":
        small.put(Scope(user), _hits(user), 0)
    assert small.get(Scope("a")) is None and small.get(Scope("c")) is not None


# -- on real mem0 -------------------------------------------------------------


async def test_profile_is_the_newest_memories_whatever_the_message(
    store_config: dict[str, Any],
) -> None:
    backend = Mem0Backend(await _memory(store_config))
    for message in ("ok", "?", "Tell me about quantum physics"):
        hits = await retrieve(backend, Scope("u", "a"), message, recall="profile", top_k=3)
        assert [h.memory for h in hits] == [
            "User moved to Hangzhou",
            "User works as a nurse",
            "User plays the piano",
        ]


async def test_profile_is_cached_and_refreshed_after_a_write(
    store_config: dict[str, Any],
) -> None:
    memory = await _memory(store_config)
    client = RecordingClient(memory)
    backend = Mem0Backend(client)
    cache = ProfileCache(ttl=60)
    scope = Scope("u", "a")
    first = await recall_profile(backend, scope, limit=2, cache=cache)
    again = await recall_profile(backend, scope, limit=2, cache=cache)
    assert first == again
    assert len(client.named("get_all")) == 1
    await memory.add("User adopted a dog", user_id="u", agent_id="a", infer=False)
    cache.invalidate(scope)
    fresh = await recall_profile(backend, scope, limit=2, cache=cache)
    assert len(client.named("get_all")) == 2
    assert fresh[0].memory == "User adopted a dog"


async def test_full_is_profile_first_then_search_without_repeats(
    store_config: dict[str, Any],
) -> None:
    backend = Mem0Backend(await _memory(store_config))
    hits = await retrieve(
        backend,
        Scope("u", "a"),
        "Does the user like green tea?",
        recall="full",
        top_k=3,
        profile_cache=ProfileCache(),
    )
    texts = [h.memory for h in hits]
    assert texts[:3] == ["User moved to Hangzhou", "User works as a nurse", "User plays the piano"]
    assert "User likes green tea" in texts[3:]
    assert len(texts) == len(set(texts)) <= 6


async def test_query_mode_searches_with_the_query(store_config: dict[str, Any]) -> None:
    client = RecordingClient(await _memory(store_config))
    backend = Mem0Backend(client)
    hits = await retrieve(backend, Scope("u", "a"), "green tea", recall="query", top_k=2)
    assert hits[0].memory == "User likes green tea"
    assert client.named("get_all") == []
    # Nothing to search with: no call at all.
    assert await retrieve(backend, Scope("u", "a"), " ?! ", recall="query") == []
    assert len(client.named("search")) == 1


class _Broken(RecordingClient):
    """Search fails or hangs; get_all works."""

    def __init__(self, inner: Any, *, hang: bool) -> None:
        super().__init__(inner)
        self.hang = hang

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        if self.hang:
            await asyncio.sleep(30)
        raise ConnectionError("search is down")


@pytest.mark.parametrize("hang", [False, True])
async def test_full_keeps_the_profile_when_search_fails_or_hangs(
    store_config: dict[str, Any], hang: bool, caplog: pytest.LogCaptureFixture
) -> None:
    backend = Mem0Backend(_Broken(await _memory(store_config), hang=hang))
    # The deadline bounds the real profile read too: room for a busy CI machine.
    hits = await retrieve(
        backend, Scope("u", "a"), "green tea", recall="full", top_k=2, timeout=2.0
    )
    assert [h.memory for h in hits] == ["User moved to Hangzhou", "User works as a nurse"]
    assert "search" in caplog.text


# -- through the middleware -------------------------------------------------


def _notes(agent: Agent) -> list[Msg]:
    return [m for m in agent.state.context if is_memory_note(m)]


async def test_middleware_profile_mode_answers_a_vague_message(
    store_config: dict[str, Any],
) -> None:
    memory = await _memory(store_config)
    mw = Mem0Middleware(
        user_id="u",
        client=memory,
        agent_id="a",
        mode="static_control",
        parameters=Mem0Middleware.Parameters(recall="profile"),
        top_k=2,
    )
    agent = Agent(name="a", system_prompt="x", model=ScriptedChatModel("Sure."), middlewares=[mw])
    await agent.reply(UserMsg("user", "ok"))
    (note,) = _notes(agent)
    text = note_text(note)
    assert "User moved to Hangzhou" in text and "User works as a nurse" in text
    await mw.aclose()


async def test_middleware_full_mode_and_refresh_after_write(
    store_config: dict[str, Any],
) -> None:
    memory = await _memory(store_config)
    mw = Mem0Middleware(
        user_id="u",
        client=memory,
        agent_id="a",
        mode="static_control",
        parameters=Mem0Middleware.Parameters(recall="full"),
        top_k=2,
        await_write=True,
    )
    model = ScriptedChatModel("Noted.")
    agent = Agent(name="a", system_prompt="x", model=model, middlewares=[mw])
    await agent.reply(UserMsg("user", "Do I like green tea?"))
    text = note_text(_notes(agent)[0])
    assert "User moved to Hangzhou" in text and "User likes green tea" in text
    # The write of this turn ("I bought a violin") must show in the next profile.
    await agent.reply(UserMsg("user", "I bought a violin."))
    await mw.flush()
    await agent.reply(UserMsg("user", "ok"))
    assert "violin" in note_text(_notes(agent)[0])
    assert len(_notes(agent)) == 1
    await mw.aclose()


@pytest.mark.parametrize("recall", ["query", "full"])
async def test_a_turn_dedupes_its_memories_once(
    store_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, recall: str
) -> None:
    """The read dedupes; the note shows what comes out (the profile is deduped
    when it is read, and then cached)."""
    from agentscope_mem0._recall import dedupe as dedupe_module
    from agentscope_mem0._recall import profile as profile_module
    from agentscope_mem0._recall import recall as recall_module

    by_words, by_meaning = dedupe_module.dedupe_hits, dedupe_module.dedupe_by_meaning
    calls: list[int] = []

    def counted(hits: Any, **kwargs: Any) -> list[MemoryHit]:
        hits = list(hits)
        calls.append(len(hits))
        return by_words(hits, **kwargs)

    async def counted_meaning(hits: Any, **kwargs: Any) -> list[MemoryHit]:
        hits = list(hits)
        calls.append(len(hits))
        return await by_meaning(hits, **kwargs)

    monkeypatch.setattr(profile_module, "dedupe_hits", counted)
    monkeypatch.setattr(recall_module, "dedupe_by_meaning", counted_meaning)
    mw = Mem0Middleware(
        user_id="u",
        client=await _memory(store_config),
        agent_id="a",
        mode="static_control",
        parameters=Mem0Middleware.Parameters(recall=recall),  # type: ignore[arg-type]
        top_k=3,
    )
    agent = Agent(name="a", system_prompt="x", model=ScriptedChatModel("Sure."), middlewares=[mw])
    await agent.reply(UserMsg("user", "Do I like green tea?"))
    calls.clear()
    await agent.reply(UserMsg("user", "Where do I live now?"))
    assert len(calls) == 1
    assert "User" in note_text(_notes(agent)[0])
    await mw.aclose()
