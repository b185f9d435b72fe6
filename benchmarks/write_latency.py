"""Per-turn reply latency and writes kept, with and without long-term memory.

Runs side by side, in one process, on one embedded mem0 (``AsyncMemory`` on an
on-disk local Qdrant in a temporary folder), a real AgentScope ``Agent`` whose
own model answers in ``--reply-delay`` seconds while mem0's extraction model
takes ``--extraction-delay`` seconds per call:

* ``none``: no memory middleware;
* ``builtin-await``: ``agentscope.middleware.Mem0Middleware(await_write=True)``;
* ``builtin-nowait``: the same with ``await_write=False``;
* ``ours``: ``agentscope_mem0.Mem0Middleware`` (non-blocking), closed with
  ``async with`` as a script would;
* ``ours-no-close``: the same, but the script ends without closing it; the
  writes it left in the outbox are stored by the next process to open the
  folder (simulated here by a new queue on the folder).

Each configuration is one ``asyncio.run`` (a "script") with its own user id;
after it ends, the memories of that user in the store are counted. Also timed:
mem0's ``search`` alone, the floor under any memory middleware's overhead.

Usage::

    python benchmarks/write_latency.py --turns 20 --out docs/benchmarks

Writes ``write-latency.json``, ``write-latency.md`` and (with matplotlib)
``write-latency.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentscope
import mem0
from agentscope.agent import Agent
from agentscope.message import UserMsg

import agentscope_mem0
from agentscope_mem0 import Mem0Middleware, build_mem0_config
from agentscope_mem0._writer import WriteQueue
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

logger = logging.getLogger("benchmarks.write_latency")

CONFIGS = ("none", "builtin-await", "builtin-nowait", "ours", "ours-no-close")


@dataclass
class Result:
    """One configuration's measurements."""

    name: str
    turns: int
    latencies: list[float] = field(default_factory=list)
    stored_at_end: int = 0
    """Memories of this run's user in the store right after the script ended."""
    stored_after_restart: int | None = None
    """Same, after the next process on the folder replayed the outbox."""
    close_seconds: float | None = None
    """Time the script spent closing the middleware (flushing writes)."""
    extra: dict[str, Any] = field(default_factory=dict)
    middleware: Any = field(default=None, repr=False)

    @property
    def median(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p95(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(q / 100 * len(ordered)) - 1)]


def store_config(folder: Path) -> dict[str, Any]:
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "bench",
                "path": str(folder / "qdrant"),
                "on_disk": True,
            },
        },
        "history_db_path": str(folder / "history.db"),
    }


def embedding_model(kind: str) -> Any:
    if kind == "hash":
        return HashEmbedding()
    from agentscope_mem0.local import default_embedding_model  # type: ignore[attr-defined]

    return default_embedding_model()


def our_middleware(outbox: Path, **kwargs: Any) -> Mem0Middleware:
    """This project's middleware with its outbox in ``outbox``."""
    if "outbox_dir" in inspect.signature(Mem0Middleware.__init__).parameters:
        return Mem0Middleware(outbox_dir=outbox, **kwargs)
    # Until the middleware takes ``outbox_dir``: give it a durable queue.
    mw = Mem0Middleware(**kwargs)
    mw._writer = WriteQueue(mw._backend, outbox_dir=outbox)
    return mw


async def count_memories(memory: Any, user_id: str) -> int:
    """How many of the turns' facts ("User likes fruitNN.") mem0 holds for ``user_id``.

    Raises:
        AssertionError: A fact is stored more than once.
    """
    raw = await memory.get_all(filters={"user_id": user_id}, top_k=1000)
    tags = [t for item in raw["results"] for t in re.findall(r"\bfruit\d\d\b", item["memory"])]
    duplicates = len(tags) - len(set(tags))
    if duplicates:
        raise AssertionError(f"{duplicates} facts of {user_id} are stored twice")
    return len(set(tags))


async def run_turns(agent: Agent, user_id: str, turns: int) -> list[float]:
    latencies = []
    for i in range(turns):
        msg = UserMsg("user", f"I like fruit{i:02d}. Which fruit goes well with it?")
        started = time.perf_counter()
        await agent.reply(msg)
        latencies.append(time.perf_counter() - started)
    return latencies


def run_config(name: str, memory: Any, args: argparse.Namespace, folder: Path) -> Result:
    """One "script": N turns in its own event loop, then count what mem0 kept."""
    user_id = f"user-{name}"
    result = Result(name=name, turns=args.turns)
    reply_model = ScriptedChatModel("Noted.", delay=args.reply_delay)

    async def script() -> None:
        middlewares: list[Any] = []
        mw: Any = None
        if name.startswith("builtin"):
            from agentscope.middleware import Mem0Middleware as BuiltinMem0Middleware

            mw = BuiltinMem0Middleware(
                user_id=user_id,
                client=memory,
                mode="static_control",
                await_write=(name == "builtin-await"),
            )
        elif name.startswith("ours"):
            mw = our_middleware(
                folder / "outbox", user_id=user_id, client=memory, mode="static_control"
            )
        if mw is not None:
            middlewares.append(mw)
        agent = Agent(
            name="assistant",
            system_prompt="You are a helpful assistant.",
            model=reply_model,
            middlewares=middlewares,
        )
        result.latencies = await run_turns(agent, user_id, args.turns)
        if name == "ours":
            started = time.perf_counter()
            await mw.aclose()
            result.close_seconds = time.perf_counter() - started
        if name.startswith("ours"):
            result.extra = {k: v for k, v in mw.stats().items() if v is not None}
            result.middleware = mw
        # builtin-nowait and ours-no-close: the script just ends here.

    asyncio.run(script())
    result.stored_at_end = asyncio.run(count_memories(memory, user_id))
    return result


