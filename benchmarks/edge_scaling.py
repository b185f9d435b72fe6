"""Search cost of the embedded default (Qdrant Edge) as memory grows, against local mode.

One run measures both engines, each in a child process of its own (so that
open time and memory are its own): the Qdrant Edge default at 1k, 10k and
100k memories, and qdrant-client's local mode at 1k and 10k, where it still
answers. Local mode was release 0.1's embedded store; it is no longer an
engine of the package, so it is measured as release 0.1 ran it: mem0's own
Qdrant provider on an on-disk path in the folder (``qdrant/``, the same
collection), through the package's shared client, with the keyword encoder.
At every size, through mem0's own ``AsyncMemory.search`` (top 5, scoped to
one of 10 users, hashed 384-d embeddings, the offline keyword encoder, each
engine's default hybrid search):

* search latency p50/p95, and searches per second one at a time and with 8
  in flight;
* recall@5 of the dense stage against an exact scan of the user's vectors
  (the store's dense search as mem0 calls it, fusion off);
* folder size on disk, time to open the folder (build a new ``AsyncMemory``
  on it), resident memory after opening.

At the largest Edge size the run then builds HNSW (``EdgeShard.optimize``) in
a thread while searches keep running, reports what those searches saw, and
measures again on the indexed store.

Memories are 8 random words from a 5,000-word vocabulary (see
``benchmarks/scaling.py``'s ``Corpus``), inserted through mem0's vector store
``insert`` with the payload mem0 writes, so that filling 100k takes seconds.

Run from the repository root::

    python benchmarks/edge_scaling.py                     # both engines, ~15-25 min
    python benchmarks/edge_scaling.py --sizes 1000,10000 --no-hnsw

Results go to ``docs/benchmarks/edge-scaling.json``; the figure, ``edge-scaling.png``,
also shows ``edge_tenants.py``'s results when they are in the same folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MEM0_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _edge_plot import render
from scaling import Corpus, LocalQdrantStore, Store

logger = logging.getLogger("benchmarks.edge_scaling")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
TOP_K = 5
USERS = 10
DIMS = 384


def rss_mb() -> float:
    """Resident memory of this process now, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def dir_mb(path: Path) -> float:
    from agentscope_mem0.local._embedded import folder_size

    return folder_size(path) / 1e6


def open_memory(engine: str, folder: Path, embedding: Any, chat: Any) -> Any:
    from agentscope_mem0 import build_local_memory, build_memory
    from agentscope_mem0.local import install_keyword_encoder

    if engine == "edge":
        return build_local_memory(chat, embedding_model=embedding, folder=folder)
    # Release 0.1's embedded store: mem0's Qdrant provider on qdrant-client's local mode.
    memory = build_memory(
        chat_model=chat,
        embedding_model=embedding,
        mem0_config={
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "agentscope_mem0",
                    "path": str(folder / "qdrant"),
                    "on_disk": True,
                },
            },
            "history_db_path": str(folder / "history.db"),
        },
    )
    install_keyword_encoder(memory)
    return memory


async def latencies(memory: Any, plan: list[tuple[str, str]], seconds: float) -> list[float]:
    out: list[float] = []
    end = time.monotonic() + seconds
    for user, query in plan:
        started = time.perf_counter()
        await memory.search(query, filters={"user_id": user}, top_k=TOP_K)
        out.append((time.perf_counter() - started) * 1000)
        if len(out) >= 20 and time.monotonic() > end:
            break
    return out


async def in_flight(memory: Any, plan: list[tuple[str, str]], count: int) -> float:
    """Searches per second with 8 in flight."""
    sem = asyncio.Semaphore(8)

    async def one(user: str, query: str) -> None:
        async with sem:
            await memory.search(query, filters={"user_id": user}, top_k=TOP_K)

    started = time.perf_counter()
    await asyncio.gather(*(one(u, q) for u, q in plan[:count]))
    return count / (time.perf_counter() - started)


