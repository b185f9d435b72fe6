"""Switching from AgentScope's built-in ``Mem0Middleware`` on the same store.

The real built-in writes with its defaults (no ``agent_id``); this package,
with its defaults, recalls every one of those memories on each backend, in
one read where the store can filter for it, and also what the built-in
writes after the switch (a rollout where both run). Its own memories stay
with the agent that wrote them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.message import HintBlock
from agentscope.middleware import Mem0Middleware as BuiltIn

from agentscope_mem0 import Mem0Backend, Mem0Middleware, Scope, build_local_memory, build_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FakePlatform, hosted_client, one_session

BEFORE = {"I live in Hangzhou.": "Hangzhou", "I prefer dark mode charts.": "dark mode"}
QUESTIONS = {"Hangzhou": "Where do I live?", "dark mode": "What chart style do I like?"}


class Store:
    """One backend: a client for the built-in, and this package's middleware on it."""

    def __init__(
        self,
        client: Any,
        ours: Callable[[], Mem0Middleware],
        reads: Callable[[], int],
    ) -> None:
        self.client = client
        self.ours = ours
        self.reads = reads
        """How many reads the store has answered so far."""


def _counted(memory: Any) -> Callable[[], int]:
    """Count the searches and listings mem0 asks of ``memory``'s vector store."""
    store = memory.vector_store
    count = [0]
    for name in ("search", "list"):
        original = getattr(store, name)

        def counting(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            count[0] += 1
            return _original(*args, **kwargs)

        setattr(store, name, counting)
    return lambda: count[0]


def _on_client(client: Any) -> Callable[[], Mem0Middleware]:
    return lambda: Mem0Middleware(user_id="alice", client=client)


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from _pgfixture import postgres_dsn

    with postgres_dsn() as dsn:
        yield dsn


def _embedded(tmp_path: Path) -> Store:
    folder = tmp_path / "data"
    client = build_local_memory(ScriptedChatModel(), embedding_model=HashEmbedding(), folder=folder)

    def ours() -> Mem0Middleware:
        mw = Mem0Middleware.local(
            user_id="alice",
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(),
            folder=folder,
        )
        store.reads = _counted(mw.client)
        return mw

    store = Store(client, ours, lambda: 0)
    return store


def _built(fields: dict[str, Any]) -> Store:
    client = build_memory(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(), mem0_config=fields
    )
    return Store(client, _on_client(client), _counted(client))


def _qdrant(tmp_path: Path) -> Store:
    return _built(
        {
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": "m", "path": str(tmp_path / "q"), "on_disk": True},
            },
            "history_db_path": str(tmp_path / "history.db"),
        }
    )


def _qdrant_server(tmp_path: Path) -> Store:
    """The package's provider for a Qdrant server, on qdrant-client's local mode."""
    from agentscope_mem0._server.qdrant_config import PROVIDER

    config = {"collection_name": "m", "path": str(tmp_path / "q"), "on_disk": True}
    return _built(
        {
            "vector_store": {"provider": PROVIDER, "config": config},
            "history_db_path": str(tmp_path / "history.db"),
        }
    )


def _pgvector(dsn: str, tmp_path: Path) -> Store:
    from _pgfixture import fresh_collection
    from agentscope_mem0.backends import pgvector_config

    return _built(
        pgvector_config(
            dsn,
            dims=HashEmbedding().dimensions,
            collection=fresh_collection(),
            history_db_path=str(tmp_path / "history.db"),
        )
    )


def _hosted(platform: FakePlatform) -> Store:
    client = hosted_client(platform)
    reads = ("/v3/memories/search/", "/v3/memories/")
    return Store(client, _on_client(client), lambda: sum(len(platform.named(p)) for p in reads))


