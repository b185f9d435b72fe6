"""The fault suite: processes that end badly, full disks, damaged files, bad models.

Everything is real (mem0, local Qdrant, SQLite files, subprocesses, a tmpfs
where the machine allows mounting one); only the chat model and the embedder
are the offline fakes. For each fault: replies complete, and every write is
stored once or visibly failed, never silently lost. docs/benchmarks/faults.md
describes each fault and how to run this file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg
from mem0 import AsyncMemory

from _faults_child import middleware
from _writer_child import UniqueFacts
from agentscope_mem0 import (
    InvalidStateError,
    Mem0Backend,
    Mem0Middleware,
    Outbox,
    RetryPolicy,
    Scope,
    WriteQueue,
)
from agentscope_mem0._write.outbox import OUTBOX_FILENAME, new_owner_id
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import outbox_counts, real_memory

CHILD = Path(__file__).with_name("_faults_child.py")
FAST = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05)
SCOPE = Scope("alice", "assistant")


def said(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


async def fruit_counts(client: Any, scope: Scope = SCOPE) -> Counter[str]:
    """How many stored memories mention each ``fruitNN`` tag."""
    raw = await client.get_all(filters=scope.filters(), top_k=1000)
    return Counter(
        tag for item in raw["results"] for tag in re.findall(r"\bfruit\d\d\b", item["memory"])
    )


def _child(
    mode: str, folder: Path, turns: int, delay: float, first: int = 0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(folder), str(turns), str(delay), str(first)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _next_process_stores(folder: Path) -> Counter[str]:
    """What the next middleware on the same store finds once it replayed the outbox."""
    mw = middleware(folder)
    try:
        assert await mw.flush(60)
        return await fruit_counts(mw.client)
    finally:
        await mw.aclose()
        mw.client.vector_store.client.close()


# -- processes that end without closing ----------------------------------------


@pytest.mark.parametrize("ending", ["ends", "killed"])
async def test_the_drop_in_path_keeps_every_write_of_a_script_that_ends(
    tmp_path: Path, ending: str
) -> None:
    # Models + the user's own mem0_config, no outbox: extraction is slow
    # (0.8 s a turn), so most writes are still queued when the script ends.
    proc = _child(ending, tmp_path, 8, 0.8)
    out, err = proc.communicate(timeout=120)
    assert out.count("replied") == 8, err
    outbox = tmp_path / "store" / OUTBOX_FILENAME
    assert outbox.exists()  # next to the store's own files
    found = await _next_process_stores(tmp_path)
    assert found == Counter({f"fruit{i:02d}": 1 for i in range(8)})
    assert outbox_counts(outbox.parent) == {"pending": 0, "failed": 0}


async def test_sigkill_at_random_points_loses_and_doubles_nothing(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("FAULT_SEED", "11")))
    replied: set[str] = set()
    for first in (0, 50):  # two kills, the second one on a store the first left half done
        proc = _child("wait", tmp_path, 30, 0.05, first)
        assert proc.stdout is not None
        kill_after = rng.randint(1, 12)
        for line in proc.stdout:
            replied.add(line.split()[1])
            if len(replied) >= kill_after and rng.random() < 0.5:
                break
        await asyncio.sleep(rng.uniform(0.0, 0.3))  # somewhere inside a mem0 call
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:
            replied.add(line.split()[1])
        proc.wait(timeout=30)
    found = await _next_process_stores(tmp_path)
    assert set(found.values()) <= {1}  # nothing stored twice
    assert {f"fruit{n}" for n in replied} <= set(found)  # every completed reply stored


# -- closed means closed ----------------------------------------------------------


async def test_a_reply_through_a_closed_middleware_raises(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    mw = Mem0Middleware(user_id="alice", client=memory, mode="static_control")
    agent = Agent(
        name="assistant", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw]
    )
    await agent.reply(UserMsg(name="user", content="I like fruit01."))
    assert await mw.aclose(timeout=30)
    with pytest.raises(InvalidStateError, match="'alice' was closed"):
        await agent.reply(UserMsg(name="user", content="I like fruit02."))
    assert await fruit_counts(memory) == Counter({"fruit01": 1})


# -- a model answering prose, an embedder failing ---------------------------------


VALID = '{"memory": [{"id": "0", "text": "User likes fruit%s #%s", "attributed_to": "user"}]}'


class Extraction:
    """Answers mem0's extraction prompt from a list (the last one repeating)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, messages: list[Any], tools: Any) -> str:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return answer % ("01", uuid.uuid4().hex[:6]) if "%s" in answer else answer


