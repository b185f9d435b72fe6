"""``threshold`` has one meaning on every backend: the least cosine similarity
between the query's embedding and a memory's, whether the store
fuses keyword hits into the ranking (the embedded store, the package's
provider for a Qdrant server) or the query has no keyword at all."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import Mem0Backend, Scope, build_local_memory, build_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

MEMORIES = [
    "User lives in Hangzhou near the lake",
    "User prefers dark mode charts",
    "User drinks green tea every morning",
    "User lives with a cat called Mochi",
    "User works in Shanghai as a designer",
    "User likes hiking near the lake in spring",
    "User owns a bicycle",
]
QUERIES = [
    "where does the user live near the lake",  # keyword terms: the store fuses rankings
    "in the with",  # stop words only, no keyword term: the store ranks by meaning alone
]
EMBEDDING = HashEmbedding()


def _cosine(a: str, b: str) -> float:
    u, v = EMBEDDING.vector(a), EMBEDDING.vector(b)
    dot = sum(x * y for x, y in zip(u, v, strict=True))
    return dot / (math.sqrt(sum(x * x for x in u)) * math.sqrt(sum(y * y for y in v)))


def _cut_points(query: str) -> list[float]:
    """Thresholds halfway between the memories' cosines with ``query`` (none on a tie)."""
    cosines = sorted({round(_cosine(query, m), 6) for m in MEMORIES})
    return [(a + b) / 2 for a, b in itertools.pairwise(cosines)]


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from _pgfixture import postgres_dsn

    with postgres_dsn() as dsn:
        yield dsn


@pytest.fixture(params=["embedded", "qdrant", "qdrant-server-provider", "pgvector"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "embedded":
        return build_local_memory(ScriptedChatModel(), embedding_model=EMBEDDING, folder=tmp_path)
    if request.param == "qdrant":
        store: dict[str, Any] = {
            "provider": "qdrant",
            "config": {"collection_name": "t", "path": str(tmp_path / "q"), "on_disk": True},
        }
    elif request.param == "qdrant-server-provider":
        # The package's hybrid provider for a Qdrant server, on qdrant-client's local mode.
        from agentscope_mem0._server.qdrant_config import PROVIDER

        store = {
            "provider": PROVIDER,
            "config": {
                "collection_name": "t",
                "embedding_model_dims": EMBEDDING.dimensions,
                "path": str(tmp_path / "q"),
            },
        }
    else:
        from _pgfixture import fresh_collection
        from agentscope_mem0.backends import pgvector_config

        dsn = request.getfixturevalue("pg_dsn")
        store = pgvector_config(dsn, dims=EMBEDDING.dimensions, collection=fresh_collection())[
            "vector_store"
        ]
    fields = {"vector_store": store, "history_db_path": str(tmp_path / "history.db")}
    return build_memory(
        chat_model=ScriptedChatModel(), embedding_model=EMBEDDING, mem0_config=fields
    )


async def test_threshold_is_the_least_cosine_similarity(memory: Any) -> None:
    for text in MEMORIES:
        await memory.add(text, user_id="u", infer=False)
    backend = Mem0Backend(memory)
    for query in QUERIES:
        cuts = _cut_points(query)
        assert len(cuts) >= 3, cuts  # the memories are told apart
        for threshold in cuts:
            found = await backend.search(query, Scope("u"), top_k=20, threshold=threshold)
            expected = {m for m in MEMORIES if _cosine(query, m) >= threshold}
            assert {hit.memory for hit in found} == expected, (query, threshold)
        # None: mem0's default, 0.1, which every memory here passes
        assert len(await backend.search(query, Scope("u"), top_k=20)) == len(MEMORIES)
