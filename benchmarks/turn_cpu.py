"""Memory's own CPU per turn on the event loop's thread, one user.

One user chats ``--turns`` turns through the service factory
(``mem0_middleware_factory`` on a temporary data folder: the real embedded
store on disk, a real ``AsyncMemory``), each turn a fresh AgentScope ``Agent``
assembled with the factory's middleware, as ``agentscope.app`` does. Every
model answers at once (``ScriptedChatModel``) and the embedder is the
package's ``HashEmbedding`` (a few microseconds a text, on mem0's worker
threads): what is left on the loop's thread is this package's own work and
AgentScope's. Turns alternate a new fact, a short question and a long one
(about 250 characters, no date in it).

Measured with ``time.thread_time()`` on the loop's thread (the main thread
runs the loop: no other thread's CPU is counted):

* ``reply``: the turn itself (the factory call, the ``Agent``, ``reply()``):
  the query, the recall's glue, the note, the enqueue before the reply returns;
* ``enqueue``: the part of ``reply`` spent in ``WriteQueue.submit``;
* ``write``: what runs on the loop while the turn's write is delivered in the
  background (``--settle`` seconds after each turn: delivery callbacks, the
  outbox's answers, the time judgement's glue, timers).

The same turns run without memory (the baseline), with memory on this
checkout's code and, with ``--before-src``, on other checkouts' code, each
``--runs`` times in a fresh interpreter, interleaved; the figures are the
medians over runs of each run's median per turn, and memory's own cost is
memory minus the baseline; ``total_mean`` is the same from each run's mean
over its turns (a fact's turn, judged in the background, costs more than a
question's, which is the median turn). The first ``--warmup`` turns (first
imports, first compiles) are left out.

With ``--pg-dsn`` two more sides run memory on PostgreSQL + pgvector (every
default for that store, a table of their own each run): ``postgres`` stores
its writes in the process, as the embedded side does; ``postgres_writer``
only records them (``Parameters(deliver_writes=False)``) and a writer
process started beside it at niceness 19 (``factory.serve_writes()``)
stores them, so its write path is what is left on the loop of recording.

Usage::

    python benchmarks/turn_cpu.py --turns 60 --runs 5 --out docs/benchmarks \\
        --before-src /tmp/v03/src
    python benchmarks/turn_cpu.py --turns 60 --runs 7 --pg-dsn postgresql://...

Writes ``turn-cpu.json`` to ``--out``; with ``--profile FILE`` one more run of
this checkout under cProfile (the loop's thread only) writes its stats there.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from _writer import serve_until_told

_LONG_QUESTION = (
    "I was thinking about everything we talked about, the garden, the trip and the "
    "books, and I would like a short summary of what you know about my family, my "
    "pets and the places I like to go, so that I can check it before I write to my "
    "sister about the plans we are making together?"
)
_ANSWER = (
    "Here is what I found: the figures for the region, the shipping delays and what "
    "they cost, the suppliers and their terms, and what I would do next. "
)
_PARTS = ("reply", "enqueue", "write", "fakes_reply", "fakes_write")


def _message(turn: int) -> str:
    """Turn ``turn``'s user message: a new fact, a short question or a long one."""
    kind = turn % 3
    if kind == 0:
        return f"I have a pet named Pet{turn}. Please remember that."
    if kind == 1:
        return "What are the names of my pets?"
    return _LONG_QUESTION


def _timed(owner: type, name: str, totals: dict[str, float], key: str) -> None:
    """Count the loop's CPU inside the coroutine method ``owner.name`` into ``totals[key]``
    (calls from other threads are not counted: their CPU is not the loop's)."""
    method = getattr(owner, name)
    loop_thread = threading.main_thread()

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not loop_thread:
            return await method(self, *args, **kwargs)
        started = time.thread_time()
        try:
            return await method(self, *args, **kwargs)
        finally:
            totals[key] += time.thread_time() - started

    setattr(owner, name, timed)


def _pending(factory: Any) -> int:
    """Writes still queued or in flight (a property now, a method in release 0.3)."""
    pending = factory._state.writer.pending
    return int(pending() if callable(pending) else pending)


def _factory(args: argparse.Namespace, kind: str, folder: Path | None) -> Any:
    """The memory of a side: the embedded store in ``folder``, or (``--pg-dsn``)
    PostgreSQL + pgvector with every default for it, its writes stored here or,
    ``memory-recording``, by a writer process."""
    from agentscope_mem0 import Mem0Middleware
    from agentscope_mem0.service import mem0_middleware_factory
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    options: dict[str, Any] = {"folder": folder}
    if kind != "memory":
        from agentscope_mem0.backends import pgvector_config, prepare_pgvector

        config = pgvector_config(
            args.pg_dsn, dims=HashEmbedding().dimensions, collection=args.collection
        )
        prepare_pgvector(config)
        options = {"mem0_config": config}
        if kind == "memory-recording":
            options["parameters"] = Mem0Middleware.Parameters(deliver_writes=False)
    return mem0_middleware_factory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        mode="static_control",
        **options,
    )


