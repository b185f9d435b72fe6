"""What the offline e5 embedder costs per reply query: the floor under many users.

Embeds N short queries (the load benchmark's even-turn messages) in one
engine call, for N in ``--sizes``, and the same queries one call each, with
the package's default embedder (warmed first). Each size is timed
``--repeats`` times; the median is kept. A burst of N users asking at once
needs at least the N-query call's time of the whole machine before the last
of them can search: with e5 on two cores that, not the store, is what a
reply waits for at 50 users (docs/benchmarks/load.md).

    python benchmarks/e5_queries.py --out docs/benchmarks/e5-queries.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _timed(run: Callable[[], object], repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from agentscope_mem0.local._embedder import default_embedding_model

    model = default_embedding_model()
    model.warm()
    users = range(max(args.sizes))
    queries = [f"I have a pet named Pet{u}x4. Please remember that." for u in users]
    rows = []
    for size in args.sizes:
        batch = queries[:size]
        together = _timed(lambda b=batch: model.embed_sync(b, query=True), args.repeats)
        alone = _timed(lambda b=batch: [model.embed_sync([q], query=True) for q in b], args.repeats)
        rows.append(
            {
                "queries": size,
                "one_call_seconds": round(together, 4),
                "one_call_per_query_ms": round(1000 * together / size, 1),
                "one_by_one_seconds": round(alone, 4),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    report = {
        "command": "python benchmarks/e5_queries.py " + " ".join(sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": os.getloadavg(),
        },
        "rows": rows,
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
