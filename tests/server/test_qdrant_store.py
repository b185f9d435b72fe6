"""The Qdrant server provider, run on qdrant-client's local mode.

No Qdrant server runs here. qdrant-client's local mode (``path=...``)
speaks the same Query API (prefetch, weighted RRF, sparse vectors with IDF,
collection metadata), so the provider's code path is the one a server gets;
only the payload indexes (``is_tenant``) are a server's alone and are not
exercised. mem0, the local Qdrant on disk under ``tmp_path``, Qdrant Edge and
SQLite are real; the models are the offline fakes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mem0 import AsyncMemory

from agentscope_mem0 import build_local_memory, build_mem0_config, build_memory
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._scope import Scope
from agentscope_mem0._server.qdrant_config import PROVIDER
from agentscope_mem0._server.qdrant_store import (
    METADATA_KEY,
    HybridQdrant,
    collection_keyword_record,
)
from agentscope_mem0.backends import qdrant_server_config
from agentscope_mem0.local import KeywordEncoder
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FILLER, LOOKALIKES, QUERY, TARGET

DIMS = 64


def server_fields(tmp_path: Path, **options: Any) -> dict[str, Any]:
    """The provider's config on qdrant-client's local mode (a path instead of a URL)."""
    return {
        "vector_store": {
            "provider": PROVIDER,
            "config": {
                "collection_name": "memories",
                "embedding_model_dims": DIMS,
                "path": str(tmp_path / "qdrant"),
                **options,
            },
        },
        "history_db_path": str(tmp_path / "history.db"),
    }


def server_memory(tmp_path: Path, **options: Any) -> AsyncMemory:
    return build_memory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(DIMS),
        mem0_config=server_fields(tmp_path, **options),
    )


async def remember(memory: Any, facts: list[str], user: str = "alice") -> None:
    backend = Mem0Backend(memory)
    for fact in facts:
        await backend.add([{"role": "user", "content": fact}], Scope(user), infer=False)


def stored_sparse(store: HybridQdrant) -> dict[str, dict[int, float]]:
    records, _ = store.client.scroll(
        store.collection_name, limit=1000, with_payload=True, with_vectors=True
    )
    out = {}
    for r in records:
        sparse = r.vector.get("bm25") if isinstance(r.vector, dict) else None
        terms = dict(zip(sparse.indices, sparse.values, strict=True)) if sparse else {}
        out[r.payload["data"]] = terms
    return out


def test_the_helper_selects_the_provider() -> None:
    fields = qdrant_server_config("http://qdrant.invalid:6333", dims=DIMS)
    assert fields["vector_store"]["provider"] == PROVIDER
    config = build_mem0_config(mem0_config=fields)
    assert config.vector_store.provider == PROVIDER
    assert (config.vector_store.config.host, config.vector_store.config.fusion) == (
        "qdrant.invalid",
        "rrf",
    )
    own = qdrant_server_config("http://qdrant.invalid:6333", dims=DIMS, hybrid=False)
    assert own["vector_store"]["provider"] == "qdrant"


async def test_the_fused_search_finds_the_keyword_memory(tmp_path: Path) -> None:
    memory = server_memory(tmp_path)
    assert isinstance(memory.vector_store, HybridQdrant)
    await remember(memory, [TARGET, *LOOKALIKES, *FILLER])
    await remember(memory, [TARGET], user="bob")
    hits = await Mem0Backend(memory).search(QUERY, Scope("alice"), top_k=3)
    assert TARGET in [hit.memory for hit in hits]
    assert 0 < hits[-1].score <= hits[0].score <= 1.0
    # mem0 must not add the keyword score a second time.
    assert memory.vector_store.keyword_search(QUERY, filters={"user_id": "alice"}) is None
    # Meaning only (mem0's own provider without fastembed): the look-alikes win.
    memory.vector_store.fusion = "none"
    memory.vector_store._bm25_encoder = False
    semantic = await Mem0Backend(memory).search(QUERY, Scope("alice"), top_k=3)
    assert TARGET not in [hit.memory for hit in semantic]


async def test_keyword_vectors_and_scores_are_the_embedded_stores(tmp_path: Path) -> None:
    memory = server_memory(tmp_path)
    edge = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=tmp_path / "edge"
    )
    facts = [
        TARGET,
        "The user keeps old letters in the attic",
        "用户住在杭州",
        "I'm HIKING; she hiked, he hikes.",
        "Hiking boots stand by the door",
        "A long note about hiking in the Alps, and more hiking in Norway with old friends",
    ]
    await remember(memory, facts)
    await remember(edge, facts)
    encoder = KeywordEncoder()
    server = stored_sparse(memory.vector_store)
    assert sorted(server) == sorted(facts)
    for text, terms in server.items():
        expected = encoder.document(text)
        assert terms == pytest.approx(
            dict(zip(expected.indices.tolist(), expected.values.tolist(), strict=True))
        )
    # The same query scores the same on both, ranking by ranking and fused
    # (a random dense query vector: the fake embedding's cosines tie).
    rng = np.random.default_rng(3)
    for query in ("hike", "old letters in the attic", "杭州 hiking Brompton"):
        on_server = [
            (p.payload["data"], round(p.score, 4))
            for p in memory.vector_store.client.query_points(
                "memories", query=_sparse(encoder, query), using="bm25", limit=10
            ).points
        ]
        on_edge = [
            (h.payload["data"], round(h.score, 4))
            for h in edge.vector_store.keyword_hits(query, top_k=10)
        ]
        assert sorted(on_server) == sorted(on_edge) and on_server
        vector = rng.normal(size=DIMS).tolist()
        for feedback in (0, 2):  # also with the keyword query widened by the first hits
            memory.vector_store.feedback_docs = edge.vector_store.feedback_docs = feedback
            fused_server = [
                (p.payload["data"], round(p.score, 4))
                for p in memory.vector_store.search(query, vector, 10)
            ]
            fused_edge = [
                (h.payload["data"], round(h.score, 4))
                for h in edge.vector_store.search(query, vector, 10)
            ]
            # Each memory scores the same on both (points that tie may come in either order).
            assert sorted(fused_server) == sorted(fused_edge) and fused_server
            assert [s for _, s in fused_server] == [s for _, s in fused_edge]


def _sparse(encoder: KeywordEncoder, text: str) -> Any:
    from qdrant_client import models

    terms = encoder.query(text)
    return models.SparseVector(indices=terms.indices.tolist(), values=terms.values.tolist())


async def test_a_payload_update_refreshes_the_keyword_vector(tmp_path: Path) -> None:
    memory = server_memory(tmp_path)
    await remember(memory, ["The user plays the cello"])
    store = memory.vector_store
    point = stored_point_id(store)
    store.update(point, payload={"data": "The user plays the bassoon", "user_id": "alice"})
    encoder = KeywordEncoder()
    terms = stored_sparse(store)["The user plays the bassoon"]
    assert set(terms) == set(encoder.document("The user plays the bassoon").indices.tolist())
    assert [
        h.payload["data"]
        for h in store.client.query_points(
            "memories", query=_sparse(encoder, "bassoon"), using="bm25", limit=3
        ).points
    ] == ["The user plays the bassoon"]


def stored_point_id(store: HybridQdrant) -> str:
    records, _ = store.client.scroll(store.collection_name, limit=1)
    return str(records[0].id)


async def test_a_collection_written_by_mem0s_provider_is_rewritten(tmp_path: Path) -> None:
    # mem0's own provider without fastembed: dense vectors only, no record.
    fields = server_fields(tmp_path)
    fields["vector_store"]["provider"] = "qdrant"
    old = build_memory(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), mem0_config=fields
    )
    old.vector_store._bm25_encoder = False  # fastembed is not installed
    await remember(old, [TARGET, *LOOKALIKES])
    client = old.vector_store.client
    assert collection_keyword_record(client, "memories") is None
    assert not any(stored_sparse(old.vector_store).values())

    memory = server_memory(tmp_path)
    assert memory.vector_store.client is client  # the folder's one shared client
    assert collection_keyword_record(client, "memories") == KeywordEncoder().settings()
    assert all(stored_sparse(memory.vector_store).values())
    hits = await Mem0Backend(memory).search(QUERY, Scope("alice"), top_k=3)
    assert TARGET in [hit.memory for hit in hits]
    meta = client.get_collection("memories").config.metadata
    assert meta[METADATA_KEY]["encoder"] == "qdrant-bm25"


async def test_the_entity_collection_is_searched_by_meaning(tmp_path: Path) -> None:
    store = server_memory(tmp_path).vector_store
    entities = HybridQdrant(
        collection_name="memories_entities", embedding_model_dims=DIMS, client=store.client
    )
    assert entities.fusion == "none"


PLAIN = "plain"


@pytest.mark.parametrize("user_index", [None, PLAIN])
def test_on_a_server_user_id_is_indexed_as_the_tenant_key(
    monkeypatch: pytest.MonkeyPatch, user_index: str | None
) -> None:
    """What the provider asks a server for (no server runs here: the two calls are
    recorded); a plain ``user_id`` index, as mem0's own provider makes it, is made again."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(url="http://qdrant.invalid:6333", check_compatibility=False)
    asked: list[tuple[str, Any]] = []
    schema: dict[str, Any] = {"agent_id": None}
    if user_index == PLAIN:
        schema["user_id"] = models.PayloadIndexInfo(
            data_type=models.PayloadSchemaType.KEYWORD, points=3
        )
    monkeypatch.setattr(
        client,
        "get_collection",
        lambda name: models.CollectionInfo.model_construct(payload_schema=schema),
    )
    monkeypatch.setattr(
        client,
        "create_payload_index",
        lambda collection_name, field_name, field_schema: asked.append((field_name, field_schema)),
    )
    store = HybridQdrant.__new__(HybridQdrant)
    store.client, store.collection_name, store.is_local = client, "memories", False
    store._create_filter_indexes()
    assert [name for name, _ in asked] == ["user_id", "run_id", "actor_id"]  # agent_id exists
    tenant = asked[0][1]
    assert isinstance(tenant, models.KeywordIndexParams) and tenant.is_tenant is True
    assert asked[1][1] == models.PayloadSchemaType.KEYWORD
