"""A search reads payloads only for the hits mem0 keeps, and mem0's answer stays the same.

Real mem0 ``AsyncMemory`` on a real Qdrant Edge shard; the embedder is the
offline bag-of-words fake.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentscope_mem0 import build_local_memory
from agentscope_mem0._vectors import search_terms as kept_module
from agentscope_mem0._vectors.search_terms import kept_of_search, results_kept
from agentscope_mem0.local._edge_provider import hits_with_payloads, is_expired
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

QUERY = "which green tea does the user drink"


def _payload(text: str, user: str, expires: str | None = None) -> dict[str, Any]:
    payload = {
        "data": text,
        "hash": hashlib.md5(text.encode()).hexdigest(),
        "user_id": user,
        "created_at": "2026-01-01T00:00:00+00:00",
    }
    if expires:
        payload["expiration_date"] = expires
    return payload


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=tmp_path / "store"
    )
    rows = [
        # The three best matches have expired: mem0 must skip them.
        *[(f"User drinks green tea {n}, which green tea", f"2020-01-0{n}") for n in (1, 2, 3)],
        *[(f"User drinks green tea number {n}", None) for n in range(40)],
        *[(f"User owns bicycle {n}", None) for n in range(40)],
    ]
    embed = memory.embedding_model.embed
    memory.vector_store.insert(
        vectors=[embed(text, "add") for text, _ in rows],
        payloads=[_payload(text, "alice", expires) for text, expires in rows],
        ids=[f"00000000-0000-4000-8000-{n:012d}" for n in range(len(rows))],
    )
    return memory


def _spy_on_store(memory: Any) -> list[int]:
    """How many hits each store search handed to mem0."""
    handed: list[int] = []
    search = memory.vector_store.search

    def counted(*args: Any, **kwargs: Any) -> Any:
        hits = search(*args, **kwargs)
        handed.append(len(hits))
        return hits

    memory.vector_store.search = counted
    return handed


def _answer(result: dict[str, Any]) -> list[tuple[str, str, float]]:
    return [(m["id"], m["memory"], round(m["score"], 9)) for m in result["results"]]


@pytest.mark.parametrize("show_expired", [False, True])
async def test_mem0_answers_the_same_with_payloads_read_only_for_kept_hits(
    memory: Any, monkeypatch: pytest.MonkeyPatch, show_expired: bool
) -> None:
    handed = _spy_on_store(memory)
    filters = {"user_id": "alice"}
    lean = await memory.search(QUERY, filters=filters, top_k=5, show_expired=show_expired)
    # As if mem0 could reorder the candidates (spaCy installed): every payload is read.
    monkeypatch.setattr(kept_module, "entity_scores_possible", lambda: True)
    full = await memory.search(QUERY, filters=filters, top_k=5, show_expired=show_expired)

    assert _answer(lean) == _answer(full)
    assert len(lean["results"]) == 5
    expired = [m for m in lean["results"] if "which green tea" in m["memory"]]
    assert len(expired) == (3 if show_expired else 0)
    assert handed[1] == 60  # mem0 asks for max(4 x 5, 60) candidates
    # Without show_expired: the 5 kept plus the 3 expired ones read on the way.
    assert handed[0] == (60 if show_expired else 8)


async def test_a_search_outside_mem0_reads_every_payload(memory: Any) -> None:
    vector = memory.embedding_model.embed(QUERY, "search")
    assert kept_of_search() is None
    hits = memory.vector_store.search(QUERY, vector, top_k=20, filters={"user_id": "alice"})
    assert len(hits) == 20 and all(h.payload["data"] for h in hits)


async def test_the_entity_collection_ignores_the_kept_count(
    memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kept_module, "entity_scores_possible", lambda: False)
    entities = memory.entity_store
    names = [f"tea shop {n}" for n in range(6)]
    entities.insert(
        vectors=[memory.embedding_model.embed(n, "add") for n in names],
        payloads=[{"data": n, "user_id": "alice", "linked_memory_ids": []} for n in names],
    )
    vector = memory.embedding_model.embed("tea shop", "search")
    with results_kept(2):
        hits = entities.search("tea shop", vector, top_k=500, filters={"user_id": "alice"})
    assert len(hits) == 6


class _Shard:
    """A shard whose retrieve knows only some points (the others were deleted)."""

    def __init__(self, payloads: dict[str, dict[str, Any]]) -> None:
        self.payloads = payloads
        self.reads: list[list[int]] = []

    def call(self, what: str, method: Any) -> Any:
        return method(self)

    def retrieve(self, ids: list[int], **_: Any) -> list[Any]:
        self.reads.append(list(ids))
        known = [i for i in ids if str(i) in self.payloads]
        return [SimpleNamespace(id=i, payload=self.payloads[str(i)]) for i in known]


def test_reading_goes_on_past_deleted_and_expired_hits() -> None:
    shard = _Shard(
        {
            "1": {"data": "a"},
            "3": {"data": "c", "expiration_date": "2000-01-01"},
            "4": {"data": "d"},
            "5": {"data": "e"},
            "6": {"data": "f"},
        }
    )
    scored = [(SimpleNamespace(id=n, payload=None), 1.0 - n / 10) for n in range(1, 7)]
    hits = hits_with_payloads(shard, scored, 3)  # type: ignore[arg-type]
    assert [h.id for h in hits] == ["1", "3", "4", "5"]  # 2 is gone, 3 has expired
    assert shard.reads == [[1, 2, 3], [4, 5]]
    assert [h.score for h in hits] == [0.9, 0.7, 0.6, 0.5]


@pytest.mark.parametrize(
    ("value", "expired"),
    [(None, False), ("", False), ("2000-01-01", True), ("2999-01-01", False), ("soon", False)],
)
def test_expiry_follows_mem0s_rule(value: str | None, expired: bool) -> None:
    assert is_expired({"expiration_date": value}) is expired