async def _turns(args: argparse.Namespace, factory: Any) -> dict[str, Any]:
    """The user's turns, with ``factory``'s memory (``None``: without memory)."""
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    if factory is not None:
        # What install() does at the app's startup (another checkout's may lack start()).
        await getattr(factory, "start", factory.get_client)()
    from agentscope_mem0._write.queue import WriteQueue

    totals = {"enqueue": 0.0, "fakes": 0.0}
    _timed(WriteQueue, "submit", totals, "enqueue")
    # The scripted models' and the hashing embedder's own CPU (they answer on
    # the loop; a provider's model would answer over the network): not memory's.
    _timed(ScriptedChatModel, "_call_api", totals, "fakes")
    _timed(HashEmbedding, "_call_api", totals, "fakes")
    per_turn: dict[str, list[float]] = {part: [] for part in (*_PARTS, "wall")}
    unsettled = 0
    profile = cProfile.Profile(time.thread_time) if args.profile else None  # CPU, this thread
    for turn in range(args.warmup + args.turns):
        if profile is not None and turn == args.warmup:
            profile.enable()
        totals.update(enqueue=0.0, fakes=0.0)
        wall = time.perf_counter()
        started = time.thread_time()
        middlewares = await factory("user", "assistant", "session") if factory else []
        agent = Agent(
            name="assistant",
            system_prompt="You help.",
            model=ScriptedChatModel(_ANSWER),
            middlewares=middlewares,
        )
        await agent.reply(UserMsg(name="user", content=_message(turn)))
        reply = time.thread_time() - started
        wall = time.perf_counter() - wall
        fakes_reply, totals["fakes"] = totals["fakes"], 0.0
        started = time.thread_time()
        await asyncio.sleep(args.settle)  # the write is delivered meanwhile
        write = time.thread_time() - started
        if factory is not None and _pending(factory):
            unsettled += 1
        if turn >= args.warmup:
            per_turn["reply"].append(reply)
            per_turn["enqueue"].append(totals["enqueue"])
            per_turn["write"].append(write)
            per_turn["fakes_reply"].append(fakes_reply)
            per_turn["fakes_write"].append(totals["fakes"])
            per_turn["wall"].append(wall)
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    out: dict[str, Any] = {
        "median_ms": {k: statistics.median(v) * 1000 for k, v in per_turn.items()},
        "mean_ms": {k: statistics.fmean(v) * 1000 for k, v in per_turn.items()},
        "turns_not_settled": unsettled,
    }
    if factory is not None:
        out["flushed"] = await factory.flush(timeout=60)
        stats = factory.stats()
        out["writes_stored"] = stats.get("writes_stored")
        out["writes_handed_over"] = stats.get("writes_handed_over", 0)
        await factory.aclose(timeout=30)
    return out


