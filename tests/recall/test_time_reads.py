"""Reads by time on every store: a question that names a period, and ``as_of``.

Real mem0 on the embedded store, the Qdrant server provider (qdrant-client's
local mode) and pgvector; the timeline is written by the package's own time
judgement from a replayed chat, only the chat model scripted. The hosted
platform is the fake one of ``fakes.py``, its timeline written by hand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import ToolResultState, UserMsg

from _pgfixture import fresh_collection, postgres_dsn
from agentscope_mem0 import ConfigurationError, Mem0Backend, Mem0Middleware, Scope
from agentscope_mem0._server.qdrant_config import PROVIDER
from agentscope_mem0._text.periods import period_in, time_in
from agentscope_mem0.backends import pgvector_config, prepare_pgvector
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FakePlatform, Record, hosted_client, note_text

DIMS = 128
SCOPE = Scope("alice", "helper")


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn() as dsn:
        yield dsn


def _build(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> Mem0Middleware:
    common: dict[str, Any] = {
        "user_id": "alice",
        "chat_model": ScriptedChatModel(),
        "embedding_model": HashEmbedding(DIMS),
        "mode": "both",  # the automatic reads and writes, and the tools
    }
    if store == "edge":
        return Mem0Middleware.local(folder=tmp_path / "data", **common)
    if store == "qdrant-server":
        config: dict[str, Any] = {
            "vector_store": {
                "provider": PROVIDER,
                "config": {
                    "collection_name": "memories",
                    "embedding_model_dims": DIMS,
                    "path": str(tmp_path / "qdrant"),
                },
            },
            "history_db_path": str(tmp_path / "history.db"),
        }
    else:
        dsn = request.getfixturevalue("pg_dsn")
        config = pgvector_config(
            dsn, dims=DIMS, collection=fresh_collection(), history_db_path=str(tmp_path / "h.db")
        )
        prepare_pgvector(config)
    return Mem0Middleware(mem0_config=config, **common)


async def _turn(mw: Mem0Middleware, text: str, when: str) -> str:
    """One reply to ``text`` said at ``when``; the memory note the model was given."""
    model = ScriptedChatModel("Noted.")
    bot = Agent(name="helper", system_prompt="You help.", model=model, middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text, created_at=when))
    await mw.flush()
    return note_text(model.calls[0])


@pytest.fixture(params=["edge", "qdrant-server", "pgvector"])
async def moved(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Mem0Middleware]:
    """Alice lived in Hangzhou (said 2024-01-05) and moved to Beijing (said 2024-03-10)."""
    mw = _build(request.param, tmp_path, request)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing.", "2024-03-10T10:00:00+00:00")
        yield mw


async def test_a_question_about_the_past_recalls_what_held_then(moved: Mem0Middleware) -> None:
    note = await _turn(moved, "Where did I live in January 2024?", "2024-06-01T10:00:00+00:00")
    assert "User lives in Hangzhou." in note
    assert "no longer true since 2024-03-10" in note  # marked, not passed off as current

    # The period's memory comes first (the note then shows its lines newest first).
    asked = datetime(2024, 6, 1, tzinfo=UTC)
    period = period_in("Where did I live in January 2024?", asked)
    backend = moved.client_state.backend
    hits = await backend.search("Where did I live?", SCOPE, top_k=1, period=period)
    assert [hit.memory for hit in hits] == ["User lives in Hangzhou."]


async def test_a_question_without_a_time_recalls_what_is_current(moved: Mem0Middleware) -> None:
    note = await _turn(moved, "Where do I live now?", "2024-06-01T10:00:00+00:00")
    assert "Beijing" in note and "Hangzhou" not in note


async def test_the_period_is_read_against_the_turns_own_time(moved: Mem0Middleware) -> None:
    # "last year" asked in 2025 is 2024, when Alice moved to Beijing: Hangzhou
    # held only until March, Beijing came in March, both belong to the year.
    note = await _turn(moved, "Where did I live last year?", "2025-02-01T10:00:00+00:00")
    assert "Hangzhou" in note and "Beijing" in note


async def test_as_of_returns_what_was_current_then(moved: Mem0Middleware) -> None:
    backend = moved.client_state.backend

    async def at(when: Any) -> list[str]:
        hits = await backend.search("Where does the user live?", SCOPE, top_k=5, as_of=when)
        return sorted(hit.memory for hit in hits)

    assert await at("2023-12-31") == []  # nothing was said yet
    assert await at("2024-02-01") == ["User lives in Hangzhou."]
    assert await at(date(2024, 3, 9)) == ["User lives in Hangzhou."]  # the whole day
    assert await at("2024-03-10") == ["User moved to Beijing."]  # the end of the day
    assert await at(datetime(2024, 3, 10, 9, 0, tzinfo=UTC)) == ["User lives in Hangzhou."]
    assert await at("2025-01-01T00:00:00Z") == ["User moved to Beijing."]
    with pytest.raises(ConfigurationError, match="as_of must be"):
        await at("the day I moved")


async def test_the_search_tool_reads_as_of_a_date(moved: Mem0Middleware) -> None:
    search = {tool.name: tool for tool in await moved.list_tools()}["search_memory"]

    async def text(**kwargs: Any) -> tuple[ToolResultState, str]:
        chunk = await search(keywords=["where the user lives"], **kwargs)
        return chunk.state, "".join(block.text for block in chunk.content)

    assert await text(as_of="2024-02-01") == (
        ToolResultState.SUCCESS,
        "- User lives in Hangzhou.",
    )
    state, now = await text()
    assert "Beijing" in now and "Hangzhou" not in now
    state, bad = await text(as_of="when I moved")
    assert state == ToolResultState.ERROR and "as_of must be" in bad


@pytest.mark.parametrize(
    ("question", "reads"),
    [
        ("Where do I live now?", [5]),  # no time: today's one search of top_k
        ("我现在住在哪？", [5]),
        ("Where did I live in January 2024?", [20]),  # one wider search, ranked by time
    ],
)
async def test_a_question_without_a_time_is_searched_as_before(
    moved: Mem0Middleware, question: str, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = moved.client_state.backend
    asked: list[int] = []
    search_raw = backend.search_raw

    async def spy(*args: Any, top_k: int, **kwargs: Any) -> list[Any]:
        asked.append(top_k)
        return await search_raw(*args, top_k=top_k, **kwargs)

    monkeypatch.setattr(backend, "search_raw", spy)
    await _turn(moved, question, "2024-06-01T10:00:00+00:00")
    assert asked == reads


async def test_a_time_told_by_an_event_is_placed_by_its_memory(moved: Mem0Middleware) -> None:
    backend = moved.client_state.backend
    asked = datetime(2024, 6, 1, tzinfo=UTC)
    before = time_in("Where did I live before I moved?", asked)
    hits = await backend.search("Where did I live?", SCOPE, top_k=1, period=before)
    assert [hit.memory for hit in hits] == ["User lives in Hangzhou."]  # held the day before

    # No memory tells of the event: the read is today's.
    graduated = time_in("Where did I live after I graduated?", asked)
    hits = await backend.search("Where did I live?", SCOPE, top_k=5, period=graduated)
    assert [hit.memory for hit in hits] == ["User moved to Beijing."]

    note = await _turn(moved, "Where did I live before I moved?", "2024-06-01T10:00:00+00:00")
    assert "User lives in Hangzhou." in note


async def test_the_hosted_platform_reads_by_time_alike(platform: FakePlatform) -> None:
    # The platform keeps its own dates: the package reads said_at from the metadata.
    platform.records += [
        Record(
            id="old",
            memory="User lives in Hangzhou",
            user_id="alice",
            metadata={
                "said_at": "2024-01-05T10:00:00+00:00",
                "superseded_by": "new",
                "valid_until": "2024-03-10T10:00:00+00:00",
            },
        ),
        Record(
            id="new",
            memory="User lives in Beijing now",
            user_id="alice",
            metadata={"said_at": "2024-03-10T10:00:00+00:00"},
        ),
    ]
    client = hosted_client(platform)
    try:
        backend = Mem0Backend(client)
        scope = Scope("alice")

        async def found(**kwargs: Any) -> list[str | None]:
            hits = await backend.search("User lives", scope, top_k=1, **kwargs)
            return [hit.id for hit in hits]

        assert await found() == ["new"]
        assert await found(as_of="2024-02-01") == ["old"]
        period = time_in("Where did I live in January 2024?", datetime(2024, 6, 1, tzinfo=UTC))
        assert await found(period=period) == ["old"]
    finally:
        await client.async_client.aclose()
