"""What a script that ends without ``aclose()`` leaves, and what the next process finds.

The drop-in path of AgentScope's built-in middleware: the two models and the
user's own ``mem0_config`` (local Qdrant + history in a temporary folder), no
``outbox``. A child process (``tests/_faults_child.py``) runs ``--turns``
replies with a slow extraction (``--delay`` seconds a call), then either
returns from ``asyncio.run`` without closing (``ends``) or kills itself with
SIGKILL (``killed``). The next process builds the same middleware and flushes.

Usage::

    python benchmarks/fault_exit.py [--turns 8] [--delays 0.8 3] [--out FILE]

The results go to docs/benchmarks/fault-exit.json by default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from _faults_child import middleware  # noqa: E402


async def next_process(folder: Path) -> dict[str, Any]:
    """Replay what the child left and count the memories per exchange."""
    mw = middleware(folder)
    started = time.perf_counter()
    flushed = await mw.flush(120)
    took = time.perf_counter() - started
    raw = await mw.client.get_all(filters={"user_id": "alice", "agent_id": "assistant"}, top_k=1000)
    tags = [t for item in raw["results"] for t in re.findall(r"fruit\d\d", item["memory"])]
    stats = mw.stats()
    await mw.aclose()
    mw.client.vector_store.client.close()
    return {
        "flushed": flushed,
        "replayed_by_next_process": stats["writes_replayed"],
        "redone_after_an_interrupted_call": stats["writes_redone"],
        "exchanges_stored": len(set(tags)),
        "stored_twice": len(tags) - len(set(tags)),
        "replay_seconds": round(took, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--delays", type=float, nargs="+", default=[0.8, 3.0])
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/fault-exit.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {"turns": args.turns, "runs": []}
    for delay in args.delays:
        for mode in ("ends", "killed"):
            folder = Path(tempfile.mkdtemp(prefix=f"fault-exit-{mode}-"))
            command = [sys.executable, str(TESTS / "_faults_child.py"), mode, str(folder)]
            started = time.perf_counter()
            child = subprocess.run(
                [*command, str(args.turns), str(delay)], capture_output=True, text=True, check=False
            )
            run: dict[str, Any] = {
                "ending": mode,
                "extraction_delay_s": delay,
                "child_seconds": round(time.perf_counter() - started, 2),
                "replies_completed": child.stdout.count("replied"),
            }
            run.update(asyncio.run(next_process(folder)))
            results["runs"].append(run)
            shutil.rmtree(folder, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
