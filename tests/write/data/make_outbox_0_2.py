"""Writes ``outbox-0.2.sqlite3`` with release 0.2's own write queue (run once, by hand).

Run from the repository root, with release 0.2's sources on the path::

    git -C <checkout> worktree add /work/wt-v02 30d9697   # release 0.2
    PYTHONPATH=/work/wt-v02/src python tests/write/data/make_outbox_0_2.py

It queues writes the way release 0.2 does (the said time stamped inside
each message dict), lets the worker send a few of them to a stand-in for
mem0 that rejects one exchange and never answers the others, and ends the
process with ``os._exit`` before anything is stored: the rows stay in the
file, claimed by a process that is gone. SQLite then folds the WAL into the
main file (one read, then close: the last connection out checkpoints), and
the file is copied here. ``tests/write/test_outbox_migration.py`` migrates it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

TARGET = Path(__file__).with_name("outbox-0.2.sqlite3")


class StandIn:
    """Rejects an exchange mentioning REJECT; never answers any other."""

    config = None

    async def add(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if any("REJECT" in str(m.get("content")) for m in messages):
            raise ValueError("bad request: rejected on purpose")
        await asyncio.Event().wait()


async def queue_writes(folder: Path) -> None:
    from agentscope_mem0._backend import Mem0Backend
    from agentscope_mem0._writer import WriteQueue

    from agentscope_mem0 import Scope

    queue = WriteQueue(Mem0Backend(StandIn()), outbox_dir=folder)
    alice, bob = Scope("alice", "assistant"), Scope("bob")

    def said(text: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]

    # alice: the first is sent (and never answered); the others wait behind it.
    await queue.submit(alice, said("I live in Hangzhou."), said_at="2024-01-05T10:00:00+00:00")
    await asyncio.sleep(0.3)
    # 2024-03-11 03:30 UTC and 09:00 UTC: one said day, in two time zones.
    await queue.submit(
        alice, said("I moved to Beijing last month."), said_at="2024-03-10T22:30:00-05:00"
    )
    await queue.submit(
        alice, said("Je m'appelle Zoë, 我喜欢茶."), said_at="2024-03-11T09:00:00+00:00"
    )
    await queue.submit(alice, said("I like green tea."))  # said now (when this ran)
    await queue.submit_facts(alice, ["User is allergic to peanuts."], timeout=0)
    # bob (no agent): rejected for good, then one sent and never answered.
    await queue.submit(bob, said("REJECT this one."), said_at=dt.date(2020, 5, 1))
    await queue.submit(bob, said("I play the cello."), said_at=dt.datetime(2020, 5, 1, 18, 0))
    await asyncio.sleep(1.0)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pid = os.fork()
        if pid == 0:
            asyncio.run(queue_writes(folder))
            sys.stdout.flush()
            os._exit(0)  # no aclose, no flush: as if the process were killed
        os.waitpid(pid, 0)
        path = folder / "outbox.sqlite3"
        reader = sqlite3.connect(path)
        reader.execute("SELECT count(*) FROM writes").fetchone()
        reader.close()  # the last connection out folds the WAL into the file
        assert not path.with_name(path.name + "-wal").exists()
        shutil.copyfile(path, TARGET)
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
