"""Syncs of the embedded store that retire outbox rows: batched, retried, hurried."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest

from agentscope_mem0 import (
    Mem0Backend,
    Outbox,
    OutboxRow,
    RetryPolicy,
    Scope,
    WriteQueue,
    build_local_memory,
)
from agentscope_mem0._write import delivery as delivery_module
from agentscope_mem0._write.delivery import StoreSync
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.local._folder import COLLECTION
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

OWNER = "test:1:writer"


def _stored_rows(box: Outbox, count: int) -> list[OutboxRow]:
    """``count`` rows in ``box``, as mem0 stored them: held by their writer."""
    for _ in range(count):
        key = uuid.uuid4().hex
        box.insert(key=key, user_id="alice", agent_id=None, messages=[], owner=OWNER, lease=60)
    return box.held(OWNER)


async def test_writes_waiting_together_share_one_sync() -> None:
    calls: list[int] = []
    sync = StoreSync(lambda: calls.append(threading.get_ident()), window=0.2)
    with Outbox(None) as box:
        rows = _stored_rows(box, 10)
        await asyncio.gather(*(sync.retire(box, [row]) for row in rows))
        assert sync.unsynced == {row.key for row in rows} and box.counts()["pending"] == 10
        assert await sync.synced(10)
        assert len(calls) == 1 and sync.syncs == 1 and not sync.unsynced
        assert box.counts()["pending"] == 0  # retired after the sync
        await sync.retire(box, _stored_rows(box, 1))  # a later write waits for a sync of its own
        assert await sync.synced(10)
    assert len(calls) == 2
    assert threading.get_ident() not in calls  # never on the event loop's thread


async def test_a_failed_sync_is_tried_again_and_its_writes_wait() -> None:
    attempts: list[float] = []

    def flaky() -> None:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise OSError("No space left on device")

    sync = StoreSync(flaky, window=0.05, retry_delay=0.05)
    with Outbox(None) as box:
        await sync.retire(box, _stored_rows(box, 1))
        await asyncio.sleep(0.12)
        assert box.counts()["pending"] == 1  # not synced yet: the row waits
        assert await sync.synced(10) and box.counts()["pending"] == 0
    assert len(attempts) == 3 and sync.failures == 2 and sync.syncs == 1


async def test_someone_waiting_for_the_queue_does_not_wait_for_the_window() -> None:
    sync = StoreSync(lambda: None, window=60)
    with Outbox(None) as box:
        with sync.hurrying():
            await sync.retire(box, _stored_rows(box, 1))
            assert await sync.synced(10)
        await sync.retire(box, _stored_rows(box, 1))
        assert not await sync.synced(0.05)
        with sync.hurrying():  # a flush() starts while a write waits
            assert await sync.synced(10)
        assert box.counts()["pending"] == 0
        await sync.aclose()


async def test_a_store_whose_answers_are_durable_retires_at_once() -> None:
    sync = StoreSync(None)
    with Outbox(None) as box:
        await sync.retire(box, _stored_rows(box, 2))
        assert box.counts()["pending"] == 0 and not sync.unsynced and sync.syncs == 0


async def test_closing_leaves_the_rows_waiting_in_the_outbox() -> None:
    sync = StoreSync(lambda: None, window=60)
    with Outbox(None) as box:
        await sync.retire(box, _stored_rows(box, 2))
        await sync.aclose()
        assert box.counts()["pending"] == 2 and not sync.unsynced and sync.syncs == 0


async def test_an_idle_process_syncs_its_last_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_module, "SYNC_WINDOW", 0.3)
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=tmp_path
    )
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=tmp_path)
    for i in range(3):
        await queue.submit(Scope("alice"), [{"role": "user", "content": f"I like fruit{i:02d}."}])
    mark = tmp_path / "edge" / f".{COLLECTION}.mark.json"
    deadline = time.monotonic() + 60
    # Nobody flushes or closes: the queue syncs by itself, then retires the rows.
    while time.monotonic() < deadline:
        if queue.outbox.counts()["pending"] == 0 and json.loads(mark.read_text())["points"] >= 3:
            break
        await asyncio.sleep(0.1)
    assert queue.outbox.counts() == {"pending": 0, "failed": 0}
    assert json.loads(mark.read_text())["points"] >= 3  # synced: on disk
    await queue.aclose()
    close_shared_clients(tmp_path)


def test_a_sync_a_finished_loop_left_does_not_hold_up_the_next_loop() -> None:
    """``asyncio.run`` ends inside a sync's window; the next loop's writes still retire."""
    sync = StoreSync(lambda: None, window=60)
    box = Outbox(None)
    first_rows = _stored_rows(box, 1)

    async def first() -> None:
        await sync.retire(box, first_rows)
        await asyncio.sleep(0.05)  # returns with the sync waiting out its window
        assert sync.unsynced

    async def second() -> None:
        # The first loop's row is free to be sent again; the next one retires.
        assert not sync.unsynced
        with sync.hurrying():
            await sync.retire(box, [row for row in _stored_rows(box, 1) if row != first_rows[0]])
            assert await sync.synced(10)

    asyncio.run(first())
    asyncio.run(second())
    assert sync.syncs == 1 and box.counts()["pending"] == 1  # the first loop's row stays
    box.close()


async def test_a_store_out_of_disk_space_defers_writes_without_failing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine refuses every write while its disk is nearly full: they wait
    (more often than the retries allow) and are stored once space is back."""
    monkeypatch.setattr(delivery_module, "SPACE_RETRY_DELAY", 0.05)
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=tmp_path
    )
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=tmp_path, retry=RetryPolicy(max_attempts=2))
    free_mb = shutil.disk_usage(tmp_path).free / 1024 / 1024
    monkeypatch.setenv("AGENTSCOPE_MEM0_MIN_FREE_MB", str(free_mb * 2))  # "nearly full"
    for i in range(3):
        await queue.submit(Scope("alice"), [{"role": "user", "content": f"I like fruit{i:02d}."}])
    deadline = time.monotonic() + 30
    while queue.stats()["writes_deferred"] < 6 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert queue.stats()["writes_deferred"] >= 6  # three times the attempts allowed
    assert queue.stats()["writes_failed"] == 0 and queue.stats()["writes_stored"] == 0
    # Nor does the outbox, where a restart would read them as attempts made.
    ((attempts,),) = queue.outbox.read("SELECT max(attempts) FROM writes")
    assert attempts <= 1  # the one in flight now, if any
    monkeypatch.delenv("AGENTSCOPE_MEM0_MIN_FREE_MB")  # space is back
    assert await queue.flush(60)
    stats = queue.stats()
    assert stats["writes_stored"] == 3 and stats["writes_failed"] == 0
    assert queue.outbox.counts() == {"pending": 0, "failed": 0}
    await queue.aclose()
    close_shared_clients(tmp_path)


