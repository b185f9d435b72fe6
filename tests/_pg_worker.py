"""One worker process of the multi-process pgvector test (tests/test_pgvector.py).

Run as ``python tests/_pg_worker.py '<json job>'``. The worker writes its
conversations through ``Mem0Middleware`` into the shared pgvector store,
flushes, waits until every worker has finished writing, then reads back what
the other workers wrote, and prints one JSON report on its last stdout line.

A conversation is one reply of a fresh agent (empty context) to a user message
carrying a unique canary; ``RuleExtractor`` turns it into exactly one fact.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

SKIPPED_LOGGERS = ("mem0.utils.spacy_models",)
"""Warnings that are expected here: spaCy is deliberately not installed."""


def canary(salt: str, worker: int, user: int, conversation: int) -> str:
    """The unique token of one conversation; every worker can recompute it."""
    return f"cx{salt}w{worker}u{user}c{conversation}"


def user_name(worker: int, user: int) -> str:
    """The mem0 ``user_id`` of a worker's ``user``-th user."""
    return f"w{worker}-u{user}"


class _Collect(logging.Handler):
    """Keeps every warning or error logged by this package or mem0."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(SKIPPED_LOGGERS):
            return
        self.records.append(f"{record.name}: {record.getMessage()}")


async def _run(job: dict[str, Any]) -> dict[str, Any]:
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from mem0 import AsyncMemory

    from agentscope_mem0 import Mem0Middleware, build_mem0_config
    from agentscope_mem0.backends import pgvector_config, prepare_pgvector
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    me: int = job["worker"]
    workers: int = job["workers"]
    users: int = job["users"]
    per_user: int = job["conversations"] // users
    salt: str = job["salt"]
    embedding = HashEmbedding(job["dims"])
    model = ScriptedChatModel("Noted.")
    config = pgvector_config(
        job["dsn"],
        dims=job["dims"],
        collection=job["collection"],
        history_db_path=str(Path(job["folder"]) / f"history-{me}.db"),
    )

    folder = Path(job["folder"])
    # Every worker prepares the schema at start, as docs/backends.md advises;
    # they run at the same moment, which is what prepare_pgvector must survive.
    prepare_pgvector(config)

    # One mem0 client (one connection pool) per process, shared by every
    # middleware, as a deployment would do.
    client = AsyncMemory(
        config=build_mem0_config(chat_model=model, embedding_model=embedding, mem0_config=config)
    )

    def middleware(user_id: str) -> Mem0Middleware:
        return Mem0Middleware(
            user_id=user_id,
            client=client,
            mode="static_control",
            agent_id="worker",
            parameters=Mem0Middleware.Parameters(search_timeout=30),
        )

    # One middleware per user: five scopes write concurrently in this process.
    mine = {u: middleware(user_name(me, u)) for u in range(users)}

    async def converse(u: int) -> None:
        for c in range(per_user):
            agent = Agent(
                name="helper", system_prompt="You help.", model=model, middlewares=[mine[u]]
            )
            text = f"My locker code is {canary(salt, me, u, c)}."
            await agent.reply(UserMsg(name="user", content=text))

    # Start writing together, so that the writes really overlap.
    await _barrier(folder, "ready", me, workers)
    started = time.time()
    await asyncio.gather(*(converse(u) for u in range(users)))
    flushed = all([await mw.flush(timeout=120) for mw in mine.values()])
    finished = time.time()

    # Read only after every worker has stored everything.
    await _barrier(folder, "written", me, workers)

    # Every other worker's facts, read through mem0 ...
    missing: list[str] = []
    reader = client
    for other in range(workers):
        if other == me:
            continue
        for u in range(users):
            got = await reader.get_all(filters={"user_id": user_name(other, u)}, top_k=1000)
            texts = " ".join(item["memory"] for item in got["results"])
            missing += [
                canary(salt, other, u, c)
                for c in range(per_user)
                if canary(salt, other, u, c) not in texts
            ]

    # ... and through the middleware: a new session of another worker's user
    # gets that user's fact in its memory note.
    noted: dict[str, bool] = {}
    for other in range(workers):
        if other == me:
            continue
        reader_model = ScriptedChatModel("Sure.")
        mw = middleware(user_name(other, 0))
        agent = Agent(
            name="helper", system_prompt="You help.", model=reader_model, middlewares=[mw]
        )
        wanted = canary(salt, other, 0, per_user - 1)
        await agent.reply(UserMsg(name="user", content=f"Whose locker code is {wanted}?"))
        seen = json.dumps([m.model_dump(mode="json") for m in reader_model.calls[0]])
        noted[wanted] = wanted in seen
        await mw.aclose()

    for mw in mine.values():
        await mw.aclose()
    return {
        "worker": me,
        "flushed": flushed,
        "writes_started": started,
        "writes_finished": finished,
        "missing": missing,
        "noted": noted,
    }


async def _barrier(folder: Path, name: str, me: int, workers: int) -> None:
    """Wait until every worker reached the point called ``name``."""
    (folder / f"{name}-{me}").touch()
    deadline = time.monotonic() + 120
    while len(list(folder.glob(f"{name}-*"))) < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other workers did not reach {name!r} within 120 s")
        await asyncio.sleep(0.05)


def main() -> int:
    """Run the job given as JSON in ``argv[1]``; print the report as JSON."""
    job = json.loads(sys.argv[1])
    collect = _Collect()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger().addHandler(collect)
    report = asyncio.run(_run(job))
    report["log_problems"] = collect.records
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
