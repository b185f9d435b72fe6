"""The fault suite: processes that end badly, full disks, damaged files, bad models.

Everything is real (mem0, local Qdrant, SQLite files, subprocesses, a tmpfs
where the machine allows mounting one); only the chat model and the embedder
are the offline fakes. For each fault: replies complete, and every write is
stored once or visibly failed, never silently lost. docs/benchmarks/faults.md
describes each fault and how to run this file.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
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
from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0._exceptions import InvalidStateError
from agentscope_mem0._outbox import OUTBOX_FILENAME, Outbox
from agentscope_mem0._writer import RetryPolicy
from agentscope_mem0.testing import ScriptedChatModel
from fakes import real_memory

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


def _close(memory: AsyncMemory) -> None:
    memory.vector_store.client.close()


@pytest.fixture
def memory(store_config: dict[str, Any]) -> Iterator[AsyncMemory]:
    mem = real_memory(store_config, ScriptedChatModel(extractor=UniqueFacts()))
    yield mem
    _close(mem)


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
    # Models + the user's own mem0_config, no outbox_dir: extraction is slow
    # (0.8 s a turn), so most writes are still queued when the script ends.
    proc = _child(ending, tmp_path, 8, 0.8)
    out, err = proc.communicate(timeout=120)
    assert out.count("replied") == 8, err
    outbox = tmp_path / "store" / OUTBOX_FILENAME
    assert outbox.exists()  # next to the store's own files
    found = await _next_process_stores(tmp_path)
    assert found == Counter({f"fruit{i:02d}": 1 for i in range(8)})
    assert Outbox(outbox).counts() == {"pending": 0, "failed": 0}


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
