"""The outbox tables: queueing, batching, claims, leases, failed rows.

The contract's tests run on both fronts (the ``box`` fixture): SQLite, and
PostgreSQL when ``AGENTSCOPE_MEM0_TEST_PG_DSN`` names a server (each test on
a table of its own). What only one front does is tested on that front here
and in ``test_outbox_postgres.py``.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from _pgfixture import DSN_ENV, fresh_collection
from agentscope_mem0 import InvalidStateError, Outbox
from agentscope_mem0._write.outbox import OUTBOX_FILENAME, BaseOutbox, new_owner_id, owner_is_dead


def _msgs(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]


def _insert(box: BaseOutbox, owner: str, key: str, user: str = "u", agent: str | None = "a") -> int:
    return box.insert(
        key=key, user_id=user, agent_id=agent, messages=_msgs(key), owner=owner, lease=30
    )


def dead_owner() -> str:
    """An owner id on this host whose process has ended (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host = new_owner_id().split(":")[0]
    return f"{host}:{child.pid}:deadbeef0000"


def postgres_outbox() -> BaseOutbox:
    """An outbox on the test server's PostgreSQL, in a table no other test uses."""
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        pytest.skip(f"the PostgreSQL outbox needs a server: set {DSN_ENV}")
    pytest.importorskip("psycopg", reason="pip install 'agentscope-mem0[pgvector]'")
    from agentscope_mem0._write.outbox_postgres import PostgresOutbox

    return PostgresOutbox(dsn, table=fresh_collection("outbox"))


@pytest.fixture(params=["sqlite", "postgres"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseOutbox]:
    """The outbox, on each front (a PostgreSQL table is dropped afterwards)."""
    outbox = Outbox.in_folder(tmp_path) if request.param == "sqlite" else postgres_outbox()
    yield outbox
    outbox.close()
    table = getattr(outbox, "table", None)
    if table is not None:
        import psycopg

        with psycopg.connect(os.environ[DSN_ENV], autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_version")


@pytest.fixture
def sqlite_box(tmp_path: Path) -> Iterator[Outbox]:
    outbox = Outbox.in_folder(tmp_path)
    yield outbox
    outbox.close()


def test_file_is_wal_and_schema_is_versioned(tmp_path: Path, sqlite_box: Outbox) -> None:
    box = sqlite_box
    assert box.durable and box.path == tmp_path / OUTBOX_FILENAME
    conn = sqlite3.connect(box.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3  # one entry per migration
    conn.close()
    Outbox.in_folder(tmp_path).close()  # reopening migrates nothing twice


def test_in_memory_outbox_is_not_durable() -> None:
    box = Outbox(None)
    owner = new_owner_id()
    _insert(box, owner, "k1")
    assert not box.durable
    assert box.counts() == {"pending": 1, "failed": 0}
    box.close()


def test_next_batch_is_oldest_first_per_scope_and_bounded(box: BaseOutbox) -> None:
    me = new_owner_id()
    for i in range(5):
        _insert(box, me, f"a{i}")
    _insert(box, me, "other", user="v")
    _insert(box, me, "no-agent", agent=None)
    batch = box.next_batch(owner=me, user_id="u", agent_id="a", limit=3)
    assert [r.key for r in batch] == ["a0", "a1", "a2"]
    assert batch[0].messages == _msgs("a0")
    assert [r.key for r in box.next_batch(owner=me, user_id="u", agent_id=None, limit=9)] == [
        "no-agent"
    ]
    if not box.shared:  # a shared outbox hands a scope's rows to whoever holds the scope
        assert box.next_batch(owner="someone-else", user_id="u", agent_id="a", limit=3) == []


def test_a_sent_batch_comes_back_as_the_same_group(box: BaseOutbox) -> None:
    me = new_owner_id()
    ids = [_insert(box, me, f"k{i}") for i in range(4)]
    assert box.start_attempt(ids[:2], owner=me, batch_key="B")
    again = box.next_batch(owner=me, user_id="u", agent_id="a", limit=10)
    assert [r.key for r in again] == ["k0", "k1"]
    assert {r.batch_key for r in again} == {"B"} and {r.attempts for r in again} == {1}
    box.complete(ids[:2])
    rest = box.next_batch(owner=me, user_id="u", agent_id="a", limit=10)
    assert [r.key for r in rest] == ["k2", "k3"]


def test_a_batch_keeps_to_the_day_its_first_exchange_was_said(box: BaseOutbox) -> None:
    me = new_owner_id()
    days = ["2024-01-01T08:00", "2024-01-01T23:00", "2024-01-02T08:00", "2024-01-02T09:00"]
    for i, day in enumerate(days):
        said = datetime.fromisoformat(day + "+00:00")
        box.insert(key=f"k{i}", user_id="u", agent_id="a", messages=[], owner=me, lease=30,
                   said_at=said)  # fmt: skip
    first = box.next_batch(owner=me, user_id="u", agent_id="a", limit=10)
    assert [r.key for r in first] == ["k0", "k1"]
    assert first[1].said_at == datetime(2024, 1, 1, 23, tzinfo=UTC)
    box.complete([r.id for r in first])
    assert [r.key for r in box.next_batch(owner=me, user_id="u", agent_id="a", limit=10)] == [
        "k2",
        "k3",
    ]


def test_unsent_rows_stop_at_a_sent_one(box: BaseOutbox) -> None:
    me = new_owner_id()
    ids = [_insert(box, me, f"k{i}") for i in range(3)]
    box.start_attempt([ids[2]], owner=me, batch_key="k2")
    assert [r.key for r in box.next_batch(owner=me, user_id="u", agent_id="a", limit=10)] == [
        "k0",
        "k1",
    ]


def test_failed_rows_keep_their_reason_and_can_be_requeued(box: BaseOutbox) -> None:
    me = new_owner_id()
    ids = [_insert(box, me, f"k{i}") for i in range(2)]
    box.start_attempt([ids[0]], owner=me, batch_key="k0")
    box.fail([ids[0]], "ValueError: bad request")
    assert box.counts() == {"pending": 1, "failed": 1}
    (failed,) = box.failed()
    assert failed.error == "ValueError: bad request" and failed.claimed_by is None
    assert box.next_batch(owner=me, user_id="u", agent_id="a", limit=10)[0].key == "k1"
    other = new_owner_id()
    (requeued,) = box.requeue_failed(owner=other, lease=30)
    assert requeued.key == "k0" and requeued.attempts == 0
    assert requeued.batch_key == "k0"  # kept: it may have reached mem0
    assert box.counts() == {"pending": 2, "failed": 0}


def test_start_attempt_refuses_rows_taken_by_another_writer(box: BaseOutbox) -> None:
    me, thief = new_owner_id(), new_owner_id()
    row_id = box.insert(key="k", user_id="u", agent_id="a", messages=[], owner=me, lease=-1)
    assert [r.key for r in box.claim_orphans(owner=thief, lease=30)] == ["k"]  # lease ran out
    assert not box.start_attempt([row_id], owner=me, batch_key="k")
    assert box.start_attempt([row_id], owner=thief, batch_key="k")


def test_a_sent_batch_is_taken_over_whole_when_one_lease_lapses(box: BaseOutbox) -> None:
    stale, me = "elsewhere:1:x", new_owner_id()
    leases = [-1, 60, 60, 60]
    ids = [
        box.insert(key=f"k{i}", user_id="u", agent_id="a", messages=[], owner=stale, lease=lease)
        for i, lease in enumerate(leases)
    ]
    assert box.start_attempt(ids[:3], owner=stale, batch_key="B")
    # k1 and k2 were sent with k0 under one key; k3 was not sent and keeps its lease.
    assert [r.key for r in box.claim_orphans(owner=me, lease=30)] == ["k0", "k1", "k2"]
    assert [r.key for r in box.held(stale)] == ["k3"]
    assert box.claim_orphans(owner=new_owner_id(), lease=30, live_here={me}) == []


def test_rows_of_live_owners_are_not_orphans(sqlite_box: Outbox) -> None:
    box = sqlite_box
    me, other = new_owner_id(), new_owner_id()
    _insert(box, other, "k")
    assert box.claim_orphans(owner=me, lease=30, live_here={other}) == []
    # Same process, no longer open: its rows are free at once.
    assert [r.key for r in box.claim_orphans(owner=me, lease=30, live_here=set())] == ["k"]


def test_rows_of_a_dead_process_are_claimed_at_once(sqlite_box: Outbox) -> None:
    box = sqlite_box
    dead = dead_owner()
    assert owner_is_dead(dead)
    assert not owner_is_dead(f"elsewhere:{1}:x")  # another host: only the lease decides
    _insert(box, dead, "k")
    me = new_owner_id()
    assert [r.key for r in box.claim_orphans(owner=me, lease=30)] == ["k"]
    assert [r.key for r in box.held(me)] == ["k"]
    assert box.release(owner=me) == 1
    assert box.held(me) == []


def test_claiming_orphans_renews_the_claimers_own_leases(box: BaseOutbox) -> None:
    me, other = new_owner_id(), "elsewhere:1:x"
    box.insert(key="k", user_id="u", agent_id="a", messages=[], owner=me, lease=-1)
    assert box.claim_orphans(owner=me, lease=30) == []  # its own row is no orphan
    # Renewed: another writer finds a live lease (it cannot tell whether "me" lives).
    assert box.claim_orphans(owner=other, lease=30, live_here={me}) == []
    assert [r.key for r in box.held(me)] == ["k"]


def test_claims_are_atomic_across_connections(tmp_path: Path) -> None:
    seed = Outbox.in_folder(tmp_path)
    dead = dead_owner()
    for i in range(300):
        _insert(seed, dead, f"k{i}")
    seed.close()
    owners = [new_owner_id() for _ in range(6)]
    results: dict[str, list[str]] = {}
    barrier = threading.Barrier(len(owners))

    def claim(owner: str) -> None:
        box = Outbox.in_folder(tmp_path)  # its own connection, as another process has
        barrier.wait()
        got: list[str] = []
        for _ in range(5):
            got += [r.key for r in box.claim_orphans(owner=owner, lease=30, live_here=owners)]
            time.sleep(0.001)
        results[owner] = got
        box.close()

    threads = [threading.Thread(target=claim, args=(o,)) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [key for keys in results.values() for key in keys]
    assert sorted(claimed) == sorted(f"k{i}" for i in range(300))  # each exactly once


def test_keep_holds_rows_in_flight_on_release(box: BaseOutbox) -> None:
    me = new_owner_id()
    ids = [_insert(box, me, f"k{i}") for i in range(3)]
    assert len(ids) == 3
    assert box.release(owner=me, keep=["k1"]) == 2
    assert [r.key for r in box.held(me)] == ["k1"]


def test_every_call_runs_on_the_thread_that_owns_the_connection(sqlite_box: Outbox) -> None:
    box = sqlite_box
    me = new_owner_id()
    callers: set[str] = set()

    def insert(i: int) -> None:
        _insert(box, me, f"k{i}")
        callers.add(threading.current_thread().name)

    threads = [threading.Thread(target=insert, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(callers) == 4 and len(box.held(me)) == 4
    # SQLite's own check: the connection refuses any other thread.
    with pytest.raises(sqlite3.ProgrammingError, match="same thread"):
        box._conn.execute("SELECT 1")
    assert box.thread.call(threading.current_thread).name == "agentscope-mem0-outbox"


def test_a_closed_outbox_says_so(box: BaseOutbox) -> None:
    with box:
        _insert(box, new_owner_id(), "k")
    with pytest.raises(InvalidStateError, match=f"the outbox {re.escape(box.where)} is closed"):
        box.counts()
    box.close()  # idempotent


# -- where the outbox lives without an outbox_dir --------------------------------


def _client_with(config: dict[str, Any]) -> Any:
    from types import SimpleNamespace

    from mem0.configs.base import MemoryConfig

    return SimpleNamespace(config=MemoryConfig(**config))


def test_the_outbox_lives_with_a_store_that_keeps_its_files_together(tmp_path: Path) -> None:
    from agentscope_mem0._write.outbox import default_outbox_dir

    client = _client_with(
        {
            "vector_store": {"provider": "qdrant", "config": {"path": str(tmp_path / "q")}},
            "history_db_path": str(tmp_path / "history.db"),
        }
    )
    assert default_outbox_dir(client) == tmp_path.resolve()


def test_a_server_store_gets_its_own_outbox_folder_by_identity(tmp_path: Path) -> None:
    from agentscope_mem0._write.outbox import default_outbox_dir

    def server(collection: str, password: str) -> Any:
        return _client_with(
            {
                "vector_store": {
                    "provider": "pgvector",
                    "config": {
                        "host": "db",
                        "port": 5432,
                        "dbname": "mem",
                        "user": "u",
                        "password": password,
                        "collection_name": collection,
                    },
                },
                "history_db_path": str(tmp_path / "history.db"),
            }
        )

    first = default_outbox_dir(server("a", "secret"))
    assert first is not None and first.parent == tmp_path.resolve() / "agentscope-mem0-outbox"
    assert first.name.startswith("pgvector-")
    assert default_outbox_dir(server("a", "rotated")) == first  # secrets are not identity
    assert default_outbox_dir(server("b", "secret")) != first  # another store, another outbox


def test_a_client_whose_store_cannot_be_told_keeps_writes_in_memory() -> None:
    from agentscope_mem0._write.outbox import default_outbox_dir

    assert default_outbox_dir(object()) is None


class _NeverStores:
    """A mem0 client whose ``add`` never answers: the writes stay queued."""

    async def add(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()


async def test_writes_recorded_while_an_insert_runs_share_the_next_one(tmp_path: Path) -> None:
    """Many replies ending together: the first write goes into the file at once
    (no turn of the loop waited for), and all that come while it is inserted
    share the next insert (one sync to disk)."""
    from agentscope_mem0 import Mem0Backend, Scope, WriteQueue

    queue = WriteQueue(Mem0Backend(_NeverStores()), outbox_dir=tmp_path)
    inserts: list[int] = []
    add = queue.outbox.add

    def counted(rows: list[Any], *args: Any) -> list[int]:
        inserts.append(len(rows))
        return add(rows, *args)

    queue.outbox.add = counted  # type: ignore[method-assign]
    users = [f"u{i}" for i in range(20)]
    try:
        keys = await asyncio.gather(*(queue.submit(Scope(u), _msgs(u)) for u in users))
        assert all(keys)
        assert inserts == [1, 19]
        stored = queue.outbox.read("SELECT user_id FROM writes ORDER BY id")
        assert [user for (user,) in stored] == users
        # Once the inserts are over, the next write again goes in at once.
        assert await queue.submit(Scope("u0"), _msgs("again"))
        more = await asyncio.gather(*(queue.submit(Scope("u1"), _msgs(f"m{i}")) for i in (1, 2)))
        assert all(more)
        assert inserts[2:] == [1, 1, 1]
    finally:
        await queue.aclose(timeout=0)
