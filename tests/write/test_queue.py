"""The write-behind queue against a real mem0 on local Qdrant.

mem0, Qdrant and the outbox are real; the chat model and embedder are the
offline fakes; faults are injected by a wrapper around the real client.
Facts get a per-call suffix (``UniqueFacts``) so that a write stored twice
shows up as two memories instead of being merged by mem0's hash dedupe.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mem0 import AsyncMemory

from _writer_child import UniqueFacts, exchange, store_config
from agentscope_mem0 import Mem0Backend, Outbox, RetryPolicy, Scope, WriteQueue
from agentscope_mem0._write.outbox import new_owner_id
from agentscope_mem0._write.queue import METADATA_KEY
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import close_memory, outbox_counts, real_memory

CHILD = Path(__file__).parents[1] / "_writer_child.py"
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05)
SCOPE = Scope("alice", "assistant")


def said(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


class FaultyClient:
    """Forwards to a real mem0 client; injects failures, delays and hangs into ``add``.

    Args:
        inner: The real client.
        fail_with: Exceptions the first ``add`` calls raise, in order.
        fail_when: ``fail_when(messages)`` returns an exception to raise, or None.
        delay: Seconds every ``add`` waits before reaching mem0.
        hang_before: How many of the first ``add`` calls hang before reaching mem0.
        hang_after: How many of the first ``add`` calls store, then hang.
    """

    def __init__(
        self,
        inner: AsyncMemory,
        *,
        fail_with: list[BaseException] | None = None,
        fail_when: Callable[[list[dict[str, str]]], BaseException | None] | None = None,
        delay: float = 0.0,
        hang_before: int = 0,
        hang_after: int = 0,
    ) -> None:
        self.inner = inner
        self.fail_with = list(fail_with or [])
        self.fail_when = fail_when
        self.delay = delay
        self.hang_before = hang_before
        self.hang_after = hang_after
        self.adds: list[dict[str, Any]] = []
        self.active: Counter[str] = Counter()
        self.max_active = 0
        self.overlaps = 0

    async def add(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        who = f"{kwargs.get('user_id')}/{kwargs.get('agent_id')}"
        call = {"messages": messages, "kwargs": kwargs, "who": who, "start": time.monotonic()}
        self.adds.append(call)
        if self.active[who]:
            self.overlaps += 1
        self.active[who] += 1
        self.max_active = max(self.max_active, sum(self.active.values()))
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail_with:
                raise self.fail_with.pop(0)
            if self.fail_when is not None and (exc := self.fail_when(messages)) is not None:
                raise exc
            if self.hang_before > 0:
                self.hang_before -= 1
                await asyncio.Event().wait()
            result = await self.inner.add(messages, **kwargs)
            call["ok"] = True
            if self.hang_after > 0:
                self.hang_after -= 1
                await asyncio.Event().wait()
            return result
        finally:
            self.active[who] -= 1
            call["end"] = time.monotonic()

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.search(*args, **kwargs)

    async def get_all(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.get_all(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.delete(*args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.get(*args, **kwargs)


async def facts(memory: AsyncMemory, scope: Scope = SCOPE) -> Counter[str]:
    """How many stored memories mention each ``fruitNN``/``tokenNN`` tag."""
    raw = await memory.get_all(filters=scope.filters(), top_k=1000)
    return Counter(
        tag
        for item in raw["results"]
        for tag in re.findall(r"\b(?:fruit|token)\d\d\b", item["memory"])
    )


def queue_for(client: Any, **kwargs: Any) -> WriteQueue:
    kwargs.setdefault("retry", FAST)
    return WriteQueue(Mem0Backend(client), **kwargs)


# -- the happy path --------------------------------------------------------


async def test_submit_returns_at_once_and_flush_waits_for_mem0(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    client = FaultyClient(memory, delay=0.3)
    queue = queue_for(client, outbox_dir=tmp_path / "outbox")
    started = time.perf_counter()
    for i in range(3):
        await queue.submit(SCOPE, said(f"I like fruit{i:02d}."))
    assert time.perf_counter() - started < 0.25  # less than one write takes
    assert queue.pending == 3
    assert await queue.flush(timeout=10)
    assert await facts(memory) == Counter({"fruit00": 1, "fruit01": 1, "fruit02": 1})
    stats = queue.stats()
    assert stats["writes_queued"] == stats["writes_stored"] == 3
    assert stats["writes_pending"] == 0 and stats["write_latency_count"] == 3
    assert queue.outbox.counts() == {"pending": 0, "failed": 0}
    assert await queue.aclose()
    # Its connections are closed: the last one out of a WAL file removes the WAL.
    assert not (tmp_path / "outbox" / "outbox.sqlite3-wal").exists()


async def test_wait_blocks_until_stored(memory: AsyncMemory) -> None:
    queue = queue_for(memory)
    key = await queue.submit(SCOPE, said("I like fruit07."), wait=True)
    assert key is not None
    assert await facts(memory) == Counter({"fruit07": 1})
    raw = await memory.get_all(filters=SCOPE.filters())
    assert raw["results"][0]["metadata"][METADATA_KEY] == key
    await queue.aclose()


async def test_in_memory_queue_when_asked(memory: AsyncMemory) -> None:
    queue = queue_for(memory, outbox_dir=":memory:")
    assert not queue.outbox.durable
    await queue.submit(SCOPE, said("I like fruit01."))
    assert await queue.flush(5)
    assert await facts(memory) == Counter({"fruit01": 1})
    await queue.aclose()
    assert await queue.aclose()  # idempotent


async def test_a_write_settled_while_flush_reads_the_outbox_is_not_waited_for_again(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    # flush() reads the rows this queue holds, then tracks them; a write stored
    # and settled between the two must not get a new waiter that nothing ends.
    queue = queue_for(FaultyClient(memory, delay=0.2), outbox_dir=tmp_path / "outbox")
    key = await queue.submit(SCOPE, said("I like fruit03."))
    assert key is not None
    real_take = queue._take_rows
    settled: list[bool] = []

    async def take_then_let_the_write_end() -> Any:
        rows = await real_take()
        rt = queue._rt
        assert rt is not None
        done = rt.waiters.get(key)
        if done is not None and any(row.key == key for row in rows[0]):
            await done  # the write ends between the read and the tracking
            settled.append(True)
        return rows

    queue._take_rows = take_then_let_the_write_end  # type: ignore[method-assign]
    assert await queue.flush(timeout=5)
    assert settled == [True]
    assert queue.pending == 0
    assert await facts(memory) == Counter({"fruit03": 1})
    assert await queue.aclose(timeout=5)


async def test_busy_scope_is_batched_in_order(memory: AsyncMemory) -> None:
    client = FaultyClient(memory, delay=0.2)
    queue = queue_for(client, max_batch=8)
    for i in range(6):
        await queue.submit(SCOPE, said(f"I like fruit{i:02d}."))
        await asyncio.sleep(0.01)  # turns come one after another
    assert await queue.flush(10)
    texts = [m["content"] for call in client.adds for m in call["messages"] if m["role"] == "user"]
    assert texts == [f"I like fruit{i:02d}." for i in range(6)]
    assert len(client.adds) == 2  # the first alone, the five that waited together
    assert queue.stats()["write_batches"] == 2
    assert await facts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(6)})
    await queue.aclose()


async def test_per_scope_order_under_50_concurrent_conversations(
    store_config: dict[str, Any],
) -> None:
    memory = real_memory(store_config, ScriptedChatModel(extractor=UniqueFacts(), delay=0.02))
    client = FaultyClient(memory)
    queue = queue_for(client, max_concurrency=8, max_batch=3)
    scopes = [Scope(f"user{u:02d}", "agent") for u in range(50)]
    turns = 4

    async def conversation(scope: Scope) -> None:
        for turn in range(turns):
            await asyncio.sleep(random.uniform(0, 0.02))
            await queue.submit(scope, said(f"I like token{turn:02d}. Turn {turn} of {scope}."))

    await asyncio.gather(*(conversation(s) for s in scopes))
    assert await queue.flush(60)

    assert client.overlaps == 0  # never two calls of one scope at once
    assert 1 < client.max_active <= 8
    by_scope: dict[str, list[int]] = {}
    # (The embedded Qdrant may fail a call under concurrency; those are retried.)
    for call in (c for c in client.adds if c.get("ok")):
        for m in call["messages"]:
            if m["role"] == "user":
                by_scope.setdefault(call["who"], []).append(int(m["content"][12:14]))
    assert len(by_scope) == 50
    assert all(seq == list(range(turns)) for seq in by_scope.values()), by_scope
    for scope in scopes:
        assert await facts(memory, scope) == Counter({f"token{t:02d}": 1 for t in range(turns)})
    assert queue.stats()["writes_stored"] == 50 * turns
    await queue.aclose()
    close_memory(memory)


# -- failures -----------------------------------------------------------------


async def test_transient_failures_are_retried_until_stored(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    client = FaultyClient(
        memory, fail_with=[ConnectionError("reset"), TimeoutError(), ConnectionError("refused")]
    )
    queue = queue_for(client, outbox_dir=tmp_path / "outbox")
    await queue.submit(SCOPE, said("I like fruit03."))
    assert await queue.flush(10)
    assert len(client.adds) == 4
    stats = queue.stats()
    assert stats["writes_retried"] == 3 and stats["writes_stored"] == 1
    assert stats["writes_failed"] == 0
    assert await facts(memory) == Counter({"fruit03": 1})
    await queue.aclose()


async def test_permanent_failure_is_kept_logged_once_and_retried_on_request(
    memory: AsyncMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = FaultyClient(memory, fail_with=[ValueError("bad request: messages malformed")])
    queue = queue_for(client, outbox_dir=tmp_path / "outbox")
    with caplog.at_level(logging.WARNING, logger="agentscope_mem0._write.queue"):
        await queue.submit(SCOPE, said("I like fruit04."))
        assert await queue.flush(10)  # a failed write is not pending
    assert len(client.adds) == 1  # never retried automatically
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "bad request" in errors[0].getMessage()
    assert queue.stats()["writes_failed"] == 1
    (row,) = await queue.failed()
    assert "ValueError" in (row.error or "") and "bad request" in (row.error or "")
    assert await facts(memory) == Counter()

    assert await queue.retry_failed() == 1  # the cause is gone now
    assert await queue.flush(10)
    assert await facts(memory) == Counter({"fruit04": 1})
    assert await queue.failed() == []
    await queue.aclose()


async def test_transient_failures_give_up_after_max_attempts(memory: AsyncMemory) -> None:
    client = FaultyClient(memory, fail_with=[ConnectionError("down")] * 10)
    queue = queue_for(client, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    await queue.submit(SCOPE, said("I like fruit05."))
    assert await queue.flush(10)
    assert len(client.adds) == 3
    (row,) = await queue.failed()
    assert "gave up after 3 attempts" in (row.error or "")
    await queue.aclose()


async def test_a_rejected_exchange_in_a_batch_does_not_sink_the_others(
    memory: AsyncMemory,
) -> None:
    def reject_poison(messages: list[dict[str, str]]) -> BaseException | None:
        poisoned = any("POISON" in m["content"] for m in messages)
        return ValueError("validation failed") if poisoned else None

    client = FaultyClient(memory, fail_when=reject_poison, delay=0.1)
    queue = queue_for(client)
    await queue.submit(SCOPE, said("I like fruit00."))
    await queue.submit(SCOPE, said("I like fruit01."))
    await queue.submit(SCOPE, said("POISON"))
    await queue.submit(SCOPE, said("I like fruit03."))
    assert await queue.flush(10)
    assert await facts(memory) == Counter({"fruit00": 1, "fruit01": 1, "fruit03": 1})
    (row,) = await queue.failed()
    assert row.messages[0]["content"] == "POISON"
    stats = queue.stats()
    assert stats["writes_stored"] == 3 and stats["writes_failed"] == 1
    await queue.aclose()


async def test_a_call_that_stored_then_timed_out_is_not_stored_twice(
    memory: AsyncMemory,
) -> None:
    client = FaultyClient(memory, hang_after=1)
    # Long enough for the first call to store on a loaded machine before it hangs.
    queue = queue_for(client, write_timeout=2.0)
    await queue.submit(SCOPE, said("I like fruit06."))
    assert await queue.flush(30)
    assert len(client.adds) == 2  # what the first stored was removed, then sent again
    assert queue.stats()["writes_redone"] == 1
    assert await facts(memory) == Counter({"fruit06": 1})
    await queue.aclose()


async def test_a_hung_backend_is_retried_after_the_timeout(memory: AsyncMemory) -> None:
    client = FaultyClient(memory, hang_before=1)
    queue = queue_for(client, write_timeout=1.0)
    started = time.perf_counter()
    await queue.submit(SCOPE, said("I like fruit08."))
    # The reply's submit never waits for the hung call (it would take write_timeout).
    assert time.perf_counter() - started < 1.0
    assert await queue.flush(30)
    # The hung call, then at least one retry (a loaded machine may time out another).
    assert len(client.adds) >= 2
    assert await facts(memory) == Counter({"fruit08": 1})
    await queue.aclose()


async def test_hung_backend_close_gives_up_and_the_next_queue_stores_it(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox"
    hung = queue_for(FaultyClient(memory, hang_before=99), outbox_dir=outbox, lease=0.5)
    await hung.submit(SCOPE, said("I like fruit09."))
    started = time.perf_counter()
    assert not await hung.aclose(timeout=0.3)
    assert time.perf_counter() - started < 1.0
    assert outbox_counts(outbox) == {"pending": 1, "failed": 0}

    queue = queue_for(memory, outbox_dir=outbox, lease=0.5)
    await queue.flush(1)
    # Its call may still be running in mem0's threads: the claim holds until the lease lapses.
    assert queue.stats()["writes_replayed"] == 0
    await asyncio.sleep(0.9)
    assert await queue.flush(10)
    assert queue.stats()["writes_replayed"] == 1
    assert await facts(memory) == Counter({"fruit09": 1})
    await queue.aclose()


async def test_an_outbox_that_cannot_record_keeps_the_write_in_memory(
    memory: AsyncMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    queue = queue_for(memory, outbox_dir=tmp_path / "outbox")
    queue.outbox.close()  # every outbox call now fails
    with caplog.at_level(logging.ERROR):
        keys = [await queue.submit(SCOPE, said(f"I like fruit1{i}.")) for i in range(2)]
    assert all(keys)
    assert await queue.flush(10)
    assert await facts(memory) == Counter({"fruit10": 1, "fruit11": 1})
    stats = queue.stats()
    assert stats["writes_unrecorded"] == 2 and stats["writes_lost"] == 0
    assert stats["outbox_errors"] >= 2
    errors = [r for r in caplog.records if "could not record memory writes" in r.getMessage()]
    assert len(errors) == 1  # logged once, with the real cause
    assert "Cannot operate on a closed database" in errors[0].getMessage()
    await queue.aclose()


async def test_submit_after_close_is_logged_not_raised(
    memory: AsyncMemory, caplog: pytest.LogCaptureFixture
) -> None:
    queue = queue_for(memory)
    await queue.aclose()
    with caplog.at_level(logging.ERROR):
        assert await queue.submit(SCOPE, said("I like fruit11.")) is None
    assert "after the queue was closed" in caplog.text
    assert not await queue.flush()  # a lost write is not a successful flush
    assert await queue.flush()  # reported once


# -- durability and exactly once -----------------------------------------------


def _orphans(folder: Path, n: int, *, sent: dict[int, str] | None = None) -> list[str]:
    """Rows left by a process that died (``sent``: row -> batch key already tried)."""
    dead = _dead_owner()
    box = Outbox.in_folder(folder)
    keys = []
    for i in range(n):
        scope, messages = exchange(i)
        key = f"orphan{i:02d}"
        row = box.insert(
            key=key,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            messages=messages,
            owner=dead,
            lease=60,
        )
        if sent and i in sent:
            assert box.start_attempt([row], owner=dead, batch_key=sent[i])
        keys.append(key)
    box.close()
    return keys


def _dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{new_owner_id().split(':')[0]}:{child.pid}:0000deadbeef"


async def all_facts(memory: AsyncMemory) -> Counter[str]:
    out: Counter[str] = Counter()
    for u in range(3):
        out += await facts(memory, Scope(f"user{u}", "agent"))
    return out


async def test_two_queues_on_one_folder_replay_each_orphan_once(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox"
    # Row 0 reached mem0 before its process died; row 1 was sent but did not.
    scope, messages = exchange(0)
    await memory.add(messages, **_add_kwargs(scope), metadata={METADATA_KEY: "orphan00"})
    _orphans(outbox, 12, sent={0: "orphan00", 1: "orphan01"})

    clients = [FaultyClient(memory, delay=0.01), FaultyClient(memory, delay=0.01)]
    queues = [queue_for(c, outbox_dir=outbox) for c in clients]
    assert all(await asyncio.gather(*(q.flush(20) for q in queues)))

    sent = Counter(
        m["content"]
        for cl in clients
        for c in cl.adds
        for m in c["messages"]
        if m["role"] == "user"
    )
    assert len(sent) == 12 and set(sent.values()) == {1}  # each row sent by one queue, once
    assert sum(q.stats()["writes_replayed"] for q in queues) == 12
    assert sum(q.stats()["writes_redone"] for q in queues) == 1
    assert await all_facts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(12)})
    assert outbox_counts(outbox) == {"pending": 0, "failed": 0}
    for q in queues:
        await q.aclose()


async def test_a_batch_half_stored_before_a_crash_ends_up_stored_once(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    # The embedded Qdrant persists one point at a time: a kill in the middle
    # of a batch's insert leaves some of its memories and not the others.
    outbox = tmp_path / "outbox"
    dead = _dead_owner()
    box = Outbox.in_folder(outbox)
    rows = [
        box.insert(
            key=f"row{i}",
            user_id=SCOPE.user_id,
            agent_id=SCOPE.agent_id,
            messages=said(f"I like fruit{i:02d}."),
            owner=dead,
            lease=60,
        )
        for i in range(3)
    ]
    assert box.start_attempt(rows, owner=dead, batch_key="B")
    box.close()
    await memory.add(said("I like fruit00."), **_add_kwargs(SCOPE), metadata={METADATA_KEY: "B"})

    queue = queue_for(memory, outbox_dir=outbox)
    assert await queue.flush(10)
    assert queue.stats()["writes_redone"] == 3
    assert await facts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(3)})
    await queue.aclose()


async def test_a_batch_whose_leases_lapse_one_by_one_is_taken_over_whole(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    # A writer that stopped before ever renewing leaves each row with the
    # lease it got when it was queued, so the rows of its last (unconfirmed)
    # batch lapse one after another. Were the first ones redone alone under
    # the batch's key, redoing the rest later would first delete, under that
    # same key, what storing the first ones had stored.
    outbox = tmp_path / "outbox"
    stale = "elsewhere:1:0000stale000"  # another host's writer: only its leases count
    box = Outbox.in_folder(outbox)
    rows = [
        box.insert(
            key=f"row{i}",
            user_id=SCOPE.user_id,
            agent_id=SCOPE.agent_id,
            messages=said(f"I like fruit{i:02d}."),
            owner=stale,
            lease=-1.0 if i < 2 else 60.0,  # the first two have lapsed, the last has not
        )
        for i in range(3)
    ]
    assert box.start_attempt(rows, owner=stale, batch_key="B")

    first = queue_for(memory, outbox_dir=outbox)
    assert await first.flush(10)
    box.release(owner=stale)  # the last row's lease is over too
    second = queue_for(memory, outbox_dir=outbox)
    assert await second.flush(10)
    assert await first.flush(10)
    assert await facts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(3)})
    assert box.counts() == {"pending": 0, "failed": 0}
    box.close()
    await first.aclose()
    await second.aclose()


def _add_kwargs(scope: Scope) -> dict[str, Any]:
    return {"user_id": scope.user_id, "agent_id": scope.agent_id}


def _run_child(mode: str, folder: Path, n: int, *, kill_after: float | None) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(folder), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "queued", proc.stderr.read() if proc.stderr else ""
        if kill_after is not None:
            time.sleep(kill_after)
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _next_process_memory(folder: Path) -> AsyncMemory:
    return AsyncMemory(
        config=_config(folder),
    )


def _config(folder: Path) -> Any:
    from agentscope_mem0 import build_mem0_config

    return build_mem0_config(
        chat_model=ScriptedChatModel(extractor=UniqueFacts()),
        embedding_model=HashEmbedding(),
        mem0_config=store_config(folder),
    )


@pytest.mark.parametrize(
    ("mode", "kill_after"),
    [("crash-after-add", None), ("pending", 0.8)],
    ids=["killed-between-mem0-and-outbox", "killed-with-writes-in-flight"],
)
async def test_sigkilled_process_loses_no_write_and_none_is_stored_twice(
    tmp_path: Path, mode: str, kill_after: float | None
) -> None:
    n = 9
    await asyncio.to_thread(_run_child, mode, tmp_path, n, kill_after=kill_after)
    left = outbox_counts(tmp_path / "outbox")["pending"]
    assert 0 < left <= n

    memory = _next_process_memory(tmp_path)
    queue = queue_for(memory, outbox_dir=tmp_path / "outbox")
    assert await queue.flush(30)
    stats = queue.stats()
    assert stats["writes_replayed"] == left
    assert stats["writes_stored"] == left
    if mode == "crash-after-add":
        assert stats["writes_redone"] >= 1  # the add the kill interrupted had landed
    assert await all_facts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(n)})
    assert outbox_counts(tmp_path / "outbox") == {"pending": 0, "failed": 0}
    await queue.aclose()
    close_memory(memory)


# -- lifecycle -------------------------------------------------------------------


def test_a_script_that_ends_without_flushing_keeps_its_writes(
    store_config: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = real_memory(store_config, ScriptedChatModel(extractor=UniqueFacts(), delay=0.3))
    queue = queue_for(memory, outbox_dir=tmp_path / "outbox", exit_grace=0)

    async def turns() -> None:
        for i in range(3):
            await queue.submit(SCOPE, said(f"I like fruit{i:02d}."))

    asyncio.run(turns())  # the loop ends with the writes still queued
    from agentscope_mem0._write.queue import _report_pending_at_exit

    with caplog.at_level(logging.WARNING, logger="agentscope_mem0._write.queue"):
        _report_pending_at_exit()
    assert re.search(r"\d memory writes not stored at exit; they stay in the outbox", caplog.text)

    async def later() -> None:
        assert await queue.flush(10)  # a new loop picks the rows up again
        await queue.aclose()

    asyncio.run(later())
    assert asyncio.run(facts(memory)) == Counter({f"fruit{i:02d}": 1 for i in range(3)})
    close_memory(memory)


def test_the_loop_ending_with_writes_pending_stores_them_first(
    store_config: dict[str, Any], tmp_path: Path
) -> None:
    memory = real_memory(store_config, ScriptedChatModel(extractor=UniqueFacts(), delay=0.2))
    queue = queue_for(memory, outbox_dir=tmp_path / "outbox", max_batch=1, exit_grace=10)

    async def turns() -> None:
        for i in range(3):
            await queue.submit(Scope(f"user{i}"), said(f"I like fruit{i:02d}."))

    asyncio.run(turns())  # asyncio.run cancels the workers: they finish within the grace
    assert queue.stats()["writes_stored"] == 3
    assert outbox_counts(tmp_path / "outbox") == {"pending": 0, "failed": 0}
    for i in range(3):
        assert asyncio.run(facts(memory, Scope(f"user{i}"))) == Counter({f"fruit{i:02d}": 1})
    close_memory(memory)


async def test_a_reply_cancelled_while_its_write_is_recorded_still_queues_it(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    queue = queue_for(memory, outbox_dir=tmp_path / "outbox")
    assert await queue.flush(10)  # idle: replay done, no worker, no lease keeper
    assert queue.outbox.path is not None
    other = sqlite3.connect(queue.outbox.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writes: recording has to wait
    reply = asyncio.create_task(queue.submit(SCOPE, said("I like fruit14.")))
    await asyncio.sleep(0.2)  # the write is being recorded
    reply.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reply
    other.execute("COMMIT")
    other.close()
    assert await queue.flush(10)
    assert await facts(memory) == Counter({"fruit14": 1})
    await queue.aclose()


async def test_dropping_a_queue_with_writes_pending_warns(memory: AsyncMemory) -> None:
    queue = queue_for(FaultyClient(memory, delay=5))
    await queue.submit(SCOPE, said("I like fruit12."))
    with pytest.warns(ResourceWarning, match="1 memory writes pending"):
        queue.__del__()
    await queue.aclose(timeout=0)


async def test_an_idle_queue_holds_no_task_and_is_collected(memory: AsyncMemory) -> None:
    import gc
    import weakref

    queue = queue_for(memory, lease=0.06)
    await queue.submit(SCOPE, said("I like fruit13."), wait=True)
    await asyncio.sleep(0.1)  # the lease keeper notices there is nothing left
    ref = weakref.ref(queue)
    del queue
    gc.collect()
    assert ref() is None