def dense_recall(store: Store, plan: list[tuple[str, str]], limit: int) -> float:
    """recall@5 of the store's dense search (fusion off) against an exact scan."""
    vector_store = store.memory.vector_store
    saved = getattr(vector_store, "fusion", None)
    if saved is not None:
        vector_store.fusion = "none"
    hits = []
    try:
        for user, query in plan[:limit]:
            vector = store.embedding.vector(query)
            found = vector_store.search(
                query=query, vectors=vector, top_k=max(4 * TOP_K, 60), filters={"user_id": user}
            )
            sims, kth = store.exact_threshold(user, query, TOP_K)
            index = {mid: i for i, mid in enumerate(store.ids[user])}
            good = sum(
                1
                for hit in found[:TOP_K]
                if str(hit.id) in index and sims[index[str(hit.id)]] >= kth - 1e-6
            )
            hits.append(good / min(TOP_K, len(sims)))
    finally:
        if saved is not None:
            vector_store.fusion = saved
    return round(statistics.mean(hits), 4)


async def measure(
    store: Store, corpus: Corpus, args: argparse.Namespace, rng: random.Random
) -> dict[str, Any]:
    plan = [(u, corpus.query(u)) for u in (rng.choice(corpus.users) for _ in range(args.queries))]
    for user, query in plan[:3]:
        await store.memory.search(query, filters={"user_id": user}, top_k=TOP_K)
    lat = await latencies(store.memory, plan, args.phase_seconds)
    flight_count = max(16, min(len(lat), 160))
    per_s_8 = await in_flight(store.memory, plan, flight_count)
    return {
        "searches": len(lat),
        "search_ms_p50": round(statistics.median(lat), 2),
        "search_ms_p95": round(float(np.percentile(lat, 95)), 2),
        "searches_per_s_1": round(1000 / statistics.mean(lat), 1),
        "searches_per_s_8_in_flight": round(per_s_8, 1),
        "recall_at_5_dense_vs_exact": dense_recall(store, plan, min(60, len(plan))),
    }


async def search_during_optimize(store: Store, corpus: Corpus, rng: random.Random) -> dict:
    """Build HNSW in a thread; keep searching from the event loop meanwhile."""
    from agentscope_mem0.local._embedded import optimize_store

    edge = store.memory.vector_store.root
    done = threading.Event()
    report: dict[str, Any] = {}

    def work() -> None:
        try:
            report.update(optimize_store(edge, ["agentscope_mem0"]))
        finally:
            done.set()

    plan = [(u, corpus.query(u)) for u in (rng.choice(corpus.users) for _ in range(10_000))]
    started = time.perf_counter()
    thread = threading.Thread(target=work, name="optimize", daemon=True)
    thread.start()
    lat: list[float] = []
    ticks: list[float] = []
    for user, query in plan:
        if done.is_set():
            break
        t0 = time.perf_counter()
        await store.memory.search(query, filters={"user_id": user}, top_k=TOP_K)
        lat.append((time.perf_counter() - t0) * 1000)
        ticks.append(time.perf_counter())
    thread.join()
    total = time.perf_counter() - started
    gaps = np.diff([started, *ticks]) if ticks else np.array([total])
    return {
        "optimize_seconds": round(total, 1),
        "searches_completed_during": len(lat),
        "longest_search_ms": round(max(lat), 1) if lat else None,
        "longest_gap_between_searches_s": round(float(gaps.max()), 1),
        "index_after": report.get("agentscope_mem0", {}),
    }


async def run_engine(args: argparse.Namespace) -> dict[str, Any]:
    from agentscope_mem0.local import close_shared_clients
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    embedding = HashEmbedding(DIMS)
    chat = ScriptedChatModel("unused: no extraction here")
    folder = Path(tempfile.mkdtemp(prefix=f"edge-scaling-{args.engine}-"))
    corpus = Corpus(USERS, seed=args.seed)
    rng = random.Random(args.seed)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    memory = open_memory(args.engine, folder, embedding, chat)
    store: Store = (
        LocalQdrantStore("qdrant-local", memory, embedding)
        if args.engine == "qdrant-local"
        else Store("qdrant-edge", memory, embedding)
    )
    store_dir = folder / ("qdrant" if args.engine == "qdrant-local" else "edge")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        fill_rate = store.fill(corpus.batch(size - store.count), batch=500)
        logger.info("%s: filled to %d (%.0f rows/s)", args.engine, store.count, fill_rate)
        # Reopen: the open time and memory of a process starting on this folder.
        close_shared_clients(folder)
        started = time.perf_counter()
        store.memory = open_memory(args.engine, folder, embedding, chat)
        open_s = time.perf_counter() - started
        row = {
            "engine": args.engine,
            "size": store.count,
            "fill_rows_per_s": round(fill_rate, 1),
            "open_seconds": round(open_s, 3),
            "rss_mb_after_open": round(rss_mb(), 1),
            "folder_mb": round(dir_mb(store_dir), 1),
        }
        row.update(await measure(store, corpus, args, rng))
        if args.engine == "edge":
            from agentscope_mem0.local._edge import index_state

            row["index"] = index_state(store.memory.vector_store.shard)["index"]
        logger.info("%s", json.dumps(row))
        rows.append(row)
    if args.engine == "edge" and args.hnsw:
        during = await search_during_optimize(store, corpus, rng)
        logger.info("during optimize: %s", during)
        from agentscope_mem0.local._edge import index_state

        after = {"engine": "edge-hnsw", "size": store.count}
        after.update(await measure(store, corpus, args, rng))
        after["index"] = index_state(store.memory.vector_store.shard)["index"]
        after["folder_mb"] = round(dir_mb(store_dir), 1)
        rows.append(after)
        rows.append({"engine": "edge", "size": store.count, "optimize": during})
    close_shared_clients(folder)
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    return {"engine": args.engine, "rows": rows}


