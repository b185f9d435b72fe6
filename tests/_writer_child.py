"""A process that queues memory writes and then dies, for tests/test_writer.py.

Usage::

    python _writer_child.py crash-after-add <folder> <n>
    python _writer_child.py pending <folder> <n>

Both build a real mem0 ``AsyncMemory`` on a local Qdrant in ``<folder>/store``
and a ``WriteQueue`` with its outbox in ``<folder>/outbox``, submit ``n``
exchanges ("I like fruitNN.") over three users, and print ``queued`` once
``submit`` returned for all of them.

* ``crash-after-add``: the first mem0 ``add`` to return kills the process
  with SIGKILL, after mem0 stored the memories and before the outbox heard
  of it: the window exactly-once replay must cover.
* ``pending``: extraction takes 1 s per call; the process waits to be
  killed by the parent.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from agentscope_mem0 import Mem0Backend, RetryPolicy, Scope, WriteQueue, build_mem0_config
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts


def store_config(folder: Path) -> dict[str, Any]:
    """The mem0 config fields the child and the test's next process share."""
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "writes",
                "path": str(folder / "store" / "qdrant"),
                "on_disk": True,
            },
        },
        "history_db_path": str(folder / "store" / "history.db"),
    }


def exchange(i: int) -> tuple[Scope, list[dict[str, str]]]:
    """The ``i``-th exchange the child submits."""
    return Scope(f"user{i % 3}", "agent"), [
        {"role": "user", "content": f"I like fruit{i:02d}."},
        {"role": "assistant", "content": "Noted."},
    ]


class KillAfterAdd:
    """Forwards to mem0; once the first add has returned, kills this process."""

    def __init__(self, inner: Any, gate: asyncio.Event) -> None:
        self.inner = inner
        self.gate = gate

    async def add(self, *args: Any, **kwargs: Any) -> Any:
        await self.gate.wait()
        result = await self.inner.add(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return result

    async def get_all(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.get_all(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.delete(*args, **kwargs)


async def run(mode: str, folder: Path, n: int) -> None:
    from mem0 import AsyncMemory

    delay = 1.0 if mode == "pending" else 0.0
    memory = AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(extractor=UniqueFacts(), delay=delay),
            embedding_model=HashEmbedding(),
            mem0_config=store_config(folder),
        )
    )
    gate = asyncio.Event()
    client: Any = KillAfterAdd(memory, gate) if mode == "crash-after-add" else memory
    queue = WriteQueue(
        Mem0Backend(client),
        outbox_dir=folder / "outbox",
        retry=RetryPolicy(initial_delay=0.01, max_delay=0.05),
    )
    for i in range(n):
        scope, messages = exchange(i)
        await queue.submit(scope, messages)
        await asyncio.sleep(0.05)  # turns come one after another
    sys.stdout.write("queued\n")
    sys.stdout.flush()
    gate.set()
    await asyncio.sleep(120)  # the parent (or the first add) kills us first


def main(argv: list[str]) -> None:
    mode, folder, n = argv[0], Path(argv[1]), int(argv[2])
    if mode not in ("crash-after-add", "pending"):
        raise SystemExit(f"unknown mode {mode!r}")
    asyncio.run(run(mode, folder, n))


if __name__ == "__main__":
    main(sys.argv[1:])
