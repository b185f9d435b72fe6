"""A process that chats through Mem0Middleware and then ends badly, for tests/test_faults.py.

Usage::

    python _faults_child.py <mode> <folder> <turns> <extraction delay> [<first>]

The middleware is built the way AgentScope's built-in is used: the two models
and the user's own ``mem0_config`` (a local Qdrant and a history database in
``<folder>/store``), no ``outbox``. It runs ``turns`` replies of an agent,
one exchange each ("I like fruitNN.", NN from ``first``, default 0), printing
``replied NN`` after each.

* ``ends``: the script returns without ``aclose`` (``asyncio.run`` ends).
* ``killed``: the process kills itself with SIGKILL after the last reply.
* ``wait``: after the last reply it sleeps, for the parent to kill it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from _writer_child import UniqueFacts, store_config
from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

USER = "alice"


def middleware(folder: Path, delay: float = 0.0) -> Mem0Middleware:
    """The middleware the child and the test's next process build alike."""
    return Mem0Middleware(
        user_id=USER,
        chat_model=ScriptedChatModel(extractor=UniqueFacts(), delay=delay),
        embedding_model=HashEmbedding(),
        mem0_config=store_config(folder),
        mode="static_control",
    )


async def run(mode: str, folder: Path, turns: int, delay: float, first: int) -> None:
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    mw = middleware(folder, delay)
    agent: Any = Agent(
        name="assistant",
        system_prompt="You help.",
        model=ScriptedChatModel("Noted."),
        middlewares=[mw],
    )
    for i in range(first, first + turns):
        await agent.reply(UserMsg(name="user", content=f"I like fruit{i:02d}."))
        sys.stdout.write(f"replied {i:02d}\n")
        sys.stdout.flush()
    if mode == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "wait":
        await asyncio.sleep(120)


def main(argv: list[str]) -> None:
    mode, folder, turns, delay = argv[0], Path(argv[1]), int(argv[2]), float(argv[3])
    first = int(argv[4]) if len(argv) > 4 else 0
    if mode not in ("ends", "killed", "wait"):
        raise SystemExit(f"unknown mode {mode!r}")
    asyncio.run(run(mode, folder, turns, delay, first))


if __name__ == "__main__":
    main(sys.argv[1:])
