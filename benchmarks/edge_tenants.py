"""Many users in one embedded store: search latency with ``user_id`` as the tenant key.

Memories are searched per user. This fills one Qdrant Edge store (the
embedded default, no HNSW index) through mem0's vector store ``insert``, with
the payload mem0 writes, in two mixes:

* **uniform**: ``--memories`` over ``--users`` users (1M over 10,000: 100 each);
* **skewed**: ``--big-users`` users with ``--big-size`` memories each (5 x 50k)
  and the rest spread over users of 100 memories each.

Then it searches through mem0's own ``AsyncMemory.search`` (top 5, one user,
the default hybrid search; queries keep 4 words of one of the user's memories
and add 2 random ones) in two ways, alternating in rounds so that both see
the same machine load: **kept**, the package's default, where the store
reads payloads only for the hits mem0 keeps, and **every**, where it reads
every candidate's payload (60 for a top 5), as before. Each search is also
timed at the store (the provider's ``search`` as mem0 calls it, on another
user than the search through mem0 so that neither reads what the other has
just brought into memory). Reported: p50/p95 per way and user size, the
folder's size and the time to open it (build a new ``AsyncMemory`` on it) per
million memories. (Release 0.2's plain ``user_id`` index against the tenant
key was measured by the runs before this one: no measurable difference.)

Memories are 8 random words of a 5,000-word vocabulary, vectors the 384-d
bag-of-words fake (``HashEmbedding``): the store's work, not the embedder's.

Run from the repository root (about 15 minutes on two idle cores)::

    python benchmarks/edge_tenants.py --tmp <dir>
    python benchmarks/edge_tenants.py --memories 100000 --users 1000 --big-size 5000

Results go to ``docs/benchmarks/edge-tenants.json``; the numbers are quoted in
``docs/benchmarks/edge-scaling.md``, whose figure (``edge-scaling.png``) is
redrawn with them (``_edge_plot.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _edge_plot import render

from agentscope_mem0._vectors import search_terms

ENTITY_SCORES_POSSIBLE = search_terms.entity_scores_possible

logger = logging.getLogger("benchmarks.edge_tenants")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
DIMS = 384
TOP_K = 5
SMALL = 100  # memories of a small user


class Mix:
    """Who owns which memory; texts are drawn again from a seed, not kept."""

    def __init__(self, name: str, sizes: list[int], seed: int) -> None:
        self.name = name
        self.sizes = sizes
        self.seed = seed
        rng = random.Random(seed)
        self.words = [
            "".join(rng.choice("bcdfghjklmnpqrstvwxzaeiou") for _ in range(6)) for _ in range(5000)
        ]
        # Memory n belongs to owners[n]: users interleaved, as memories arrive over time.
        owners = [u for u, size in enumerate(sizes) for _ in range(size)]
        rng.shuffle(owners)
        self.owners = owners
        self.of_user: dict[int, list[int]] = {}
        for n, user in enumerate(owners):
            self.of_user.setdefault(user, []).append(n)

    def text(self, n: int) -> str:
        rng = random.Random(self.seed * 1_000_003 + n)
        return "User likes " + " ".join(rng.sample(self.words, 8))

    def query(self, user: int, rng: random.Random) -> str:
        words = self.text(rng.choice(self.of_user[user])).split()[2:]
        return " ".join(rng.sample(words, 4) + rng.sample(self.words, 2))


def _payload(user: int, text: str, now: str) -> dict[str, Any]:
    # What mem0 2.2's own insert path stores (see AsyncMemory._create_memory).
    return {
        "data": text,
        "hash": hashlib.md5(text.encode()).hexdigest(),
        "text_lemmatized": text.lower(),
        "created_at": now,
        "updated_at": now,
        "user_id": f"user-{user}",
    }


def open_memory(folder: Path) -> Any:
    from agentscope_mem0 import build_local_memory
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    return build_local_memory(
        ScriptedChatModel("unused"), embedding_model=HashEmbedding(DIMS), folder=folder
    )


def fill(memory: Any, mix: Mix, batch: int = 1000) -> float:
    """Insert every memory of ``mix``; returns memories per second."""
    embedding = memory.embedding_model.model
    store = memory.vector_store
    started = time.perf_counter()
    total = len(mix.owners)
    for start in range(0, total, batch):
        numbers = range(start, min(start + batch, total))
        texts = [mix.text(n) for n in numbers]
        now = datetime.now(UTC).isoformat()
        store.insert(
            vectors=[embedding.vector(t) for t in texts],
            payloads=[_payload(mix.owners[n], t, now) for n, t in zip(numbers, texts, strict=True)],
            ids=[str(uuid.uuid4()) for _ in texts],
        )
        if start // batch % 100 == 99:
            rate = (start + batch) / (time.perf_counter() - started)
            logger.info("%s: %d of %d (%.0f/s)", mix.name, start + batch, total, rate)
    store.shard.call("flush", lambda s: s.flush())
    return total / (time.perf_counter() - started)


def read_every_payload(every: bool) -> None:
    """Make the store read every candidate's payload (as before 0.3), or only the kept hits'.

    The package reads every payload when mem0 could reorder the candidates
    with entity scores (spaCy installed); this pretends that it could.
    """
    search_terms.entity_scores_possible = (lambda: True) if every else ENTITY_SCORES_POSSIBLE


def rss_mb() -> float:
    """This process's resident memory now, mapped store files included."""
    resident = int(Path("/proc/self/statm").read_text().split()[1])
    return round(resident * os.sysconf("SC_PAGE_SIZE") / 1e6, 1)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
    }


