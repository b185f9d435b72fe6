"""Per-turn reply latency and writes kept, with and without long-term memory.

Runs side by side, in one process, on one embedded mem0 (the default:
``AsyncMemory`` on Qdrant Edge in a temporary data folder), a real AgentScope ``Agent`` whose
own model answers in ``--reply-delay`` seconds while mem0's extraction model
takes ``--extraction-delay`` seconds per call:

* ``none``: no memory middleware;
* ``builtin-await``: ``agentscope.middleware.Mem0Middleware(await_write=True)``;
* ``builtin-nowait``: the same with ``await_write=False``;
* ``ours``: ``agentscope_mem0.Mem0Middleware`` (non-blocking), closed with
  ``aclose()`` as ``async with`` does;
* ``ours-no-close``: the same, but the script ends without closing it; the
  writes left in the outbox are stored by the next process on the folder (a
  real second process, started at the end);
* ``ours-write-path``: ours with its search answered instantly by a stub, so
  the turn pays for the write path (and the note) only;
* ``ours-no-consolidation``: ours with write-time consolidation switched off
  (repeats stay current), to put its cost beside ``ours``;
* ``ours-no-judge`` and ``ours-no-judge-no-consolidation``: the same pair
  with ``judge=False``, where consolidation is a pass of its own (a search per
  new memory, embeddings of the pairs the words leave open), as on hosted mem0.

Every third turn also says an earlier turn's fact again in other words, so
consolidation has repeats to merge; the repeats left current are counted.

Then the query-embedding cache: ours again, each message sent twice (a retry
or a regenerated answer) and a third of them once more from the agent's
saved and reloaded state (a resumed session), with the cache on and then off;
the hit rate and the embedding time it saved come from the cache's counters.
``--phase cache`` runs that part alone and merges it into an existing report.

Each configuration runs as a "script" (its own ``asyncio.run``) with its own
user id, ``--rounds`` times, configurations interleaved; after each script
the memories of its user are counted. mem0's ``search`` is timed during every
run and once more alone at the end: the floor under any memory middleware.

Usage::

    python benchmarks/write_latency.py --turns 30 --rounds 2 --out docs/benchmarks
    python benchmarks/write_latency.py --phase cache --embedding e5 --out docs/benchmarks

Writes ``write-latency.json``, ``write-latency.md`` and (with matplotlib)
``write-latency.png`` and ``write-kept.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentscope
import mem0
from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.state import AgentState

import agentscope_mem0
from agentscope_mem0 import Mem0Middleware, build_local_memory
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._mem0.query_cache import QueryEmbeddingCache, install_query_cache
from agentscope_mem0._write.queue import WriteQueue
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

# builtin-nowait leaves its untracked writes running on mem0's threads after its
# script ended (seconds of background embedding on a loaded machine), which slows
# down the script after it: ours-no-close, which has no latency figure of its own,
# goes there. The writes ours-no-close leaves in the outbox are taken up by the
# next script on the folder once their lease ends (its close waits for them):
# ours-write-path, whose search is stubbed, goes there. So the pairs compared (ours
# and ours-no-consolidation, ...) run clear of both.
CONFIGS = (
    "none",
    "builtin-await",
    "builtin-nowait",
    "ours-no-close",
    "ours-write-path",
    "ours",
    "ours-no-consolidation",
    "ours-no-judge",
    "ours-no-judge-no-consolidation",
)
CLOSED = ("ours", "ours-write-path", "ours-no-consolidation", "ours-no-judge")
CLOSED += ("ours-no-judge-no-consolidation",)
"""Configurations whose script closes the middleware (``async with``)."""
KEPT_SHOWN = ("builtin-await", "builtin-nowait", "ours", "ours-no-close")
"""Configurations in the plot of writes kept (the others differ from ``ours`` elsewhere)."""


@dataclass
class Result:
    """One configuration's measurements, over all rounds."""

    name: str
    writes: int = 0
    """Exchanges the turns produced (0 without memory)."""
    latencies: list[float] = field(default_factory=list)
    searches: list[float] = field(default_factory=list)
    """Durations of mem0 ``search`` calls made during the turns."""
    stored_at_end: int = 0
    """Facts of this configuration's users stored right after each script ended."""
    repeats_current: int = 0
    """Memories saying an earlier fact again that are still current (not merged)."""
    stored_after_restart: int | None = None
    """Same, after the next process on the folder replayed the outbox."""
    close_seconds: list[float] = field(default_factory=list)
    """Time each script spent in ``aclose()`` (flushing writes)."""
    stats: dict[str, Any] = field(default_factory=dict)
    """``Mem0Middleware.stats()`` of the last round."""
    users: list[str] = field(default_factory=list)
    left_open: list[Any] = field(default_factory=list, repr=False)

    @property
    def median(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p95(self) -> float:
        return percentile(self.latencies, 95)


class SearchTimer:
    """Times every ``search`` call on one mem0 client (both middlewares call it)."""

    def __init__(self, memory: Any) -> None:
        self.samples: list[float] = []
        inner = memory.search

        async def search(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                self.samples.append(time.perf_counter() - started)

        memory.search = search


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(q / 100 * len(ordered)) - 1)]


