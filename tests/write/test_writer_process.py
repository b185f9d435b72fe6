"""Replicas that only record their writes, and the writer process that stores them.

``WriteQueue(deliver=False)`` (``Parameters(deliver_writes=False)``) records a
write in the shared outbox and leaves it there; a queue running ``serve()``
(``factory.serve_writes()``) stores what every replica recorded. Needs
``AGENTSCOPE_MEM0_TEST_PG_DSN``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mem0 import AsyncMemory

from agentscope_mem0 import ConfigurationError, Mem0Backend, RetryPolicy, Scope, WriteQueue
from fakes import AddRecorder, said

psycopg = pytest.importorskip("psycopg", reason="pip install 'agentscope-mem0[pgvector]'")

from agentscope_mem0._write.outbox_postgres import PostgresOutbox  # noqa: E402

SCOPE = Scope("alice", "assistant")
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05)


@contextlib.asynccontextmanager
async def writer(client: Any, dsn: str, table: str) -> AsyncIterator[WriteQueue]:
    """A queue serving the outbox in the background, as the writer process does."""
    queue = WriteQueue(Mem0Backend(client), outbox_dir=dsn, outbox_table=table, retry=FAST)
    task = asyncio.create_task(queue.serve(poll=0.05))
    try:
        yield queue
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await queue.aclose(10)


async def until_empty(box: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while box.counts()["pending"]:
        assert time.monotonic() < deadline, box.counts()
        await asyncio.sleep(0.05)


async def test_a_replica_that_only_records_stores_nothing_and_the_writer_stores_in_order(
    memory: AsyncMemory, dsn: str, table: str
) -> None:
    client = AddRecorder(memory)
    replicas = [
        WriteQueue(Mem0Backend(client), outbox_dir=dsn, outbox_table=table, deliver=False)
        for _ in range(2)
    ]
    texts = [f"I like fruit{i:02d}." for i in range(6)]
    for i, text in enumerate(texts):  # turns to alternating replicas
        assert await replicas[i % 2].submit(SCOPE, said(text))
    for replica in replicas:
        assert replica.stats()["writes_handed_over"] == 3
        assert replica.stats()["writes_stored"] == 0 and replica.pending == 0
    assert not await replicas[0].flush(0.3)  # flush waits for the writer
    box = replicas[0].outbox
    assert box.counts() == {"pending": 6, "failed": 0}
    assert client.texts == []  # no replica delivers
    async with writer(client, dsn, table) as serving:
        assert await replicas[1].flush(30)
        assert box.counts() == {"pending": 0, "failed": 0}
        assert serving.stats()["writes_stored"] == 6
    assert client.texts == texts  # in the order said, across replicas
    raw = await memory.get_all(filters=SCOPE.filters(), top_k=100)
    assert Counter(m["memory"].split(" #")[0] for m in raw["results"]) == Counter(
        f"User likes fruit{i:02d}." for i in range(6)
    )
    for replica in replicas:
        assert await replica.aclose(5)


async def test_a_write_waited_for_returns_once_the_writer_stored_it(
    memory: AsyncMemory, dsn: str, table: str
) -> None:
    replica = WriteQueue(Mem0Backend(memory), outbox_dir=dsn, outbox_table=table, deliver=False)
    async with writer(memory, dsn, table):
        key = await asyncio.wait_for(replica.submit(SCOPE, said("I like kiwis."), wait=True), 30)
        assert key is not None
        assert replica.outbox.counts()["pending"] == 0
        result = await replica.submit_facts(SCOPE, ["User likes plums."], timeout=30)
        assert result.state == "stored"
    raw = await memory.get_all(filters=SCOPE.filters(), top_k=100)
    assert {m["memory"].split(" #")[0] for m in raw["results"]} == {
        "User likes kiwis.",
        "User likes plums.",
    }
    await replica.aclose(5)


async def test_a_write_waited_for_without_a_writer_stays_queued(
    memory: AsyncMemory, dsn: str, table: str
) -> None:
    replica = WriteQueue(Mem0Backend(memory), outbox_dir=dsn, outbox_table=table, deliver=False)
    result = await replica.submit_facts(SCOPE, ["User likes plums."], timeout=0.3)
    assert result.state == "queued" and result.recorded
    assert not await replica.flush(0.3)  # waited for: not stored yet
    assert replica.outbox.counts()["pending"] == 1
    await replica.aclose(0.1)
    async with writer(memory, dsn, table) as serving:  # started later, it stores it
        await until_empty(serving.outbox)


async def test_writes_kept_in_memory_while_postgres_is_down_go_to_the_writer_when_it_is_back(
    memory: AsyncMemory, dsn: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = AddRecorder(memory)
    replica = WriteQueue(Mem0Backend(client), outbox_dir=dsn, outbox_table=table, deliver=False)
    box = replica.outbox
    assert isinstance(box, PostgresOutbox)
    with psycopg.connect(dsn, autocommit=True) as admin:  # the replica's connection drops
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'agentscope-mem0-outbox' AND pid <> pg_backend_pid()"
        )

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(psycopg, "connect", refused)
    for i in range(3):
        assert await replica.submit(SCOPE, said(f"I like fruit{i:02d}."))
    assert replica.stats()["writes_in_memory_only"] == 3
    assert not await replica.flush(0.2)  # only in memory: not handed over yet
    monkeypatch.undo()
    deadline = time.monotonic() + 30
    while replica.stats()["writes_in_memory_only"]:  # moved into the outbox: the writer's now
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    assert box.counts()["pending"] == 3 and client.texts == []
    async with writer(client, dsn, table):
        assert await replica.flush(30)
    assert client.texts == [f"I like fruit{i:02d}." for i in range(3)]  # none twice
    await replica.aclose(5)


async def test_only_a_shared_outbox_lets_another_process_deliver(
    memory: AsyncMemory, dsn: str, table: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="outbox every process reaches"):
        WriteQueue(Mem0Backend(memory), outbox_dir=tmp_path, deliver=False)
    local = WriteQueue(Mem0Backend(memory), outbox_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="outbox in PostgreSQL"):
        await local.serve()
    await local.aclose()
    recording = WriteQueue(Mem0Backend(memory), outbox_dir=dsn, outbox_table=table, deliver=False)
    with pytest.raises(ConfigurationError, match="deliver_writes=True"):
        await recording.serve()
    await recording.aclose()


async def test_a_lost_writers_writes_are_stored_once_by_the_next(
    memory: AsyncMemory, dsn: str, table: str
) -> None:
    client = AddRecorder(memory)
    replica = WriteQueue(Mem0Backend(client), outbox_dir=dsn, outbox_table=table, deliver=False)
    for i in range(3):
        await replica.submit(SCOPE, said(f"I like fruit{i:02d}."))
    lost = WriteQueue(
        Mem0Backend(AddRecorder(memory, delay=3600)), outbox_dir=dsn, outbox_table=table, retry=FAST
    )
    serving = asyncio.create_task(lost.serve(poll=0.05))
    box = lost.outbox
    assert isinstance(box, PostgresOutbox)
    deadline = time.monotonic() + 30
    while box.counts()["pending"] and not box.read("SELECT 1 FROM {t} WHERE attempts > 0"):
        assert time.monotonic() < deadline  # it took the rows and is sending them
        await asyncio.sleep(0.05)
    serving.cancel()
    ((pid,),) = box.read("SELECT pg_backend_pid()")
    with psycopg.connect(dsn, autocommit=True) as admin:  # its pod is gone, its connection too
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    async with writer(client, dsn, table):
        assert await replica.flush(30)
    assert client.texts == [f"I like fruit{i:02d}." for i in range(3)]  # each once, in order
    await replica.aclose(5)
    await lost.aclose(0.1)
