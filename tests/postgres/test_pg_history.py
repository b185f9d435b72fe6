"""mem0's history and the token totals in PostgreSQL, beside a pgvector store.

The server comes from ``AGENTSCOPE_MEM0_TEST_PG_DSN`` (or ``pgserver``; see
``tests/_pgfixture.py``); each test keeps to a collection of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _pgfixture import fresh_collection, postgres_dsn
from agentscope_mem0._mem0.clients import build_memory, close_memory
from agentscope_mem0._observe.usage import CallTokens, TokenMeter, read_postgres_usage
from agentscope_mem0._postgres.history import PostgresHistory, history_dsn
from agentscope_mem0.backends import pgvector_config
from agentscope_mem0.cli import _history_db
from agentscope_mem0.cli._records import MemoryRecord
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

DIMS = 64


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn() as dsn:
        yield dsn


def _client(config: dict[str, Any]) -> Any:
    return build_memory(
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=HashEmbedding(DIMS),
        mem0_config=config,
    )


async def test_two_clients_on_one_database_read_one_history(pg_dsn: str, tmp_path: Path) -> None:
    config = pgvector_config(pg_dsn, dims=DIMS, collection=fresh_collection("h"))
    first, second = _client(config), _client(config)  # two replicas, one database
    try:
        assert isinstance(first.db, PostgresHistory)
        added = await first.add("I live in Paris", user_id="alice", infer=False)
        memory_id = added["results"][0]["id"]
        await first.update(memory_id, "I live in Lyon")
        # The other client, which wrote nothing, reads the whole change log.
        entries = await second.history(memory_id)
        assert [(e["event"], e["old_memory"], e["new_memory"]) for e in entries] == [
            ("ADD", None, "I live in Paris"),
            ("UPDATE", "I live in Paris", "I live in Lyon"),
        ]
        # mem0 opened no SQLite history on disk: not in the data folder, not in ~/.mem0.
        data = Path(os.environ["AGENTSCOPE_MEM0_DIR"])
        assert not any(data.rglob("history.db"))
        assert first.config.history_db_path == ":memory:"
    finally:
        close_memory(first)
        close_memory(second)


async def test_reset_empties_this_collection_only_and_keeps_the_history_in_postgres(
    pg_dsn: str,
) -> None:
    mine = pgvector_config(pg_dsn, dims=DIMS, collection=fresh_collection("h"))
    other = pgvector_config(pg_dsn, dims=DIMS, collection=fresh_collection("h"))
    client, neighbour = _client(mine), _client(other)
    try:
        kept = (await neighbour.add("I like tea", user_id="bob", infer=False))["results"][0]["id"]
        gone = (await client.add("I like coffee", user_id="bob", infer=False))["results"][0]["id"]
        await client.reset()
        assert isinstance(client.db, PostgresHistory)  # mem0's reset put SQLite back; not kept
        assert await client.history(gone) == []
        assert [e["event"] for e in await neighbour.history(kept)] == ["ADD"]
        again = (await client.add("I like juice", user_id="bob", infer=False))["results"][0]["id"]
        assert [e["event"] for e in await neighbour.history(again)] == []  # other collection
        assert [e["event"] for e in await client.history(again)] == ["ADD"]
    finally:
        close_memory(client)
        close_memory(neighbour)


def test_kept_messages_are_the_last_ten_of_the_scope_oldest_first(pg_dsn: str) -> None:
    history = PostgresHistory(pg_dsn, collection=fresh_collection("h"))
    try:
        for n in range(12):
            history.save_messages([{"role": "user", "content": f"m{n}"}], "user_id=alice")
        history.save_messages([{"role": "user", "content": "other"}], "user_id=bob")
        last = history.get_last_messages("user_id=alice", limit=10)
        assert [m["content"] for m in last] == [f"m{n}" for n in range(2, 12)]
        assert history.session_scopes() and sorted(history.session_scopes()) == [
            "user_id=alice",
            "user_id=bob",
        ]
        # what `forget --all` does for one user
        assert _history_db.purge_messages(_Holder(history), {"user_id": "alice"}) == 10
        assert history.session_scopes() == ["user_id=bob"]
    finally:
        history.close()


def test_forget_and_import_edit_the_postgres_history(pg_dsn: str) -> None:
    history = PostgresHistory(pg_dsn, collection=fresh_collection("h"))
    holder = _Holder(history)
    try:
        history.add_history("m1", None, "I live in Paris", "ADD")
        records = [_record("m1", "I live in Paris"), _record("m2", "I like tea")]
        _history_db.add_missing_history(holder, records)
        assert [e["new_memory"] for e in history.get_history("m1")] == ["I live in Paris"]
        (entry,) = history.get_history("m2")
        assert (entry["event"], entry["created_at"]) == ("ADD", "2026-01-02T03:04:05+00:00")
        assert _history_db.purge_history(holder, ["m1", "m2", "m3"]) == 2
        assert history.get_history("m1") == history.get_history("m2") == []
    finally:
        history.close()


def test_a_connection_the_server_dropped_is_reopened_once(pg_dsn: str) -> None:
    import psycopg

    history = PostgresHistory(pg_dsn, collection=fresh_collection("h"))
    try:
        history.add_history("m1", None, "I live in Paris", "ADD")
        pid = history.tables.run(lambda conn: conn.info.backend_pid)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:  # a restart, a failover
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        history.add_history("m1", "I live in Paris", "I live in Lyon", "UPDATE")
        assert [e["event"] for e in history.get_history("m1")] == ["ADD", "UPDATE"]
        assert history.tables.run(lambda conn: conn.info.backend_pid) != pid
    finally:
        history.close()


def test_the_history_goes_to_postgres_only_for_pgvector_without_a_history_path(
    tmp_path: Path,
) -> None:
    from mem0.configs.base import MemoryConfig

    dsn = "postgresql://u:p@db:5432/mem0"
    pg = pgvector_config(dsn, dims=DIMS)
    assert history_dsn(MemoryConfig(**pg)) == dsn
    local = pgvector_config(dsn, dims=DIMS, history_db_path=str(tmp_path / "h.db"))
    assert history_dsn(MemoryConfig(**local)) is None  # a file named: SQLite, as before
    qdrant = MemoryConfig(vector_store={"provider": "qdrant", "config": {"path": str(tmp_path)}})
    assert history_dsn(qdrant) is None


def test_two_meters_on_one_database_add_up(pg_dsn: str) -> None:
    collection = fresh_collection("u")
    meters = [TokenMeter(postgres=(pg_dsn, collection)) for _ in range(2)]
    try:
        for meter in meters:
            meter.add("extraction", CallTokens(100, 10, estimated=False), writes=1)
        meters[1].add("judge", CallTokens(7, 3, estimated=True))
    finally:
        for meter in meters:
            meter.close()
    kept = read_postgres_usage(pg_dsn, collection)
    assert kept is not None
    assert (kept["tokens_in_extraction"], kept["tokens_writes"]) == (200, 2)
    assert (kept["tokens_in_judge"], kept["tokens_estimated_calls"]) == (7, 1)
    assert kept["tokens_in_per_write"] == 103.5
    assert read_postgres_usage(pg_dsn, fresh_collection("u")) is None


def test_a_meter_on_postgres_does_no_io_on_the_callers_thread(pg_dsn: str) -> None:
    collection = fresh_collection("u")
    meter = TokenMeter(postgres=(pg_dsn, collection))
    store = meter._store
    assert store is not None
    callers: list[str] = []
    real_run = store._tables.run  # type: ignore[attr-defined]

    def run(work: Any) -> Any:
        callers.append(threading.current_thread().name)
        return real_run(work)

    store._tables.run = run  # type: ignore[attr-defined]
    try:
        for _ in range(20):  # as the event loop's thread does after each write
            meter.add("extraction", CallTokens(10, 1, estimated=False), writes=1)
    finally:
        meter.close()
    assert callers and set(callers) <= {"agentscope-mem0-token-totals", "MainThread"}
    assert "MainThread" not in callers[:-1]  # only close() writes what was left, if anything
    kept = read_postgres_usage(pg_dsn, collection)
    assert kept is not None and (kept["tokens_writes"], kept["tokens_in_extraction"]) == (20, 200)


def test_totals_a_server_refused_are_added_when_it_answers_again(pg_dsn: str) -> None:
    collection = fresh_collection("u")
    meter = TokenMeter(postgres=(pg_dsn, collection))
    store = meter._store
    assert store is not None
    real_run = store._tables.run  # type: ignore[attr-defined]
    refused = threading.Event()

    def run(work: Any) -> Any:
        if not refused.is_set():
            refused.set()
            raise OSError("server away")
        return real_run(work)

    store._tables.run = run  # type: ignore[attr-defined]
    try:
        meter.add("extraction", CallTokens(10, 1, estimated=False), writes=1)
        assert refused.wait(30)  # the totals' thread met the refusal
        meter.add("extraction", CallTokens(10, 1, estimated=False), writes=1)
    finally:
        meter.close()
    kept = read_postgres_usage(pg_dsn, collection)
    assert kept is not None and kept["tokens_writes"] == 2  # nothing lost in between


class _Holder:
    """A client as the command line's history functions see it: its ``db``."""

    def __init__(self, db: PostgresHistory) -> None:
        self.db = db


def _record(memory_id: str, text: str) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        text=text,
        user_id="alice",
        created_at="2026-01-02T03:04:05+00:00",
        updated_at="2026-01-02T03:04:05+00:00",
    )
