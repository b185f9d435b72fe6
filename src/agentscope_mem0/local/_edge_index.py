"""The Qdrant Edge store's index state, and building its HNSW index off the serving path.

A new store is searched exactly: points land in an appendable segment with
keyword payload indexes on the scope fields, and a filtered search scans only
the points of that scope (a few milliseconds at 100k memories, see
docs/benchmarks/edge-scaling.md). Building HNSW is ``EdgeShard.optimize()``,
which on qdrant-edge-py 0.9.0 holds the GIL for its whole run (38 s for 50k x
384 here): in a thread of a serving process it would stop every reply, every
write and the event loop for that long. So the package never optimizes on
its own; :func:`optimize_store` (``agentscope-mem0 optimize``) does it while
nothing else uses the folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from ._edge import DENSE, SharedShard, shard_dims, shard_exists, shared_shard

__all__ = ["folder_size", "index_state", "optimize_store", "store_status"]

logger = logging.getLogger(__name__)


def _segment_kinds(path: Path) -> dict[str, int]:
    kinds = {"hnsw": 0, "plain": 0}
    for segment in (path / "segments").glob("*/segment.json"):
        try:
            config = json.loads(segment.read_text(encoding="utf-8"))["config"]
            kind = config["vector_data"][DENSE]["index"]["type"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        kinds["hnsw" if kind == "hnsw" else "plain"] += 1
    return kinds


def folder_size(path: Path) -> int:
    """Bytes on disk under ``path`` (files only, sparse WAL files counted as allocated)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def index_state(shard: SharedShard) -> dict[str, Any]:
    """Points, indexed vectors and segment kinds of one open shard.

    ``index`` is ``"exact"`` (no HNSW segment: every search scans its scope)
    or ``"hnsw"`` (an optimized segment has HNSW; points written since land in
    a plain appendable segment and are searched exactly, see ``plain_segments``).
    """
    info = shard.call("info", lambda s: s.info())
    kinds = _segment_kinds(shard.path)
    state = "hnsw" if kinds["hnsw"] else "exact"
    return {
        "points": int(info.points_count),
        "indexed_vectors": int(info.indexed_vectors_count),
        "segments": int(info.segments_count),
        "hnsw_segments": kinds["hnsw"],
        "plain_segments": kinds["plain"],
        "index": state,
        "payload_indexes": sorted(info.payload_schema),
        "tenant_key": next(
            (
                name
                for name, index in info.payload_schema.items()
                if getattr(index.params, "is_tenant", None)
            ),
            None,
        ),
    }


def store_status(edge: Path, collection: str) -> dict[str, Any]:
    """What ``status`` shows about one collection of the Qdrant Edge store in ``edge``.

    Opens the shard through this process's registry (reusing it when open).

    Raises:
        StoreLockedError: Another process holds it.
    """
    path = edge / collection
    out: dict[str, Any] = {"engine": "qdrant-edge", "path": str(path)}
    if not shard_exists(path):
        out.update(points=0, vector_size=None, index="empty", note="nothing stored yet")
        return out
    dims = shard_dims(path)
    out["vector_size"] = dims
    if dims is None:
        out["note"] = "the store's configuration file is unreadable"
        return out
    out.update(index_state(shared_shard(path, dims)))
    out["size_bytes"] = folder_size(path)
    record = edge / "migrated-from-0.1.json"
    if record.is_file():
        with contextlib.suppress(OSError, ValueError):
            out["migrated_from_0_1"] = json.loads(record.read_text(encoding="utf-8"))
    return out


def optimize_store(edge: Path, collections: list[str] | None = None) -> dict[str, Any]:
    """Build HNSW (and vacuum deletions) in every collection of the store in ``edge``.

    Blocks the calling process for the whole run (the engine holds the GIL):
    run it from the ``agentscope-mem0 optimize`` command or a maintenance
    script, not in a process that is serving replies.

    Returns:
        Per collection: seconds taken, whether anything changed, the index state after.

    Raises:
        StoreLockedError: Another process holds the store.
    """
    names = collections or sorted(p.name for p in edge.iterdir() if shard_exists(p))
    report: dict[str, Any] = {}
    for name in names:
        path = edge / name
        dims = shard_dims(path)
        if dims is None:
            continue
        shard = shared_shard(path, dims)
        started = time.perf_counter()
        changed = shard.call("optimize", lambda s: s.optimize())
        shard.call("flush", lambda s: s.flush())
        seconds = time.perf_counter() - started
        logger.info("optimized %s in %.1f s (changed: %s)", path, seconds, changed)
        report[name] = {"seconds": round(seconds, 2), "changed": bool(changed)}
        report[name].update(index_state(shard))
    return report