def _queue_on(store_config: dict[str, Any], model: Any, embedding: Any = None) -> WriteQueue:
    memory = real_memory(store_config, model, embedding)
    return WriteQueue(Mem0Backend(memory), retry=FAST)


@pytest.mark.parametrize(
    "bad",
    [
        "I could not find anything worth remembering, sorry!",
        '{"memory": [{"id": "0", "text": "User likes fru',  # cut off mid-answer
    ],
    ids=["prose", "truncated"],
)
async def test_an_extraction_answer_mem0_cannot_parse_is_a_failed_attempt(
    store_config: dict[str, Any], bad: str
) -> None:
    # Unparseable twice, then valid: stored by the third attempt.
    queue = _queue_on(store_config, ScriptedChatModel(Extraction(bad, bad, VALID), extractor=None))
    await queue.submit(SCOPE, said("I like fruit01."))
    assert await queue.flush(30)
    stats = queue.stats()
    assert (stats["writes_retried"], stats["writes_stored"], stats["writes_failed"]) == (2, 1, 0)
    assert await fruit_counts(queue.backend.client) == Counter({"fruit01": 1})
    await queue.aclose()


async def test_a_model_that_only_answers_prose_leaves_a_visible_failed_write(
    store_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    prose = "Sure! The user likes fruit."
    queue = _queue_on(store_config, ScriptedChatModel(Extraction(prose), extractor=None))
    with caplog.at_level(logging.ERROR):
        await queue.submit(SCOPE, said("I like fruit01."))
        assert await queue.flush(30)
    assert queue.stats()["writes_failed"] == 1 and queue.stats()["writes_stored"] == 0
    (row,) = await queue.failed()
    assert "not mem0's JSON" in (row.error or "") and "Sure! The user likes fruit." in row.error
    assert "kept in the outbox as failed" in caplog.text
    # Durable: the CLI's status and retry-failed read the same file.
    assert queue.outbox.path is not None
    assert outbox_counts(queue.outbox.path.parent)["failed"] == 1
    await queue.aclose()


async def test_a_valid_empty_answer_is_nothing_worth_keeping(store_config: dict[str, Any]) -> None:
    queue = _queue_on(store_config, ScriptedChatModel(Extraction('{"memory": []}'), extractor=None))
    await queue.submit(SCOPE, said("Hello there."))
    assert await queue.flush(30)
    stats = queue.stats()
    assert (stats["writes_stored"], stats["writes_retried"], stats["writes_failed"]) == (1, 0, 0)
    await queue.aclose()


class FlakyEmbedding(HashEmbedding):
    """Fails to embed extracted facts ("User ...") the first ``failures`` times."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> Any:
        if self.failures > 0 and any(str(t).startswith("User ") for t in inputs):
            self.failures -= 1
            raise ConnectionError("embedding service unavailable")
        return await super()._call_api(inputs, **kwargs)


@pytest.mark.parametrize(("failures", "stored"), [(2, 1), (1000, 0)], ids=["recovers", "down"])
async def test_an_embedding_failing_inside_mem0s_add_is_a_failed_attempt(
    store_config: dict[str, Any], failures: int, stored: int
) -> None:
    model = ScriptedChatModel(extractor=UniqueFacts())
    queue = _queue_on(store_config, model, FlakyEmbedding(failures))
    await queue.submit(SCOPE, said("I like fruit01."))
    assert await queue.flush(30)
    stats = queue.stats()
    assert stats["writes_stored"] == stored and stats["writes_failed"] == 1 - stored
    assert stats["writes_retried"] >= 1
    assert await fruit_counts(queue.backend.client) == Counter(
        {"fruit01": stored} if stored else {}
    )
    if not stored:
        (row,) = await queue.failed()
        assert "embedding" in (row.error or "") and "embedding service unavailable" in row.error
    await queue.aclose()


# -- a full disk ---------------------------------------------------------------


class FullDisk:
    """The outbox's folder on a small tmpfs that can be filled up and freed again.

    Where mounting is not allowed (CI runners without root), SQLite's own
    limit stands in: ``PRAGMA max_page_count`` makes the outbox connections
    fail with the very error a full disk gives (``SQLITE_FULL``).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.tmpfs = False
        if not os.environ.get("FAULT_NO_TMPFS"):  # set it to try the fallback here
            mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)]
            self.tmpfs = subprocess.run(mount, capture_output=True).returncode == 0
        self._box: Outbox | None = None

    def fill(self, box: Outbox) -> None:
        self._box = box
        if not self.tmpfs:
            ((pages,),) = box.read("PRAGMA page_count")
            box.read(f"PRAGMA max_page_count = {pages}")
            return
        fd = os.open(self.folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 65536)
        except OSError:
            pass
        finally:
            os.close(fd)

    def free(self) -> None:
        if not self.tmpfs:
            assert self._box is not None
            self._box.read("PRAGMA max_page_count = 1073741823")
            return
        (self.folder / "filler").unlink()

    def unmount(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.folder)], check=False)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[FullDisk]:
    disk = FullDisk(tmp_path / "small-disk")
    yield disk
    disk.unmount()


