"""Acknowledged writes survive a power loss, not only the process dying.

The embedded store puts a write on disk only when it flushes; until then it
is in the engine's write-ahead log, in the page cache. A power loss is
simulated by restarting from what was synced: each Qdrant Edge shard as it
was right after its last flush (copied at that moment, under the shard's
lock), the outbox and mem0's history as they are (their commits are
fsynced). The next process on that folder must store every acknowledged
write exactly once.

Real mem0, real Qdrant Edge shards and SQLite files under tmp_path; the chat
model and the embedder are the offline fakes.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import agentscope_mem0
from agentscope_mem0 import Mem0Backend, RetryPolicy, Scope, WriteQueue, build_local_memory
from agentscope_mem0._write.outbox import OUTBOX_FILENAME
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts

SCOPE = Scope("alice", "assistant")
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05)


def _memory(folder: Path) -> Any:
    return build_local_memory(
        ScriptedChatModel(extractor=UniqueFacts()), embedding_model=HashEmbedding(64), folder=folder
    )


# The process that loses its power. Right after each flush of a shard (under
# the shard's lock, so the copy is what the disk holds) it copies the shard
# into a new numbered folder and then points "<shard>.current" at it: a kill
# in the middle of a copy leaves the previous sync point. It acknowledges
# writes (prints "ack <i>" once submit returned), then, in "settle" mode,
# waits until mem0 holds them all; the test kills it.
_LIVE = """
import asyncio, os, shutil, sys
from pathlib import Path
from agentscope_mem0 import Mem0Backend, RetryPolicy, Scope, WriteQueue, build_local_memory
from agentscope_mem0._write import delivery
from agentscope_mem0.local._edge import SharedShard
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts

live, synced, mode, count = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
delivery.SYNC_WINDOW = float(sys.argv[5])
copies = 0

def copy(shard):
    global copies
    copies += 1
    target = synced / f"{shard.name}.{copies}"
    shutil.copytree(shard, target)
    mark = shard.parent / f".{shard.name}.mark.json"
    if mark.exists():
        shutil.copy2(mark, target / "_mark.json")
    pointer = synced / f"{shard.name}.current"
    (synced / "next").write_text(target.name)
    os.replace(synced / "next", pointer)

real_call, real_init = SharedShard.call, SharedShard.__init__
def call(shard, what, method, *args, **kwargs):
    result = real_call(shard, what, method, *args, **kwargs)
    if what == "flush":
        copy(shard.path)
    return result
def init(shard, *args, **kwargs):
    real_init(shard, *args, **kwargs)
    copy(shard.path)
SharedShard.call, SharedShard.__init__ = call, init

