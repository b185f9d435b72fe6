"""How search and add cost grow with the store: embedded local Qdrant vs pgvector.

One run fills each store to every size in turn (1k, 10k, 100k memories by
default, spread over several users plus one small user) and measures, through
mem0's own ``AsyncMemory`` with the same offline embedder everywhere:

* search latency p50/p95 (``AsyncMemory.search`` scoped to one user, top 5),
* add throughput (``AsyncMemory.add(..., infer=False)``, one at a time and
  8 concurrently),
* recall@5 of the vector stage against an exact scan of the user's vectors,
  and how many candidates come back, for a big and for a small user.

Stores: ``local-qdrant`` (the embedded default); ``pgvector-hnsw`` (mem0's
HNSW index with pgvector's default ``ef_search`` 40 plus the scope index of
``prepare_pgvector``, and the same table searched with ``ef_search`` 200);
``pgvector-hnsw-noscope`` (what mem0 creates by itself: HNSW, no scope index);
``pgvector-exact`` (no HNSW; the user's rows found through the scope index and
ranked exactly).

Run::

    python benchmarks/scaling.py            # starts a throwaway pgserver
    python benchmarks/scaling.py --pg-dsn postgresql://...  --sizes 1000,10000

Results go to ``docs/benchmarks/scaling.json`` and ``scaling.png``.
Needs ``pip install 'agentscope-mem0[pgvector]' pgserver matplotlib``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("benchmarks.scaling")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
PG_TABLES = ("scaling_hnsw", "scaling_noscope", "scaling_exact")
"""The benchmark's own tables (mem0 adds ``<table>_entities``): dropped before
and after a run, so a rerun on the same database (``--pg-dsn``) starts empty
and leaves nothing behind."""
SMALL_USER = "small-user"
SMALL_USER_MEMORIES = 20
TOP_K = 5


class Corpus:
    """Synthetic memories and queries; deterministic for a seed.

    Texts are 8 words drawn from a 5,000-word vocabulary, so the bag-of-words
    embedding gives every memory a distinct direction; a query keeps 4 words
    of one of the user's memories and adds 2 random ones.
    """

    def __init__(self, users: int, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.words = [self._word() for _ in range(5000)]
        self.users = [f"user-{i}" for i in range(users)]
        self.texts: dict[str, list[str]] = {u: [] for u in [*self.users, SMALL_USER]}

    def _word(self) -> str:
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxzaeiou") for _ in range(6))

    def text(self) -> str:
        return "User likes " + " ".join(self.rng.sample(self.words, 8))

    def batch(self, count: int) -> list[tuple[str, str]]:
        """``count`` new (user, text) pairs, round-robin over the big users."""
        out = []
        for _ in range(count):
            user = self.users[sum(map(len, (self.texts[u] for u in self.users))) % len(self.users)]
            text = self.text()
            self.texts[user].append(text)
            out.append((user, text))
        return out

    def small_user_batch(self) -> list[tuple[str, str]]:
        out = [(SMALL_USER, self.text()) for _ in range(SMALL_USER_MEMORIES)]
        self.texts[SMALL_USER] += [t for _, t in out]
        return out

    def query(self, user: str) -> str:
        words = self.rng.choice(self.texts[user]).split()[2:]
        return " ".join(self.rng.sample(words, 4) + self.rng.sample(self.words, 2))


def _payload(user: str, text: str) -> dict[str, Any]:
    # What mem0 2.2's own insert path stores (see AsyncMemory._create_memory).
    now = datetime.now(UTC).isoformat()
    return {
        "data": text,
        "hash": hashlib.md5(text.encode()).hexdigest(),
        "text_lemmatized": text.lower(),
        "created_at": now,
        "updated_at": now,
        "user_id": user,
    }


class Store:
    """One backend under test: a mem0 AsyncMemory plus the vectors it holds."""

    def __init__(self, name: str, memory: Any, embedding: Any) -> None:
        self.name = name
        self.memory = memory
        self.embedding = embedding
        self.vectors: dict[str, list[np.ndarray]] = {}
        self.ids: dict[str, list[str]] = {}
        self.count = 0
        self.fill_notes: dict[str, Any] = {}

    def bulk_mode(self) -> contextlib.AbstractContextManager[None]:
        """How this backend is loaded in bulk; measurements run outside it."""
        return contextlib.nullcontext()

    def fill(self, pairs: list[tuple[str, str]], batch: int = 500) -> float:
        """Insert ``pairs`` through mem0's vector store; returns rows per second."""
        with self.bulk_mode():
            return self._fill(pairs, batch)

    def _fill(self, pairs: list[tuple[str, str]], batch: int) -> float:
        started = time.perf_counter()
        for i in range(0, len(pairs), batch):
            chunk = pairs[i : i + batch]
            vectors = [self.embedding.vector(text) for _, text in chunk]
            ids = [str(uuid.uuid4()) for _ in chunk]
            self.memory.vector_store.insert(
                vectors=vectors, ids=ids, payloads=[_payload(u, t) for u, t in chunk]
            )
            for (user, _), vector, mid in zip(chunk, vectors, ids, strict=True):
                self.vectors.setdefault(user, []).append(np.asarray(vector, dtype=np.float32))
                self.ids.setdefault(user, []).append(mid)
        self.count += len(pairs)
        return len(pairs) / (time.perf_counter() - started)

    def exact_threshold(self, user: str, query: str, k: int) -> tuple[np.ndarray, float]:
        """Cosine similarity of every memory of ``user``, and the k-th best."""
        matrix = np.stack(self.vectors[user])
        q = np.asarray(self.embedding.vector(query), dtype=np.float32)
        sims = matrix @ q  # vectors are unit length
        kth = float(np.sort(sims)[-min(k, len(sims))])
        return sims, kth


