"""What the PostgreSQL outbox adds to the contract: liveness by connection, one
deliverer per scope, migrations under a lock, an unreachable server, its URL.

The contract's own tests run on this front in ``test_outbox.py``. These need
``AGENTSCOPE_MEM0_TEST_PG_DSN`` (each test on tables of its own).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mem0 import AsyncMemory

from _pgfixture import fresh_collection
from agentscope_mem0 import (
    ConfigurationError,
    Mem0Backend,
    Mem0Middleware,
    OutboxWriteError,
    RetryPolicy,
    Scope,
    WriteQueue,
)
from agentscope_mem0._write.outbox import OutboxRow, new_owner_id
from fakes import AddRecorder, said

psycopg = pytest.importorskip("psycopg", reason="pip install 'agentscope-mem0[pgvector]'")

from agentscope_mem0._write.outbox_postgres import (  # noqa: E402  (after the skip)
    MIGRATIONS,
    RETRY_AFTER,
    PostgresOutbox,
    pgvector_outbox,
)

SCOPE = Scope("alice", "assistant")
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05)


@pytest.fixture
def boxes(dsn: str, table: str) -> Iterator[list[PostgresOutbox]]:
    """Outboxes the test opens (each its own connection, as replicas have); closed after."""
    opened: list[PostgresOutbox] = []
    yield opened
    for box in opened:
        box.close()


def _open(boxes: list[PostgresOutbox], dsn: str, table: str) -> PostgresOutbox:
    box = PostgresOutbox(dsn, table=table)
    boxes.append(box)
    return box


def _insert(box: PostgresOutbox, owner: str, key: str, *, lease: float = 300) -> int:
    messages = [{"role": "user", "content": key}]
    return box.insert(
        key=key, user_id="u", agent_id="a", messages=messages, owner=owner, lease=lease
    )


def _terminate(dsn: str, box: PostgresOutbox) -> None:
    """End ``box``'s connection from the server's side, as when its pod is lost."""
    ((pid,),) = box.read("SELECT pg_backend_pid()")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_writer_whose_connection_is_gone_frees_its_rows_at_once(
    dsn: str, table: str, boxes: list[PostgresOutbox]
) -> None:
    lost, other = _open(boxes, dsn, table), _open(boxes, dsn, table)
    owner, me = new_owner_id(), new_owner_id()
    _insert(lost, owner, "k0")
    _insert(lost, owner, "k1")
    assert other.claim_orphans(owner=me, lease=30) == []  # alive, lease of 300 s
    _terminate(dsn, lost)
    time.sleep(0.2)  # the server ends the backend (and its locks) asynchronously
    assert [r.key for r in other.claim_orphans(owner=me, lease=30)] == ["k0", "k1"]


def test_one_writer_delivers_a_scope_in_the_order_writes_were_acknowledged(
    dsn: str, table: str, boxes: list[PostgresOutbox]
) -> None:
    a, b = _open(boxes, dsn, table), _open(boxes, dsn, table)
    owner_a, owner_b = new_owner_id(), new_owner_id()
    _insert(a, owner_a, "k0")
    _insert(b, owner_b, "k1")
    _insert(a, owner_a, "k2")
    batch = a.next_batch(owner=owner_a, user_id="u", agent_id="a", limit=10)
    assert [r.key for r in batch] == ["k0", "k1", "k2"]  # b's row too, in id order
    assert b.next_batch(owner=owner_b, user_id="u", agent_id="a", limit=10) == []  # a holds it
    assert b.settled(["k1"]) == {}  # still pending
    a.complete([r.id for r in batch])
    assert b.settled(["k1"]) == {"k1": True}  # b learns a stored it
    assert a.next_batch(owner=owner_a, user_id="u", agent_id="a", limit=10) == []
    _insert(b, owner_b, "k3")
    # Nothing left, but a keeps the scope until it lets go (its judgement done).
    assert b.next_batch(owner=owner_b, user_id="u", agent_id="a", limit=10) == []
    a.let_go("u", "a")
    assert [r.key for r in b.next_batch(owner=owner_b, user_id="u", agent_id="a", limit=10)] == [
        "k3"
    ]
    (k3,) = b.held(owner_b)
    b.fail([k3.id], "ValueError: no")
    assert a.settled(["k3"]) == {"k3": False}


def test_claims_are_atomic_across_connections(
    dsn: str, table: str, boxes: list[PostgresOutbox]
) -> None:
    seed = _open(boxes, dsn, table)
    seed.add([OutboxRow(f"k{i}", "u", "a", [], datetime.now(UTC)) for i in range(300)])
    owners = [new_owner_id() for _ in range(6)]
    mine = {owner: _open(boxes, dsn, table) for owner in owners}
    results: dict[str, list[str]] = {}
    barrier = threading.Barrier(len(owners))

    def claim(owner: str) -> None:
        barrier.wait()
        got: list[str] = []
        for _ in range(5):
            got += [r.key for r in mine[owner].claim_orphans(owner=owner, lease=30)]
        results[owner] = got

    threads = [threading.Thread(target=claim, args=(o,)) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [key for keys in results.values() for key in keys]
    assert sorted(claimed) == sorted(f"k{i}" for i in range(300))  # each exactly once


def test_replicas_opening_a_new_table_at_once_create_it_once(dsn: str, table: str) -> None:
    opened: list[PostgresOutbox] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        barrier.wait()
        try:
            opened.append(PostgresOutbox(dsn, table=table))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == [] and len(opened) == 6
        assert opened[0].read(f"SELECT version FROM {table}_version") == [(len(MIGRATIONS),)]
    finally:
        for box in opened:
            box.close()


def test_an_unreachable_server_fails_fast_and_the_outbox_reconnects(
    dsn: str, table: str, boxes: list[PostgresOutbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    box, other = _open(boxes, dsn, table), _open(boxes, dsn, table)
    owner = new_owner_id()
    _insert(box, owner, "k0")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    _terminate(dsn, box)
    monkeypatch.setattr(psycopg, "connect", refused)
    started = time.monotonic()
    for _ in range(3):
        with pytest.raises(OutboxWriteError, match=r"unreachable|Is PostgreSQL reachable"):
            box.counts()
    assert time.monotonic() - started < 2.0
    monkeypatch.undo()
    time.sleep(RETRY_AFTER)
    assert box.counts() == {"pending": 1, "failed": 0}
    # Its owner lock went with the old connection: the row is an orphan now.
    assert [r.key for r in other.claim_orphans(owner=new_owner_id(), lease=30)] == ["k0"]


def test_the_outbox_url_is_checked_and_psycopg_named(monkeypatch: pytest.MonkeyPatch) -> None:
    parameters = Mem0Middleware.Parameters
    assert parameters(outbox="postgresql://u@db:5432/app").outbox == "postgresql://u@db:5432/app"
    with pytest.raises(ConfigurationError, match="not a PostgreSQL URL"):
        parameters(outbox="mysql://u@db/app")
    with pytest.raises(ConfigurationError, match="malformed"):
        parameters(outbox="postgresql://db:port/app")
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"agentscope-mem0\[pgvector\]"):
        parameters(outbox="postgresql://u@db:5432/app")


def test_a_pgvector_store_keeps_its_outbox_in_its_own_database() -> None:
    from agentscope_mem0 import build_mem0_config
    from agentscope_mem0.backends import pgvector_config
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    def place(dsn: str) -> tuple[str, str] | None:
        fields = pgvector_config(dsn, dims=8, collection="notes", history_db_path="/tmp/h.db")
        config = build_mem0_config(
            chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(8), mem0_config=fields
        )
        return pgvector_outbox(config)

    assert place("postgresql://u:pw@db:5432/app") == (
        "postgresql://u:pw@db:5432/app",
        "notes_outbox",
    )
    # A collection mem0 would quote (capitals) gets a table of ours, one per collection.
    from types import SimpleNamespace

    def of(collection: str) -> tuple[str, str] | None:
        store = {"connection_string": "postgresql://db/app", "collection_name": collection}
        return pgvector_outbox(SimpleNamespace(vector_store=SimpleNamespace(
            provider="pgvector", config=store)))  # fmt: skip

    quoted = of("MyFacts")
    assert quoted is not None and quoted[1].startswith("agentscope_mem0_outbox_")
    assert of("MyFacts") == quoted != of("MyNotes")
    url, _ = place("host=db port=5433 dbname=app user=u") or ("", "")
    assert psycopg.conninfo.conninfo_to_dict(url) == {
        "host": "db",
        "port": "5433",
        "dbname": "app",
        "user": "u",
    }


# -- the write queue on it ------------------------------------------------------------


async def stored(memory: AsyncMemory) -> Counter[str]:
    raw = await memory.get_all(filters=SCOPE.filters(), top_k=100)
    return Counter(item["memory"].split(" #")[0] for item in raw["results"])


async def test_two_replicas_store_a_scope_in_acknowledgement_order_one_at_a_time(
    memory: AsyncMemory, dsn: str, table: str
) -> None:
    client = AddRecorder(memory, delay=0.15)
    url = dsn
    a = WriteQueue(Mem0Backend(client), outbox_dir=url, outbox_table=table, retry=FAST)
    b = WriteQueue(Mem0Backend(client), outbox_dir=url, outbox_table=table, retry=FAST)
    texts = [f"I like fruit{i:02d}." for i in range(8)]
    for i, text in enumerate(texts):  # turns one after another, to alternating replicas
        await (a, b)[i % 2].submit(SCOPE, said(text))
        await asyncio.sleep(0.05)
    assert await a.flush(30) and await b.flush(30)
    assert client.texts == texts  # in the order acknowledged, whichever replica took them
    assert client.overlaps == 0  # never two deliveries of the scope at once
    assert await stored(memory) == Counter(f"User likes fruit{i:02d}." for i in range(8))
    assert a.outbox.counts() == {"pending": 0, "failed": 0}
    await a.aclose()
    await b.aclose()


async def test_writes_kept_in_memory_while_postgres_is_down_move_in_when_it_is_back(
    memory: AsyncMemory,
    dsn: str,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = AddRecorder(memory, delay=1.0)
    queue = WriteQueue(
        Mem0Backend(client), outbox_dir=dsn, outbox_table=table, retry=FAST, max_batch=1
    )
    box = queue.outbox
    assert isinstance(box, PostgresOutbox)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    _terminate(dsn, box)
    monkeypatch.setattr(psycopg, "connect", refused)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        keys = [await queue.submit(SCOPE, said(f"I like fruit{i:02d}.")) for i in range(3)]
        assert time.monotonic() - started < 2.0  # the replies went on
        assert all(keys) and queue.stats()["writes_in_memory_only"] == 3
        monkeypatch.undo()  # PostgreSQL is back while the first write is sent
        assert await queue.flush(30)
    assert any("moved 2 memory writes" in r.getMessage() for r in caplog.records)
    stats = queue.stats()
    assert stats["writes_in_memory_only"] == 0 and stats["writes_lost"] == 0
    assert await stored(memory) == Counter(f"User likes fruit{i:02d}." for i in range(3))
    assert client.texts == [f"I like fruit{i:02d}." for i in range(3)]  # none twice
    assert box.counts() == {"pending": 0, "failed": 0}
    await queue.aclose()


async def test_a_replica_flushing_stores_what_a_lost_replica_acknowledged(
    memory: AsyncMemory, dsn: str, table: str, tmp_path: Path
) -> None:
    stuck = AddRecorder(memory, delay=3600)  # its mem0 never answers
    lost = WriteQueue(Mem0Backend(stuck), outbox_dir=dsn, outbox_table=table, retry=FAST)
    for i in range(3):
        await lost.submit(SCOPE, said(f"I like fruit{i:02d}."))
    assert isinstance(lost.outbox, PostgresOutbox)
    _terminate(dsn, lost.outbox)  # the pod is gone, its connection with it
    await asyncio.sleep(0.2)
    fresh = WriteQueue(Mem0Backend(memory), outbox_dir=dsn, outbox_table=table, retry=FAST)
    assert await fresh.flush(30)
    assert fresh.stats()["writes_replayed"] == 3
    assert await stored(memory) == Counter(f"User likes fruit{i:02d}." for i in range(3))
    await fresh.aclose()
    await lost.aclose(0.1)


async def test_rows_taken_with_a_scope_from_another_writer_are_never_left_held(
    memory: AsyncMemory, dsn: str, table: str, boxes: list[PostgresOutbox]
) -> None:
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=dsn, outbox_table=table, retry=FAST)
    assert await queue.flush(10)  # started: what it held at start is behind it
    other = _open(boxes, dsn, table)
    other.insert(
        key="theirs",
        user_id=SCOPE.user_id,
        agent_id=SCOPE.agent_id,
        messages=said("I like fruit07."),
        owner=new_owner_id(),
        lease=300,
    )
    # This queue's connection takes the scope, and the row with it, but has
    # no write of its own waiting there (as when its worker stopped).
    box = queue.outbox
    taken = await box.thread.run(
        box.next_batch,
        owner=queue._owner,
        user_id=SCOPE.user_id,
        agent_id=SCOPE.agent_id,
        limit=8,
    )
    assert [row.key for row in taken] == ["theirs"]
    assert await queue.flush(10)
    assert await stored(memory) == Counter({"User likes fruit07.": 1})
    assert other.settled(["theirs"]) == {"theirs": True}
    await queue.aclose()


async def test_token_totals_stay_in_the_stores_folder_with_the_outbox_in_postgres(
    dsn: str, tmp_path: Path
) -> None:
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    from agentscope_mem0._observe.usage import read_usage
    from agentscope_mem0._write.outbox import default_outbox_dir
    from agentscope_mem0.backends import pgvector_config, prepare_pgvector
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    collection = fresh_collection()
    config = pgvector_config(
        dsn, dims=64, collection=collection, history_db_path=str(tmp_path / "history.db")
    )
    prepare_pgvector(config)
    mw = Mem0Middleware(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(64),
        mem0_config=config,
        mode="static_control",
    )
    async with mw:
        assert isinstance(mw.client_state.writer.outbox, PostgresOutbox)
        bot = Agent(
            name="helper", system_prompt="x", model=ScriptedChatModel("Ok."), middlewares=[mw]
        )
        await bot.reply(UserMsg(name="user", content="I live in Lyon."))
        assert await mw.flush(30)
        folder = default_outbox_dir(mw.client)
    assert folder is not None
    usage = read_usage(folder)
    assert usage is not None and usage["model_calls_extraction"] == 1, usage


async def test_a_write_that_failed_while_postgres_was_down_is_kept_failed_there_at_close(
    memory: AsyncMemory, dsn: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = AddRecorder(memory)
    client.down = True  # a pgvector store is down with its database
    retry = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.02)
    queue = WriteQueue(Mem0Backend(client), outbox_dir=dsn, outbox_table=table, retry=retry)
    box = queue.outbox
    assert isinstance(box, PostgresOutbox)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    _terminate(dsn, box)
    monkeypatch.setattr(psycopg, "connect", refused)
    await queue.submit(SCOPE, said("I like fruit09."))
    assert await queue.flush(10)  # failed for good: not pending
    assert queue.stats()["writes_failed"] == 1
    monkeypatch.undo()
    await asyncio.sleep(RETRY_AFTER)
    await queue.aclose()  # the database is back: the failed write goes there, still failed

    client.down = False
    again = WriteQueue(Mem0Backend(client), outbox_dir=dsn, outbox_table=table, retry=FAST)
    assert await again.retry_failed() == 1
    assert await again.flush(10)
    assert await stored(memory) == Counter({"User likes fruit09.": 1})
    await again.aclose()


async def test_writes_an_earlier_release_left_beside_a_pgvector_store_move_in(
    dsn: str, tmp_path: Path
) -> None:
    from agentscope_mem0 import Outbox, build_memory
    from agentscope_mem0._write.outbox import default_outbox_dir
    from agentscope_mem0.backends import pgvector_config, prepare_pgvector
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
    from fakes import UniqueFacts

    collection = fresh_collection()
    fields = pgvector_config(
        dsn, dims=64, collection=collection, history_db_path=str(tmp_path / "history.db")
    )
    prepare_pgvector(fields)
    memory = build_memory(
        chat_model=ScriptedChatModel(extractor=UniqueFacts()),
        embedding_model=HashEmbedding(64),
        mem0_config=fields,
    )
    folder = default_outbox_dir(memory)
    assert folder is not None
    # What release 0.3 left in its SQLite outbox: a write nobody holds, one failed.
    with Outbox.in_folder(folder) as earlier:
        now = datetime.now(UTC)
        earlier.add([OutboxRow("left", "alice", "assistant", said("I like fruit01."), now)])
        earlier.add(
            [OutboxRow("bad", "alice", "assistant", said("I like fruit02."), now, status="failed")]
        )
    queue = WriteQueue(Mem0Backend(memory), retry=FAST)
    assert isinstance(queue.outbox, PostgresOutbox)
    assert await queue.flush(30)
    assert await queue.retry_failed() == 1
    assert await queue.flush(30)
    assert await stored(memory) == Counter({"User likes fruit01.": 1, "User likes fruit02.": 1})
    await queue.aclose()
    with Outbox.in_folder(folder) as earlier:
        assert earlier.counts() == {"pending": 0, "failed": 0}


class SlowJudgement:
    """An AfterStore whose judgement of each batch takes ``seconds`` in the
    background, as the time judgement's model call does; ``active`` is shared by
    the replicas, so ``overlaps`` counts judgements of one scope at once."""

    def __init__(self, active: Counter[Scope], overlaps: list[Scope], seconds: float) -> None:
        self.active = active
        self.overlaps = overlaps
        self.seconds = seconds
        self.tasks: dict[Scope, asyncio.Task[None]] = {}

    def stored(self, scope: Scope, results: list[dict[str, Any]], said_at: datetime) -> None:
        earlier = self.tasks.get(scope)
        self.tasks[scope] = asyncio.ensure_future(self._judge(scope, earlier))

    async def _judge(self, scope: Scope, earlier: asyncio.Task[None] | None) -> None:
        if earlier is not None:
            await earlier
        if self.active[scope]:
            self.overlaps.append(scope)
        self.active[scope] += 1
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.active[scope] -= 1

    async def followed(self, scope: Scope) -> None:
        task = self.tasks.get(scope)
        if task is not None:
            await asyncio.wait({task})


async def test_one_users_judgements_never_run_on_two_replicas_at_once(
    memory: AsyncMemory, dsn: str, table: str
) -> None:
    active: Counter[Scope] = Counter()
    overlaps: list[Scope] = []
    queues = [
        WriteQueue(
            Mem0Backend(memory),
            outbox_dir=dsn,
            outbox_table=table,
            retry=FAST,
            after_store=SlowJudgement(active, overlaps, 0.4),
        )
        for _ in range(2)
    ]
    for i in range(6):  # one user's turns, to alternating replicas
        await queues[i % 2].submit(SCOPE, said(f"I like fruit{i:02d}."))
        await asyncio.sleep(0.1)
    for queue in queues:
        assert await queue.flush(30)
    for queue in queues:
        judgement = queue._after_store
        assert isinstance(judgement, SlowJudgement)
        for task in judgement.tasks.values():
            await task
    assert overlaps == []
    assert await stored(memory) == Counter(f"User likes fruit{i:02d}." for i in range(6))
    for queue in queues:
        await queue.aclose()


def test_rows_recorded_together_get_ids_in_their_order_and_a_repeat_none(
    boxes: list[PostgresOutbox], dsn: str, table: str
) -> None:
    # One statement records them all (a reply waits for it); the ids keep the
    # order they were acknowledged in, and a key recorded before is not recorded again.
    box = _open(boxes, dsn, table)
    owner = new_owner_id()
    now = datetime.now(UTC)
    (first,) = box.add([OutboxRow("k0", "u", "a", [], now)], owner, 300)
    rows = [
        OutboxRow(key, "u", "a", [{"role": "user", "content": key}], now)
        for key in ("k1", "k0", "k2")
    ]
    ids = box.add(rows, owner, 300)
    assert ids[1] == 0 and first < ids[0] < ids[2]
    stored = box.read(f"SELECT key, messages FROM {table} ORDER BY id")
    assert [key for key, _ in stored] == ["k0", "k1", "k2"]
    assert box.add([], owner, 300) == []
