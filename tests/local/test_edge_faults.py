"""The embedded store against a second opener and missing files.

Real Qdrant Edge shards on disk under tmp_path, real mem0, other processes
where the fault needs one; the models are the offline fakes.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentscope_mem0
from agentscope_mem0 import DiskFullError, StoreDamagedError, build_local_memory
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.local._folder import COLLECTION
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

DIMS = 64

_OPEN_AND_REPORT = """
import sys
from agentscope_mem0 import StoreLockedError, build_local_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
try:
    build_local_memory(ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=sys.argv[1])
except StoreLockedError as exc:
    print("locked:", exc)
else:
    print("opened")
"""

_WRITE_THEN_WAIT = """
import asyncio, sys
from agentscope_mem0 import build_local_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

async def main(folder, action, count):
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=folder
    )
    if action == "add":
        for i in range(count):
            await memory.add([{"role": "user", "content": f"fact {i}"}], user_id="u", infer=False)
    else:
        listed = memory.vector_store.list(filters={"user_id": "u"}, top_k=count)[0][:count]
        for item in listed:
            await memory.delete(item.id)
    print("done", flush=True)
    await asyncio.sleep(600)  # until killed: nothing is flushed or closed

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def _memory(folder: Path) -> Any:
    return build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=folder
    )


async def _add(memory: Any, first: int, count: int) -> None:
    for i in range(first, first + count):
        await memory.add([{"role": "user", "content": f"fact {i}"}], user_id="u", infer=False)


def _count(memory: Any) -> int:
    return len(memory.vector_store.list(filters={"user_id": "u"}, top_k=10_000)[0])


def _crash_after(folder: Path, action: str, count: int) -> None:
    """A process that does ``action`` on ``count`` memories and is then killed."""
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITE_THEN_WAIT, str(folder), action, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    os.kill(child.pid, signal.SIGKILL)
    _, err = child.communicate(timeout=30)
    assert line.strip() == "done", err


async def test_a_second_process_is_refused_before_the_engine_touches_the_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = _memory(tmp_path)
    await _add(memory, 0, 30)
    shard = memory.vector_store.shard
    shard.call("flush", lambda s: s.flush())

    other = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_REPORT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert other.stdout.startswith("locked:"), other.stdout + other.stderr
    assert "another process" in other.stdout

    # The live process goes on: it writes, syncs and closes without an error
    # (before, its next flush failed: "Tracker journal ... is shorter than expected").
    await _add(memory, 30, 10)
    shard.call("flush", lambda s: s.flush())
    with caplog.at_level(logging.ERROR):
        close_shared_clients(tmp_path)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert _count(_memory(tmp_path)) == 40
    close_shared_clients(tmp_path)


def test_a_lost_write_ahead_log_after_a_crash_is_refused(tmp_path: Path) -> None:
    _crash_after(tmp_path, "add", 30)  # 30 writes, in the log only
    shard = tmp_path / "edge" / COLLECTION
    shutil.rmtree(shard / "wal")

    with pytest.raises(StoreDamagedError) as info:
        _memory(tmp_path)
    message = str(info.value)
    assert str(shard) in message and "wal/" in message and "import" in message


async def test_lost_segments_after_a_clean_close_are_refused_until_the_loss_is_accepted(
    tmp_path: Path,
) -> None:
    memory = _memory(tmp_path)
    await _add(memory, 0, 30)
    close_shared_clients(tmp_path)
    shard = tmp_path / "edge" / COLLECTION
    shutil.rmtree(shard / "segments")

    with pytest.raises(StoreDamagedError) as info:
        _memory(tmp_path)
    message = str(info.value)
    assert str(shard) in message and "held 30" in message
    mark = message.split("delete ", 1)[1].split(" and open", 1)[0]
    assert Path(mark).exists()
    # The way out it names: accept the loss by deleting the mark.
    Path(mark).unlink()
    assert _count(_memory(tmp_path)) < 30
    close_shared_clients(tmp_path)


async def test_deletions_the_log_replays_are_not_a_loss(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    await _add(memory, 0, 30)
    close_shared_clients(tmp_path)
    _crash_after(tmp_path, "delete", 10)  # deleted, in the log only, then killed

    assert _count(_memory(tmp_path)) == 20
    close_shared_clients(tmp_path)


async def test_a_nearly_full_disk_refuses_writes_before_the_engine_can_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _memory(tmp_path)
    await _add(memory, 0, 3)
    free_mb = shutil.disk_usage(tmp_path).free / 1024 / 1024
    monkeypatch.setenv("AGENTSCOPE_MEM0_MIN_FREE_MB", str(free_mb * 2))  # "almost full"
    with pytest.raises(DiskFullError, match="free"):
        await memory.add([{"role": "user", "content": "fact x"}], user_id="u", infer=False)
    assert _count(memory) == 3  # nothing reached the engine
    monkeypatch.delenv("AGENTSCOPE_MEM0_MIN_FREE_MB")  # space is back
    await _add(memory, 3, 1)
    assert _count(memory) == 4
    close_shared_clients(tmp_path)


_OPEN_AND_ADD = """
import asyncio, sys
from agentscope_mem0 import DiskFullError, build_local_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

async def main():
    try:
        memory = build_local_memory(
            ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=sys.argv[1]
        )
        await memory.add([{"role": "user", "content": "fact new"}], user_id="u", infer=False)
    except DiskFullError as exc:
        print("refused:", exc)
    else:
        print("stored")

asyncio.run(main())
"""


def test_opening_a_store_on_a_nearly_full_disk_refuses_instead_of_crashing(
    tmp_path: Path,
) -> None:
    """Opening a shard can claim tens of MB of memory-mapped pages before any
    write: on a tmpfs with less than that free the engine died with SIGBUS.
    Each free size must end with the memory stored or a DiskFullError."""
    seed = tmp_path / "seed"
    env = {k: v for k, v in os.environ.items() if k != "AGENTSCOPE_MEM0_MIN_FREE_MB"}
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    made = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_ADD, str(seed)], capture_output=True, text=True, env=env
    )
    assert made.stdout.strip() == "stored", made.stderr[-2000:]

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=320m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace')}")
    outcomes = {}
    try:
        for free_mb in (30, 100, 250):
            for child in disk.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
            # cp keeps the engine's sparse files sparse; copytree would fill them.
            subprocess.run(
                ["cp", "-a", "--sparse=always", str(seed), str(disk / "data")], check=True
            )
            filler = shutil.disk_usage(disk).free - free_mb * 1024 * 1024
            with open(disk / "filler", "wb") as out:
                os.posix_fallocate(out.fileno(), 0, filler)
            run = subprocess.run(
                [sys.executable, "-c", _OPEN_AND_ADD, str(disk / "data")],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert run.returncode == 0, (free_mb, run.returncode, run.stderr[-2000:])
            outcomes[free_mb] = run.stdout.split(":")[0].strip()
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    assert outcomes[30] == "refused" and outcomes[250] == "stored", outcomes
    assert set(outcomes.values()) <= {"refused", "stored"}, outcomes