class LocalQdrantStore(Store):
    """The embedded store. qdrant-client's local mode commits one SQLite
    transaction per point (one fsync each, ~50 rows/s here); the fill turns
    ``synchronous`` off on that file and restores it before measuring."""

    @contextlib.contextmanager
    def bulk_mode(self) -> Iterator[None]:
        try:
            local = self.memory.vector_store.client._client  # qdrant-client internals
            conn = local.collections[self.memory.vector_store.collection_name].storage.storage
        except (AttributeError, KeyError):
            logger.warning("cannot reach the local Qdrant's SQLite file; filling at full cost")
            yield
            return
        (before,) = conn.execute("PRAGMA synchronous").fetchone()
        conn.execute("PRAGMA synchronous=OFF")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA synchronous={before}")
        self.fill_notes["method"] = "mem0 vector_store.insert, SQLite synchronous=OFF while filling"


class PgvectorStore(Store):
    """pgvector with mem0's HNSW index. The fill drops the index, inserts, and
    builds it again (pgvector's advice for bulk loads); measurements run with
    the index in place, as mem0 created it."""

    def __init__(
        self, name: str, memory: Any, embedding: Any, dsn: str, table: str, *, hnsw: bool
    ) -> None:
        super().__init__(name, memory, embedding)
        self.dsn = dsn
        self.table = table
        self.hnsw = hnsw

    @contextlib.contextmanager
    def bulk_mode(self) -> Iterator[None]:
        import psycopg

        index = f"{self.table}_hnsw_idx"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            if self.hnsw:
                conn.execute(f'DROP INDEX IF EXISTS "{index}"')
            yield
            started = time.perf_counter()
            if self.hnsw:
                conn.execute("SET maintenance_work_mem = '1GB'")
                conn.execute(
                    f'CREATE INDEX "{index}" ON "{self.table}" '
                    "USING hnsw (vector vector_cosine_ops)"
                )
            conn.execute(f'ANALYZE "{self.table}"')
        self.fill_notes = {
            "method": "mem0 vector_store.insert"
            + (" without the HNSW index, then CREATE INDEX hnsw" if self.hnsw else ""),
            "index_build_seconds": round(time.perf_counter() - started, 1),
        }