async def test_a_full_disk_keeps_writes_in_memory_and_recovers_by_itself(
    memory: AsyncMemory, full_disk: FullDisk, caplog: pytest.LogCaptureFixture
) -> None:
    queue = WriteQueue(
        Mem0Backend(memory), outbox_dir=full_disk.folder, retry=FAST, lease=0.6, write_timeout=15
    )
    for i in range(3):
        await queue.submit(SCOPE, said(f"I like fruit{i:02d}."))
    assert await queue.flush(30)

    full_disk.fill(queue.outbox)
    with caplog.at_level(logging.WARNING):
        keys = [await queue.submit(SCOPE, said(f"I like fruit{i:02d}.")) for i in range(3, 23)]
        assert all(keys)  # every reply went on, every write was taken
        unrecorded = queue.stats()["writes_unrecorded"]
        assert unrecorded >= 1
        # Those kept in memory reach mem0 while the disk is still full.
        deadline = time.monotonic() + 60  # a busy CI machine may take a while
        while queue.stats()["writes_stored"] < 3 + unrecorded and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert queue.stats()["writes_stored"] >= 3 + unrecorded

        full_disk.free()
        await queue.submit(SCOPE, said("I like fruit23."))
        assert await queue.flush(60), (queue.stats(), queue.outbox.counts())
    errors = [r.getMessage() for r in caplog.records if "could not record" in r.getMessage()]
    assert all("database or disk is full" in error for error in errors)
    # Logged once per episode, with the real cause. SQLite's page limit (the
    # stand-in without tmpfs) lets a write reuse the space of rows stored
    # meanwhile, which ends an episode early; a full tmpfs stays full.
    assert len(errors) == caplog.text.count("records writes again") >= 1
    assert len(errors) == 1 or not full_disk.tmpfs
    assert "cannot rollback" not in caplog.text
    stats = queue.stats()
    assert stats["writes_lost"] == 0 and stats["outbox_errors"] >= unrecorded
    assert await fruit_counts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(24)})
    await queue.aclose()
    assert outbox_counts(full_disk.folder) == {"pending": 0, "failed": 0}


