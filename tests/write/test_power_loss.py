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
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

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


# The process that loses its power: it copies each shard folder right after
# each flush (under the shard's lock, so the copy is what the disk holds),
# acknowledges 12 writes, waits until mem0 holds them all, and is killed.
_LIVE = """
import asyncio, shutil, sys, time
from pathlib import Path
from agentscope_mem0 import Mem0Backend, RetryPolicy, Scope, WriteQueue, build_local_memory
from agentscope_mem0.local._edge import SharedShard
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts

live, synced = Path(sys.argv[1]), Path(sys.argv[2])

def copy(shard):
    target = synced / shard.name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(shard, target)
    mark = shard.parent / f".{shard.name}.mark.json"
    if mark.exists():
        shutil.copy2(mark, synced / f".{shard.name}.mark.json")

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
    for i in range(12):
        said = [{"role": "user", "content": f"I like fruit{i:02d}."}]
        await queue.submit(Scope("alice", "assistant"), said)
    while len(memory.vector_store.list(filters={"user_id": "alice"}, top_k=100)[0]) < 12:
        await asyncio.sleep(0.02)
    print("acknowledged and in mem0", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _power_loss(live: Path, synced: Path, restored: Path) -> None:
    """Run the live process until mem0 holds its writes, kill it, and build
    ``restored``: what its disk holds after a power loss."""
    env = dict(os.environ)
    here = str(Path(__file__).parents[1])
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, here, env.get("PYTHONPATH")) if p)
    synced.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _LIVE, str(live), str(synced)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    os.kill(child.pid, signal.SIGKILL)
    _, err = child.communicate(timeout=60)
    assert line.startswith("acknowledged"), err
    # The outbox and mem0's history commit with fsync: they are as they were.
    shutil.copytree(live, restored, ignore=shutil.ignore_patterns("edge"))
    shutil.copytree(synced, restored / "edge")


def _tags(memory: Any) -> Counter[str]:
    stored = memory.vector_store.list(filters={"user_id": "alice"}, top_k=10_000)[0]
    text = " ".join(str(item.payload.get("data", "")) for item in stored)
    return Counter(re.findall(r"\bfruit\d\d\b", text))


async def test_every_acknowledged_write_survives_a_power_loss(tmp_path: Path) -> None:
    restored = tmp_path / "restored"
    _power_loss(tmp_path / "live", tmp_path / "synced", restored)
    assert (restored / OUTBOX_FILENAME).exists()

    after = _memory(restored)
    replay = WriteQueue(Mem0Backend(after), outbox_dir=restored, retry=FAST)
    assert await replay.flush(60)
    assert _tags(after) == Counter({f"fruit{i:02d}": 1 for i in range(12)})
    await replay.aclose()
    close_shared_clients(restored)


def test_the_outbox_commits_durably(tmp_path: Path) -> None:
    """A recorded write is on disk when the reply goes on (not only in the OS's cache)."""
    from agentscope_mem0 import Outbox

    box = Outbox(tmp_path / OUTBOX_FILENAME)
    try:
        (level,) = box.db.read("PRAGMA synchronous")[0]
        assert level == 2  # FULL: every commit is fsynced (NORMAL, 1, was before)
    finally:
        box.close()