def _worker(args: argparse.Namespace) -> None:
    """``--worker``: one run in this interpreter, printed as JSON on the last line."""
    logging.basicConfig(level=logging.ERROR)
    import agentscope_mem0

    if args.worker == "baseline":
        report = asyncio.run(_turns(args, None))
    elif args.worker == "writer":  # of memory-recording, until its flush saw everything stored
        stats = asyncio.run(serve_until_told(_factory(args, "memory-postgres", None), poll=0.05))
        report = {"writes_stored": stats.get("writes_stored")}
    elif args.worker == "memory":
        from agentscope_mem0.local import close_shared_clients

        with tempfile.TemporaryDirectory(prefix="agentscope-mem0-cpu-") as tmp:
            report = asyncio.run(_turns(args, _factory(args, "memory", Path(tmp))))
            close_shared_clients(tmp)
    else:
        writer = None
        if args.worker == "memory-recording":  # its writes stored by a niced process
            command = [sys.executable, __file__, "--worker", "writer", "--pg-dsn", args.pg_dsn]
            command += ["--collection", args.collection]
            writer = subprocess.Popen(
                ["nice", "-n", "19", *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        try:
            report = asyncio.run(_turns(args, _factory(args, args.worker, None)))
        finally:
            if writer is not None:
                output = writer.communicate("stop\n", timeout=120)[0]
        if writer is not None:
            report["writes_stored"] = json.loads(output.strip().splitlines()[-1])["writes_stored"]
    report["code"] = str(Path(agentscope_mem0.__file__).resolve().parent.parent)
    print(json.dumps(report))


def _child(kind: str, args: argparse.Namespace, src: Path, profile: Path | None = None) -> Any:
    """One run in a fresh interpreter on ``src``'s package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("MEM0_TELEMETRY", "False")
    command = [sys.executable, __file__, "--worker", kind]
    command += ["--turns", str(args.turns), "--warmup", str(args.warmup)]
    if kind != "memory" and args.pg_dsn:
        command += ["--pg-dsn", args.pg_dsn, "--collection", f"cpu_{uuid.uuid4().hex[:12]}"]
    command += ["--settle", str(args.settle)]
    if profile is not None:
        command += ["--profile", str(profile)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {kind} run on {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _memory_own(side: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> dict[str, Any]:
    """Memory's own loop CPU per turn: each run minus the baseline run of its round
    (the machine's load drifts between rounds more than within one), the fakes'
    own CPU left out of both, then the median over rounds.

    ``total``, ``reply`` and ``write`` take each run's median turn, which is a
    question's turn (two turns in three ask, one tells a fact, whose write is
    judged); ``total_mean`` takes each run's mean over its turns, what a turn
    costs on average and the figure to size a process by."""
    rounds: dict[str, list[float]] = {
        "total": [],
        "reply": [],
        "write": [],
        "with_fakes": [],
        "total_mean": [],
    }

    def own(run: dict[str, Any], base: dict[str, Any], stat: str, part: str) -> float:
        mine, theirs = run[stat], base[stat]
        return (mine[part] - mine[f"fakes_{part}"]) - (theirs[part] - theirs[f"fakes_{part}"])

    for run, base in zip(side, baseline, strict=True):
        reply, write = own(run, base, "median_ms", "reply"), own(run, base, "median_ms", "write")
        rounds["reply"].append(reply)
        rounds["write"].append(write)
        rounds["total"].append(reply + write)
        mine, theirs = run["median_ms"], base["median_ms"]
        with_fakes = mine["reply"] + mine["write"] - theirs["reply"] - theirs["write"]
        rounds["with_fakes"].append(with_fakes)
        rounds["total_mean"].append(
            own(run, base, "mean_ms", "reply") + own(run, base, "mean_ms", "write")
        )
    out: dict[str, Any] = {part: statistics.median(values) for part, values in rounds.items()}
    out["enqueue"] = statistics.median(run["median_ms"]["enqueue"] for run in side)
    out["total_per_round"] = rounds["total"]
    return out


def _medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        key: statistics.median(run["median_ms"][key] for run in runs)
        for key in runs[0]["median_ms"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=6, help="first turns left out")
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per side")
    parser.add_argument(
        "--settle", type=float, default=0.25, help="seconds after each turn for its write"
    )
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument(
        "--before-src",
        type=Path,
        action="append",
        default=[],
        help="the src folder of another checkout, run side by side (repeatable)",
    )
    parser.add_argument("--profile", type=Path, help="cProfile stats of one more run here")
    parser.add_argument(
        "--pg-dsn",
        help="also run memory on PostgreSQL + pgvector here, its writes stored in the "
        "process and by a writer process",
    )
    parser.add_argument(
        "--worker",
        choices=("baseline", "memory", "memory-postgres", "memory-recording", "writer"),
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--collection", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    logging.basicConfig(level=logging.WARNING)

    here = Path(__file__).resolve().parent.parent / "src"
    sides: dict[str, tuple[str, Path]] = {
        "baseline": ("baseline", here),
        "memory": ("memory", here),
    }
    for number, src in enumerate(args.before_src):
        sides[f"before{number or ''}"] = ("memory", src.resolve())
    if args.pg_dsn:
        sides["postgres"] = ("memory-postgres", here)
        sides["postgres_writer"] = ("memory-recording", here)
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(args.runs):  # interleaved: a drift in the machine's load hits every side
        for name, (kind, src) in sides.items():
            runs[name].append(_child(kind, args, src))
    baseline = _medians(runs["baseline"])
    report: dict[str, Any] = {
        "command": "python benchmarks/turn_cpu.py "
        + " ".join(sys.argv[1:]).replace(args.pg_dsn or "<none>", "<dsn>"),
        "config": {"turns": args.turns, "warmup": args.warmup, "runs": args.runs},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "baseline_ms": baseline,
        "sides": {},
    }
    for name in sides:
        if name == "baseline":
            continue
        medians = _medians(runs[name])
        memory_ms = _memory_own(runs[name], runs["baseline"])
        report["sides"][name] = {
            "code": runs[name][0]["code"],
            "median_ms": medians,
            "memory_ms": memory_ms,
            "runs": runs[name],
        }
        print(
            f"{name} ({runs[name][0]['code']}): memory's loop CPU per turn "
            f"{memory_ms['total']:.2f} ms = reply path {memory_ms['reply']:.2f} ms "
            f"(enqueue {memory_ms['enqueue']:.2f} ms) + write path {memory_ms['write']:.2f} ms"
            f" at the median turn; {memory_ms['total_mean']:.2f} ms on average over turns"
        )
    report["runs_baseline"] = runs["baseline"]
    if args.profile:
        _child("memory", args, here, profile=args.profile.resolve())
        report["profile"] = str(args.profile)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "turn-cpu.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"without memory: {baseline['reply']:.2f} ms of loop CPU per turn")


if __name__ == "__main__":
    main()
