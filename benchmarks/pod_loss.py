"""Pod loss: replicas on one PostgreSQL, one SIGKILLed with its disk, a new one.

Three replica processes (``tests/_replica_child.py``: each its own HOME and
data folder, as on its own pod) share PostgreSQL with pgvector; the write
outbox is every default, a table in the same database. Each of ``--users``
users says a fact to one replica, a liking to replica ``r1`` and later a
change of the fact to the next replica, acknowledged one after another as
replies would be. ``r1`` is SIGKILLed once it acknowledged ``--kill-after``
writes and its folder deleted; the writes still to come go to the other
two; a fresh replica starts, and all flush. With ``--writer`` the replicas
only record their writes (``deliver_writes=False``) and a writer process
stores them; it is SIGKILLed with its folder at the same moment as ``r1``,
and a fresh writer starts with the fresh replica. Then the store is read:

* ``lost`` / ``stored_twice``: acknowledged writes not stored, or stored more
  than once (both must be 0);
* ``changes_before_their_fact``: users whose change was stored in an earlier
  transaction than the fact it changes (must be 0);
* the acknowledgement round trip (parent to replica and back, the outbox
  insert inside) p50/p95, and how long the flush took.

Usage::

    python benchmarks/pod_loss.py --pg-dsn postgresql://... [--users 50]
        [--kill-after 20] [--extraction-delay 0.5] [--writer] [--out FILE]

``--pg-dsn`` defaults to ``$AGENTSCOPE_MEM0_TEST_PG_DSN``. The results go to
docs/benchmarks/pod-loss.json by default.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "pod-loss.json"
_STATED = (("I live", "User lives"), ("I like", "User likes"), ("I moved", "User moved"))


def _memory_text(said: str) -> str:
    """The memory the scripted extraction makes of ``said``."""
    for before, after in _STATED:
        said = said.replace(before, after)
    return said


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)] if ordered else 0.0


def run(
    dsn: str, users: int, kill_after: int, delay: float, root: Path, *, writer: bool = False
) -> dict[str, Any]:
    """One pod-loss run; its measures."""
    import psycopg

    from _replica_child import Replica, memory_config
    from agentscope_mem0.backends import prepare_pgvector

    collection = f"pods_{uuid.uuid4().hex[:10]}"
    prepare_pgvector(memory_config(dsn, collection, root))
    role = "recorder" if writer else "replica"
    replicas = [Replica(f"r{i}", dsn, collection, root, delay=delay, role=role) for i in range(3)]
    # With --writer: the first writer, lost with r1, and the one started after.
    writers = [Replica("w0", dsn, collection, root, delay=delay, role="writer")] if writer else []
    started = time.perf_counter()
    pending_at_kill = 0
    try:
        for replica in replicas + writers:
            replica.ready()
        r0, r1, r2 = replicas
        alive = [r0, r1, r2]

        def send(replica: Replica, user: str, text: str) -> None:
            nonlocal pending_at_kill, alive
            if replica not in alive:  # the load balancer skips the lost pod
                replica = alive[hash(user) % len(alive)]
            replica.submit(user, text)
            if replica is r1 and len(r1.acknowledged) == kill_after:
                with psycopg.connect(dsn) as conn:
                    (pending_at_kill,) = conn.execute(
                        f"SELECT count(*) FROM {collection}_outbox"
                    ).fetchone() or (0,)
                r1.kill()
                for lost in writers:
                    lost.kill()
                alive = [r0, r2]

        for i in range(users):
            send(replicas[i % 3], f"user{i}", f"I live in town{i:03d}.")
        for i in range(users):
            send(r1, f"user{i}", f"I like fruit{i:03d}.")
        for i in range(users):
            send(replicas[(i + 1) % 3], f"user{i}", f"I moved to city{i:03d}.")
        if r1 in alive:
            raise SystemExit(f"r1 acknowledged only {len(r1.acknowledged)} of --kill-after")
        fresh = Replica("r3", dsn, collection, root, delay=delay, role=role)
        replicas.append(fresh)
        fresh.ready()
        if writer:
            writers.append(Replica("w1", dsn, collection, root, delay=delay, role="writer"))
            writers[-1].ready()
        flush_started = time.perf_counter()
        flushed = [replica.ask("flush") == "flushed True" for replica in (fresh, r0, r2)]
        flush_seconds = time.perf_counter() - flush_started
        for replica in (fresh, r0, r2, *writers[1:]):
            replica.ask("close")
    finally:
        for replica in replicas + writers:
            replica.stop()
    total_seconds = time.perf_counter() - started

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT payload->>'user_id', payload->>'data', xmin::text::bigint FROM {collection}"
        ).fetchall()
        (left,) = conn.execute(f"SELECT count(*) FROM {collection}_outbox").fetchone() or (0,)
    found = Counter(text.split(" #")[0] for _, text, _ in rows)
    acknowledged = Counter(
        _memory_text(text) for replica in replicas for text in replica.acknowledged
    )
    stored_at = {(user, text.split(" #")[0]): xmin for user, text, xmin in rows}
    out_of_order = 0
    for i in range(users):
        fact = stored_at.get((f"user{i}", f"User lives in town{i:03d}."))
        change = stored_at.get((f"user{i}", f"User moved to city{i:03d}."))
        if fact is not None and change is not None and change < fact:
            out_of_order += 1
    acks = [s for replica in replicas for s in replica.ack_seconds]
    return {
        "acknowledged": sum(acknowledged.values()),
        "acknowledged_by_lost_replica": len(r1.acknowledged),
        "writer_process": writer,
        "outbox_rows_when_killed": pending_at_kill,
        "stored": sum(found.values()),
        "lost": sum((acknowledged - found).values()),
        "stored_twice": sum((found - acknowledged).values()),
        "changes_before_their_fact": out_of_order,
        "outbox_rows_left": left,
        "all_flushed": all(flushed),
        "flush_seconds": round(flush_seconds, 2),
        "run_seconds": round(total_seconds, 2),
        "ack_ms_p50": round(1000 * statistics.median(acks), 2),
        "ack_ms_p95": round(1000 * _percentile(acks, 0.95), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-dsn", default=os.environ.get("AGENTSCOPE_MEM0_TEST_PG_DSN"))
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--kill-after", type=int, default=20)
    parser.add_argument("--extraction-delay", type=float, default=0.5)
    parser.add_argument(
        "--writer",
        action="store_true",
        help="replicas only record; a writer process stores, and is lost with r1",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not args.pg_dsn:
        parser.error("give --pg-dsn (or set AGENTSCOPE_MEM0_TEST_PG_DSN)")
    if not 0 < args.kill_after <= args.users:
        parser.error("--kill-after must be in 1..--users")
    with tempfile.TemporaryDirectory(prefix="pod-loss-") as folder:
        measured = run(
            args.pg_dsn,
            args.users,
            args.kill_after,
            args.extraction_delay,
            Path(folder),
            writer=args.writer,
        )
    report = {
        "command": "python benchmarks/pod_loss.py "
        + " ".join(sys.argv[1:]).replace(args.pg_dsn, "<dsn>"),
        "users": args.users,
        "replicas": 3,
        "kill_after": args.kill_after,
        "extraction_delay": args.extraction_delay,
        **measured,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