async def measure(
    store: Store,
    corpus: Corpus,
    *,
    queries: int,
    adds: int,
    extra: list[Store],
    phase_seconds: float,
) -> dict[str, Any]:
    """Search latency, recall and add throughput at the store's current size."""
    rng = random.Random(store.count)
    big = [rng.choice(corpus.users) for _ in range(queries)]
    small = [SMALL_USER] * max(queries // 3, 5)
    plan = [(u, corpus.query(u)) for u in big + small]
    for user, query in plan[:3]:  # warm-up
        await store.memory.search(query, filters={"user_id": user}, top_k=TOP_K)
    result: dict[str, Any] = {"backend": store.name, "size": store.count}

    for target in [store, *extra]:
        latencies: list[float] = []
        phase_end = time.monotonic() + phase_seconds
        # Big and small users interleaved, so a time cap keeps both.
        order = _interleave(len(big), len(small))
        for i in order:
            user, query = plan[i]
            started = time.perf_counter()
            await target.memory.search(query, filters={"user_id": user}, top_k=TOP_K)
            latencies.append((time.perf_counter() - started) * 1000)
            if len(latencies) >= 12 and time.monotonic() > phase_end:
                break
        key = "" if target is store else f"{target.name}:"
        result[f"{key}searches"] = len(latencies)
        result[f"{key}search_ms_p50"] = round(statistics.median(latencies), 2)
        result[f"{key}search_ms_p95"] = round(float(np.percentile(latencies, 95)), 2)
        result[f"{key}recall"] = recall(
            target, store, plan, big_count=len(big), seconds=phase_seconds
        )

    # Adds, one at a time then 8 at once (mem0's whole path: embed, insert, history).
    started = time.perf_counter()
    # Adds go to users of their own, so the recall measured next time is not
    # disturbed by memories the exact scan does not know.
    for i in range(adds):
        user = f"adder-{i % 3}"
        await store.memory.add(
            [{"role": "user", "content": corpus.text()}], user_id=user, infer=False
        )
    result["adds_per_s"] = round(adds / (time.perf_counter() - started), 1)
    started = time.perf_counter()
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        async with sem:
            user = f"adder-{i % 3}"
            await store.memory.add(
                [{"role": "user", "content": corpus.text()}], user_id=user, infer=False
            )

    await asyncio.gather(*(one(i) for i in range(adds)))
    result["adds_per_s_8_concurrent"] = round(adds / (time.perf_counter() - started), 1)
    return result


def _interleave(big: int, small: int) -> list[int]:
    """Plan indexes alternating big-user queries (0..big) and small-user ones."""
    out: list[int] = []
    b, s = list(range(big)), list(range(big, big + small))
    while b or s:
        out += b[:3] + s[:1]
        b, s = b[3:], s[1:]
    return out


def recall(
    target: Store, truth: Store, plan: list[tuple[str, str]], *, big_count: int, seconds: float
) -> dict:
    """recall@5 of the vector stage (as mem0 calls it: top_k = max(4 * 5, 60)).

    A returned memory counts when its exact similarity reaches the 5th best
    exact similarity of the user (ties count). Only memories inserted by
    :meth:`Store.fill` are known to the exact scan; others are ignored.
    """
    out: dict[str, Any] = {}
    for label, part in (("big_user", plan[:big_count]), ("small_user", plan[big_count:])):
        hits, returned = [], []
        end = time.monotonic() + seconds / 2
        for user, query in part:
            if len(hits) >= 6 and time.monotonic() > end:
                break
            vector = truth.embedding.vector(query)
            found = target.memory.vector_store.search(
                query=query, vectors=vector, top_k=max(4 * TOP_K, 60), filters={"user_id": user}
            )
            returned.append(len(found))
            sims, kth = truth.exact_threshold(user, query, TOP_K)
            index = {mid: i for i, mid in enumerate(truth.ids[user])}
            good = sum(
                1
                for hit in found[:TOP_K]
                if str(hit.id) in index and sims[index[str(hit.id)]] >= kth - 1e-6
            )
            hits.append(good / min(TOP_K, len(sims)))
        out[label] = {
            "queries": len(hits),
            "recall_at_5": round(statistics.mean(hits), 3),
            "candidates_returned_mean": round(statistics.mean(returned), 1),
        }
    return out


def build_qdrant(folder: Path, embedding: Any, chat: Any) -> Any:
    from mem0 import AsyncMemory

    from agentscope_mem0 import build_mem0_config
    from agentscope_mem0.local import share_local_qdrant

    # Release 0.1's embedded store (qdrant-client's local mode in the folder, one
    # shared client); the Qdrant Edge default is in edge_scaling.py.
    store = {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "agentscope_mem0",
                "path": str(folder / "qdrant"),
                "on_disk": True,
            },
        },
        "history_db_path": str(folder / "history.db"),
    }
    config = build_mem0_config(chat_model=chat, embedding_model=embedding, mem0_config=store)
    folder.mkdir(parents=True, exist_ok=True)
    return AsyncMemory(config=share_local_qdrant(config))


