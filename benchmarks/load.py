"""Many users at once: on the embedded default, or on PostgreSQL over replicas.

``--users`` users chat at the same time, ``--turns`` turns each, through the
service factory (``mem0_middleware_factory`` on a temporary data folder: one
shared mem0 client, the real embedded store, the offline e5 embedder). Every
turn is a fresh AgentScope ``Agent`` assembled with the factory's middleware,
as ``agentscope.app`` does. The agent's model and mem0's extraction model are
``ScriptedChatModel``s that answer after ``--reply-delay`` and
``--extraction-delay`` seconds (a provider's latency); the agent's answers are
as long as real agents' are: a seeded mix of 50 to ``--max-reply`` characters
(2,000 by default), which mem0 then embeds with each exchange it stores.
Extraction keeps the user's first-person statements.

Even turns state a new fact with a marker unique to the user and turn ("I
have a pet named Pet7x4."); odd turns ask about them, and extraction keeps
nothing from a question. The same workload runs without memory (the
baseline), without memory but with a middleware that awaits
``asyncio.sleep(0)`` once before the reply (``pause``: the least any
middleware that waits for something before the model call can cost a reply
on a busy loop), with memory on this checkout's code (the default: a reply's query
that e5 expects to keep waiting past its 0.25 s budget is searched by
keywords alone), with memory where every query waits for its embedding
(``query_budget=None``, as before 0.3), and, with ``--before-src``, with
memory on another checkout's code: each in a fresh interpreter, one after
the other, so the numbers sit side by side in one report.

**Scale-out** (``--replicas N``, with ``--pg-dsn``): the same users on
PostgreSQL + pgvector through ``mem0_middleware_factory`` with every default
for that store (the outbox a table in the same database, the offline e5
embedder), once in one process and once dealt out over ``N`` replica
processes (user ``u`` to replica ``u % N``), and the baseline over as many
processes; then both again with replicas that only record their writes
(``deliver_writes=False``) and a writer process at niceness 19 storing them
(``factory.serve_writes()``; ``--skip writer`` leaves these out). Every
workload's process has its own HOME and data folder, as on its own pod;
each answers one question first (AgentScope's agent built, with memory the
embedder loaded and the first search done), and the users of all
its processes start at the same moment, when every one of them is warm. The
facts are counted once every process drained, so a write stored twice by
another replica shows too.

With the same model latency for every call (``--reply-spread 0``, the
default) the users stay in step, every turn's start lands on the loop at
the same moment as the others', which is the worst case; ``--reply-spread``
varies each call's latency around ``--reply-delay`` (seeded, the same in
every workload), as a provider's does.

Measured: reply latency (the overhead is the difference from the baseline,
p50 and p95), turns without memory (the search timed out, failed or was
skipped by the breaker), searches answered by keywords alone, event-loop lag
(a coroutine that sleeps 10 ms at a time and records how late it wakes, p99
and max: every coroutine of the app waits that long), writes stored exactly
once (each fact's marker found once in mem0 after the drain), and the time
from the last reply until every write is stored.

Usage::

    python benchmarks/load.py --users 50 --turns 10 --out docs/benchmarks \\
        --before-src /path/to/old/checkout/src
    python benchmarks/load.py --replicas 2 --pg-dsn postgresql://... \\
        --skip pause memory memory-waiting --report scale-out

Writes ``load.json`` and (with matplotlib) ``load.png`` to ``--out`` (another
name with ``--report``). Each workload also records the 1-, 5- and 15-minute
load averages before and after it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _writer import serve_until_told

_MARKER = re.compile(r"Pet\d+x\d+")
_ANSWER = (
    "Here is what I found, step by step: the figures for the region, the shipping "
    "delays and what they cost, the suppliers and their terms, the staffing plan for "
    "the months ahead, and what I would do next. "
)
_LAG_TICK = 0.010
# Workers on PostgreSQL: replicas that store their writes, replicas that only record
# them, and the writer process that stores what those recorded.
_POSTGRES = ("memory-postgres", "memory-recording", "memory-writer")
_WRITER_NICE = 19
# The workload's settings: passed to each workload's interpreter, kept in the report.
_CONFIG = (
    "users",
    "turns",
    "reply_delay",
    "reply_spread",
    "extraction_delay",
    "search_timeout",
    "max_reply",
)


def _message(user: int, turn: int) -> str:
    if turn % 2 == 0:
        return f"I have a pet named Pet{user}x{turn}. Please remember that."
    return "What are the names of my pets?"


def _reply(user: int, turn: int, longest: int) -> str:
    """The agent's answer: a seeded length between 50 and ``longest`` characters."""
    size = random.Random(user * 1000 + turn).randint(50, longest)
    return (_ANSWER * (size // len(_ANSWER) + 1))[:size]


def _delay(user: int, turn: int, args: argparse.Namespace) -> float:
    """The agent's model latency this turn: ``--reply-delay``, or with ``--reply-spread``
    a seeded draw within that many seconds around it (the same in every workload)."""
    if not args.reply_spread:
        return float(args.reply_delay)
    draw = random.Random(f"delay {user} {turn}").uniform(-0.5, 0.5)
    return float(args.reply_delay + draw * args.reply_spread)


@functools.cache
def _pause_once() -> type:
    """The ``pause`` workload's middleware class (AgentScope is imported by the
    workers only: the process that starts them stays light)."""
    from agentscope.middleware import MiddlewareBase

    class PauseOnce(MiddlewareBase):
        """No memory, one ``await asyncio.sleep(0)`` before the reply. What any
        middleware that waits for anything before the model call costs a reply
        on a busy loop, however short the wait."""

        async def on_reply(self, agent: Any, input_kwargs: Any, next_handler: Any) -> Any:
            await asyncio.sleep(0)
            async for item in next_handler(**input_kwargs):
                yield item

    return PauseOnce


async def _pause_factory(user_id: str, agent_id: str, session_id: str) -> list[Any]:
    return [_pause_once()()]


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
        "p99": _percentile(values, 0.99),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


async def _watch_lag(samples: list[float], stop: asyncio.Event) -> None:
    """How late the loop wakes a coroutine that sleeps ``_LAG_TICK`` at a time."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(_LAG_TICK)
        samples.append(max(0.0, time.perf_counter() - started - _LAG_TICK))


async def _turn(
    user_id: str, message: str, answer: str, delay: float, factory: Any | None
) -> tuple[float, bool]:
    """One turn as ``agentscope.app`` runs it: a fresh ``Agent`` with the factory's
    middleware; returns the reply's latency and whether its note named a pet."""
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    from agentscope_mem0.testing import ScriptedChatModel

    model = ScriptedChatModel(answer, delay=delay)
    started = time.perf_counter()
    middlewares = await factory(user_id, "assistant", "s") if factory else []
    agent = Agent(name="assistant", system_prompt="You help.", model=model, middlewares=middlewares)
    await agent.reply(UserMsg(name="user", content=message))
    latency = time.perf_counter() - started
    seen = "\n".join(str(getattr(b, "hint", "")) for m in model.calls[0] for b in m.content)
    return latency, bool(_MARKER.search(seen))


async def _user(
    user: int, args: argparse.Namespace, factory: Any | None
) -> tuple[list[float], int]:
    """One user's turns; returns each reply's latency and how many notes named a pet."""
    latencies: list[float] = []
    recalled = 0
    for turn in range(args.turns):
        latency, named = await _turn(
            f"user{user}",
            _message(user, turn),
            _reply(user, turn, args.max_reply),
            _delay(user, turn, args),
            factory,
        )
        latencies.append(latency)
        recalled += named
    return latencies, recalled


async def _barrier(word: str) -> None:
    """Tell the parent ``word`` and wait for its go (a line on stdin): the
    processes of one workload start their users, and count, at the same moment."""
    print(word, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


def _users(args: argparse.Namespace) -> list[int]:
    """The users of this process: every ``--processes``-th, from ``--process``."""
    return list(range(args.process, args.users, args.processes))


def _memory_factory(args: argparse.Namespace, folder: Path | None) -> Any:
    """The factory of a memory workload: on the embedded store in ``folder``, or
    (``--pg-dsn``) on PostgreSQL + pgvector with every default for that store."""
    from agentscope_mem0 import Mem0Middleware
    from agentscope_mem0.service import mem0_middleware_factory
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    # Another checkout's release 0.2 (--before-src) takes the timeout as a keyword.
    options: dict[str, Any] = (
        {"parameters": Mem0Middleware.Parameters(search_timeout=args.search_timeout)}
        if hasattr(Mem0Middleware, "Parameters")
        else {"search_timeout": args.search_timeout}
    )
    if args.worker in _POSTGRES:
        if args.worker == "memory-recording":  # the writer process stores the writes
            options["parameters"] = options["parameters"].model_copy(
                update={"deliver_writes": False}
            )
        from agentscope_mem0.backends import pgvector_config, prepare_pgvector
        from agentscope_mem0.local import default_embedding_model

        # --embedder hash: embeddings nearly free, to see what e5's share is.
        hashed = args.embedder == "hash"
        embedding_model = HashEmbedding(384) if hashed else default_embedding_model()
        config = pgvector_config(
            args.pg_dsn, dims=embedding_model.dimensions, collection=args.collection
        )
        prepare_pgvector(config)  # processes starting together: made once, under a lock
        options.update(embedding_model=embedding_model, mem0_config=config)
    else:
        options.update(folder=folder)
    return mem0_middleware_factory(
        chat_model=ScriptedChatModel(delay=args.extraction_delay),
        mode="static_control",
        **options,
    )


async def _run(args: argparse.Namespace, folder: Path | None) -> dict[str, Any]:
    """This process's share of one workload: without memory when it is ``baseline``
    or ``pause`` (whose middleware only pauses)."""
    factory: Any = _pause_factory if args.worker == "pause" else None
    startup = None
    if args.worker not in ("baseline", "pause"):
        factory = _memory_factory(args, folder)
        started = time.perf_counter()
        # What install() does at the app's startup (another checkout's may lack start()).
        await getattr(factory, "start", factory.get_client)()
        startup = time.perf_counter() - started
    # Warm up as an app does before its users come: one question (nothing to store)
    # loads AgentScope's agent, and with memory the embedder and the first search.
    await _turn("warm-up", _message(0, 1), "Hello.", 0.0, factory)
    await _barrier("ready")
    lags: list[float] = []
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_lag(lags, stop))
    began_at = time.time()  # the wall clock: the parent lines processes up with it
    results = await asyncio.gather(*(_user(u, args, factory) for u in _users(args)))
    replies_done_at = time.time()
    out: dict[str, Any] = {
        "reply_latencies": [x for lat, _ in results for x in lat],
        # turn t of every user: the first turns start together, the later ones drift
        "reply_latencies_by_turn": [[lat[t] for lat, _ in results] for t in range(args.turns)],
        "began_at": began_at,
        "replies_done_at": replies_done_at,
    }
    if factory is None or args.worker == "pause":
        stop.set()
        await watcher
        await _barrier("drained")
        out.update(loop_lags=lags, drained_at=replies_done_at)
        return out
    # With a writer process: until it stored what every replica recorded.
    drained = await factory.flush(timeout=args.drain_timeout)
    out["drained_at"] = time.time()
    stop.set()
    await watcher
    # Count once every process of the workload drained: a write stored twice by
    # another replica shows too.
    await _barrier("drained")
    client: Any = factory.client
    expected = {f"user{u}": {f"Pet{u}x{t}" for t in range(0, args.turns, 2)} for u in _users(args)}
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
    without = sum(stats.get(k, 0) for k in ("search_timeouts", "search_failures"))
    without += stats.get("searches_skipped", 0)
    out.update(
        loop_lags=lags,
        startup_seconds=startup,
        drained=drained,
        turns_without_memory=without,
        writes_expected=sum(len(m) for m in expected.values()),
        writes_stored_once=once,
        writes_missing=missing,
        writes_duplicated=duplicated,
        question_turns_recalling_a_fact=sum(r for _, r in results),
        searches_by_keywords_alone=stats.get("searches_by_keywords_alone", 0),
        store=f"{store.__module__}.{store.__qualname__}",
        stats={k: v for k, v in stats.items() if isinstance(v, int | float | str)},
    )
    return out


def _worker(args: argparse.Namespace) -> None:
    """``--worker``: run this process's share of one workload; print it as JSON last."""
    logging.basicConfig(level=logging.ERROR)
    if args.worker == "memory-writer":  # until the parent says stop: every write stored
        stats = asyncio.run(serve_until_told(_memory_factory(args, None), poll=0.2))
        report = {"stats": {k: v for k, v in stats.items() if isinstance(v, int | float | str)}}
    elif args.worker in ("baseline", "pause", *_POSTGRES):
        report = asyncio.run(_run(args, None))
    else:
        if args.worker == "memory-waiting":
            from agentscope_mem0.local import default_embedding_model

            default_embedding_model().query_budget = None
        from agentscope_mem0.local import close_shared_clients

        with tempfile.TemporaryDirectory(prefix="agentscope-mem0-load-") as tmp:
            report = asyncio.run(_run(args, Path(tmp)))
            close_shared_clients(tmp)  # the embedded store stays open until then
    import agentscope_mem0

    report["code"] = str(Path(agentscope_mem0.__file__).resolve().parent.parent)
    print(json.dumps(report))


def _merged(parts: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """One workload's report from the reports of its processes."""
    first = parts[0]
    latencies = [x for part in parts for x in part["reply_latencies"]]
    replies_done_at = max(part["replies_done_at"] for part in parts)
    out: dict[str, Any] = {
        "processes": len(parts),
        "reply_latency": _summary(latencies),
        "reply_latencies": latencies,
        "reply_latency_by_turn": [
            _summary([x for part in parts for x in part["reply_latencies_by_turn"][turn]])
            for turn in range(args.turns)
        ],
        "replies_wall_time": replies_done_at - min(part["began_at"] for part in parts),
        "loop_lag": _summary([x for part in parts for x in part["loop_lags"]]),
        "code": first["code"],
    }
    if "writes_expected" not in first:
        return out
    summed = (
        "turns_without_memory",
        "writes_expected",
        "writes_stored_once",
        "writes_missing",
        "writes_duplicated",
        "question_turns_recalling_a_fact",
        "searches_by_keywords_alone",
    )
    out.update({key: sum(part[key] for part in parts) for key in summed})
    out.update(
        startup_seconds=max(part["startup_seconds"] for part in parts),
        drained=all(part["drained"] for part in parts),
        drain_seconds=max(part["drained_at"] for part in parts) - replies_done_at,
        turns=args.users * args.turns,
        question_turns=args.users * (args.turns // 2),
        store=first["store"],
        stats=first["stats"] if len(parts) == 1 else [part["stats"] for part in parts],
    )
    return out


def _workload(
    kind: str, args: argparse.Namespace, src: Path | None, processes: int = 1
) -> dict[str, Any]:
    """Run one workload in ``processes`` fresh interpreters (``src``: that checkout's
    package), each with its own HOME and data folder as on its own pod, the users
    dealt out between them; they start their users together once all are warm."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    command = [sys.executable, __file__, "--worker", kind, "--processes", str(processes)]
    for name in _CONFIG:
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    command += ["--drain-timeout", str(args.drain_timeout)]
    if kind in _POSTGRES:
        command += ["--pg-dsn", args.pg_dsn, "--collection", f"load_{uuid.uuid4().hex[:12]}"]
        command += ["--embedder", args.embedder]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="load-pods-") as root, ExitStack() as files:

        def start(name: str, argv: list[str], nice: int = 0) -> subprocess.Popen[str]:
            home = Path(root) / name
            (home / "data").mkdir(parents=True)
            pod = {"HOME": home, "AGENTSCOPE_MEM0_DIR": home / "data", "MEM0_DIR": home / ".mem0"}
            return subprocess.Popen(
                ["nice", "-n", str(nice), *argv] if nice else argv,
                env=env | {k: str(v) for k, v in pod.items()},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                # a file: a full pipe would stall the worker
                stderr=files.enter_context((home / "stderr").open("w")),
                text=True,
            )

        writer: subprocess.Popen[str] | None = None
        workers: list[subprocess.Popen[str]] = []
        try:
            if kind == "memory-recording":  # the writer process, below the replicas' priority
                argv = [*command, "--process", "0"]
                argv[argv.index(kind)] = "memory-writer"
                writer = start("writer", argv, nice=_WRITER_NICE)
                _wait_for(writer, "ready", "memory-writer", Path(root))
            for process in range(processes):
                workers.append(start(f"p{process}", [*command, "--process", str(process)]))
            for word in ("ready", "drained"):
                for worker in workers:
                    _wait_for(worker, word, kind, Path(root))
                for worker in workers:
                    assert worker.stdin is not None
                    worker.stdin.write("go\n")
                    worker.stdin.flush()
            outputs = [worker.communicate()[0] for worker in workers]
            if writer is not None:  # every write is stored: it may stop
                outputs.append(writer.communicate("stop\n", timeout=120)[0])
        finally:
            for worker in [*workers, *([writer] if writer else [])]:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
        started = [(f"p{number}", worker) for number, worker in enumerate(workers)]
        for name, worker in started + ([("writer", writer)] if writer else []):
            if worker.returncode != 0:
                stderr = (Path(root) / name / "stderr").read_text()
                raise SystemExit(f"the {kind} run failed:\n{stderr[-3000:]}")
    parts = [json.loads(output.strip().splitlines()[-1]) for output in outputs]
    written = parts.pop() if writer is not None else None
    result = _merged(parts, args)
    if written is not None:
        result["writer"] = written
    result["load_average_before"] = load_before
    result["load_average_after"] = os.getloadavg()
    return result


def _wait_for(worker: subprocess.Popen[str], word: str, kind: str, root: Path) -> None:
    """Read ``worker``'s stdout up to the line ``word``; fail with its stderr if it ends."""
    assert worker.stdout is not None
    for line in worker.stdout:
        if line.strip() == word:
            return
    worker.wait()
    stderrs = "\n".join(path.read_text()[-3000:] for path in root.glob("*/stderr"))
    raise SystemExit(f"the {kind} run ended before it was {word}:\n{stderrs}")


def _plot(report: dict[str, Any], workloads: dict[str, dict[str, Any]], path: Path) -> None:
    """Reply-latency CDFs and the loop lag of each workload."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logging.warning("matplotlib is not installed (the bench extra); no plot")
        return
    runs = [(run["label"], run) for run in workloads.values()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[3, 2])
    for name, run in runs:
        values = sorted(run["reply_latencies"])
        fractions = [(i + 1) / len(values) for i in range(len(values))]
        label = f"{name} (p50 {run['reply_latency']['p50']:.2f} s)"
        if "turns_without_memory" in run:
            label += f", {run['turns_without_memory']}/{run['turns']} turns without memory"
        left.plot(values, fractions, label=label)
    left.set_xlabel("reply latency (s)")
    left.set_ylabel("fraction of turns")
    left.legend(fontsize=8, loc="lower right")
    left.grid(alpha=0.3)
    names = [name.replace(", ", ",\n").replace(" on ", "\non ") for name, _ in runs]
    p99 = [run["loop_lag"]["p99"] * 1000 for _, run in runs]
    worst = [run["loop_lag"]["max"] * 1000 for _, run in runs]
    xs = range(len(runs))
    right.bar([x - 0.2 for x in xs], p99, width=0.4, label="p99")
    right.bar([x + 0.2 for x in xs], worst, width=0.4, label="max")
    for x, value in zip(xs, p99, strict=True):
        right.annotate(f"{value:.0f}", (x - 0.2, value), ha="center", va="bottom", fontsize=8)
    for x, value in zip(xs, worst, strict=True):
        right.annotate(f"{value:.0f}", (x + 0.2, value), ha="center", va="bottom", fontsize=8)
    right.axhline(20, color="grey", linestyle="--", linewidth=1)
    right.set_xticks(list(xs), names, fontsize=7)
    right.set_ylabel("event-loop lag (ms)")
    right.set_yscale("log")
    right.legend(fontsize=8)
    config: dict[str, Any] = report["config"]
    fig.suptitle(
        f"{config['users']} users x {config['turns']} turns, replies of 50-{config['max_reply']} "
        f"characters, {report['machine']['cpus']} cores",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--reply-delay", type=float, default=0.5)
    parser.add_argument(
        "--reply-spread",
        type=float,
        default=0.0,
        help="seconds the model's latency varies around --reply-delay (0: every call the same)",
    )
    parser.add_argument("--extraction-delay", type=float, default=1.0)
    parser.add_argument("--search-timeout", type=float, default=2.0)
    parser.add_argument("--max-reply", type=int, default=2000)
    parser.add_argument("--drain-timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("--report", default="load", help="name of the .json and .png written")
    parser.add_argument(
        "--before-src", type=Path, help="the src folder of another checkout, run side by side"
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=0,
        help="also run memory on PostgreSQL (--pg-dsn) in one process and over this many "
        "replica processes, and the baseline over as many",
    )
    parser.add_argument(
        "--pg-dsn",
        default=os.environ.get("AGENTSCOPE_MEM0_TEST_PG_DSN"),
        help="PostgreSQL with pgvector for --replicas (default $AGENTSCOPE_MEM0_TEST_PG_DSN)",
    )
    parser.add_argument(
        "--embedder",
        choices=("e5", "hash"),
        default="e5",
        help="the PostgreSQL workloads' embedder: the offline e5 (the default) or a nearly "
        "free hash embedder (what e5 costs them)",
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=("pause", "memory", "memory-waiting", "writer"),
        help="workloads left out (a quicker run; the report has no rows for them)",
    )
    parser.add_argument(
        "--worker",
        choices=("baseline", "pause", "memory", "memory-waiting", *_POSTGRES),
        help=argparse.SUPPRESS,
    )
    # A worker's share of the users and its table (the parent passes them).
    parser.add_argument("--process", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--collection", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    if args.replicas and not args.pg_dsn:
        parser.error("--replicas needs --pg-dsn (or $AGENTSCOPE_MEM0_TEST_PG_DSN)")
    logging.basicConfig(level=logging.WARNING)

    load_before = os.getloadavg()
    here = Path(__file__).resolve().parent.parent / "src"
    # (report key, label, worker, processes, src): run one after the other.
    workloads: list[tuple[str, str, str, int, Path]] = [
        ("baseline", "no memory", "baseline", 1, here)
    ]
    if "pause" not in args.skip:
        workloads.append(("pause", "no memory, one pause", "pause", 1, here))
    if "memory" not in args.skip:
        workloads.append(("memory", "memory, now", "memory", 1, here))
    if "memory-waiting" not in args.skip:
        workloads.append(("waiting", "memory, every query waits", "memory-waiting", 1, here))
    if args.before_src:
        workloads.append(("before", "memory, before", "memory", 1, args.before_src))
    if args.replicas:
        n = args.replicas
        pg = "memory on PostgreSQL" + (", hash embedder" if args.embedder == "hash" else "")
        workloads += [
            ("baseline_replicas", f"no memory, {n} processes", "baseline", n, here),
            ("postgres", f"{pg}, 1 process", "memory-postgres", 1, here),
            ("postgres_replicas", f"{pg}, {n} replicas", "memory-postgres", n, here),
        ]
        if "writer" not in args.skip:  # the writes stored by a writer process, niced
            workers = "a writer process"
            workloads += [
                ("postgres_writer", f"{pg}, 1 process + {workers}", "memory-recording", 1, here),
                (
                    "postgres_replicas_writer",
                    f"{pg}, {n} replicas + {workers}",
                    "memory-recording",
                    n,
                    here,
                ),
            ]
    runs: dict[str, dict[str, Any]] = {}
    for key, label, kind, processes, src in workloads:
        runs[key] = {"label": label, **_workload(kind, args, src, processes)}
    baseline = runs["baseline"]
    command = " ".join(sys.argv[1:])
    report: dict[str, Any] = {
        "command": "python benchmarks/load.py "
        + (command.replace(args.pg_dsn, "<dsn>") if args.pg_dsn else command),
        "config": {k: getattr(args, k) for k in _CONFIG}
        | {"replicas": args.replicas, "embedder": args.embedder},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
    }

    def overhead(run: dict[str, Any], against: dict[str, Any]) -> dict[str, float]:
        return {q: run["reply_latency"][q] - against["reply_latency"][q] for q in ("p50", "p95")}

    for key, run in runs.items():
        report[key] = run
        if key != "baseline":
            report[f"overhead_{key}"] = overhead(run, baseline)
    if "memory" in runs:
        report["overhead"] = report.pop("overhead_memory")
    if args.replicas:  # what memory adds where the users are split the same way
        for key in ("postgres_replicas", "postgres_replicas_writer"):
            if key in runs:
                report[f"overhead_{key}_same_split"] = overhead(
                    runs[key], runs["baseline_replicas"]
                )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.report}.json").write_text(json.dumps(report, indent=1) + "\n")
    _plot(report, runs, args.out / f"{args.report}.png")
    for key, run in runs.items():
        line = (
            f"{run['label']}: reply p50 {run['reply_latency']['p50'] * 1000:.0f} ms, "
            f"p95 {run['reply_latency']['p95'] * 1000:.0f} ms; "
            f"loop lag p99 {run['loop_lag']['p99'] * 1000:.0f} ms, "
            f"max {run['loop_lag']['max'] * 1000:.0f} ms"
        )
        if key != "baseline":
            added = report.get(f"overhead_{key}") or report["overhead"]
            line += f"; overhead p50 {added['p50'] * 1000:+.0f} ms, "
            line += f"p95 {added['p95'] * 1000:+.0f} ms"
        if "writes_expected" in run:
            line += (
                f"; turns without memory {run['turns_without_memory']}/{run['turns']}; "
                f"by keywords alone {run['searches_by_keywords_alone']}; "
                f"writes stored once {run['writes_stored_once']}/{run['writes_expected']}; "
                f"drain {run['drain_seconds']:.1f} s"
            )
        print(line)


if __name__ == "__main__":
    main()
