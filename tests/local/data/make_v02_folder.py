"""Write a small data folder with release 0.2's own code (its keyword encoder).

The fixture ``edge-v0.2.tar.gz`` beside this file was made with::

    git -C <repo> worktree add /tmp/v02 30d9697      # release 0.2
    PYTHONPATH=/tmp/v02/src python tests/local/data/make_v02_folder.py /tmp/folder
    tar -C /tmp/folder -cSzf tests/local/data/edge-v0.2.tar.gz edge
    cp /tmp/folder/memories.json tests/local/data/v0.2-memories.json

``v0.2-memories.json`` lists what was stored (ids, users, texts); the test
checks every point against it after the upgrade.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MEM0_TELEMETRY", "False")

MEMORIES = [
    ("alice", "Alice adopted a greyhound called Pepper last spring"),
    ("alice", "Alice is running the Berlin marathon in September"),
    ("alice", "Alice works as a cartographer and draws hiking maps"),
    ("alice", "Alice 喜欢在周末爬山"),
    ("bob", "Bob keeps bees on his allotment near the canal"),
    ("bob", "Bob's daughter studies volcanology in Iceland"),
    ("bob", "Bob prefers tea without milk"),
]


async def main(folder: Path) -> None:
    from agentscope_mem0 import build_local_memory
    from agentscope_mem0.local import close_shared_clients
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(64), folder=folder
    )
    stored = []
    for user, text in MEMORIES:
        result = await memory.add(
            [{"role": "user", "content": text}],
            user_id=user,
            infer=False,
            metadata={"n": len(stored)},
        )
        stored.extend({"id": r["id"], "user_id": user, "text": text} for r in result["results"])
    close_shared_clients()
    (folder / "memories.json").write_text(json.dumps(stored, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