def result_of(args: argparse.Namespace, name: str) -> Result:
    return next(r for r in args.results if r.name == name)


def replay_in_next_process(memory: Any, folder: Path, args: argparse.Namespace) -> int:
    """Start the next process on the folder; it stores what the outbox holds.

    Returns:
        The memories of ``user-ours-no-close`` that process counted afterwards.
    """
    # This process lives on, so do the claims of the queue the script left
    # open; hand them back as this process exiting would (rows held by a dead
    # process are free at once), without waiting for a single write.
    no_close = result_of(args, "ours-no-close")
    asyncio.run(no_close.middleware._writer.aclose(timeout=0))
    # Hand the folder over: the embedded Qdrant admits one process at a time.
    memory.vector_store.client.close()
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--replay",
            str(folder),
            "--embedding",
            args.embedding,
            "--extraction-delay",
            str(args.extraction_delay),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1])["stored"])


async def replay(memory: Any, folder: Path) -> int:
    """In the next process: a queue on the folder replays what was left."""
    from agentscope_mem0._backend import Mem0Backend

    queue = WriteQueue(Mem0Backend(memory), outbox_dir=folder / "outbox")
    await queue.aclose(timeout=300)
    return await count_memories(memory, "user-ours-no-close")


async def time_search(memory: Any, n: int) -> list[float]:
    """mem0's search alone, as the middleware calls it (same store, same filters)."""
    out = []
    for i in range(n):
        started = time.perf_counter()
        await memory.search(
            f"I like fruit{i:02d}. Which fruit goes well with it?",
            filters={"user_id": "user-ours", "agent_id": "assistant"},
            top_k=5,
        )
        out.append(time.perf_counter() - started)
    return out