async def test_rows_waiting_for_a_sync_are_not_taken_for_unsent_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease keeper looks for held rows several times while stored rows
    wait for their sync; it must not queue them again (their writes are
    settled), or flush() waits for writes that never come."""
    monkeypatch.setattr(delivery_module, "SYNC_WINDOW", 1.5)
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=tmp_path
    )
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=tmp_path, lease=0.3)  # kept every 0.1 s
    for i in range(3):
        await queue.submit(Scope("alice"), [{"role": "user", "content": f"I like fruit{i:02d}."}])
    deadline = time.monotonic() + 30
    while queue.stats()["writes_stored"] < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert queue.stats()["writes_unsynced"] == 3
    await asyncio.sleep(0.5)  # the keeper runs while they wait
    assert queue.stats()["writes_pending"] == 0
    assert await queue.flush(30)
    assert queue.outbox.counts() == {"pending": 0, "failed": 0}
    await queue.aclose()
    close_shared_clients(tmp_path)


async def test_a_write_stored_while_the_queue_looks_for_its_rows_is_not_taken_again(
    tmp_path: Path,
) -> None:
    """flush() reads the rows this queue holds; a write stored and settled
    while that read is on its way must not be queued again (nothing would
    settle it, and flush() would wait for it forever)."""
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=tmp_path
    )
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=tmp_path)
    gate = asyncio.Event()
    store = queue._delivery._store

    async def gated(batch: object) -> object:
        await gate.wait()
        return await store(batch)

    queue._delivery._store = gated  # type: ignore[method-assign]
    armed, looking, go_on = threading.Event(), threading.Event(), threading.Event()
    claim = queue.outbox.claim_orphans

    def slow_claim(**kwargs: object) -> list[OutboxRow]:
        if armed.is_set():  # flush()'s look, not the replay at start
            looking.set()
            go_on.wait(10)
        return claim(**kwargs)  # type: ignore[arg-type]

    queue.outbox.claim_orphans = slow_claim  # type: ignore[method-assign]
    await queue.submit(Scope("alice"), [{"role": "user", "content": "I like fruit01."}])
    deadline = time.monotonic() + 30
    while not queue._delivery.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # the write is with mem0, held at the gate
    armed.set()
    flushing = asyncio.create_task(queue.flush(5))
    while not looking.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    gate.set()  # the write is stored and settled while flush() looks for rows
    while queue.stats()["writes_stored"] < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    go_on.set()
    assert await flushing
    assert queue.outbox.counts() == {"pending": 0, "failed": 0}
    await queue.aclose()
    close_shared_clients(tmp_path)
