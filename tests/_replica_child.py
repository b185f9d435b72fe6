"""One replica of a service, as on its own pod, for tests/write/test_pod_loss.py.

Usage::

    python _replica_child.py <dsn> <collection> <folder>

It builds a real mem0 on PostgreSQL/pgvector (``collection``; mem0's history
in ``<folder>``, its HOME and data folder) with the scripted offline models,
extraction taking 0.3 s per call, and a ``WriteQueue`` with every default:
its outbox is then the table ``<collection>_outbox`` in the same database.
Then it reads commands, one a line, and answers each on stdout:

* ``submit <user> <text>``: queue one exchange of ``<user>`` saying
  ``<text>``; answers ``ok`` once ``submit`` returned (the write is
  acknowledged, as a reply would be);
* ``flush``: answers ``flushed True`` (or ``False``) when everything queued,
  here or left by a replica that is gone, is stored;
* ``close``: closes the queue, answers ``closed`` and ends.

It prints ``ready`` once it can take commands.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentscope_mem0 import Mem0Backend, RetryPolicy, Scope, WriteQueue, build_mem0_config
from agentscope_mem0.backends import pgvector_config
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts

DIMS = 64
AGENT = "assistant"


def memory_config(dsn: str, collection: str, folder: Path) -> dict[str, object]:
    """The mem0 config fields of a replica (and of the test reading the store)."""
    return pgvector_config(
        dsn, dims=DIMS, collection=collection, history_db_path=str(folder / "history.db")
    )


def said(text: str) -> list[dict[str, str]]:
    """An exchange in which the user says ``text``."""
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


def answer(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def serve(dsn: str, collection: str, folder: Path) -> None:
    from mem0 import AsyncMemory

    memory = AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(extractor=UniqueFacts(), delay=0.3),
            embedding_model=HashEmbedding(DIMS),
            mem0_config=memory_config(dsn, collection, folder),
        )
    )
    queue = WriteQueue(Mem0Backend(memory), retry=RetryPolicy(initial_delay=0.05, max_delay=0.2))
    loop = asyncio.get_running_loop()
    answer("ready")
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        command, _, rest = line.partition(" ")
        if command == "submit":
            user, _, text = rest.partition(" ")
            await queue.submit(Scope(user, AGENT), said(text))
            answer("ok")
        elif command == "flush":
            answer(f"flushed {await queue.flush(60)}")
        else:  # "close", or stdin closed
            await queue.aclose()
            answer("closed")
            return


def main(argv: list[str]) -> None:
    dsn, collection, folder = argv[0], argv[1], Path(argv[2])
    asyncio.run(serve(dsn, collection, folder))


if __name__ == "__main__":
    main(sys.argv[1:])
