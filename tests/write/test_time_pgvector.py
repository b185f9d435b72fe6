"""Supersession on PostgreSQL/pgvector: the timeline is written into the row's payload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from _pgfixture import fresh_collection, postgres_dsn
from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0.backends import pgvector_config, prepare_pgvector
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import note_text

DIMS = 128


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn() as dsn:
        yield dsn


def _payloads(dsn: str, table: str) -> dict[str, dict[str, Any]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT id, payload FROM "{table}"').fetchall()
    return {row[1]["data"]: {"id": str(row[0]), **row[1]} for row in rows}


def _middleware_on_pgvector(
    pg_dsn: str, tmp_path: Path, **options: Any
) -> tuple[str, Mem0Middleware]:
    """A fresh pgvector table and a middleware for alice on it: (table, middleware)."""
    table = fresh_collection()
    config = pgvector_config(
        pg_dsn, dims=DIMS, collection=table, history_db_path=str(tmp_path / "history.db")
    )
    prepare_pgvector(config)
    mw = Mem0Middleware(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(DIMS),
        mem0_config=config,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(search_timeout=30, **options),
    )
    return table, mw


async def test_a_change_supersedes_on_pgvector(pg_dsn: str, tmp_path: Path) -> None:
    table, mw = _middleware_on_pgvector(pg_dsn, tmp_path)
    async with mw:
        asker = ScriptedChatModel("Ok.")
        for text, when, model in (
            ("I live in Hangzhou.", "2024-01-05T10:00:00+00:00", ScriptedChatModel("Ok.")),
            ("I moved to Beijing.", "2024-03-10T10:00:00+00:00", ScriptedChatModel("Ok.")),
            ("Where do I live?", "2024-04-01T10:00:00+00:00", asker),
        ):
            bot = Agent(name="helper", system_prompt="x", model=model, middlewares=[mw])
            await bot.reply(UserMsg(name="user", content=text, created_at=when))
            await mw.flush()
        note = note_text(asker.calls[0])
        assert "Beijing" in note and "Hangzhou" not in note

        rows = _payloads(pg_dsn, table)
        old, new = rows["User lives in Hangzhou."], rows["User moved to Beijing."]
        assert old["superseded_by"] == new["id"]
        assert old["valid_until"].startswith("2024-03-10")
        assert old["created_at"].startswith("2024-01-05")  # text, vector and dates untouched
        assert new["supersedes"] == [old["id"]]

        assert await mw.client_state.backend.delete(new["id"])
        assert not _payloads(pg_dsn, table)["User lives in Hangzhou."].get("superseded_by")
        hits = await mw.client_state.backend.get_all(Scope("alice", "helper"), limit=10)
        assert [h.memory for h in hits] == ["User lives in Hangzhou."]


@pytest.mark.parametrize("judge", [True, False], ids=["judge", "no-judge"])
async def test_a_repeat_is_marked_on_pgvector(pg_dsn: str, tmp_path: Path, judge: bool) -> None:
    """One fact said twice in other words: one current row, the other marked in its
    payload; the note shows the fact once; forgetting the kept one forgets it too."""
    table, mw = _middleware_on_pgvector(pg_dsn, tmp_path, judge=judge)
    async with mw:
        asker = ScriptedChatModel("Ok.")
        for text, model in (
            ("I want my charts in dark mode.", ScriptedChatModel("Ok.")),
            ("I want dark mode for my charts.", ScriptedChatModel("Ok.")),
            ("How should my charts look?", asker),
        ):
            bot = Agent(name="helper", system_prompt="x", model=model, middlewares=[mw])
            await bot.reply(UserMsg(name="user", content=text))
            await mw.flush()
        note = note_text(asker.calls[0])
        assert note.count("dark mode") == 1, note

        rows = _payloads(pg_dsn, table)
        charts = {text: row for text, row in rows.items() if "dark mode" in text}
        assert len(charts) == 2, rows
        (repeat,) = [row for row in charts.values() if row.get("duplicate_of")]
        (kept,) = [row for row in charts.values() if not row.get("duplicate_of")]
        assert repeat["duplicate_of"] == kept["id"] and repeat["valid_until"]
        assert kept["duplicates"] == [repeat["id"]]
        assert kept["created_at"] < repeat["created_at"]  # the older one is kept

        done = await mw.client_state.backend.forget(kept["id"])
        assert done.current_again == () and [h.id for h in done.repeats] == [repeat["id"]]
        assert not any("dark mode" in text for text in _payloads(pg_dsn, table))
        hits = await mw.client_state.backend.get_all(Scope("alice", "helper"), limit=10)
        assert not any("dark mode" in h.memory for h in hits)