@pytest.fixture(params=["embedded", "qdrant", "qdrant-server", "pgvector", "hosted"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "embedded":
        return _embedded(tmp_path)
    if request.param == "qdrant":
        return _qdrant(tmp_path)
    if request.param == "qdrant-server":
        return _qdrant_server(tmp_path)
    if request.param == "pgvector":
        return _pgvector(request.getfixturevalue("pg_dsn"), tmp_path)
    return _hosted(request.getfixturevalue("platform"))


async def _recalls(mw: Any, question: str, agent: str = "helper") -> str:
    """The memory note a fresh agent with ``mw`` gets for ``question`` (either middleware's)."""
    model = await one_session(mw, question, agent=agent)
    return "\n".join(
        block.hint
        for msg in model.calls[0]
        if msg.name == "memory"
        for block in msg.content
        if isinstance(block, HintBlock)
    )


async def _each_recalled(mw: Mem0Middleware, words: list[str], agent: str = "helper") -> None:
    for word in words:
        assert word in await _recalls(mw, QUESTIONS.get(word, f"What about {word}?"), agent), word


async def test_what_the_builtin_stored_stays_found_after_the_switch(store: Store) -> None:
    builtin = BuiltIn(user_id="alice", client=store.client, mode="static_control")
    for text in BEFORE:
        await one_session(builtin, text)
    stored = [
        m["memory"] for m in (await store.client.get_all(filters={"user_id": "alice"}))["results"]
    ]
    assert len(stored) == len(BEFORE) and not any(
        m.get("agent_id")
        for m in (await store.client.get_all(filters={"user_id": "alice"}))["results"]
    )

    ours = store.ours()  # this package, every keyword left at its default
    await _each_recalled(ours, list(BEFORE.values()))
    # every memory the built-in stored, in one read of the store
    assert await ours.flush(30)
    backend = Mem0Backend(ours.client)
    reads = store.reads()
    helper = Scope("alice", "helper").searched(by_agent=True)
    listed = await backend.get_all(helper, limit=100)
    assert set(stored) <= {hit.memory for hit in listed}
    assert store.reads() - reads == 1
    reads = store.reads()
    await backend.search(
        "Where do I live?", Scope("alice", "helper").searched(by_agent=True), top_k=5
    )
    assert store.reads() - reads == 1

    # a rollout: the built-in still runs somewhere and writes after the switch
    await one_session(builtin, "My cat is called Mochi.")
    assert "Mochi" in await _recalls(ours, "What is my cat called?")
    # any agent of this package finds the built-in's memories
    assert "Hangzhou" in await _recalls(ours, "Where do I live?", agent="planner")
    await ours.aclose()


# The hosted platform files a user's messages under the user alone, whoever wrote them.
@pytest.mark.parametrize(
    "store", ["embedded", "qdrant", "qdrant-server", "pgvector"], indirect=True
)
async def test_this_packages_own_memories_stay_with_their_agent(store: Store) -> None:
    builtin = BuiltIn(user_id="alice", client=store.client, mode="static_control")
    await one_session(builtin, "I live in Hangzhou.")
    ours = store.ours()
    await one_session(ours, "I work in Shanghai.", agent="helper")
    assert await ours.flush(30)
    assert "Shanghai" in await _recalls(ours, "Where do I work?", agent="helper")
    other = await _recalls(ours, "Where do I work? Where do I live?", agent="planner")
    assert "Shanghai" not in other and "Hangzhou" in other
    # rolling back: the built-in, reading by user, finds this package's memories too
    back = BuiltIn(user_id="alice", client=store.client, mode="static_control")
    assert "Shanghai" in await _recalls(back, "Where do I work?")
    await ours.aclose()


def _no_absent_filter(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store seen as a provider this package has no one-read filter for (Chroma, Milvus...)."""
    monkeypatch.setattr(store.client.config.vector_store, "provider", "chroma")


async def test_another_mem0_store_is_read_once_by_user_and_filtered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _qdrant(tmp_path)
    builtin = BuiltIn(user_id="alice", client=store.client, mode="static_control")
    await one_session(builtin, "I live in Hangzhou.")
    await store.client.add("User owns a cat", user_id="alice", agent_id="planner", infer=False)
    await store.client.add("User likes tea", user_id="alice", agent_id="helper", infer=False)
    _no_absent_filter(store, monkeypatch)
    backend = Mem0Backend(store.client)
    scope = Scope("alice", "helper").searched(by_agent=True)
    reads = store.reads()
    found = await backend.search("Where does the user live?", scope, top_k=5)
    assert {hit.memory for hit in found} == {"User lives in Hangzhou.", "User likes tea"}
    assert [hit.score for hit in found] == sorted((hit.score for hit in found), reverse=True)
    assert store.reads() - reads == 1
    reads = store.reads()
    listed = await backend.get_all(scope, limit=10)
    assert [hit.memory for hit in listed] == ["User likes tea", "User lives in Hangzhou."]
    assert store.reads() - reads == 1


async def test_other_agents_crowding_the_users_read_do_not_hide_the_agents_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _qdrant(tmp_path)
    for n in range(30):  # more than the user-wide read's headroom for 2
        await store.client.add(
            f"User lives in town {n}", user_id="alice", agent_id="planner", infer=False
        )
    await store.client.add("User likes tea", user_id="alice", agent_id="helper", infer=False)
    _no_absent_filter(store, monkeypatch)
    backend = Mem0Backend(store.client)
    scope = Scope("alice", "helper").searched(by_agent=True)
    found = await backend.search("Where does the user live?", scope, top_k=2)
    assert [hit.memory for hit in found] == ["User likes tea"]
    listed = await backend.get_all(scope, limit=2)
    assert [hit.memory for hit in listed] == ["User likes tea"]


def _counted_searches(client: Any, question: str) -> tuple[list[int], list[int]]:
    """Count mem0's searches on ``client`` and the embeddings of ``question`` it asks for."""
    searches, embeddings = [0], [0]
    search, embedder = client.search, client.embedding_model
    embed = embedder.embed

    async def counting_search(*args: Any, **kwargs: Any) -> Any:
        searches[0] += 1
        return await search(*args, **kwargs)

    def counting_embed(text: Any, memory_action: Any = None, **kwargs: Any) -> Any:
        if memory_action == "search" and text == question:
            embeddings[0] += 1
        return embed(text, memory_action, **kwargs)

    client.search = counting_search
    embedder.embed = counting_embed
    return searches, embeddings


@pytest.mark.parametrize("where", ["embedded", "chroma-like"])
async def test_a_reply_makes_one_search_and_embeds_its_query_once(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _embedded(tmp_path) if where == "embedded" else _qdrant(tmp_path)
    builtin = BuiltIn(user_id="alice", client=store.client, mode="static_control")
    await one_session(builtin, "I live in Hangzhou.")
    ours = store.ours()
    await one_session(ours, "I drink green tea.", agent="helper")
    await one_session(ours, "I own a cat.", agent="planner")
    assert await ours.flush(30)
    if where != "embedded":
        _no_absent_filter(store, monkeypatch)
    question = "Where do I live and what do I drink?"
    searches, embeddings = _counted_searches(ours.client, question)
    note = await _recalls(ours, question, agent="helper")
    assert "Hangzhou" in note and "tea" in note and "cat" not in note
    assert (searches[0], embeddings[0]) == (1, 1)
    await ours.aclose()