async def main():
    memory = build_local_memory(
        ScriptedChatModel(extractor=UniqueFacts()), embedding_model=HashEmbedding(64), folder=live
    )
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=live, retry=RetryPolicy(initial_delay=0.01))
    print("ready", flush=True)
    for i in range(count):
        said = [{"role": "user", "content": f"I like fruit{i:02d}."}]
        await queue.submit(Scope("alice", "assistant"), said)
        print(f"ack {i}", flush=True)
        if mode == "spread":
            await asyncio.sleep(0.1)
    while mode == "settle" and len(
        memory.vector_store.list(filters={"user_id": "alice"}, top_k=100)[0]
    ) < count:
        await asyncio.sleep(0.02)
    print("settled", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _power_loss(
    tmp_path: Path, *, mode: str, count: int, window: float, kill_after: float | None
) -> tuple[Path, set[int]]:
    """Run the live process, kill it, and build what its disk holds after a
    power loss; returns that folder and the writes it acknowledged.

    ``kill_after``: seconds after it is ready (``None``: once it printed "settled").
    """
    live, synced, restored = tmp_path / "live", tmp_path / "synced", tmp_path / "restored"
    env = dict(os.environ)
    here = str(Path(__file__).parents[1])
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, here, env.get("PYTHONPATH")) if p)
    synced.mkdir()
    command = [sys.executable, "-c", _LIVE, str(live), str(synced), mode, str(count), str(window)]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    lines: list[str] = []
    ready, settled = threading.Event(), threading.Event()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.append(line.strip())
            if line.startswith("ready"):
                ready.set()
            elif line.startswith("settled"):
                settled.set()

    reader = threading.Thread(target=read, args=(child.stdout,), daemon=True)
    reader.start()
    assert ready.wait(120), "the live process did not start"
    if kill_after is None:
        assert settled.wait(120), "the live process did not store its writes"
    else:
        time.sleep(kill_after)
    os.kill(child.pid, signal.SIGKILL)
    _, err = child.communicate(timeout=60)
    reader.join(10)
    acknowledged = {int(line.split()[1]) for line in lines if line.startswith("ack ")}
    # The outbox and mem0's history commit with fsync: they are as they were.
    shutil.copytree(live, restored, ignore=shutil.ignore_patterns("edge"))
    for pointer in synced.glob("*.current"):
        snapshot = synced / pointer.read_text()
        shard = restored / "edge" / pointer.name.removesuffix(".current")
        shutil.copytree(snapshot, shard, ignore=shutil.ignore_patterns("_mark.json"))
        if (snapshot / "_mark.json").exists():
            shutil.copy2(snapshot / "_mark.json", shard.parent / f".{shard.name}.mark.json")
    assert (restored / OUTBOX_FILENAME).exists(), err
    return restored, acknowledged


def _tags(memory: Any) -> Counter[str]:
    stored = memory.vector_store.list(filters={"user_id": "alice"}, top_k=10_000)[0]
    text = " ".join(str(item.payload.get("data", "")) for item in stored)
    return Counter(re.findall(r"\bfruit\d\d\b", text))


async def _replayed(restored: Path) -> Counter[str]:
    """What a new process on ``restored`` holds once it stored what the outbox kept."""
    after = _memory(restored)
    replay = WriteQueue(Mem0Backend(after), outbox_dir=restored, retry=FAST)
    assert await replay.flush(120)
    tags = _tags(after)
    await replay.aclose()
    close_shared_clients(restored)
    return tags


async def test_every_acknowledged_write_survives_a_power_loss(tmp_path: Path) -> None:
    """Killed right after mem0 stored every write, before the store synced them."""
    restored, acknowledged = _power_loss(
        tmp_path, mode="settle", count=12, window=5.0, kill_after=None
    )
    assert acknowledged == set(range(12))
    assert await _replayed(restored) == Counter({f"fruit{i:02d}": 1 for i in range(12)})


async def test_a_power_loss_at_a_random_point_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    """Killed at a random moment while writes arrive, are stored and synced
    (a 1 s sync window, so that some rows were retired before the loss)."""
    seed = int(os.environ.get("FAULT_SEED", str(random.randrange(1_000_000))))
    kill_after = random.Random(seed).uniform(0.2, 7.0)
    restored, acknowledged = _power_loss(
        tmp_path, mode="spread", count=40, window=1.0, kill_after=kill_after
    )
    tags = await _replayed(restored)
    where = f"FAULT_SEED={seed} (killed {kill_after:.2f} s after start)"
    assert acknowledged, where
    assert {f"fruit{i:02d}" for i in acknowledged} <= set(tags), where  # none lost
    assert max(tags.values()) == 1, where  # none twice


def test_the_outbox_commits_durably(tmp_path: Path) -> None:
    """A recorded write is on disk when the reply goes on (not only in the OS's cache)."""
    from agentscope_mem0 import Outbox

    box = Outbox(tmp_path / OUTBOX_FILENAME)
    try:
        (level,) = box.read("PRAGMA synchronous")[0]
        assert level == 2  # FULL: every commit is fsynced (NORMAL, 1, was before)
    finally:
        box.close()
