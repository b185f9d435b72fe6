"""The whole data folder on a filesystem that fills up: no crash, nothing
acknowledged lost, recovery by itself.

The folder of ``Mem0Middleware.local`` (the embedded store, the outbox,
mem0's history) lives on a small tmpfs that a filler file fills to the last
byte while replies go on. The app runs in a child process: on a full disk
Qdrant Edge's memory-mapped files would kill it with SIGBUS, which must not
happen. Needs ``mount`` rights (root); without them the test is skipped and
the pieces are covered with injected faults
(``test_store_sync.py::test_a_store_out_of_disk_space_defers_writes_without_failing_them``,
``test_faults.py::test_a_full_disk_keeps_writes_in_memory_and_recovers_by_itself``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentscope_mem0
from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts

BEFORE, DURING = 3, 20
"""Replies before the disk fills up, and while it is full."""

# The app: replies before and while the disk is full (each printed as
# "ack <i> durable|memory": recorded in the outbox file, or held in memory
# only, as stats() tells), then, in "recover" mode, the filler is removed
# and the app drains; in "kill" mode it waits to be killed; in "exit" mode
# it closes and ends with the disk still full.
_APP = """
import asyncio, json, os, sys, time
from pathlib import Path
from agentscope_mem0 import Mem0Middleware
from agentscope_mem0._write import delivery
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts, one_session

mount, mode = Path(sys.argv[1]), sys.argv[2]
before, during = int(sys.argv[3]), int(sys.argv[4])
delivery.SPACE_RETRY_DELAY = delivery.RETRY_DELAY = 0.5

def fill(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    for size in (1 << 20, 4096, 1):  # to the last byte
        try:
            while True:
                os.write(fd, b"\\0" * size)
        except OSError:
            pass
    os.close(fd)

def stats(mw):
    return {k: v for k, v in mw.stats().items() if k.startswith(("writes_", "outbox_"))}

async def main():
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(extractor=UniqueFacts()),
        embedding_model=HashEmbedding(64),
        folder=mount / "data",
    )
    for i in range(before):
        await one_session(mw, f"I like fruit{i:02d}.")
        print(f"ack {i} durable", flush=True)
    assert await mw.flush(60)
    fill(mount / "filler")
    print("full", flush=True)
    for i in range(before, before + during):
        held = stats(mw)["writes_in_memory_only"]
        await one_session(mw, f"I like fruit{i:02d}.")
        kept = "memory" if stats(mw)["writes_in_memory_only"] > held else "durable"
        print(f"ack {i} {kept}", flush=True)
    await asyncio.sleep(3)  # the store refuses, the writes wait
    print("while full " + json.dumps(stats(mw)), flush=True)
    if mode == "kill":
        await asyncio.sleep(600)
    if mode == "exit":
        print("closing " + str(await mw.aclose(5)), flush=True)
        return
    os.remove(mount / "filler")
    flushed = await mw.flush(120)
    print("after " + json.dumps({"flushed": flushed, **stats(mw)}), flush=True)
    await mw.aclose()

asyncio.run(main())
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 MB tmpfs (twice the store's default reserve), unmounted at the end."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    tests = str(Path(__file__).parents[1])
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, tests, env.get("PYTHONPATH")) if p)
    return env


def _run_app(mount: Path, mode: str) -> tuple[list[str], str, int]:
    command = [
        sys.executable,
        "-X",
        "faulthandler",
        "-c",
        _APP,
        str(mount),
        mode,
        str(BEFORE),
        str(DURING),
    ]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    assert child.stdout is not None
    lines: list[str] = []
    for line in child.stdout:
        lines.append(line.strip())
        if mode == "kill" and line.startswith("while full"):
            os.kill(child.pid, signal.SIGKILL)
            break
    _, err = child.communicate(timeout=300)
    return lines, err, child.returncode


def _acks(lines: list[str]) -> dict[int, str]:
    return {int(m[1]): m[2] for m in (re.match(r"ack (\d+) (\w+)", x) for x in lines) if m}


def _report(lines: list[str], prefix: str) -> dict[str, int]:
    found = [json.loads(x.removeprefix(prefix)) for x in lines if x.startswith(prefix)]
    assert found, f"no {prefix!r} line in {lines}"
    report: dict[str, int] = found[0]
    return report


async def _stored(folder: Path) -> Counter[str]:
    """Each fruit's count in the store, once a new app on ``folder`` stored
    what the outbox kept."""
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(extractor=UniqueFacts()),
        embedding_model=HashEmbedding(64),
        folder=folder,
    )
    try:
        assert await mw.flush(120)
        stored = mw.client.vector_store.list(filters={"user_id": "alice"}, top_k=10_000)[0]
        text = " ".join(str(item.payload.get("data", "")) for item in stored)
        return Counter(re.findall(r"\bfruit\d\d\b", text))
    finally:
        await mw.aclose()
        with contextlib.suppress(Exception):
            from agentscope_mem0.local import close_shared_clients

            close_shared_clients(folder)


async def test_a_full_data_folder_holds_the_writes_and_recovers_by_itself(
    small_disk: Path,
) -> None:
    lines, err, code = _run_app(small_disk, "recover")
    assert code == 0, err[-3000:]  # no SIGBUS (-7), no error
    acks = _acks(lines)
    assert sorted(acks) == list(range(BEFORE + DURING)), err[-3000:]  # every reply completed
    full = _report(lines, "while full ")
    # The store refused while the disk was full, and said so: nothing failed.
    assert full["writes_deferred"] > 0 and full["writes_failed"] == 0
    assert full["writes_stored"] == BEFORE
    # What the outbox could not record was said to be held in memory only.
    memory_only = [i for i, kept in acks.items() if kept == "memory"]
    assert full["writes_unrecorded"] == len(memory_only) > 0
    assert "memory writes wait for disk space" in err
    assert "could not record memory writes in the outbox" in err
    after = _report(lines, "after ")
    assert after["flushed"] and after["writes_failed"] == 0 and after["writes_lost"] == 0
    assert after["writes_in_memory_only"] == 0 and after["writes_unsynced"] == 0
    stored = await asyncio.wait_for(_stored(small_disk / "data"), 300)
    assert stored == Counter({f"fruit{i:02d}": 1 for i in range(BEFORE + DURING)})


@pytest.mark.parametrize("ending", ["kill", "exit"])
async def test_writes_recorded_on_a_full_disk_survive_the_process_ending(
    small_disk: Path, ending: str
) -> None:
    """Killed, or closed and ended, while the disk is still full; the next
    process on the folder, once space is back, stores what was recorded.

    Ending used to crash too: dropping the engine at exit wrote into its
    memory-mapped files (SIGBUS while garbage-collecting)."""
    lines, err, code = _run_app(small_disk, ending)
    assert code == (-signal.SIGKILL if ending == "kill" else 0), err[-3000:]  # no SIGBUS
    acks = _acks(lines)
    assert len(acks) == BEFORE + DURING, err[-3000:]
    (small_disk / "filler").unlink()  # space is back
    stored = await asyncio.wait_for(_stored(small_disk / "data"), 300)
    durable = {f"fruit{i:02d}" for i, kept in acks.items() if kept == "durable"}
    assert durable <= set(stored)  # every write acknowledged as recorded is there
    assert max(stored.values()) == 1  # none twice
    # Only the ones the app was told were held in memory may be missing.
    assert set(stored) | {f"fruit{i:02d}" for i, k in acks.items() if k == "memory"} == {
        f"fruit{i:02d}" for i in range(BEFORE + DURING)
    }
