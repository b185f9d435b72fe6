"""The Qdrant Edge store under mem0: provider, filters, hybrid search, panics.

Everything is real (mem0 AsyncMemory, Qdrant Edge shards on disk, SQLite)
except the models, which are the offline fakes. A release-0.1 folder's
migration is tested in test_migrate.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentscope_mem0
from agentscope_mem0 import (
    EdgeEngineError,
    Mem0Backend,
    Scope,
    build_local_memory,
    build_mem0_config,
)
from agentscope_mem0.local import (
    EDGE_PROVIDER,
    EdgeVectorStore,
    SparseTerms,
    close_shared_clients,
)
from agentscope_mem0.local._edge import SharedShard, close_shards, release_user
from agentscope_mem0.local._edge_provider import edge_config_class
from agentscope_mem0.local._folder import COLLECTION
from agentscope_mem0.local._keyword import sparse_vector
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FILLER, LOOKALIKES, QUERY, TARGET

DIMS = 64
WRITER = Path(__file__).parents[1] / "_edge_writer_child.py"


def memory_on(folder: Path, dims: int = DIMS) -> Any:
    return build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(dims), folder=folder
    )


def texts(result: Any) -> list[str]:
    return sorted(m["memory"] for m in result["results"])


async def remember(memory: Any, user: str, text: str, **metadata: Any) -> str:
    added = await memory.add(
        [{"role": "user", "content": text}], user_id=user, infer=False, metadata=metadata or None
    )
    return str(added["results"][0]["id"])


# -- the provider ---------------------------------------------------------------


def test_the_provider_does_not_open_mem0s_whitelist(tmp_path: Path) -> None:
    from mem0.configs.base import MemoryConfig
    from mem0.vector_stores.configs import VectorStoreConfig

    edge_config_class()  # registered
    with pytest.raises(ValueError, match="Unsupported vector store provider"):
        VectorStoreConfig(provider=EDGE_PROVIDER, config={"path": str(tmp_path)})
    with pytest.raises(ValueError, match="Unsupported vector store provider: chroma"):
        edge_config_class()(provider="chroma", config={"path": str(tmp_path)})
    with pytest.raises(ValueError, match="needs a config with a 'path'"):
        edge_config_class()(provider=EDGE_PROVIDER, config={})
    with pytest.raises(ValueError):
        MemoryConfig(vector_store={"provider": "no-such-store"})

    # Named in a user's mem0_config, it builds (through this package only).
    config = build_mem0_config(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(DIMS),
        mem0_config={
            "vector_store": {"provider": EDGE_PROVIDER, "config": {"path": str(tmp_path / "e")}},
            "history_db_path": str(tmp_path / "h.db"),
        },
    )
    assert config.vector_store.provider == EDGE_PROVIDER
    assert config.vector_store.config.embedding_model_dims == DIMS


async def test_mem0_reads_and_writes_through_the_engine(tmp_path: Path) -> None:
    memory = memory_on(tmp_path / "store")
    assert isinstance(memory.vector_store, EdgeVectorStore)
    hike = await remember(memory, "alice", "I love hiking in the Alps", topic="sport", n=3)
    await remember(memory, "alice", "My cat is called Tom", topic="pets", n=5)
    await remember(memory, "bob", "I love hiking too", topic="sport", n=1)

    found = await memory.search("hiking", filters={"user_id": "alice"}, top_k=5)
    assert found["results"][0]["memory"] == "I love hiking in the Alps"
    assert {m["user_id"] for m in found["results"]} == {"alice"}
    assert 0 < found["results"][0]["score"] <= 1.0

    assert (await memory.get(hike))["metadata"] == {"topic": "sport", "n": 3}
    await memory.update(hike, "I love skiing in the Alps")
    assert (await memory.get(hike))["memory"] == "I love skiing in the Alps"
    # The keyword vector follows the new text.
    hits = memory.vector_store.keyword_hits("skiing", filters={"user_id": "alice"})
    assert [h.id for h in hits] == [hike]

    await memory.delete(hike)
    assert await memory.get(hike) is None
    assert texts(await memory.get_all(filters={"user_id": "alice"})) == ["My cat is called Tom"]
    await memory.delete_all(user_id="alice")
    assert texts(await memory.get_all(filters={"user_id": "alice"})) == []
    assert texts(await memory.get_all(filters={"user_id": "bob"})) == ["I love hiking too"]

    info = memory.vector_store.col_info()
    assert info["engine"] == "qdrant-edge" and info["points"] == 1
    assert {"user_id", "agent_id", "run_id"} <= set(info["payload_indexes"])
    assert memory.vector_store.list_cols() == [COLLECTION, f"{COLLECTION}_entities"]
    await memory.reset()
    assert memory.vector_store.count() == 0


async def test_metadata_filters_and_operators(tmp_path: Path) -> None:
    memory = memory_on(tmp_path / "store")
    for n, topic in enumerate(["sport", "pets", "food", "sport"]):
        await remember(memory, "alice", f"fact number {n} about {topic}", topic=topic, n=n)
    await remember(memory, "bob", "fact about sport for bob", topic="sport", n=9)
    store = memory.vector_store

    def listed(**filters: Any) -> list[str]:
        return sorted(
            h.payload["data"] for h in store.list(filters={"user_id": "alice", **filters})[0]
        )

    assert len(listed()) == 4
    assert listed(topic="pets") == ["fact number 1 about pets"]
    assert listed(topic={"ne": "sport"}) == ["fact number 1 about pets", "fact number 2 about food"]
    assert len(listed(topic={"in": ["pets", "food"]})) == 2
    assert len(listed(topic=["pets", "food"])) == 2
    assert listed(topic={"nin": ["sport", "pets"]}) == ["fact number 2 about food"]
    assert len(listed(n={"gte": 2})) == 2 and len(listed(n={"gt": 0, "lt": 3})) == 2
    assert listed(data={"contains": "about food"}) == ["fact number 2 about food"]
    assert listed(data={"icontains": "ABOUT FOOD"}) == ["fact number 2 about food"]
    assert len(listed(topic="*")) == 4
    assert len(listed(OR=[{"topic": "pets"}, {"topic": "food"}])) == 2
    assert len(listed(NOT=[{"topic": "sport"}])) == 2
    assert len(listed(**{"$or": [{"n": 0}, {"n": 1}], "OR": [{"n": 0}, {"n": 1}]})) == 2
    created = store.list(filters={"user_id": "alice"})[0][0].payload["created_at"]
    assert len(listed(created_at={"gte": created[:10]})) == 4
    # The same filters through mem0's search.
    found = await memory.search("fact", filters={"user_id": "alice", "topic": "sport"}, top_k=5)
    assert len(found["results"]) == 2
    with pytest.raises(ValueError, match="supported"):
        store.list(filters={"topic": {"like": "s%"}})
    with pytest.raises(ValueError, match="cannot mix"):
        store.list(filters={"n": {"gt": 1, "eq": 2}})
    store.delete_where({"user_id": "alice", "topic": "sport"})
    assert len(listed()) == 2 and store.count({"user_id": "bob"}) == 1
    with pytest.raises(ValueError, match="needs a filter"):
        store.delete_where({})


async def test_the_engine_fuses_keyword_and_dense_hits(tmp_path: Path) -> None:
    memory = memory_on(tmp_path / "store")
    backend = Mem0Backend(memory)
    for fact in [TARGET, *LOOKALIKES, *FILLER]:
        await backend.add([{"role": "user", "content": fact}], Scope("alice"), infer=False)
    store = memory.vector_store
    assert store.fusion == "rrf"
    # mem0 must not add the keyword score a second time.
    assert store.keyword_search(QUERY, filters={"user_id": "alice"}) is None

    hybrid = [hit.memory for hit in await backend.search(QUERY, Scope("alice"), top_k=3)]
    store.fusion = "none"
    store._bm25_encoder = False  # mem0 without a keyword encoder: meaning only
    semantic = [hit.memory for hit in await backend.search(QUERY, Scope("alice"), top_k=3)]

    assert TARGET in hybrid
    assert TARGET not in semantic


def test_the_entity_collection_is_searched_by_meaning(tmp_path: Path) -> None:
    # mem0 2.2 merges entities whose search score reaches 0.95: a cosine threshold.
    store = EdgeVectorStore(
        path=str(tmp_path), collection_name=f"{COLLECTION}_entities", embedding_model_dims=4
    )
    assert store.fusion == "none"
    store.insert([[1.0, 0.0, 0.0, 0.0]], [{"data": "Tom", "user_id": "u"}], [7])
    [hit] = store.search("Tom", [1.0, 0.0, 0.0, 0.0], top_k=1, filters={"user_id": "u"})
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_a_store_with_nothing_new_is_not_flushed_again(tmp_path: Path) -> None:
    """A flush holds the GIL for tens of milliseconds: only after writes."""
    store = EdgeVectorStore(path=str(tmp_path), embedding_model_dims=4)
    flushes: list[str] = []
    call = store.shard.call

    def counted(what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        flushes.extend([what] if what == "flush" else [])
        return call(what, method, *args, **kwargs)

    store.shard.call = counted  # type: ignore[method-assign]
    store.shard.sync()  # the indexes made at open are flushed once
    store.shard.sync()
    assert len(flushes) == 1
    store.insert([[1.0, 0.0, 0.0, 0.0]], [{"data": "Tom", "user_id": "u"}], [7])
    store.shard.sync()
    store.shard.sync()
    assert len(flushes) == 2
    assert store.shard.mark.points == 1  # the high-water mark followed the flush


# -- the engine's failures ----------------------------------------------------------


def test_bad_vectors_are_refused_before_the_engine(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2 indices but 1 values"):
        sparse_vector(SparseTerms(indices=[1, 2], values=[1.0]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unique"):
        sparse_vector(SparseTerms(indices=[3, 3], values=[1.0, 1.0]))  # type: ignore[arg-type]
    store = EdgeVectorStore(path=str(tmp_path), embedding_model_dims=4)
    with pytest.raises(ValueError, match="3 dimensions"):
        store.insert([[1.0, 0.0, 0.0]], [{"data": "x"}], ["a"])


def test_an_engine_panic_becomes_a_backend_error(tmp_path: Path) -> None:
    from qdrant_edge import Point, SparseVector, UpdateOperation

    shard = SharedShard(tmp_path / "shard", 2)
    bad = Point(id=1, vector={"": [1.0, 0.0], "bm25": SparseVector(indices=[1, 2], values=[1.0])})
    # Unchecked, qdrant-edge 0.9.0 panics (pyo3_runtime.PanicException, a BaseException).
    with pytest.raises(EdgeEngineError, match="panicked during upsert") as caught:
        shard.call("upsert", lambda s: s.update(UpdateOperation.upsert_points([bad])))
    assert type(caught.value.__cause__).__name__ == "PanicException"
    shard.close()
    # The panic left a point the engine cannot load: opening says so, clearly.
    with pytest.raises(EdgeEngineError, match="could not open the store"):
        SharedShard(tmp_path / "shard", 2)


# -- durability -------------------------------------------------------------------------


def test_sigkill_during_writes_loses_nothing_acknowledged(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    env = dict(os.environ)
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    acknowledged: list[str] = []
    assert child.stdout is not None
    try:
        for line in child.stdout:
            acknowledged.append(line.strip())
            if len(acknowledged) >= 60:
                break
        os.kill(child.pid, signal.SIGKILL)  # mid-stream: it keeps writing until killed
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    memory = memory_on(folder)
    stored = {h.id for h in memory.vector_store.list(top_k=100_000)[0]}
    missing = [mid for mid in acknowledged if mid not in stored]
    assert missing == []
    assert len(stored) >= len(acknowledged)
    for mid in acknowledged[-3:]:
        assert (asyncio.run(memory.get(mid)) or {}).get("memory", "").startswith("fact ")


def test_close_shards_is_idempotent(tmp_path: Path) -> None:
    store = EdgeVectorStore(path=str(tmp_path), embedding_model_dims=4)
    close_shards(tmp_path)
    close_shards(tmp_path)
    with pytest.raises(RuntimeError, match="was closed"):
        store.count()


# -- the command line ---------------------------------------------------------------


def _cli(*args: str) -> Any:
    from click.testing import CliRunner

    from agentscope_mem0.cli import cli

    env = {"AGENTSCOPE_MEM0_EMBEDDER": f"hash:{DIMS}", "AGENTSCOPE_MEM0_CHAT_MODEL": None}
    result = CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)
    return result


async def test_status_shows_the_engine_and_its_index(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    memory = memory_on(folder)
    for i in range(5):
        await remember(memory, "alice", f"fact {i}")
    close_shared_clients(folder)

    result = _cli("status", "--folder", str(folder), "--json")
    assert result.exit_code == 0, result.output
    backend = json.loads(result.stdout)["backend"]
    assert backend["engine"] == "qdrant-edge" and backend["memories"] == 5
    assert backend["points"] == 5 and backend["index"] == "exact"
    assert backend["vector_size"] == DIMS and backend["segments"] >= 1
    text = _cli("status", "--folder", str(folder))
    assert re.search(r"engine:\s+qdrant-edge", text.stdout)
    assert re.search(r"index:\s+exact search", text.stdout)

    optimized = _cli("optimize", "--folder", str(folder), "--json")
    assert optimized.exit_code == 0, optimized.output
    assert json.loads(optimized.stdout)[COLLECTION]["points"] == 5
    assert memory_on(folder).vector_store.count() == 5


def test_a_folders_shards_close_with_the_last_store_on_them(tmp_path: Path) -> None:
    memories = EdgeVectorStore(path=str(tmp_path), embedding_model_dims=4)
    entities = EdgeVectorStore(
        path=str(tmp_path), collection_name=f"{COLLECTION}_entities", embedding_model_dims=4
    )
    assert release_user(memories) is None  # the entity store still uses the folder
    assert memories.count() == 0
    assert release_user(entities) == tmp_path.resolve()
    with pytest.raises(RuntimeError, match="was closed"):
        entities.count()
    assert release_user(entities) is None  # once only
    assert EdgeVectorStore(path=str(tmp_path), embedding_model_dims=4).count() == 0  # reopens