LABELS = {
    "none": "no memory",
    "builtin-await": "built-in, blocking write",
    "builtin-nowait": "built-in, write not awaited",
    "ours": "agentscope-mem0",
    "ours-no-close": "agentscope-mem0, script not closed",
    "ours-write-path": "agentscope-mem0, search stubbed",
    "ours-no-consolidation": "agentscope-mem0, consolidation off",
    "ours-no-judge": "agentscope-mem0, judge=False",
    "ours-no-judge-no-consolidation": "agentscope-mem0, judge=False, consolidation off",
}
"""What each configuration is, in words, for the plots."""


def build_memory(folder: Path, args: argparse.Namespace) -> Any:
    """The embedded default on ``folder``: Qdrant Edge, the chosen embedder."""
    if args.embedding == "hash":
        embedder: Any = HashEmbedding()
    else:
        from agentscope_mem0.local import default_embedding_model

        embedder = default_embedding_model()
    return build_local_memory(
        ScriptedChatModel(delay=args.extraction_delay), embedding_model=embedder, folder=folder
    )


def our_middleware(outbox: Path, *, judge: bool = True, **kwargs: Any) -> Mem0Middleware:
    """This project's middleware with its outbox in ``outbox``."""
    parameters = Mem0Middleware.Parameters(outbox=outbox, judge=judge)
    return Mem0Middleware(parameters=parameters, **kwargs)


def middleware_for(name: str, user_id: str, memory: Any, folder: Path) -> Any:
    if name == "none":
        return None
    if name.startswith("builtin"):
        from agentscope.middleware import Mem0Middleware as BuiltinMem0Middleware

        return BuiltinMem0Middleware(
            user_id=user_id,
            client=memory,
            mode="static_control",
            await_write=(name == "builtin-await"),
        )
    judge = "no-judge" not in name
    mw = our_middleware(
        folder / "outbox", user_id=user_id, client=memory, mode="static_control", judge=judge
    )
    if name.endswith("no-consolidation"):
        time_judge = mw.client_state.judge
        assert hasattr(time_judge, "consolidates"), "the consolidation switch is gone"
        time_judge.consolidates = False
    if name == "ours-write-path":

        async def no_search(*args: Any, **kwargs: Any) -> list[Any]:
            return []

        mw.client_state.backend.search = no_search  # type: ignore[method-assign]
    return mw


async def count_memories(memory: Any, user_id: str) -> tuple[int, int]:
    """How many of the turns' facts ("User likes fruitNN.") mem0 holds for ``user_id``,
    and how many current memories beyond one per fact there are (a fact said again,
    "User really like fruitNN!", and not merged; which of the two is kept does not
    matter: said in one write, either may be).

    Raises:
        AssertionError: A fact is stored more than once.
    """
    raw = await memory.get_all(filters={"user_id": user_id}, top_k=1000)
    facts = [item for item in raw["results"] if "really" not in item["memory"]]
    tags = [t for item in facts for t in re.findall(r"\bfruit\d\d\b", item["memory"])]
    if len(tags) != len(set(tags)):
        raise AssertionError(f"{len(tags) - len(set(tags))} facts of {user_id} are stored twice")
    current = Counter(
        tag
        for item in raw["results"]
        if not (item.get("metadata") or {}).get("duplicate_of")
        for tag in set(re.findall(r"\bfruit\d\d\b", item["memory"]))
    )
    return len(set(tags)), sum(n - 1 for n in current.values())


