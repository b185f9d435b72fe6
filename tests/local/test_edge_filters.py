"""A mem0 filter means the same on the embedded Qdrant Edge store as on mem0's
own Qdrant store: the same memories, or an error on both.

The same memories are stored through real mem0 on both stores (Qdrant Edge,
and qdrant-client's local mode on disk, which answers as a Qdrant server
does); every filter form mem0 documents is then asked of both, through
mem0's ``search`` (which rewrites ``AND``/``OR``/``NOT`` and the operators
first) and its ``get_all`` (which hands the dict over as it is).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import build_local_memory, build_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

MEMORIES: dict[str, dict[str, Any]] = {
    "alpha": {
        "city": "Hangzhou",
        "n": 3,
        "active": True,
        "note": "Prefers Dark Mode charts",
        "when": "2024-03-01",
        "ratio": 1.5,
        "pet": "cat",
    },
    "beta": {
        "city": "Beijing",
        "n": 5,
        "active": False,
        "note": "dark roast coffee",
        "when": "2025-01-10T08:00:00Z",
        "ratio": 0.25,
    },
    "gamma": {"city": "Lisbon", "n": 7, "note": "light mode", "pet": "dog", "tags": ["a", "b"]},
    "delta": {"city": "hangzhou", "n": 1, "active": 1, "note": "modern dark-art", "ratio": 3},
}

FORMS: list[dict[str, Any]] = [
    # equality: strings, numbers, booleans
    {"city": "Hangzhou"},
    {"city": {"eq": "hangzhou"}},
    {"n": 3},
    {"n": {"eq": 1}},
    {"ratio": 3},
    {"active": True},
    {"active": False},
    {"active": {"eq": True}},
    {"active": 1},
    {"ratio": 1.5},
    {"city": None},
    # ne, in, nin (an absent field matches none of them)
    {"city": {"ne": "Hangzhou"}},
    {"n": {"ne": 3}},
    {"pet": {"ne": "cat"}},
    {"active": {"ne": True}},
    {"city": {"in": ["Hangzhou", "Lisbon"]}},
    {"city": ["Beijing", "hangzhou"]},
    {"n": {"in": [3, 7]}},
    {"city": {"nin": ["Hangzhou"]}},
    {"n": {"nin": [1, 5]}},
    {"pet": {"nin": ["dog"]}},
    {"active": {"in": [True]}},
    {"city": {"in": []}},
    {"city": {"nin": []}},
    {"city": {"in": "Hangzhou"}},
    {"n": {"in": [3, "5"]}},
    {"tags": "a"},
    # ranges: numbers and ISO dates
    {"n": {"gt": 3}},
    {"n": {"gte": 3}},
    {"n": {"lt": 5}},
    {"n": {"lte": 5}},
    {"n": {"gte": 3, "lt": 7}},
    {"ratio": {"gt": 1}},
    {"when": {"gte": "2024-06-01"}},
    {"when": {"lt": "2025-01-10T09:00:00Z"}},
    {"n": {"gt": "three"}},
    {"n": {"gt": 1, "ne": 3}},
    # text: whole words, any case
    {"note": {"contains": "dark"}},
    {"note": {"contains": "Dark Mode"}},
    {"note": {"contains": "mode dark"}},
    {"note": {"contains": "dar"}},
    {"note": {"icontains": "DARK"}},
    {"note": {"icontains": "light MODE"}},
    {"note": {"contains": "art"}},
    {"n": {"contains": 3}},
    # logic and wildcard
    {"AND": [{"city": "Hangzhou"}, {"n": {"gt": 1}}]},
    {"OR": [{"city": "Beijing"}, {"active": True}]},
    {"NOT": [{"city": "Hangzhou"}]},
    {"NOT": [{"pet": "cat"}]},
    {"OR": [{"n": {"lt": 2}}, {"note": {"contains": "coffee"}}]},
    {"AND": [{"NOT": [{"city": "Lisbon"}]}, {"n": {"lte": 5}}]},
    {"city": "*"},
    {"pet": "*"},
    {"city": {"in": ["Hangzhou", "Beijing"]}, "n": {"gte": 3}},
    {"nope": {"between": [1, 2]}},
]


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    qdrant = build_memory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        mem0_config={
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": "f", "path": str(tmp_path / "q"), "on_disk": True},
            },
            "history_db_path": str(tmp_path / "q-history.db"),
        },
    )
    edge = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(), folder=tmp_path / "e"
    )
    for memory in (qdrant, edge):
        for text, metadata in MEMORIES.items():
            await memory.add(text, user_id="u", metadata=metadata, infer=False)
        await memory.add(
            "omega", user_id="someone-else", metadata={"city": "Hangzhou"}, infer=False
        )
    yield {"mem0's qdrant": qdrant, "qdrant edge": edge}


async def _answer(memory: Any, how: str, form: dict[str, Any]) -> Any:
    filters = {"user_id": "u", **form}
    try:
        if how == "search":
            raw = await memory.search("memory", filters=filters, top_k=50, threshold=0.0)
        else:
            raw = await memory.get_all(filters=filters, top_k=50)
    except Exception:
        return "refused"
    return sorted(entry["memory"] for entry in raw["results"])


@pytest.mark.parametrize("how", ["search", "get_all"])
async def test_every_filter_form_means_the_same_on_both_stores(
    how: str, stores: dict[str, Any]
) -> None:
    differ = []
    for form in FORMS:
        answers = {name: await _answer(memory, how, form) for name, memory in stores.items()}
        if len({repr(a) for a in answers.values()}) > 1:
            differ.append((form, answers))
    assert differ == []


async def test_the_forms_tell_the_memories_apart(stores: dict[str, Any]) -> None:
    # Guards the test above against forms that match everything or nothing.
    edge = stores["qdrant edge"]
    assert await _answer(edge, "get_all", {"active": True}) == ["alpha"]
    assert await _answer(edge, "get_all", {"active": 1}) == ["delta"]
    dark = ["alpha", "beta", "delta"]  # "Dark Mode", "dark roast", "dark-art"
    assert await _answer(edge, "get_all", {"note": {"contains": "dark"}}) == dark
    assert await _answer(edge, "get_all", {"pet": {"ne": "cat"}}) == ["gamma"]
    assert await _answer(edge, "get_all", {"NOT": [{"pet": "cat"}]}) == ["beta", "delta", "gamma"]
    assert await _answer(edge, "search", {"active": {"in": [True]}}) == "refused"
    answers = [repr(await _answer(edge, "search", form)) for form in FORMS]
    assert len(set(answers)) >= 12 and answers.count("'refused'") <= 12
