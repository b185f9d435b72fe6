"""The writer process the PostgreSQL benchmarks start beside processes that only record."""

from __future__ import annotations

import asyncio
import sys
from typing import Any


async def serve_until_told(factory: Any, poll: float) -> dict[str, Any]:
    """Store, with ``factory``, what the recording processes record until a line
    comes on stdin (``ready`` is printed once serving); the factory's counters."""
    await factory.get_client()
    serving = asyncio.create_task(factory.serve_writes(poll=poll))
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    stats: dict[str, Any] = factory.stats()
    await factory.aclose(timeout=30)
    return stats
