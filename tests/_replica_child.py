"""One replica of a service, as on its own pod, for tests/write/test_pod_loss.py.

Usage::

    python _replica_child.py <dsn> <collection> <folder> [<extraction delay> [<role>]]

It builds a real mem0 on PostgreSQL/pgvector (``collection``; mem0's history
in ``<folder>``, its HOME and data folder) with the scripted offline models,
extraction taking 0.3 s per call (or the delay given), and a ``WriteQueue`` with every default:
its outbox is then the table ``<collection>_outbox`` in the same database.
Its role is ``replica`` (it stores what it acknowledges, the default),
``recorder`` (a replica that only records: ``deliver=False``) or ``writer``
(it stores what recorders recorded: ``WriteQueue.serve``, from the start).
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
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from agentscope_mem0 import Mem0Backend, RetryPolicy, Scope, WriteQueue, build_mem0_config
from agentscope_mem0.backends import pgvector_config
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import UniqueFacts

DIMS = 64
AGENT = "assistant"
SRC = Path(__file__).resolve().parents[1] / "src"


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


async def serve(dsn: str, collection: str, folder: Path, delay: float, role: str) -> None:
    from mem0 import AsyncMemory

    memory = AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(extractor=UniqueFacts(), delay=delay),
            embedding_model=HashEmbedding(DIMS),
            mem0_config=memory_config(dsn, collection, folder),
        )
    )
    queue = WriteQueue(
        Mem0Backend(memory),
        retry=RetryPolicy(initial_delay=0.05, max_delay=0.2),
        deliver=role != "recorder",
    )
    serving = asyncio.create_task(queue.serve(poll=0.1)) if role == "writer" else None
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
            if serving is not None:
                serving.cancel()
            await queue.aclose()
            answer("closed")
            return


class Replica:
    """A replica process (this script) and its pipes, for the parent: the
    test or the benchmark. Its HOME and data folder are ``<root>/<name>``."""

    def __init__(
        self,
        name: str,
        dsn: str,
        collection: str,
        root: Path,
        *,
        delay: float = 0.3,
        role: str = "replica",
    ) -> None:
        self.folder = root / name
        self.folder.mkdir()
        self.log = root / f"{name}.log"
        self._log_file = self.log.open("w")
        env = {
            **os.environ,
            "HOME": str(self.folder),
            "AGENTSCOPE_MEM0_DIR": str(self.folder / "data"),
            "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        }
        self.proc = subprocess.Popen(
            [sys.executable, __file__, dsn, collection, str(self.folder), str(delay), role],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,  # a file: a full pipe would stall the replica
            text=True,
            env=env,
        )
        self.acknowledged: list[str] = []
        self.ack_seconds: list[float] = []

    def _line(self) -> str:
        stdout: IO[str] | None = self.proc.stdout
        assert stdout is not None
        line = stdout.readline().strip()
        if not line:
            raise AssertionError(f"the replica ended: {self.log.read_text()[-3000:]}")
        return line

    def ready(self) -> None:
        assert self._line() == "ready"

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line()

    def submit(self, user: str, text: str) -> None:
        """Send one write; returns once the replica acknowledged it."""
        started = time.perf_counter()
        assert self.ask(f"submit {user} {text}") == "ok"
        self.ack_seconds.append(time.perf_counter() - started)
        self.acknowledged.append(text)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._log_file.close()
        shutil.rmtree(self.folder)  # the pod's ephemeral disk goes with it

    def stop(self) -> None:
        """End the process if it still runs, and release its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self._log_file.close()


def main(argv: list[str]) -> None:
    dsn, collection, folder = argv[0], argv[1], Path(argv[2])
    delay = float(argv[3]) if len(argv) > 3 else 0.3
    role = argv[4] if len(argv) > 4 else "replica"
    asyncio.run(serve(dsn, collection, folder, delay, role))


if __name__ == "__main__":
    main(sys.argv[1:])
