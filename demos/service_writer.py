"""The writer process of ``demos/service_app.py``'s replicas.

Replicas started with ``$AGENTSCOPE_MEM0_DELIVER_WRITES=0`` only record each
write in the outbox table of their PostgreSQL database; this process stores
them (each user's in the order said), then runs the time judgement, with the
same models and options as the replicas. Run one beside them, at a lower
priority than the replicas where they share cores::

    AGENTSCOPE_MEM0_PG_DSN=postgresql://... nice -n 10 python -m demos.service_writer

It prints ``serving writes`` once its mem0 client is built; SIGINT or SIGTERM
stops it after the writes it holds are stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from demos._shared_memory import PG_DSN_ENV, shared_memory

from agentscope_mem0.demo import chat_model_from_env


async def main() -> None:
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        raise SystemExit(f"set {PG_DSN_ENV} to the replicas' PostgreSQL database")
    extraction_model, described = chat_model_from_env()
    memory = shared_memory(dsn, extraction_model)
    async with memory.running():  # closing stores what this writer holds
        serving = asyncio.create_task(memory.serve_writes())
        loop = asyncio.get_running_loop()
        for stop in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(stop, serving.cancel)
        print(f"serving writes (extraction: {described})", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await serving


if __name__ == "__main__":
    asyncio.run(main())