async def test_writes_kept_in_memory_move_into_the_outbox_once_it_takes_them_again(
    memory: AsyncMemory, full_disk: FullDisk
) -> None:
    """Once space is back, a write held in memory is on disk before mem0 stores
    it: a process killed then loses none of them (before, they moved at close)."""
    queue = WriteQueue(
        Mem0Backend(memory),
        outbox_dir=full_disk.folder,
        retry=FAST,
        lease=0.6,
        write_timeout=15,
        max_batch=2,
    )
    # mem0's first add after the disk fills waits for the space to come back;
    # every later one waits until the test lets it go.
    freed, release = threading.Event(), threading.Event()
    add, calls = memory.add, []

    async def add_when_let(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        gate = freed if len(calls) == 1 else release
        while not gate.is_set():
            await asyncio.sleep(0.02)
        return await add(*args, **kwargs)

    memory.add = add_when_let  # type: ignore[method-assign]
    full_disk.fill(queue.outbox)
    # Long enough for a row of its own pages: SQLite's page limit (the
    # stand-in without tmpfs) then refuses each of them as a full disk does.
    answer = {"role": "assistant", "content": "Noted. " + "z" * 6000}
    keys = [
        await queue.submit(SCOPE, [*said(f"I like fruit{i:02d}."), answer]) for i in range(1, 9)
    ]
    in_memory = queue.stats()["writes_in_memory_only"]
    assert in_memory >= 3  # more than the one batch (of 2) mem0 is given first

    full_disk.free()
    freed.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        len(calls) < 2 or queue.stats()["writes_in_memory_only"] > 0
    ):
        await asyncio.sleep(0.05)
    assert queue.stats()["writes_in_memory_only"] == 0, queue.stats()
    # Every write mem0 has not stored yet is in the file, held by this queue.
    conn = sqlite3.connect(full_disk.folder / OUTBOX_FILENAME)
    try:
        on_disk = dict(conn.execute("SELECT key, status FROM writes").fetchall())
    finally:
        conn.close()
    stored = queue.stats()["writes_stored"]
    assert set(on_disk) <= set(keys) and set(on_disk.values()) == {"pending"}
    assert len(on_disk) == len(keys) - stored >= in_memory - 2

    release.set()
    assert await queue.flush(60), queue.stats()
    assert await fruit_counts(memory) == Counter({f"fruit{i:02d}": 1 for i in range(1, 9)})
    assert queue.stats()["writes_lost"] == 0
    await queue.aclose()
    assert outbox_counts(full_disk.folder) == {"pending": 0, "failed": 0}


# -- damaged files -----------------------------------------------------------------


def _dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{new_owner_id().split(':')[0]}:{child.pid}:0000deadbeef"


def _left_rows(folder: Path, n: int, *, size: int = 40) -> None:
    """``n`` pending writes of a writer that died, in ``folder``'s outbox."""
    box, dead = Outbox.in_folder(folder), _dead_owner()
    for i in range(n):
        text = f"I like fruit{i:02d}. " + "x" * size
        box.insert(key=f"left{i:02d}", user_id="alice", agent_id="assistant",
                   messages=said(text), owner=dead, lease=60)  # fmt: skip
    box.close()


async def _replay(memory: AsyncMemory, folder: Path) -> WriteQueue:
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=folder, retry=FAST)
    assert await queue.flush(60)
    return queue


