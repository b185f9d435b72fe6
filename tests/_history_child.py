"""One replica of the shared-history test (tests/cli/test_shared_history.py).

Run as ``python tests/_history_child.py '<json job>'`` with a data folder of
its own (``$AGENTSCOPE_MEM0_DIR``, as on its own pod). It builds a
``Mem0Middleware`` on the shared pgvector store with every default (so mem0's
history and the token totals go where the middleware puts them), has the
user tell each of ``texts`` to a fresh agent, waits until every write is
stored, and prints one JSON line: the memory ids it stored and its own token
totals.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def _run(job: dict[str, Any]) -> dict[str, Any]:
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    from agentscope_mem0 import Mem0Middleware
    from agentscope_mem0.backends import pgvector_config
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    model = ScriptedChatModel("Noted.")
    middleware = Mem0Middleware(
        user_id=job["user"],
        chat_model=model,
        embedding_model=HashEmbedding(job["dims"]),
        mem0_config=pgvector_config(job["dsn"], dims=job["dims"], collection=job["collection"]),
        mode="static_control",
        parameters=Mem0Middleware.Parameters(search_timeout=30),
    )
    async with middleware:
        for text in job["texts"]:
            agent = Agent(
                name="helper", system_prompt="You help.", model=model, middlewares=[middleware]
            )
            await agent.reply(UserMsg(name="user", content=text))
        assert await middleware.flush(timeout=120)
        stored = await middleware.client.get_all(filters={"user_id": job["user"]}, top_k=100)
        stats = middleware.stats()
    return {
        "ids": {item["memory"]: item["id"] for item in stored["results"]},
        "tokens": {k: v for k, v in stats.items() if k.startswith("tokens_")},
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_run(json.loads(sys.argv[1])))))
