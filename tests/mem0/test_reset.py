"""``reset()`` on every client the package builds: it empties the store and the
history, and this client and every other one on the same store keep working."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import Mem0Middleware, build_local_memory, build_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

Build = Callable[[], Any]


def _qdrant_path(tmp_path: Path) -> Build:
    fields = {
        "vector_store": {
            "provider": "qdrant",
            "config": {"collection_name": "c", "path": str(tmp_path / "qdrant"), "on_disk": True},
        },
        "history_db_path": str(tmp_path / "history.db"),
    }
    return lambda: build_memory(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(), mem0_config=fields
    )


def _embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Build:
    return lambda: build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(), folder=tmp_path / "data"
    )


def _models_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Build:
    # Mem0Middleware(chat_model=..., embedding_model=...): the embedded default
    return lambda: (
        Mem0Middleware(
            user_id="u", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding()
        ).client
    )


@pytest.fixture(
    params=["qdrant path", "embedded", "models only"],
)
def build(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Build:
    makers: dict[str, Callable[[Path, pytest.MonkeyPatch], Build]] = {
        "qdrant path": lambda path, _: _qdrant_path(path),
        "embedded": _embedded,
        "models only": _models_only,
    }
    return makers[request.param](tmp_path, monkeypatch)


def _texts(answer: dict[str, Any]) -> list[str]:
    return sorted(entry["memory"] for entry in answer["results"])


async def _reset_keeps_both_clients_working(first: Any, second: Any) -> None:
    old = await first.add("User lives in Hangzhou", user_id="u", infer=False)
    await second.add("User owns a cat", user_id="u", agent_id="pet", infer=False)
    old_id = old["results"][0]["id"]
    assert await first.history(old_id)

    await first.reset()

    assert _texts(await first.get_all(filters={"user_id": "u"})) == []
    assert await first.history(old_id) == []
    await first.add("User lives in Beijing", user_id="u", infer=False)
    await second.add("User likes tea", user_id="u", infer=False)
    for client in (first, second):
        assert _texts(await client.get_all(filters={"user_id": "u"})) == [
            "User likes tea",
            "User lives in Beijing",
        ]
        found = await client.search("where does the user live", filters={"user_id": "u"})
        assert found["results"][0]["memory"] == "User lives in Beijing"
    for entry in (await second.get_all(filters={"user_id": "u"}))["results"]:
        assert await first.history(entry["id"])  # history is written again


async def test_reset_empties_the_store_and_every_client_keeps_working(build: Build) -> None:
    await _reset_keeps_both_clients_working(build(), build())


async def test_a_middleware_goes_on_after_its_client_was_reset(tmp_path: Path) -> None:
    from fakes import note_text, one_session

    mw = Mem0Middleware.local(
        user_id="u",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        await_write=True,
    )
    await one_session(mw, "I live in Hangzhou.")
    await mw.client.reset()
    await one_session(mw, "I live in Beijing.")
    model = await one_session(mw, "Where do I live?")
    note = note_text(model.calls[0])
    assert "Beijing" in note and "Hangzhou" not in note
    await mw.aclose()


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from _pgfixture import postgres_dsn

    with postgres_dsn() as dsn:
        yield dsn


async def test_reset_on_pgvector_keeps_every_client_working(pg_dsn: str, tmp_path: Path) -> None:
    from _pgfixture import fresh_collection
    from agentscope_mem0.backends import pgvector_config

    fields = pgvector_config(
        pg_dsn,
        dims=HashEmbedding().dimensions,
        collection=fresh_collection(),
        history_db_path=str(tmp_path / "history.db"),
    )

    def build() -> Any:
        return build_memory(
            chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(), mem0_config=fields
        )

    await _reset_keeps_both_clients_working(build(), build())
