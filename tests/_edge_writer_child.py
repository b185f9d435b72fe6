"""A writer for tests/test_local_edge.py's SIGKILL test; prints one id per stored memory.

Usage::

    python _edge_writer_child.py <data folder>

Stores memories through mem0 on the embedded default, one ``add`` at a time,
and prints each memory's id once ``add`` has returned (acknowledged), until
it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("MEM0_TELEMETRY", "False")


async def main(folder: str) -> None:
    from agentscope_mem0 import build_local_memory
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=folder
    )
    i = 0
    while True:
        added = await memory.add(
            [{"role": "user", "content": f"fact {i} about thing{i}"}],
            user_id=f"user-{i % 4}",
            infer=False,
        )
        for result in added["results"]:
            sys.stdout.write(f"{result['id']}\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
