"""A replica lost with its disk loses none of the writes it acknowledged.

Three replica processes (``tests/_replica_child.py``, each with its own HOME
and data folder, as on its own pod) share one PostgreSQL with pgvector and
take the writes of six users, each user's fact and later change going to
two different replicas. One replica is SIGKILLed after acknowledging some
writes and its folder deleted; a fresh replica starts and flushes. Every
acknowledged write is then stored exactly once, and each user's change was
stored after the fact it changes. Again with replicas that only record and
a writer process that stores, lost at the same moment, and a fresh writer.

Needs ``AGENTSCOPE_MEM0_TEST_PG_DSN``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from _pgfixture import DSN_ENV, fresh_collection

psycopg = pytest.importorskip("psycopg", reason="pip install 'agentscope-mem0[pgvector]'")

from _replica_child import Replica, memory_config  # noqa: E402  (after the skip)
from agentscope_mem0.backends import prepare_pgvector  # noqa: E402

USERS = 6


def _memories(dsn: str, collection: str) -> list[tuple[str, str, int]]:
    """(user, memory text without its per-call suffix, the inserting transaction)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT payload->>'user_id', payload->>'data', xmin::text::bigint FROM {collection}"
        ).fetchall()
    return [(user, text.split(" #")[0], xmin) for user, text, xmin in rows]


@pytest.mark.parametrize("writer", [False, True], ids=["replicas-store", "a-writer-stores"])
def test_a_lost_replica_loses_no_acknowledged_write_and_order_holds(
    tmp_path: Path, writer: bool
) -> None:
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        pytest.skip(f"the pod-loss test needs a PostgreSQL with pgvector: set {DSN_ENV}")
    collection = fresh_collection("pods")
    prepare_pgvector(memory_config(dsn, collection, tmp_path))
    role = "recorder" if writer else "replica"
    replicas = [Replica(f"r{i}", dsn, collection, tmp_path, role=role) for i in range(3)]
    writers = [Replica("w0", dsn, collection, tmp_path, role="writer")] if writer else []
    try:
        for replica in replicas + writers:
            replica.ready()
        r0, r1, r2 = replicas
        # Each user's fact goes to one replica and the change to the next one;
        # r1 takes more, so it holds acknowledged writes when it is lost.
        for i in range(USERS):
            user = f"user{i}"
            replicas[i % 3].submit(user, f"I live in town{i:02d}.")
            r1.submit(user, f"I like fruit{i:02d}.")
            replicas[(i + 1) % 3].submit(user, f"I moved to city{i:02d}.")
        r1.kill()
        for lost in writers:  # its writes in flight too
            lost.kill()
        for i in range(USERS):  # the load balancer sends the users elsewhere now
            (r0, r2)[i % 2].submit(f"user{i}", f"I have pet{i:02d}.")
        fresh = Replica("r3", dsn, collection, tmp_path, role=role)
        replicas.append(fresh)
        fresh.ready()
        if writer:
            writers.append(Replica("w1", dsn, collection, tmp_path, role="writer"))
            writers[-1].ready()
        for replica in (fresh, r0, r2):
            assert replica.ask("flush") == "flushed True"
        for replica in (fresh, r0, r2, *writers[1:]):
            assert replica.ask("close") == "closed"
    finally:
        for replica in replicas + writers:
            replica.stop()

    acknowledged = [text for replica in replicas for text in replica.acknowledged]
    assert len(acknowledged) == USERS * 4
    assert len(r1.acknowledged) >= USERS  # the lost replica had acknowledged some
    found = _memories(dsn, collection)
    expected = Counter(
        text.replace("I live", "User lives")
        .replace("I like", "User likes")
        .replace("I moved", "User moved")
        .replace("I have", "User has")
        for text in acknowledged
    )
    assert Counter(text for _, text, _ in found) == expected  # each exactly once
    stored_at = {(user, text): xmin for user, text, xmin in found}
    for i in range(USERS):
        user = f"user{i}"
        fact = stored_at[(user, f"User lives in town{i:02d}.")]
        change = stored_at[(user, f"User moved to city{i:02d}.")]
        assert fact <= change, f"{user}'s change was stored before the fact it changes"
    with psycopg.connect(dsn) as conn:
        left = conn.execute(f"SELECT count(*) FROM {collection}_outbox").fetchone()
    assert left == (0,)