async def measure(
    memory: Any, mix: Mix, users: list[int], count: int, rng: random.Random
) -> tuple[list[float], list[float]]:
    """``count`` searches through mem0, and as many at the store on other users."""
    from agentscope_mem0._vectors.search_terms import results_kept

    through_mem0: list[float] = []
    at_store: list[float] = []
    embed = memory.embedding_model.model.vector
    for _ in range(count):
        user = rng.choice(users)
        query = mix.query(user, rng)
        filters = {"user_id": f"user-{user}"}
        started = time.perf_counter()
        await memory.search(query, filters=filters, top_k=TOP_K)
        through_mem0.append((time.perf_counter() - started) * 1000)
        user = rng.choice(users)
        query = mix.query(user, rng)
        vector = embed(query)
        started = time.perf_counter()
        with results_kept(TOP_K):  # as mem0's search(top_k=5) calls it
            memory.vector_store.search(
                query, vector, top_k=max(4 * TOP_K, 60), filters={"user_id": f"user-{user}"}
            )
        at_store.append((time.perf_counter() - started) * 1000)
    return through_mem0, at_store


async def run_mix(mix: Mix, args: argparse.Namespace) -> dict[str, Any]:
    from agentscope_mem0.local import close_shared_clients
    from agentscope_mem0.local._edge import index_state
    from agentscope_mem0.local._embedded import folder_size

    folder = Path(tempfile.mkdtemp(prefix=f"edge-tenants-{mix.name}-", dir=args.tmp))
    memory = open_memory(folder)
    rate = fill(memory, mix)
    del memory
    close_shared_clients(folder)
    gc.collect()
    started = time.perf_counter()
    memory = open_memory(folder)
    open_s = time.perf_counter() - started
    points = len(mix.owners)
    state = index_state(memory.vector_store.shard)
    out: dict[str, Any] = {
        "mix": mix.name,
        "memories": points,
        "users": len(mix.sizes),
        "user_sizes": sorted(set(mix.sizes)),
        "fill_per_s": round(rate, 1),
        "open_seconds": round(open_s, 3),
        "open_seconds_per_million": round(open_s * 1e6 / points, 3),
        "folder_mb": round(folder_size(folder / "edge") / 1e6, 1),
        "folder_gb_per_million": round(folder_size(folder / "edge") / 1e9 * 1e6 / points, 3),
        "index": state["index"],
        "segments": state["segments"],
    }
    groups = {"small": [u for u, s in enumerate(mix.sizes) if s <= SMALL]}
    big = [u for u, s in enumerate(mix.sizes) if s > SMALL]
    if big:
        groups["big"] = big
    rng = random.Random(args.seed)
    # Warm up the code paths both ways first.
    for every in (True, False):
        read_every_payload(every)
        await measure(memory, mix, groups["small"], 50, rng)
    samples: dict[str, list[float]] = {}
    load: list[float] = []  # 1-minute load average after each round: the machine's share
    for round_ in range(args.rounds):
        for every in (False, True) if round_ % 2 == 0 else (True, False):
            read_every_payload(every)
            label = "every" if every else "kept"
            for group, users in groups.items():
                mem0_ms, store_ms = await measure(memory, mix, users, args.searches, rng)
                key = f"{label}/{group}"
                samples.setdefault(f"{key}/mem0", []).extend(mem0_ms)
                samples.setdefault(f"{key}/store", []).extend(store_ms)
        load.append(round(os.getloadavg()[0], 2))
        logger.info(
            "%s: round %d of %d done (load %.1f)", mix.name, round_ + 1, args.rounds, load[-1]
        )
    read_every_payload(False)
    out["rss_mb"] = rss_mb()
    out["latency_ms"] = {key: percentiles(values) for key, values in sorted(samples.items())}
    out["load_average_by_round"] = load
    del memory
    close_shared_clients(folder)
    shutil.rmtree(folder, ignore_errors=True)
    logger.info("%s", json.dumps(out))
    return out


def mixes(args: argparse.Namespace) -> list[Mix]:
    uniform = [args.memories // args.users] * args.users
    rest = args.memories - args.big_users * args.big_size
    skewed = [args.big_size] * args.big_users + [SMALL] * (rest // SMALL)
    return [Mix("uniform", uniform, args.seed), Mix("skewed", skewed, args.seed + 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--big-users", type=int, default=5)
    parser.add_argument("--big-size", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--searches", type=int, default=250, help="per round, index and group")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mix", choices=["uniform", "skewed"], default=None)
    parser.add_argument("--tmp", type=Path, default=None, help="where the stores are built")
    parser.add_argument("--out-dir", type=Path, default=DOCS)
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("mem0", "httpx", "agentscope_mem0"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    json_path = args.out_dir / "edge-tenants.json"
    if not args.plot_only:
        if args.tmp is not None:
            args.tmp.mkdir(parents=True, exist_ok=True)
        load_start = [round(x, 2) for x in os.getloadavg()]
        started = time.time()
        results = [
            asyncio.run(run_mix(mix, args)) for mix in mixes(args) if args.mix in (None, mix.name)
        ]
        from importlib.metadata import version

        report = {
            "command": " ".join(["python", "benchmarks/edge_tenants.py", *sys.argv[1:]]),
            "minutes": round((time.time() - started) / 60, 1),
            "top_k": TOP_K,
            "dims": DIMS,
            "mixes": results,
            "environment": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "mem0ai": version("mem0ai"),
                "qdrant-edge-py": version("qdrant-edge-py"),
                "load_average_at_start": load_start,
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            },
        }
        args.out_dir.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    report = json.loads(json_path.read_text())
    render(args.out_dir)
    for mix in report["mixes"]:
        print(mix["mix"], json.dumps(mix["latency_ms"]))


if __name__ == "__main__":
    main()