async def test_a_zeroed_outbox_is_moved_aside_and_a_new_one_started(
    memory: AsyncMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "outbox"
    _left_rows(folder, 3)
    path = folder / OUTBOX_FILENAME
    path.write_bytes(b"\0" * path.stat().st_size)  # what a crash on some filesystems leaves
    with caplog.at_level(logging.ERROR):
        queue = await _replay(memory, folder)
    assert f"the outbox {path} was damaged" in caplog.text
    (moved,) = folder.glob(f"{OUTBOX_FILENAME}.damaged-*[0-9]")
    assert moved.read_bytes() == b"\0" * moved.stat().st_size  # kept for inspection
    await queue.submit(SCOPE, said("I like fruit09."))  # the new outbox works
    assert await queue.flush(30)
    assert await fruit_counts(memory) == Counter({"fruit09": 1})
    await queue.aclose()


async def test_a_corrupted_page_keeps_every_row_still_readable(
    memory: AsyncMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "outbox"
    _left_rows(folder, 40, size=1500)  # two or three rows a page
    path = folder / OUTBOX_FILENAME
    with path.open("r+b") as f:  # one page of garbage in the middle of the table
        f.seek(4096 * 12)
        f.write(random.Random(3).randbytes(4096))
    with caplog.at_level(logging.ERROR):
        queue = await _replay(memory, folder)
    kept = queue.outbox.recovered_at_open
    assert kept is not None and 30 <= kept < 40
    assert "some rows could not be read and are lost" in caplog.text
    found = await fruit_counts(memory)
    assert len(found) == kept and set(found.values()) == {1}  # the readable ones, once
    await queue.aclose()


def _crash_with_rows(folder: Path, n: int) -> None:
    """A process that records ``n`` writes and is killed before SQLite checkpoints them."""
    script = (
        "import os, signal, sys\n"
        "from agentscope_mem0 import Outbox\n"
        "box = Outbox.in_folder(sys.argv[1])\n"
        f"for i in range({n}):\n"
        "    box.insert(key=f'k{i}', user_id='alice', agent_id='assistant',\n"
        "               messages=[{'role': 'user', 'content': 'I like fruit%02d.' % i}],\n"
        "               owner='elsewhere:1:x', lease=60)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(folder)], check=False, timeout=60)
    assert (folder / f"{OUTBOX_FILENAME}-wal").exists()


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
async def test_a_lost_wal_is_detected_and_counted(
    memory: AsyncMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    folder = tmp_path / "outbox"
    _crash_with_rows(folder, 5)
    wal = folder / f"{OUTBOX_FILENAME}-wal"
    if damage == "deleted":
        wal.unlink()
        (folder / f"{OUTBOX_FILENAME}-shm").unlink(missing_ok=True)
    else:
        wal.write_bytes(random.Random(5).randbytes(wal.stat().st_size))
    with caplog.at_level(logging.ERROR):
        queue = WriteQueue(Mem0Backend(memory), outbox_dir=folder, retry=FAST)
    assert "5 memory writes recorded in the outbox" in caplog.text
    assert "were deleted or damaged" in caplog.text or "was deleted or damaged" in caplog.text
    assert queue.stats()["writes_lost"] == 5
    assert not await queue.flush(5)  # lost writes are not reported as a success
    await queue.submit(SCOPE, said("I like fruit09."))  # and it goes on working
    assert await queue.flush(30)
    assert await fruit_counts(memory) == Counter({"fruit09": 1})
    await queue.aclose()


async def test_a_damaged_history_database_is_moved_aside(
    tmp_path: Path, store_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    history = Path(store_config["history_db_path"])
    history.write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING):
        mw = Mem0Middleware(
            user_id="alice",
            chat_model=ScriptedChatModel(extractor=UniqueFacts()),
            embedding_model=HashEmbedding(),
            mem0_config=store_config,
            mode="static_control",
        )
    assert f"history database {history} is damaged" in caplog.text
    assert list(tmp_path.glob("history.db.damaged-*"))
    agent = Agent(
        name="assistant", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw]
    )
    await agent.reply(UserMsg(name="user", content="I like fruit01."))
    assert await mw.flush(30)
    assert await fruit_counts(mw.client) == Counter({"fruit01": 1})
    await mw.aclose()
    mw.client.vector_store.client.close()


def test_a_model_call_whose_loop_ends_fails_fast_instead_of_stalling_exit() -> None:
    # asyncio.run returning while mem0 still runs a call on its write lane: the
    # model coroutine sent to the agent's loop never runs; the call must not
    # wait out the bridge's 60 s timeout (it held the interpreter's exit).
    import threading
    import time

    from agentscope_mem0 import BridgeError
    from agentscope_mem0._mem0.call_context import calling
    from agentscope_mem0._mem0.loops import run_model

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever)
    runner.start()
    try:
        threading.Timer(0.3, loop.call_soon_threadsafe, args=(loop.stop,)).start()
        threading.Timer(0.6, lambda: (runner.join(), loop.close())).start()
        started = time.monotonic()
        with calling(loop=loop), pytest.raises(BridgeError, match="closed before it ran"):
            run_model(asyncio.sleep(30), timeout=60)
        assert time.monotonic() - started < 20  # well before the 60 s timeout
    finally:
        runner.join(5)