def turn_text(i: int) -> str:
    """Turn ``i``'s message: a new fact, and every third turn an earlier one again."""
    again = f" I really like fruit{i - 2:02d}!" if i % 3 == 2 else ""
    return f"I like fruit{i:02d}.{again} Which fruit goes well with it?"


def run_script(
    result: Result,
    round_: int,
    memory: Any,
    timer: SearchTimer,
    args: argparse.Namespace,
    folder: Path,
) -> None:
    """One "script": N turns in its own event loop, then count what mem0 kept."""
    name = result.name
    user_id = f"user-{name}-{round_}"
    reply_model = ScriptedChatModel("Noted.", delay=args.reply_delay)

    async def script() -> None:
        mw = middleware_for(name, user_id, memory, folder)
        agent = Agent(
            name="assistant",
            system_prompt="You are a helpful assistant.",
            model=reply_model,
            middlewares=[mw] if mw is not None else [],
        )
        for i in range(args.turns):
            msg = UserMsg("user", turn_text(i))
            started = time.perf_counter()
            await agent.reply(msg)
            result.latencies.append(time.perf_counter() - started)
        if name in CLOSED:
            started = time.perf_counter()
            await mw.aclose()
            result.close_seconds.append(time.perf_counter() - started)
        if name.startswith("ours"):
            result.stats = {k: v for k, v in mw.stats().items() if v is not None}
        if name == "ours-no-close":
            result.left_open.append(mw)
        # builtin-nowait and ours-no-close: the script just ends here.

    timer.samples.clear()
    asyncio.run(script())
    result.searches += timer.samples if name != "ours-write-path" else []
    if name != "none":
        result.writes += args.turns
        result.users.append(user_id)
        stored, repeats = asyncio.run(count_memories(memory, user_id))
        result.stored_at_end += stored
        result.repeats_current += repeats


def replay_in_next_process(
    memory: Any, folder: Path, result: Result, args: argparse.Namespace
) -> int:
    """Start the next process on the folder; it stores what the outbox holds.

    Returns:
        The memories of ``result``'s users that process counted afterwards.
    """
    # This process lives on, so do the claims of the queues the scripts left
    # open; hand them back as this process exiting would (rows held by a dead
    # process are free at once), without waiting for a single write.
    for mw in result.left_open:
        asyncio.run(mw.client_state.writer.aclose(timeout=0))
    # Hand the folder over: the embedded store admits one process at a time.
    memory.close()
    close_shared_clients(folder)
    done = subprocess.run(
        [sys.executable, __file__, "--replay", str(folder), *_model_args(args), *result.users],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1])["stored"])


def _model_args(args: argparse.Namespace) -> list[str]:
    return ["--embedding", args.embedding, "--extraction-delay", str(args.extraction_delay)]


async def replay(memory: Any, folder: Path, users: list[str]) -> int:
    """In the next process: a queue on the folder stores what was left, then counts.

    The benchmark's own process is still alive, so rows it had in flight when
    a script's loop ended stay claimed until their lease (30 s) runs out, not
    at once as after a real exit; keep flushing until the outbox is empty.
    """
    queue = WriteQueue(Mem0Backend(memory), outbox_dir=folder / "outbox")
    deadline = time.monotonic() + 300
    while queue.outbox.counts()["pending"] and time.monotonic() < deadline:
        await queue.flush(timeout=60)
        await asyncio.sleep(1.0)
    await queue.aclose(timeout=300)
    return sum([(await count_memories(memory, user))[0] for user in users])


async def time_search(memory: Any, user_id: str, n: int) -> list[float]:
    """mem0's search alone, as the middleware calls it (same store, same filters),
    with the query cache bypassed: the floor is what one search costs."""
    cache = install_query_cache(memory)
    if cache is not None:
        cache.enabled = False
    out = []
    for i in range(n):
        started = time.perf_counter()
        await memory.search(
            f"I like fruit{i:02d}. Which fruit goes well with it?",
            filters={"user_id": user_id, "agent_id": "assistant"},
            top_k=5,
        )
        out.append(time.perf_counter() - started)
    if cache is not None:
        cache.enabled = True
    return out


def _reset(cache: QueryEmbeddingCache) -> None:
    cache.hits = cache.misses = 0
    cache.seconds_saved = 0.0


