"""Many users at once on the embedded default with its own offline embedder.

``--users`` users chat at the same time, ``--turns`` turns each, through the
service factory (``mem0_middleware_factory`` on a temporary data folder: one
shared mem0 client, the real embedded store, the offline e5 embedder). Every
turn is a fresh AgentScope ``Agent`` assembled with the factory's middleware,
as ``agentscope.app`` does. The agent's model and mem0's extraction model are
``ScriptedChatModel``s that answer after ``--reply-delay`` and
``--extraction-delay`` seconds (a provider's latency); extraction keeps the
user's first-person statements.

Even turns state a new fact with a marker unique to the user and turn ("I
have a pet named Pet7x4."); odd turns ask about them, and extraction keeps
nothing from a question. The same workload runs first without memory, for
the baseline reply latency.

Measured: reply latency with and without memory (the overhead is the
difference, p50 and p95), searches and search timeouts (goal 0), writes
stored exactly once (each fact's marker found once in mem0 after the drain;
goal: all), and the time from the last reply until every write is stored.

Usage::

    python benchmarks/load.py --users 50 --turns 10 --out docs/benchmarks

Writes ``load.json`` and (with matplotlib) ``load.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import ScriptedChatModel

_MARKER = re.compile(r"Pet\d+x\d+")


def _message(user: int, turn: int) -> str:
    if turn % 2 == 0:
        return f"I have a pet named Pet{user}x{turn}. Please remember that."
    return "What are the names of my pets?"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": _percentile(values, 0.50),
        "p95": _percentile(values, 0.95),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


async def _user(
    user: int, turns: int, reply_delay: float, factory: Any | None
) -> tuple[list[float], int]:
    """One user's turns; returns each reply's latency and how many notes named a pet."""
    latencies: list[float] = []
    recalled = 0
    for turn in range(turns):
        model = ScriptedChatModel("Noted.", delay=reply_delay)
        started = time.perf_counter()
        middlewares = await factory(f"user{user}", "assistant", "s") if factory else []
        agent = Agent(
            name="assistant", system_prompt="You help.", model=model, middlewares=middlewares
        )
        await agent.reply(UserMsg(name="user", content=_message(user, turn)))
        latencies.append(time.perf_counter() - started)
        seen = "\n".join(str(getattr(b, "hint", "")) for m in model.calls[0] for b in m.content)
        recalled += bool(_MARKER.search(seen))
    return latencies, recalled


async def _run(args: argparse.Namespace, folder: Path | None) -> dict[str, Any]:
    factory = None
    if folder is not None:
        factory = mem0_middleware_factory(
            chat_model=ScriptedChatModel(delay=args.extraction_delay),
            folder=folder,
            mode="static_control",
            search_timeout=args.search_timeout,
        )
        started = time.perf_counter()
        await factory.get_client()  # what install() does at the app's startup
        startup = time.perf_counter() - started
    began = time.perf_counter()
    results = await asyncio.gather(
        *(_user(u, args.turns, args.reply_delay, factory) for u in range(args.users))
    )
    replies_done = time.perf_counter()
    latencies = [x for lat, _ in results for x in lat]
    out: dict[str, Any] = {
        "reply_latency": _summary(latencies),
        "reply_latencies": latencies,
        "replies_wall_time": replies_done - began,
    }
    if factory is None:
        return out
    drained = await factory.flush(timeout=args.drain_timeout)
    drain_time = time.perf_counter() - replies_done
    client: Any = factory.client
    expected = {
        f"user{u}": {f"Pet{u}x{t}" for t in range(0, args.turns, 2)} for u in range(args.users)
    }
    once = missing = duplicated = 0
    for user, markers in expected.items():
        stored = (await client.get_all(filters={"user_id": user}, top_k=10_000))["results"]
        found = [m for item in stored for m in _MARKER.findall(item["memory"])]
        for marker in markers:
            count = found.count(marker)
            once += count == 1
            missing += count == 0
            duplicated += count > 1
    stats = factory.stats()
    store = type(getattr(client, "vector_store", None))
    await factory.aclose(timeout=30)
    question_turns = args.users * (args.turns // 2)
    out.update(
        startup_seconds=startup,
        drained=drained,
        drain_seconds=drain_time,
        writes_expected=sum(len(m) for m in expected.values()),
        writes_stored_once=once,
        writes_missing=missing,
        writes_duplicated=duplicated,
        question_turns=question_turns,
        question_turns_recalling_a_fact=sum(r for _, r in results),
        store=f"{store.__module__}.{store.__qualname__}",
        stats={k: v for k, v in stats.items() if isinstance(v, int | float | str)},
    )
    return out


def _plot(report: dict[str, Any], path: Path) -> None:
    """Reply-latency CDFs with and without memory."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logging.warning("matplotlib is not installed (the bench extra); no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, run in (("no memory", report["baseline"]), ("memory", report["memory"])):
        values = sorted(run["reply_latencies"])
        fractions = [(i + 1) / len(values) for i in range(len(values))]
        ax.plot(values, fractions, label=f"{name} (p50 {run['reply_latency']['p50']:.2f} s)")
    memory = report["memory"]
    ax.set_xlabel("reply latency (s)")
    ax.set_ylabel("fraction of turns")
    config: dict[str, Any] = report["config"]
    ax.set_title(
        f"{config['users']} users x {config['turns']} turns, {report['machine']['cpus']} cores: "
        f"{memory['stats'].get('search_timeouts', '?')} search timeouts, "
        f"{memory['writes_stored_once']}/{memory['writes_expected']} writes stored once",
        fontsize=9,
    )
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--reply-delay", type=float, default=0.5)
    parser.add_argument("--extraction-delay", type=float, default=1.0)
    parser.add_argument("--search-timeout", type=float, default=2.0)
    parser.add_argument("--drain-timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    load_before = os.getloadavg()
    baseline = asyncio.run(_run(args, None))
    with tempfile.TemporaryDirectory(prefix="agentscope-mem0-load-") as tmp:
        memory = asyncio.run(_run(args, Path(tmp)))
        close_shared_clients(tmp)  # the embedded store stays open until then
    report: dict[str, Any] = {
        "command": "python benchmarks/load.py " + " ".join(sys.argv[1:]),
        "config": {
            k: getattr(args, k)
            for k in ("users", "turns", "reply_delay", "extraction_delay", "search_timeout")
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "overhead": {
            q: memory["reply_latency"][q] - baseline["reply_latency"][q] for q in ("p50", "p95")
        },
        "baseline": baseline,
        "memory": memory,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(report, indent=1) + "\n")
    _plot(report, args.out / "load.png")
    stats = memory["stats"]
    print(
        f"overhead p50 {report['overhead']['p50'] * 1000:.0f} ms, "
        f"p95 {report['overhead']['p95'] * 1000:.0f} ms; "
        f"search timeouts {stats.get('search_timeouts')} of {stats.get('searches')}; "
        f"writes stored once {memory['writes_stored_once']}/{memory['writes_expected']} "
        f"(missing {memory['writes_missing']}, duplicated {memory['writes_duplicated']}); "
        f"drain {memory['drain_seconds']:.1f} s; store {memory['store']}"
    )


if __name__ == "__main__":
    main()