def write_report(results: list[Result], search: list[float], args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = {r.name: r for r in results}
    none = base["none"].median
    search_median = statistics.median(search)
    data = {
        "command": f"python benchmarks/write_latency.py --turns {args.turns} "
        f"--reply-delay {args.reply_delay} --extraction-delay {args.extraction_delay} "
        f"--embedding {args.embedding}",
        "environment": {
            "python": platform.python_version(),
            "agentscope": agentscope.__version__,
            "mem0ai": getattr(mem0, "__version__", "2.2.1"),
            "agentscope_mem0": agentscope_mem0.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_1m_before_after": [args.load[0][0], args.load[1][0]],
        },
        "settings": {
            "turns": args.turns,
            "reply_delay_s": args.reply_delay,
            "extraction_delay_s": args.extraction_delay,
            "embedding": args.embedding,
            "store": "mem0 AsyncMemory on on-disk local Qdrant",
        },
        "search_alone_s": {"median": search_median, "p95": percentile(search, 95)},
        "results": [
            {
                "name": r.name,
                "median_s": r.median,
                "p95_s": r.p95,
                "overhead_median_s": r.median - none,
                "writes": r.turns if r.name != "none" else 0,
                "stored_at_end": r.stored_at_end,
                "stored_after_restart": r.stored_after_restart,
                "close_s": r.close_seconds,
                "latencies_s": r.latencies,
                "stats": r.extra,
            }
            for r in results
        ],
    }
    (out / "write-latency.json").write_text(json.dumps(data, indent=2) + "\n")

    lines = [
        "# Write latency: reply time and writes kept",
        "",
        "Generated by `benchmarks/write_latency.py`; raw numbers in "
        "[write-latency.json](write-latency.json).",
        "",
        f"One process, one embedded mem0 (AsyncMemory, on-disk local Qdrant), a real "
        f"AgentScope `Agent`; its model answers in {args.reply_delay} s, mem0's "
        f"extraction model takes {args.extraction_delay} s per call; embedding: "
        f"{args.embedding}. {args.turns} turns per configuration, each configuration one "
        "`asyncio.run` (a script) with its own user; memories counted after it ended.",
        "",
        f"Command: `{data['command']}`",
        "",
        f"Machine: {os.cpu_count()} CPUs, 1-minute load average {args.load[0][0]:.1f} before "
        f"and {args.load[1][0]:.1f} after the run (other work shared the machine; the p95 "
        "column is sensitive to it, the medians much less).",
        "",
        "| configuration | median (s) | p95 (s) | overhead vs none (s) | memories stored "
        "when the script ended | after the next start |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        writes = f"{r.stored_at_end} / {r.turns}" if r.name != "none" else "–"
        after = (
            f"{r.stored_after_restart} / {r.turns}" if r.stored_after_restart is not None else "–"
        )
        lines.append(
            f"| {r.name} | {r.median:.3f} | {r.p95:.3f} | {r.median - none:+.3f} | "
            f"{writes} | {after} |"
        )
    ours = base["ours"]
    lines += [
        "",
        f"mem0 `search` alone (the floor under any memory middleware): median "
        f"{search_median * 1000:.1f} ms, p95 {percentile(search, 95) * 1000:.1f} ms. "
        f"This project's median overhead over no memory: "
        f"{(ours.median - none) * 1000:.1f} ms = "
        f"{(ours.median - none) / search_median:.2f}× the search alone.",
        "",
        f"`ours` closed with `async with` / `aclose()`; closing waited "
        f"{ours.close_seconds or 0:.2f} s for the queued writes "
        f"({ours.extra.get('write_batches', '?')} mem0 calls for {ours.turns} exchanges: "
        "consecutive exchanges of a busy conversation are sent together).",
        "`ours-no-close` ended without closing: what mem0 had not stored yet stayed in the "
        "outbox, and the next process started on the folder (a real second process, "
        "started once this one had released the store and the queue's claims, as exiting "
        "would) stored it.",
        "`builtin-nowait` launches an untracked task per write; when the script's loop "
        "ends those tasks are cancelled and their writes are gone.",
        "",
        "Notes: every memory count is the number of memories mem0 holds for that run's "
        "user; the extraction fake turns each 'I like fruitNN.' into one memory, so "
        "N turns should leave N memories.",
    ]
    if (out / "write-latency.png").exists() or args.plot:
        lines += ["", "![reply latency and writes kept](write-latency.png)"]
    (out / "write-latency.md").write_text("\n".join(lines) + "\n")


def plot(results: list[Result], out: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed; no plot")
        return False
    names = [r.name for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    x = range(len(names))
    left.bar([i - 0.2 for i in x], [r.median * 1000 for r in results], 0.4, label="median")
    left.bar([i + 0.2 for i in x], [r.p95 * 1000 for r in results], 0.4, label="p95")
    left.set_xticks(list(x), names, rotation=20)
    left.set_ylabel("reply latency per turn (ms)")
    left.legend()
    left.set_title("Reply latency")
    memory_runs = [r for r in results if r.name != "none"]
    y = range(len(memory_runs))
    right.bar(
        [i - 0.2 for i in y],
        [100 * r.stored_at_end / r.turns for r in memory_runs],
        0.4,
        label="when the script ended",
    )
    right.bar(
        [i + 0.2 for i in y],
        [100 * (r.stored_after_restart or r.stored_at_end) / r.turns for r in memory_runs],
        0.4,
        label="after the next start",
    )
    right.set_xticks(list(y), [r.name for r in memory_runs], rotation=20)
    right.set_ylabel("writes stored (%)")
    right.set_ylim(0, 105)
    right.legend(loc="lower right")
    right.set_title("Writes kept")
    fig.tight_layout()
    fig.savefig(out / "write-latency.png", dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--reply-delay", type=float, default=0.05)
    parser.add_argument("--extraction-delay", type=float, default=0.5)
    parser.add_argument("--embedding", choices=("hash", "e5"), default="hash")
    parser.add_argument("--out", default="docs/benchmarks")
    parser.add_argument("--folder", help="data folder (default: a new temporary one)")
    parser.add_argument("--no-plot", dest="plot", action="store_false")
    parser.add_argument("--replay", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("as", "mem0", "agentscope", "httpx", "qdrant_client", "agentscope_mem0"):
        logging.getLogger(noisy).setLevel(logging.ERROR)

    folder = Path(args.replay or args.folder or tempfile.mkdtemp(prefix="agentscope-mem0-bench-"))
    extraction = ScriptedChatModel(delay=args.extraction_delay)
    memory = mem0.AsyncMemory(
        config=build_mem0_config(
            chat_model=extraction,
            embedding_model=embedding_model(args.embedding),
            mem0_config=store_config(folder),
        )
    )
    if args.replay:
        sys.stdout.write(json.dumps({"stored": asyncio.run(replay(memory, folder))}) + "\n")
        return
    asyncio.run(memory.search("warm up", filters={"user_id": "warm"}, top_k=1))
    load_before = os.getloadavg()

    results = []
    for name in CONFIGS:
        result = run_config(name, memory, args, folder)
        results.append(result)
        print(
            f"{name:15s} median {result.median * 1000:7.1f} ms  p95 {result.p95 * 1000:7.1f} ms"
            f"  stored {result.stored_at_end}/{result.turns}"
        )
    search = asyncio.run(time_search(memory, max(args.turns, 20)))
    args.load = (load_before, os.getloadavg())
    args.results = results
    no_close = result_of(args, "ours-no-close")
    no_close.stored_after_restart = replay_in_next_process(memory, folder, args)
    print(
        f"{no_close.name:15s} after the next process started: "
        f"{no_close.stored_after_restart}/{no_close.turns}"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plotted = args.plot and plot(results, out)
    args.plot = plotted
    write_report(results, search, args)
    print(f"search alone   median {statistics.median(search) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
