"""The write queue's own cost: the SQLite outbox and the PostgreSQL one side by side.

Delivery is instant here (a backend whose ``add`` stores nothing and returns
at once), so what is measured is the queue: recording a write in the
outbox before the reply goes on, and taking it out again once "stored". Each
run is a set of fresh processes (``--child``), started together; for each
front (an outbox file in one folder; a fresh table in one PostgreSQL):

* **latency**: one process, one write at a time (replies one after another,
  users taking turns): the time ``WriteQueue.submit`` takes, which is what an
  enqueue adds to a reply, p50/p95;
* **one process** and **three processes** (replicas, each its own
  ``WriteQueue`` on the same file or table; users shared between them, as a
  load balancer without sticky sessions spreads them): ``--concurrency``
  users per process, each submitting its writes one after another as fast as
  they are acknowledged. Reported: writes acknowledged per second (all
  processes together, first submit to last acknowledgement), writes
  delivered per second (first submit to the last ``add``), the lag from a
  write's submit to its delivery (p50/p95/max), and when the last
  ``flush()`` returned (a replica whose writes another one delivers sees
  them gone by polling: the difference is that poll's cost).

Every run checks that each acknowledged write reached ``add`` exactly once.
The load average is recorded beside the timings (they mean little above 1.5
on a 2-core machine).

Usage::

    eval "$(python .ci/start_pg.py)"    # a local PostgreSQL (pgserver), once
    python benchmarks/queue_cost.py [--pg-dsn DSN] [--writes 600] [--concurrency 20]
        [--latency-writes 300] [--repeats 3] [--out FILE] [--plot FILE]

``--pg-dsn`` defaults to ``$AGENTSCOPE_MEM0_TEST_PG_DSN``; the results go to
docs/benchmarks/queue-cost.json and queue-cost.png by default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, cast

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
OUT = DOCS / "queue-cost.json"
PLOT = DOCS / "queue-cost.png"
FRONTS = ("sqlite", "postgres")


class InstantBackend:
    """Where the writes go: a backend that stores nothing and answers at once.

    It stands where :class:`~agentscope_mem0._mem0.backend.Mem0Backend` does
    (without importing mem0, which would be most of each process's start) and
    counts the writes (exchanges) it was given and when it last got one.
    """

    client = None

    def __init__(self) -> None:
        self.delivered: Counter[str] = Counter()
        self.delivered_at: dict[str, float] = {}
        self.last_add = 0.0

    async def add(
        self, messages: list[dict[str, str]], scope: Any, **_: Any
    ) -> list[dict[str, Any]]:
        for message in messages:
            if message.get("role") == "user":
                self.delivered[message["content"]] += 1
                self.delivered_at[message["content"]] = time.time()
        self.last_add = time.time()
        return []

    async def delete_batch(self, *_: Any, **__: Any) -> int:
        return 0  # nothing was stored: a batch redone has nothing to remove


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)] if ordered else 0.0


# -- one process (a child) ---------------------------------------------------------------


async def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """One replica: wait for "go" on stdin, submit, flush; what it measured."""
    from agentscope_mem0._scope import Scope
    from agentscope_mem0._write.queue import WriteQueue

    backend = InstantBackend()
    queue = WriteQueue(cast(Any, backend), outbox_dir=spec["place"], outbox_table=spec["table"])
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    name, users, each = spec["name"], spec["users"], spec["each"]
    latencies: list[float] = []
    submitted_at: dict[str, float] = {}
    unrecorded = 0

    async def write(j: int, k: int) -> None:
        said = [
            {"role": "user", "content": f"{name} user{j} write{k}"},
            {"role": "assistant", "content": "Noted."},
        ]
        submitted_at[said[0]["content"]] = time.time()
        began = time.perf_counter()
        key = await queue.submit(Scope(f"user{j}"), said)
        latencies.append(time.perf_counter() - began)
        if key is None:  # not acknowledged: the outbox could not record it
            nonlocal unrecorded
            unrecorded += 1

    async def user(j: int) -> None:
        for k in range(each):
            await write(j, k)

    started = time.time()
    if spec["one_at_a_time"]:  # replies one after another, users taking turns
        for k in range(each):
            for j in range(users):
                await write(j, k)
    else:
        await asyncio.gather(*(user(j) for j in range(users)))
    acknowledged = time.time()
    flushed_ok = await queue.flush(spec["timeout"])
    flushed = time.time()
    await queue.aclose()
    return {
        "started": started,
        "acknowledged": acknowledged,
        "flushed": flushed,
        "flushed_ok": flushed_ok,
        "last_add": backend.last_add,
        "writes": len(latencies),
        "unrecorded": unrecorded,
        "delivered": dict(backend.delivered),
        "delivered_at": backend.delivered_at,
        "submitted_at": submitted_at,
        "latencies": latencies,
    }


# -- a run of processes (the parent) -------------------------------------------------------


def _place(front: str, dsn: str | None, root: Path) -> tuple[str, str]:
    """A fresh outbox: (``outbox_dir``, table) of ``front``."""
    fresh = uuid.uuid4().hex[:10]
    if front == "postgres":
        assert dsn is not None
        return dsn, f"queue_cost_{fresh}_outbox"
    folder = root / f"outbox-{fresh}"
    folder.mkdir()
    return str(folder), "unused"


def run_processes(
    front: str,
    place: tuple[str, str],
    *,
    processes: int,
    users: int,
    each: int,
    one_at_a_time: bool = False,
    timeout: float = 300.0,
) -> dict[str, Any]:
    """``processes`` children on one outbox, started together; their measures."""
    children = []
    for p in range(processes):
        spec = {
            "name": f"p{p}",
            "place": place[0],
            "table": place[1],
            "users": users,
            "each": each,
            "one_at_a_time": one_at_a_time,
            "timeout": timeout,
        }
        children.append(
            subprocess.Popen(
                [sys.executable, __file__, "--child", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for child in children:
            line = child.stdout.readline() if child.stdout else ""
            if line.strip() != "ready":
                raise SystemExit(f"a {front} child did not start: {line!r}")
        load_before = os.getloadavg()[0]
        for child in children:  # "go" to all at once
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = []
        for child in children:
            out, _ = child.communicate(timeout=timeout + 60)
            if child.returncode != 0:
                raise SystemExit(f"a {front} child exited {child.returncode}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    load_after = os.getloadavg()[0]
    start = min(r["started"] for r in results)
    total = sum(r["writes"] for r in results)
    delivered: Counter[str] = Counter()
    for r in results:
        delivered.update(r["delivered"])
    latencies = [s for r in results for s in r["latencies"]]
    # From a write's submit to its delivery, by whichever process delivered it.
    delivered_at = {k: t for r in results for k, t in r["delivered_at"].items()}
    lags = [
        delivered_at[k] - t
        for r in results
        for k, t in r["submitted_at"].items()
        if k in delivered_at
    ]
    acknowledged_in = max(r["acknowledged"] for r in results) - start
    delivered_in = max(r["last_add"] for r in results) - start
    flushed_in = max(r["flushed"] for r in results) - start
    return {
        "processes": processes,
        "writes": total,
        "unrecorded": sum(r["unrecorded"] for r in results),
        "delivered": sum(delivered.values()),
        "delivered_twice": sum(n - 1 for n in delivered.values() if n > 1),
        "all_flushed": all(r["flushed_ok"] for r in results),
        "acknowledged_per_second": round(total / acknowledged_in, 1),
        "delivered_per_second": round(total / delivered_in, 1) if delivered_in > 0 else 0.0,
        "acknowledged_seconds": round(acknowledged_in, 3),
        "delivered_seconds": round(delivered_in, 3),
        "last_flush_seconds": round(flushed_in, 3),
        "enqueue_ms_p50": round(1000 * statistics.median(latencies), 3),
        "enqueue_ms_p95": round(1000 * _percentile(latencies, 0.95), 3),
        "delivery_lag_ms_p50": round(1000 * statistics.median(lags), 1) if lags else None,
        "delivery_lag_ms_p95": round(1000 * _percentile(lags, 0.95), 1) if lags else None,
        "delivery_lag_ms_max": round(1000 * max(lags), 1) if lags else None,
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
    }


def measure(
    dsn: str | None,
    *,
    writes: int,
    concurrency: int,
    latency_writes: int,
    repeats: int,
    root: Path,
) -> dict[str, Any]:
    """Every run of both fronts (PostgreSQL only with ``dsn``), ``repeats`` times.

    The fronts take turns run by run, so a burst of other work on the
    machine falls on both; each figure is the median of its repeats.
    """
    each = max(1, writes // concurrency)
    users = min(latency_writes, 10)
    shapes: dict[str, dict[str, Any]] = {
        "latency": {
            "processes": 1,
            "users": users,
            "each": max(1, latency_writes // users),
            "one_at_a_time": True,
        },
        "one_process": {"processes": 1, "users": concurrency, "each": each},
        "three_processes": {"processes": 3, "users": concurrency, "each": each},
    }
    fronts = [f for f in FRONTS if f != "postgres" or dsn]
    done: dict[str, dict[str, list[dict[str, Any]]]] = {f: {s: [] for s in shapes} for f in fronts}
    try:
        for _ in range(repeats):
            for shape, kwargs in shapes.items():
                for front in fronts:
                    place = _place(front, dsn, root)
                    done[front][shape].append(run_processes(front, place, **kwargs))
        alone = {f: insert_alone(f, _place(f, dsn, root)) for f in fronts}
    finally:
        if dsn:
            _drop_tables(dsn)
    return {
        f: {"insert_alone": alone[f], **{s: _median_run(runs) for s, runs in by.items()}}
        for f, by in done.items()
    }


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures from its repeats: medians of the timings; the worst of
    the guarantees (fewest delivered, most delivered twice, any flush not done)."""
    merged: dict[str, Any] = {"repeats": len(runs)}
    for key, first in runs[0].items():
        values = [run[key] for run in runs]
        if isinstance(first, bool):
            merged[key] = all(values)
        elif key == "delivered":
            merged[key] = min(values)
        elif key in ("delivered_twice", "unrecorded"):
            merged[key] = max(values)
        elif first is None or key in ("processes", "writes"):
            merged[key] = first
        else:
            merged[key] = round(statistics.median(values), 3)
    return merged


def insert_alone(front: str, place: tuple[str, str], count: int = 100) -> dict[str, float]:
    """p50/p95 of the outbox's own insert of one row, called directly (no
    queue, no delivery sharing its connection): what is left of an enqueue
    when nothing waits ahead of it."""
    from datetime import UTC, datetime

    from agentscope_mem0._write.outbox import OUTBOX_FILENAME, Outbox, OutboxRow
    from agentscope_mem0._write.outbox_postgres import PostgresOutbox

    box = (
        PostgresOutbox(place[0], table=place[1])
        if front == "postgres"
        else Outbox(Path(place[0]) / OUTBOX_FILENAME)
    )
    times = []
    with box:
        for i in range(count):
            row = OutboxRow(
                uuid.uuid4().hex,
                f"user{i % 10}",
                None,
                [{"role": "user", "content": "hi"}],
                datetime.now(UTC),
            )
            began = time.perf_counter()
            box.add([row])
            times.append(time.perf_counter() - began)
    return {
        "insert_ms_p50": round(1000 * statistics.median(times), 3),
        "insert_ms_p95": round(1000 * _percentile(times, 0.95), 3),
    }


def commit_floor_ms(dsn: str, count: int = 50) -> float:
    """The median time of one committed one-row INSERT on this server (each
    commit waits for its WAL flush): the floor under an enqueue."""
    import psycopg

    table = f"queue_cost_floor_{uuid.uuid4().hex[:10]}"
    times = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (x int)")
        try:
            for _ in range(count):
                began = time.perf_counter()
                with conn.transaction():
                    conn.execute(f"INSERT INTO {table} VALUES (1)")
                times.append(time.perf_counter() - began)
        finally:
            conn.execute(f"DROP TABLE {table}")
    return round(1000 * statistics.median(times), 3)


def _drop_tables(dsn: str) -> None:
    """Remove the tables the runs made (each run has its own)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        names = conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", ("queue\\_cost\\_%",)
        ).fetchall()
        for (name,) in names:
            conn.execute(f"DROP TABLE IF EXISTS {name}")


def plot(fronts: dict[str, Any], path: Path) -> None:
    """Enqueue latency and writes per second, both fronts side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(fronts)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.27
    bars = (
        ("latency", "enqueue_ms_p50", "submit p50"),
        ("latency", "enqueue_ms_p95", "submit p95"),
        ("insert_alone", "insert_ms_p50", "the outbox's insert alone, p50"),
    )
    for i, (run, key, label) in enumerate(bars):
        values = [fronts[n][run][key] for n in names]
        left.bar([x + i * width for x in range(len(names))], values, width, label=label)
    left.set_xticks([x + width for x in range(len(names))], names)
    left.set_ylabel("ms (one write at a time)")
    left.set_title("What an enqueue adds to a reply")
    left.legend(fontsize=8)
    runs = [(n, r) for n in names for r in ("one_process", "three_processes")]
    labels = [f"{n}\n{r.replace('_', ' ')}" for n, r in runs]
    for i, (key, label) in enumerate(
        (("acknowledged_per_second", "acknowledged"), ("delivered_per_second", "delivered"))
    ):
        values = [fronts[n][r][key] for n, r in runs]
        right.bar([x + i * width for x in range(len(runs))], values, width, label=label)
    right.set_xticks([x + width / 2 for x in range(len(runs))], labels, fontsize=8)
    right.set_ylabel("writes per second, all processes")
    right.set_title("Throughput with instant delivery")
    right.legend()
    timed = [run for front in fronts.values() for run in front.values() if "load_before" in run]
    loads = [run[k] for run in timed for k in ("load_before", "load_after")]
    fig.suptitle(
        f"SQLite and PostgreSQL outboxes; load average {min(loads):.1f}-{max(loads):.1f} "
        f"on {os.cpu_count()} cores",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-dsn", default=os.environ.get("AGENTSCOPE_MEM0_TEST_PG_DSN"))
    parser.add_argument("--writes", type=int, default=600, help="per process")
    parser.add_argument("--concurrency", type=int, default=20, help="users per process")
    parser.add_argument("--latency-writes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; medians reported")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(json.loads(args.child)))), flush=True)
        return
    if not args.pg_dsn:
        parser.error(
            "give --pg-dsn (or set AGENTSCOPE_MEM0_TEST_PG_DSN); "
            'eval "$(python .ci/start_pg.py)" starts a local PostgreSQL'
        )
    if min(args.writes, args.concurrency, args.latency_writes, args.repeats) < 1:
        parser.error("--writes, --concurrency, --latency-writes and --repeats must be positive")
    with tempfile.TemporaryDirectory(prefix="queue-cost-") as folder:
        fronts = measure(
            args.pg_dsn,
            writes=args.writes,
            concurrency=args.concurrency,
            latency_writes=args.latency_writes,
            repeats=args.repeats,
            root=Path(folder),
        )
    floor = commit_floor_ms(args.pg_dsn)
    report = {
        "command": "python benchmarks/queue_cost.py "
        + " ".join(sys.argv[1:]).replace(args.pg_dsn, "<dsn>"),
        "cpus": os.cpu_count(),
        "writes_per_process": args.writes,
        "concurrency": args.concurrency,
        "latency_writes": args.latency_writes,
        "repeats": args.repeats,
        "postgres_commit_ms_p50": floor,
        "fronts": fronts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    plot(fronts, args.plot)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