def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Run each engine in a child process; merge their results."""
    results = []
    started = time.time()
    load_start = [round(x, 2) for x in os.getloadavg()]
    plans = [
        ("edge", args.sizes, args.hnsw),
        (
            "qdrant-local",
            ",".join(s for s in args.sizes.split(",") if int(s) <= args.local_max),
            False,
        ),
    ]
    for engine, sizes, hnsw in plans:
        if not sizes:
            continue
        out = Path(tempfile.mkstemp(suffix=".json")[1])
        command = [
            sys.executable,
            __file__,
            "--engine",
            engine,
            "--sizes",
            sizes,
            "--queries",
            str(args.queries),
            "--phase-seconds",
            str(args.phase_seconds),
            "--seed",
            str(args.seed),
            "--child-out",
            str(out),
        ] + ([] if hnsw else ["--no-hnsw"])
        logger.info("running %s", " ".join(command[1:]))
        subprocess.run(command, check=True)
        results.append(json.loads(out.read_text()))
        out.unlink()
        partial = args.out_dir / "edge-scaling.partial.json"
        partial.write_text(json.dumps(results, indent=2) + "\n")
    from importlib.metadata import version

    return {
        "command": "python benchmarks/edge_scaling.py"
        + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""),
        "users": USERS,
        "dims": DIMS,
        "top_k": TOP_K,
        "minutes": round((time.time() - started) / 60, 1),
        "results": [row for r in results for row in r["rows"]],
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "mem0ai": version("mem0ai"),  # the package's version, without importing it here
            "qdrant-edge-py": version("qdrant-edge-py"),
            "qdrant-client": version("qdrant-client"),
            "load_average_at_start": load_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
    }


def table(report: dict[str, Any]) -> str:
    """The Markdown table of one report's measured rows."""
    head = (
        "| engine | memories | index | search p50 ms | p95 ms | searches/s (1) "
        "| searches/s (8 in flight) | recall@5 vs exact | open s | RSS MB | folder MB |\n"
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    lines = [head]
    for r in report["results"]:
        if "search_ms_p50" not in r:
            continue
        lines.append(
            f"| {r['engine']} | {r['size']:,} | {r.get('index', '-')} | {r['search_ms_p50']} "
            f"| {r['search_ms_p95']} | {r['searches_per_s_1']} | {r['searches_per_s_8_in_flight']} "
            f"| {r['recall_at_5_dense_vs_exact']} | {r.get('open_seconds', '-')} "
            f"| {r.get('rss_mb_after_open', '-')} | {r.get('folder_mb', '-')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--local-max", type=int, default=10000, help="largest size for local mode")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--phase-seconds", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-hnsw", dest="hnsw", action="store_false")
    parser.add_argument("--engine", choices=["edge", "qdrant-local"], default=None)
    parser.add_argument("--child-out", type=Path, default=None)
    parser.add_argument("--out-dir", type=Path, default=DOCS)
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("mem0", "httpx", "agentscope_mem0"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    if args.engine:
        result = asyncio.run(run_engine(args))
        args.child_out.write_text(json.dumps(result))
        return
    json_path = args.out_dir / "edge-scaling.json"
    if not args.plot_only:
        args.out_dir.mkdir(parents=True, exist_ok=True)  # the partial results go there too
        report = drive(args)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    report = json.loads(json_path.read_text())
    render(args.out_dir)
    print(table(report))


if __name__ == "__main__":
    main()