async def _timed_turn(bot: Agent, text: str, into: list[float]) -> None:
    started = time.perf_counter()
    await bot.reply(UserMsg("user", text))
    into.append(time.perf_counter() - started)


async def cache_phase(memory: Any, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Repeated and resumed turns, query cache on then off (see the module doc)."""
    cache = install_query_cache(memory)
    assert cache is not None
    result: dict[str, Any] = {"embedding": args.embedding, "turns": args.turns}
    for label, enabled in (("on", True), ("off", False)):
        cache.enabled = enabled
        _reset(cache)
        user_id = f"user-cache-{label}-{time.time_ns()}"
        mw = our_middleware(
            folder / "outbox", user_id=user_id, client=memory, mode="static_control"
        )
        model = ScriptedChatModel("Noted.", delay=args.reply_delay)
        agent = Agent(name="assistant", system_prompt="You help.", model=model, middlewares=[mw])
        timings: dict[str, list[float]] = {"first": [], "again": [], "resumed": []}
        texts = [f"What goes well with fruit{i:02d}, given what I like?" for i in range(args.turns)]

        for text in texts:
            await _timed_turn(agent, text, timings["first"])
            await _timed_turn(agent, text, timings["again"])  # the same message sent again
        saved = json.loads(json.dumps(agent.state.model_dump(mode="json")))
        reborn = Agent(
            name="assistant",
            system_prompt="You help.",
            model=model,
            middlewares=[mw],
            state=AgentState.model_validate(saved),
        )
        for text in texts[-max(1, args.turns // 3) :]:
            await _timed_turn(reborn, text, timings["resumed"])
        await mw.aclose()
        stats = cache.stats()
        result[label] = {
            **{f"{k}_median_s": statistics.median(v) for k, v in timings.items()},
            "searches": stats["query_cache_hits"] + stats["query_cache_misses"],
            "hits": stats["query_cache_hits"],
            "hit_rate": stats["query_cache_hit_rate"] if enabled else None,
            "embedding_seconds_saved": stats["query_cache_seconds_saved"] if enabled else 0.0,
        }
        if not enabled:
            result[label]["searches"] = sum(len(v) for v in timings.values())
    cache.enabled = True
    result["load_average_1m_after"] = os.getloadavg()[0]
    on, off = result["on"], result["off"]
    result["saved_per_hit_s"] = on["embedding_seconds_saved"] / on["hits"] if on["hits"] else 0.0
    result["repeat_turn_median_difference_s"] = off["again_median_s"] - on["again_median_s"]
    return result


def cache_markdown(phases: dict[str, Any]) -> list[str]:
    """The report's section on the query-embedding cache (one row per embedder run)."""
    loads = ", ".join(
        f"{name} {run.get('load_average_1m_after', float('nan')):.1f}"
        for name, run in sorted(phases.items())
    )
    lines = [
        "## Query-embedding cache",
        "",
        "Our middleware again, each of the turns' messages sent twice (a retry or a "
        "regenerated answer), then the last third once more from the agent's saved and "
        "reloaded state (a resumed session); the same script with the cache on and off. "
        "Hits, hit rate and the embedding time saved are the cache's own counters (the "
        "time a hit saves is what embedding that text took when it missed).",
        "",
        "| embedder | lookups | hits | hit rate | embedding time saved (s) | saved per hit "
        "(ms) | turn medians, cache on / off (ms): new message | sent again | resumed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in sorted(phases.items()):
        on, off = r["on"], r["off"]
        lines.append(
            f"| {name} | {on['searches']} | {on['hits']} | {on['hit_rate']:.0%} | "
            f"{on['embedding_seconds_saved']:.2f} | {r['saved_per_hit_s'] * 1000:.1f} | "
            f"{on['first_median_s'] * 1000:.1f} / {off['first_median_s'] * 1000:.1f} | "
            f"{on['again_median_s'] * 1000:.1f} / {off['again_median_s'] * 1000:.1f} | "
            f"{on['resumed_median_s'] * 1000:.1f} / {off['resumed_median_s'] * 1000:.1f} |"
        )
    lines += [
        "",
        "Commands: `" + "`, `".join(r["command"] for _, r in sorted(phases.items())) + "`.",
        "First-time messages always miss (every turn here is new text): their medians, on "
        "and off, show how much two runs differ by noise alone on this machine (1-minute "
        f"load average after each run: {loads}). The hit rate is "
        "that of the repeats; the rest of the report's turns are all new and gain nothing. "
        "Lookups are one per search plus one per entity mem0 2.2 embeds for its entity "
        "boost. The resumed agent runs in the same process, as `agentscope.app` rebuilds "
        "an agent and its middlewares from the session for every request; a new process "
        "starts with an empty cache.",
    ]
    return lines


def report(results: list[Result], search: list[float], args: argparse.Namespace) -> dict[str, Any]:
    by_name = {r.name: r for r in results}
    none = by_name["none"].median
    ours = by_name["ours"]
    write_path = by_name["ours-write-path"]
    quiet = statistics.median(search)
    during = statistics.median(ours.searches)
    return {
        "command": (
            f"python benchmarks/write_latency.py --turns {args.turns} --rounds {args.rounds} "
            f"--reply-delay {args.reply_delay} --extraction-delay {args.extraction_delay} "
            f"--embedding {args.embedding}"
        ),
        "environment": {
            "python": platform.python_version(),
            "agentscope": agentscope.__version__,
            "mem0ai": getattr(mem0, "__version__", "unknown"),
            "agentscope_mem0": agentscope_mem0.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_1m_before_after": list(args.load),
        },
        "settings": {
            "turns_per_script": args.turns,
            "rounds": args.rounds,
            "reply_delay_s": args.reply_delay,
            "extraction_delay_s": args.extraction_delay,
            "embedding": args.embedding,
            "store": "mem0 AsyncMemory on an on-disk local Qdrant",
        },
        "search_alone_s": {"median": quiet, "p95": percentile(search, 95)},
        "summary": {
            "ours_overhead_median_s": ours.median - none,
            "ours_search_median_during_run_s": during,
            "ours_overhead_over_search_during_run": (ours.median - none) / during,
            "ours_overhead_over_search_alone": (ours.median - none) / quiet,
            "write_path_overhead_median_s": write_path.median - none,
            # What consolidation adds to a reply: the same middleware with it on and off.
            "consolidation_median_s": ours.median - by_name["ours-no-consolidation"].median,
            "consolidation_p95_s": ours.p95 - by_name["ours-no-consolidation"].p95,
            "consolidation_no_judge_median_s": (
                by_name["ours-no-judge"].median - by_name["ours-no-judge-no-consolidation"].median
            ),
            "consolidation_no_judge_p95_s": (
                by_name["ours-no-judge"].p95 - by_name["ours-no-judge-no-consolidation"].p95
            ),
        },
        "results": [
            {
                "name": r.name,
                "turns": len(r.latencies),
                "median_s": r.median,
                "p95_s": r.p95,
                "overhead_median_s": r.median - none,
                "search_median_during_run_s": (
                    statistics.median(r.searches) if r.searches else None
                ),
                "writes": r.writes,
                "stored_at_end": r.stored_at_end,
                "repeats_current": r.repeats_current,
                "repeats_said": sum(i % 3 == 2 for i in range(args.turns)) * args.rounds,
                "stored_after_restart": r.stored_after_restart,
                "close_s": r.close_seconds,
                "stats": r.stats,
                "latencies_s": r.latencies,
                "search_latencies_s": r.searches,
            }
            for r in results
        ],
    }


def markdown(data: dict[str, Any], args: argparse.Namespace, plotted: bool) -> str:
    s = data["summary"]
    rows = {r["name"]: r for r in data["results"]}
    lines = [
        "# Write latency: reply time and writes kept",
        "",
        "Generated by `benchmarks/write_latency.py`; every number is in "
        "[write-latency.json](write-latency.json).",
        "",
        f"One process, one embedded mem0 (the default: `AsyncMemory` on Qdrant Edge in a data "
        f"folder), a real "
        f"AgentScope `Agent` whose model answers in {args.reply_delay} s; mem0's extraction "
        f"model takes {args.extraction_delay} s per call; embedding: {args.embedding}. Each "
        f"configuration runs as a script (its own `asyncio.run`, its own user) of "
        f"{args.turns} turns, {args.rounds} time(s), configurations interleaved; the memories "
        "of the script's user are counted right after it ends.",
        "",
        f"Command: `{data['command']}`",
        "",
        f"Machine: {os.cpu_count()} CPUs, 1-minute load average {args.load[0]:.1f} before and "
        f"{args.load[1]:.1f} after the run: other work shared the machine, which shows in "
        "the p95 column far more than in the medians.",
        "",
        "| configuration | median (s) | p95 (s) | median overhead (ms) | its searches, "
        "median (ms) | stored when the script ended | after the next start | repeats "
        "left current |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["results"]:
        search = r["search_median_during_run_s"]
        searched = f"{search * 1000:.1f}" if search is not None else "–"
        stored = f"{r['stored_at_end']} / {r['writes']}" if r["writes"] else "–"
        after = r["stored_after_restart"]
        restarted = f"{after} / {r['writes']}" if after is not None else "–"
        repeats = f"{r['repeats_current']} / {r['repeats_said']}" if r["writes"] else "–"
        lines.append(
            f"| {r['name']} | {r['median_s']:.3f} | {r['p95_s']:.3f} | "
            f"{r['overhead_median_s'] * 1000:+.1f} | {searched} | {stored} | {restarted} | "
            f"{repeats} |"
        )
    close = rows["ours"]["close_s"]
    lines += [
        "",
        f"- mem0's `search` alone, timed at the end with nothing else running: median "
        f"{data['search_alone_s']['median'] * 1000:.1f} ms. During the `ours` scripts, with "
        f"the background writes sharing the process and the store, its searches took "
        f"{s['ours_search_median_during_run_s'] * 1000:.1f} ms (median). The median turn of "
        f"`ours` was {s['ours_overhead_median_s'] * 1000:.1f} ms slower than no memory: "
        f"{s['ours_overhead_over_search_during_run']:.2f}× its search, "
        f"{s['ours_overhead_over_search_alone']:.2f}× the search alone.",
        f"- `ours-write-path` (search stubbed out): {s['write_path_overhead_median_s'] * 1000:+.1f}"
        " ms over no memory. Queueing a write records it in the outbox (SQLite, WAL) on the "
        "event loop when the file is free, in tens of microseconds, and returns; mem0's "
        "extraction runs in the background.",
        "- Consolidation (one current memory per fact), on and off in the same run: "
        f"the median turn of `ours` was {s['consolidation_median_s'] * 1000:+.1f} ms "
        f"(p95 {s['consolidation_p95_s'] * 1000:+.1f} ms) from the same middleware with "
        "consolidation off, and with `judge=False`, where it is a pass of its own (a "
        f"search per new memory), {s['consolidation_no_judge_median_s'] * 1000:+.1f} ms "
        f"(p95 {s['consolidation_no_judge_p95_s'] * 1000:+.1f} ms): it runs after the "
        "write was stored, in the background. Every third turn said an earlier fact again "
        "in other words; the last column counts the current memories beyond one per fact "
        "when the script ended (the built-in keeps both wordings; ours marks one a repeat "
        "of the other, the older, or either when one write stored both; "
        "`ours-write-path`'s stubbed search is the judge's too, so it only merges repeats "
        "within one write).",
        f"- `ours` closed with `aclose()` (what `async with` does): closing waited "
        f"{statistics.median(close):.2f} s (median) for the writes still queued; a busy "
        f"conversation's consecutive exchanges go to mem0 together "
        f"({rows['ours']['stats'].get('write_batches', '?')} mem0 calls for "
        f"{args.turns} exchanges in the last round).",
        "- `ours-no-close` ended without closing: what mem0 had not stored stayed in the "
        "outbox, and the next process on the folder (a real second process, started once "
        "this one had released the store; rows still in flight stay claimed by this live "
        "process until their 30 s lease ends, after which the next process takes them) "
        f"stored {rows['ours-no-close']['stored_after_restart']} of "
        f"{rows['ours-no-close']['writes']}, each once.",
        "- `builtin-nowait` starts an untracked task per write: when the script's event loop "
        "ends, the writes still running are cancelled and lost. `builtin-await` stores every "
        "write by making each turn wait for mem0's extraction. What it leaves running on "
        "mem0's threads slows down the next script, `ours-no-close` (so placed on purpose: "
        "its figure is what the next process stores, not its latency); the writes "
        "`ours-no-close` leaves in the outbox are stored by the next script, "
        "`ours-write-path`, once their lease ends, so its close waits for them.",
        "- Counts are distinct facts: the extraction fake turns each 'I like fruitNN.' into "
        "one memory, and the script fails if any fact is stored twice.",
    ]
    if plotted:
        lines += [
            "",
            "![reply time per turn](write-latency.png)",
            "",
            "![writes kept when a script ends](write-kept.png)",
        ]
    if data.get("query_cache"):
        lines += ["", *cache_markdown(data["query_cache"])]
        if plotted and plot_cache(data["query_cache"], Path(args.out)):
            lines += ["", "![query-embedding cache](write-latency-cache.png)"]
    return "\n".join(lines) + "\n"


def plot(data: dict[str, Any], out: Path) -> bool:
    """``write-latency.png`` (what a turn costs) and ``write-kept.png`` (what is kept)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logging.getLogger(__name__).warning("matplotlib is not installed; no plot")
        return False
    shown = [r for r in data["results"] if r["name"] != "ours-write-path"]
    names = [LABELS[r["name"]] for r in shown]
    medians = [r["median_s"] * 1000 for r in shown]
    p95s = [r["p95_s"] * 1000 for r in shown]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(shown) + 1.3))
    y = list(range(len(shown)))[::-1]
    colours = ["#4a7bb7" if r["name"].startswith("ours") else "#9aa3ad" for r in shown]
    ax.barh(y, medians, color=colours, height=0.6, label="median")
    ax.scatter(p95s, y, marker="|", s=260, color="#b3261e", zorder=3, label="p95")
    for yi, median, p95 in zip(y, medians, p95s, strict=True):
        ax.text(median, yi + 0.33, f" {median:.0f} ms", va="center", fontsize=9)
        ax.text(p95, yi - 0.33, f" p95 {p95:.0f}", va="center", fontsize=8, color="#b3261e")
    ax.set_yticks(y, names)
    ax.set_xlabel("reply time per turn (ms)")
    ax.set_xlim(0, max(p95s) * 1.25)
    ax.set_title("A turn costs the search, not the write\n(mem0 extracting in 0.5 s)", fontsize=10)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "write-latency.png", dpi=120)
    plt.close(fig)

    kept = [r for r in data["results"] if r["name"] in KEPT_SHOWN]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    y = list(range(len(kept)))[::-1]
    at_end = [r["stored_at_end"] for r in kept]
    later = [r["stored_after_restart"] or r["stored_at_end"] for r in kept]
    ax.barh(y, later, color="#c9d8ec", height=0.6, label="after the next process started")
    ax.barh(y, at_end, color="#4a7bb7", height=0.6, label="when the script ended")
    for yi, now, after, r in zip(y, at_end, later, kept, strict=True):
        text = f" {now}/{r['writes']}" + (f" → {after}/{r['writes']}" if after != now else "")
        ax.text(after, yi, text, va="center", fontsize=9)
    ax.set_yticks(y, [LABELS[r["name"]] for r in kept])
    ax.set_xlabel("exchanges stored")
    ax.set_xlim(0, max(r["writes"] for r in kept) * 1.35)
    ax.set_title("Every write is kept, also when a script ends without closing")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out / "write-kept.png", dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30, help="turns per script")
    parser.add_argument("--rounds", type=int, default=2, help="scripts per configuration")
    parser.add_argument("--reply-delay", type=float, default=0.05)
    parser.add_argument("--extraction-delay", type=float, default=0.5)
    parser.add_argument("--embedding", choices=("hash", "e5"), default="hash")
    parser.add_argument("--out", default="docs/benchmarks")
    parser.add_argument("--folder", help="data folder (default: a new temporary one)")
    parser.add_argument("--no-plot", dest="plot", action="store_false")
    parser.add_argument(
        "--phase",
        choices=("all", "cache"),
        default="all",
        help="'cache': only the query-cache part, merged into the report in --out",
    )
    parser.add_argument("--replay", metavar="FOLDER", help=argparse.SUPPRESS)
    parser.add_argument("users", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("as", "mem0", "httpx", "qdrant_client", "agentscope_mem0"):
        logging.getLogger(noisy).setLevel(logging.ERROR)

    made = not (args.replay or args.folder)  # a folder of its own, removed at the end
    folder = Path(args.replay or args.folder or tempfile.mkdtemp(prefix="agentscope-mem0-bench-"))
    try:
        memory = build_memory(folder, args)
        if args.replay:
            stored = asyncio.run(replay(memory, folder, args.users))
            sys.stdout.write(json.dumps({"stored": stored}) + "\n")
            return

        asyncio.run(memory.search("warm up", filters={"user_id": "warm"}, top_k=1))
        if args.phase == "cache":
            merge_cache_phase(memory, args, folder)
            return
        timer = SearchTimer(memory)
        load_before = os.getloadavg()[0]
        results = [Result(name) for name in CONFIGS]
        for round_ in range(args.rounds):
            for result in results:
                run_script(result, round_, memory, timer, args, folder)
                sys.stdout.write(
                    f"round {round_ + 1} {result.name:16s} median {result.median * 1000:7.1f} ms"
                    f"  p95 {result.p95 * 1000:7.1f} ms  stored {result.stored_at_end}/"
                    f"{result.writes}\n"
                )
        search = asyncio.run(time_search(memory, "user-ours-0", max(args.turns, 30)))
        args.load = (load_before, os.getloadavg()[0])
        cache = run_cache_phase(memory, args, folder)  # before the folder is handed over
        no_close = next(r for r in results if r.name == "ours-no-close")
        no_close.stored_after_restart = replay_in_next_process(memory, folder, no_close, args)
        sys.stdout.write(
            f"ours-no-close after the next process started: "
            f"{no_close.stored_after_restart}/{no_close.writes}\n"
        )

        data = report(results, search, args)
        data["query_cache"] = {args.embedding: cache}
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "write-latency.json").write_text(json.dumps(data, indent=2) + "\n")
        plotted = args.plot and plot(data, out)
        (out / "write-latency.md").write_text(markdown(data, args, plotted))
        sys.stdout.write(f"search alone median {data['search_alone_s']['median'] * 1000:.1f} ms\n")
    finally:
        if made:
            close_shared_clients(folder)
            shutil.rmtree(folder, ignore_errors=True)


def run_cache_phase(memory: Any, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    phase = asyncio.run(cache_phase(memory, args, folder))
    phase["command"] = (
        f"python benchmarks/write_latency.py --phase cache --turns {args.turns} "
        f"--reply-delay {args.reply_delay} --extraction-delay {args.extraction_delay} "
        f"--embedding {args.embedding}"
    )
    on = phase["on"]
    sys.stdout.write(
        f"query cache ({args.embedding}): {on['hits']}/{on['searches']} hits, "
        f"{on['embedding_seconds_saved']:.2f} s of embedding saved\n"
    )
    return phase


def plot_cache(phases: dict[str, Any], out: Path) -> bool:
    """``write-latency-cache.png``: turn medians with the cache on and off, per embedder."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logging.getLogger(__name__).warning("matplotlib is not installed; no plot")
        return False
    names = sorted(phases)
    kinds = (("first", "new message"), ("again", "sent again"), ("resumed", "resumed state"))
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        x = list(range(len(kinds)))
        for shift, label in ((-0.2, "on"), (0.2, "off")):
            values = [phases[name][label][f"{k}_median_s"] * 1000 for k, _ in kinds]
            colour = "#4a7bb7" if label == "on" else "#9aa3ad"
            ax.bar([i + shift for i in x], values, 0.4, color=colour, label=f"cache {label}")
            for i, value in zip(x, values, strict=True):
                ax.text(i + shift, value + 1, f"{value:.0f}", ha="center", fontsize=8)
        ax.set_xticks(x, [title for _, title in kinds])
        ax.set_ylabel("reply time per turn, median (ms)")
        ax.set_title(f"A message sent again skips its embedding ({name})", fontsize=10)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(out / "write-latency-cache.png", dpi=120)
    plt.close(fig)
    return True


def merge_cache_phase(memory: Any, args: argparse.Namespace, folder: Path) -> None:
    """``--phase cache``: add this embedder's run to the JSON and rewrite its section."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "write-latency.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("query_cache", {})[args.embedding] = run_cache_phase(memory, args, folder)
    path.write_text(json.dumps(data, indent=2) + "\n")
    report_md = out / "write-latency.md"
    text = report_md.read_text() if report_md.exists() else "# Write latency\n"
    head = text.split("\n## Query-embedding cache\n")[0].rstrip("\n")
    section = cache_markdown(data["query_cache"])
    if args.plot and plot_cache(data["query_cache"], out):
        section += ["", "![query-embedding cache](write-latency-cache.png)"]
    report_md.write_text(head + "\n\n" + "\n".join(section) + "\n")


if __name__ == "__main__":
    main()
