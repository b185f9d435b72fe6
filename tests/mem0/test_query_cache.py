"""The query-embedding cache: on a real mem0 client, and its LRU/TTL rules."""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0._mem0.query_cache import (
    CachingEmbedder,
    QueryEmbeddingCache,
    install_query_cache,
)
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import RecordingClient, real_memory


async def test_a_repeated_search_does_not_embed_the_query_again(
    store_config: dict[str, Any],
) -> None:
    embedding = HashEmbedding()
    memory = real_memory(store_config, embedding=embedding)
    await memory.add("User lives in Oslo", user_id="u", infer=False)
    before = await memory.search("where does the user live", filters={"user_id": "u"})
    cache = install_query_cache(memory)
    assert cache is not None and install_query_cache(memory) is cache  # one per embedder
    first = await memory.search("where does the user live", filters={"user_id": "u"})
    embedded = embedding.texts_embedded
    second = await memory.search("where does the user live", filters={"user_id": "u"})
    assert embedding.texts_embedded == embedded  # the query was not embedded again
    assert [h["memory"] for h in second["results"]] == [h["memory"] for h in first["results"]]
    assert [h["memory"] for h in first["results"]] == [h["memory"] for h in before["results"]]
    assert cache.hits >= 1 and cache.seconds_saved > 0
    # Adding memories is never served from the cache.
    await memory.add("where does the user live", user_id="u", infer=False)
    assert embedding.texts_embedded > embedded


async def test_the_middleware_caches_its_searches_and_reports_it(
    store_config: dict[str, Any],
) -> None:
    embedding = HashEmbedding()
    memory = real_memory(store_config, embedding=embedding)
    mw = Mem0Middleware(user_id="u", client=memory, mode="static_control", await_write=True)
    assert isinstance(memory.embedding_model, CachingEmbedder)  # installed by the middleware
    agent = Agent(name="a", system_prompt="", model=ScriptedChatModel("Ok."), middlewares=[mw])
    for _ in range(3):  # the same message, sent again twice (retries)
        await agent.reply(UserMsg("user", "What do I like to eat?"))
    stats = mw.stats()
    assert stats["query_cache_hits"] >= 2
    assert 0 < stats["query_cache_hit_rate"] < 1
    await mw.aclose()


def test_hosted_and_wrapped_clients_get_no_cache(store_config: dict[str, Any]) -> None:
    assert install_query_cache(RecordingClient(None)) is None


def test_lru_and_ttl() -> None:
    now = [0.0]
    cache = QueryEmbeddingCache(maxsize=2, ttl=10, clock=lambda: now[0])
    cache.put("a", [1.0], 0.5)
    cache.put("b", [2.0], 0.5)
    assert cache.get("a") == [1.0]  # a is now the most recent
    cache.put("c", [3.0], 0.5)  # evicts b
    assert cache.get("b") is None and cache.get("c") == [3.0]
    now[0] = 11
    assert cache.get("a") is None and len(cache) == 1  # expired and dropped
    assert cache.stats()["query_cache_hits"] == 2
    assert cache.stats()["query_cache_seconds_saved"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        QueryEmbeddingCache(ttl=0)
    off = QueryEmbeddingCache(maxsize=0)
    off.put("a", [1.0], 1)
    assert off.get("a") is None
