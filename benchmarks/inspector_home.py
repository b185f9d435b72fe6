"""How long the inspector's pages take on a large embedded store.

    python benchmarks/inspector_home.py --folder DIR [--runs 5] [--out FILE]

Fills nothing: point it at a data folder that holds the memories (for the
numbers in docs/inspector.md, 50,000 memories of 500 users imported with
``agentscope-mem0 import``; ``--make N`` writes such a JSONL file first and
imports it). Opens the store as ``agentscope-mem0 ui`` does and times the
home page and one user's page through the app (in process, no socket), the
median and the slowest of ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def make_export(path: Path, count: int, users: int) -> None:
    """A JSONL export of ``count`` memories spread over ``users`` users and 3 agents."""
    rng = random.Random(7)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            created = (start + timedelta(minutes=13 * i)).isoformat()
            user = f"user{i % users}"
            record = {
                "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "text": f"fact {i}: {user} likes item {i % 97} in city {i % 31}",
                "user_id": user,
                "agent_id": f"agent{i % 3}",
                "created_at": created,
                "updated_at": created,
            }
            out.write(json.dumps(record) + "\n")


async def _time_pages(folder: Path, runs: int) -> dict[str, Any]:
    import httpx

    from agentscope_mem0.cli._config import load_settings
    from agentscope_mem0.cli._mem0_store import open_store
    from agentscope_mem0.cli.ui._web import create_app

    settings = load_settings(folder=str(folder))
    store = open_store(settings, embeds=True)
    try:
        app = create_app(store, token=None)
        transport = httpx.ASGITransport(app=app)
        results: dict[str, Any] = {}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for name, url in (("home", "/"), ("user", "/?user=user7")):
                seconds = []
                for _ in range(runs):
                    started = time.perf_counter()
                    answer = await client.get(url)
                    seconds.append(time.perf_counter() - started)
                    assert answer.status_code == 200, answer.text[:500]
                results[name] = {
                    "median_s": round(statistics.median(seconds), 3),
                    "max_s": round(max(seconds), 3),
                    "bytes": len(answer.content),
                }
        return results
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--make", type=int, default=0, help="import this many memories first")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("AGENTSCOPE_MEM0_EMBEDDER", "hash")
    if args.make:
        export = args.folder.with_suffix(".jsonl")
        args.folder.mkdir(parents=True, exist_ok=True)
        make_export(export, args.make, users=500)
        subprocess.run(
            [sys.executable, "-m", "agentscope_mem0.cli", "import", str(export),
             "--folder", str(args.folder), "--batch-size", "1000", "--no-progress"],
            check=True,
        )  # fmt: skip
    results = asyncio.run(_time_pages(args.folder, args.runs))
    report = {"folder": str(args.folder), "runs": args.runs, "pages": results}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
