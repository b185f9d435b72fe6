"""A folder written by release 0.2 is brought up to date on its first open.

Its keyword vectors are rewritten with the engine's BM25 and ``user_id``
becomes the tenant key of its payload index; nothing else changes.

The folder in ``data/edge-v0.2.tar.gz`` was written by release 0.2's own code
(``data/make_v02_folder.py`` says how); everything else is real: mem0, the
Qdrant Edge shards on disk under ``tmp_path``, SQLite.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import build_local_memory
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._scope import Scope
from agentscope_mem0.local import KeywordEncoder, close_shared_clients
from agentscope_mem0.local._edge import DENSE, SPARSE, SharedShard
from agentscope_mem0.local._folder import COLLECTION
from agentscope_mem0.local._keyword import (
    KEYWORD_RECORD,
    keyword_record,
    rewrite_keywords,
)
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import shard_records

DATA = Path(__file__).parent / "data"
DIMS = 64  # what make_v02_folder.py stored with


def unpack_v02(folder: Path) -> list[dict[str, Any]]:
    folder.mkdir(parents=True)
    with tarfile.open(DATA / "edge-v0.2.tar.gz") as archive:
        archive.extractall(folder, filter="data")
    return json.loads((DATA / "v0.2-memories.json").read_text(encoding="utf-8"))


def points(path: Path) -> dict[str, Any]:
    """Every point of a closed shard folder: id -> (payload, dense, sparse as a dict)."""
    out = {}
    for r in shard_records(path, DIMS):
        sparse = r.vector.get(SPARSE)
        terms = dict(zip(sparse.indices, sparse.values, strict=True)) if sparse else {}
        out[str(r.id)] = (dict(r.payload), list(r.vector[DENSE]), terms)
    return out


@pytest.fixture(autouse=True)
def _close_stores() -> Any:
    yield
    close_shared_clients()


async def test_a_v02_folder_is_upgraded_losslessly_on_first_open(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    stored = unpack_v02(folder)
    shard_path = folder / "edge" / COLLECTION
    assert keyword_record(shard_path) is None
    before = points(shard_path)
    assert sorted(before) == sorted(m["id"] for m in stored)

    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=folder
    )
    encoder = KeywordEncoder()
    assert keyword_record(shard_path) == encoder.settings()
    # A rare word of one memory finds it by keywords alone (the new query encoding).
    hits = memory.vector_store.keyword_hits("volcanology", filters={"user_id": "bob"})
    assert [h.payload["data"] for h in hits][:1] == [
        "Bob's daughter studies volcanology in Iceland"
    ]
    hits = memory.vector_store.keyword_hits("爬山", filters={"user_id": "alice"})
    assert [h.payload["data"] for h in hits][:1] == ["Alice 喜欢在周末爬山"]
    close_shared_clients()

    after = points(shard_path)
    assert sorted(after) == sorted(before)
    for point_id, (payload, dense, terms) in after.items():
        old_payload, old_dense, old_terms = before[point_id]
        assert payload == old_payload and dense == pytest.approx(old_dense)
        expected = encoder.document(payload["data"])
        assert terms == pytest.approx(
            dict(zip(expected.indices.tolist(), expected.values.tolist(), strict=True))
        )
        assert set(terms) != set(old_terms)  # the former encoder's ids are gone


async def test_the_upgraded_folder_serves_mem0(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    stored = unpack_v02(folder)
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=folder
    )
    backend = Mem0Backend(memory)
    hits = await backend.search("Who keeps bees near the canal?", Scope("bob"), top_k=3)
    assert hits[0].memory == "Bob keeps bees on his allotment near the canal"
    listed = await memory.get_all(filters={"user_id": "alice"})
    assert len(listed["results"]) == sum(m["user_id"] == "alice" for m in stored)


def test_the_rewrite_runs_once_and_again_after_an_interruption(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    unpack_v02(folder)
    shard = SharedShard(folder / "edge" / COLLECTION, DIMS)
    encoder = KeywordEncoder()
    try:
        assert rewrite_keywords(shard, encoder) == 7
        assert rewrite_keywords(shard, encoder) is None  # the record is current
        # A rewrite cut short leaves no record (it is written last): done again.
        (shard.path / KEYWORD_RECORD).unlink()
        assert rewrite_keywords(shard, encoder) == 7
        # Other encoder settings also rewrite.
        assert rewrite_keywords(shard, KeywordEncoder(avg_len=32.0)) == 7
        assert keyword_record(shard.path) == KeywordEncoder(avg_len=32.0).settings()
    finally:
        shard.close()


def test_a_new_store_is_recorded_at_once(tmp_path: Path) -> None:
    build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=tmp_path / "new"
    )
    path = tmp_path / "new" / "edge" / COLLECTION
    assert keyword_record(path) == KeywordEncoder().settings()


def tenant_keys(path: Path) -> dict[str, bool | None]:
    """The payload indexes of a closed shard, read with the engine alone (no upgrade)."""
    from qdrant_edge import EdgeShard

    shard = EdgeShard.load(str(path))
    try:
        schema = shard.info().payload_schema
    finally:
        shard.close()
    return {name: getattr(index.params, "is_tenant", None) for name, index in schema.items()}


def test_user_id_becomes_the_tenant_key(tmp_path: Path) -> None:
    from agentscope_mem0.local._embedded import store_status

    folder = tmp_path / "data"
    unpack_v02(folder)
    path = folder / "edge" / COLLECTION
    before = tenant_keys(path)
    assert set(before) == {"user_id", "agent_id", "run_id", "actor_id"}
    assert not before["user_id"]  # release 0.2: a plain keyword index

    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=folder
    )
    assert store_status(folder / "edge", COLLECTION)["tenant_key"] == "user_id"
    assert memory.vector_store.count({"user_id": "alice"}) == 4
    close_shared_clients()
    after = tenant_keys(path)
    assert after["user_id"] is True and not after["agent_id"]
    # A new store starts with it.
    build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=tmp_path / "new"
    )
    close_shared_clients()
    assert tenant_keys(tmp_path / "new" / "edge" / COLLECTION)["user_id"] is True