def build_pgvector(
    dsn: str,
    folder: Path,
    embedding: Any,
    chat: Any,
    table: str,
    *,
    scope_index: bool = True,
    **kw: Any,
) -> Any:
    from mem0 import AsyncMemory

    from agentscope_mem0 import build_mem0_config
    from agentscope_mem0.backends import pgvector_config, prepare_pgvector

    config = pgvector_config(
        dsn,
        dims=embedding.dimensions,
        collection=table,
        history_db_path=str(folder / f"history-{uuid.uuid4().hex[:6]}.db"),
        **kw,
    )
    prepare_pgvector(config, scope_index=scope_index)
    return AsyncMemory(
        config=build_mem0_config(chat_model=chat, embedding_model=embedding, mem0_config=config)
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    embedding = HashEmbedding(args.dims)
    chat = ScriptedChatModel("unused: adds run with infer=False")
    sizes = sorted(int(s) for s in args.sizes.split(","))
    work = Path(tempfile.mkdtemp(prefix="asm0-bench-"))
    deadline = time.monotonic() + args.budget_minutes * 60
    results: list[dict[str, Any]] = []
    server = None
    dsn = args.pg_dsn
    if "pgvector" in args.backends and not dsn:
        import pgserver

        pgdata = Path(tempfile.mkdtemp(prefix="asm0-bench-pg-"))
        server = pgserver.get_server(pgdata, cleanup_mode="delete")
        dsn = server.get_uri()

    if dsn:
        drop_tables(dsn)
    try:
        for backend in args.backends.split(","):
            corpus = Corpus(args.users, seed=args.seed)
            extra: list[Store] = []
            if backend == "qdrant":
                memory = build_qdrant(work / "qdrant", embedding, chat)
                store = LocalQdrantStore("local-qdrant", memory, embedding)
            elif backend == "pgvector":
                table = PG_TABLES[0]
                memory = build_pgvector(dsn, work, embedding, chat, table)
                store = PgvectorStore("pgvector-hnsw", memory, embedding, dsn, table, hnsw=True)
                with_ef = Store(
                    "pgvector-hnsw-ef200",
                    build_pgvector(dsn, work, embedding, chat, table, ef_search=200),
                    embedding,
                )
                extra = [with_ef]
            elif backend == "pgvector-hnsw-noscope":
                # What mem0 builds by itself: HNSW, no index on user_id.
                table = PG_TABLES[1]
                memory = build_pgvector(dsn, work, embedding, chat, table, scope_index=False)
                store = PgvectorStore(
                    "pgvector-hnsw-noscope", memory, embedding, dsn, table, hnsw=True
                )
            elif backend == "pgvector-exact":
                table = PG_TABLES[2]
                memory = build_pgvector(dsn, work, embedding, chat, table, hnsw=False)
                store = PgvectorStore("pgvector-exact", memory, embedding, dsn, table, hnsw=False)
            else:
                raise SystemExit(f"unknown backend {backend!r}")
            store.fill(corpus.small_user_batch())
            for size in sizes:
                if time.monotonic() > deadline:
                    logger.warning("time budget spent: %s stops before %d", store.name, size)
                    results.append({"backend": store.name, "size": size, "skipped": "time budget"})
                    continue
                started = time.perf_counter()
                rate = store.fill(corpus.batch(size - store.count))
                for other in extra:  # the same table, so the same rows
                    other.vectors, other.ids, other.count = store.vectors, store.ids, store.count
                fill_s = time.perf_counter() - started
                logger.info("%s filled to %d in %.1f s", store.name, store.count, fill_s)
                row = await measure(
                    store,
                    corpus,
                    queries=args.queries,
                    adds=args.adds,
                    extra=extra,
                    phase_seconds=args.phase_seconds,
                )
                row["fill_rows_per_s"] = round(rate, 1)
                row["fill_seconds"] = round(fill_s, 1)
                row["fill"] = dict(store.fill_notes)
                results.append(row)
                logger.info("%s", json.dumps(row))
                _write(args, results, sizes)
    finally:
        if server is not None:
            server.cleanup()
        elif dsn:
            drop_tables(dsn)
        shutil.rmtree(work, ignore_errors=True)
    return _write(args, results, sizes)


def drop_tables(dsn: str) -> None:
    """Drop :data:`PG_TABLES`, their indexes and mem0's ``<table>_entities`` beside each."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in PG_TABLES:
            conn.execute(f'DROP TABLE IF EXISTS "{table}", "{table}_entities"')


def _write(args: argparse.Namespace, results: list[dict[str, Any]], sizes: list[int]) -> dict:
    report = {
        "command": "python benchmarks/scaling.py " + " ".join(sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "settings": {
            "sizes": sizes,
            "users": args.users,
            "small_user_memories": SMALL_USER_MEMORIES,
            "dims": args.dims,
            "queries_per_size": args.queries + max(args.queries // 3, 5),
            "phase_seconds": args.phase_seconds,
            "adds_per_size": args.adds,
            "top_k": TOP_K,
            "embedder": f"agentscope_mem0.testing.HashEmbedding({args.dims})",
        },
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return report


PLOT_STORES = {
    "pgvector-hnsw": "pgvector, HNSW (backends.pgvector_config)",
    "pgvector-exact": "pgvector, exact search",
    "local-qdrant": "release 0.1's embedded store",
}
"""The stores the plot compares, in words (the others are in the JSON and the tables)."""


def plot(report: dict[str, Any], path: Path) -> None:
    """One message: search latency as the store grows, per store; p50 bars with
    their value, p95 markers. Throughput and recall are in the report's tables."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["results"] if "skipped" not in r and r["backend"] in PLOT_STORES]
    sizes = sorted({r["size"] for r in rows})
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(PLOT_STORES)
    colours = {"pgvector-hnsw": "#4a7bb7", "pgvector-exact": "#9ec1e6", "local-qdrant": "#9aa3ad"}
    for index, (backend, label) in enumerate(PLOT_STORES.items()):
        by_size = {r["size"]: r for r in rows if r["backend"] == backend}
        xs = [i + (index - 1) * width for i, size in enumerate(sizes) if size in by_size]
        p50 = [by_size[size]["search_ms_p50"] for size in sizes if size in by_size]
        p95 = [by_size[size]["search_ms_p95"] for size in sizes if size in by_size]
        ax.bar(xs, p50, width * 0.95, color=colours[backend], label=f"{label}: p50")
        ax.scatter(xs, p95, marker="_", s=300, color="#b3261e", zorder=3)
        for x, value in zip(xs, p50, strict=True):
            shown = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
            ax.text(x, value * 1.08, shown, ha="center", fontsize=8)
    ax.scatter([], [], marker="_", s=300, color="#b3261e", label="p95")
    ax.set_yscale("log")
    ax.set_xticks(range(len(sizes)), [f"{size:,} memories" for size in sizes])
    ax.set_ylabel("search latency (ms, log scale)")
    ax.set_title("pgvector search stays in milliseconds as the store grows (one user, top 5)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    """Parse the command line, run, write the JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--backends", default="qdrant,pgvector,pgvector-hnsw-noscope,pgvector-exact"
    )
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=60, help="big-user queries per size")
    parser.add_argument("--adds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-dsn", default=os.environ.get("AGENTSCOPE_MEM0_TEST_PG_DSN"))
    parser.add_argument("--budget-minutes", type=float, default=25.0)
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=60.0,
        help="cap on each search phase once 12 searches ran (slow stores get fewer)",
    )
    parser.add_argument("--out", default=str(DOCS / "scaling.json"))
    parser.add_argument("--plot", default=str(DOCS / "scaling.png"))
    parser.add_argument(
        "--plot-only",
        metavar="JSON",
        default=None,
        help="only draw --plot from an earlier run's JSON (e.g. docs/benchmarks/scaling.json)",
    )
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text(encoding="utf-8")), Path(args.plot))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("mem0", "httpx", "agentscope", "pgserver"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    report = asyncio.run(run(args))
    plot(report, Path(args.plot))
    print(json.dumps(report["results"], indent=2))


if __name__ == "__main__":
    main()
