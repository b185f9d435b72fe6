"""Copying an embedded data folder into Qdrant server collections (``migrate --to``).

Every point of the folder's collections (the memories and mem0's entity
links) goes to the collection of the same name on the server with its id,
payload, dense vector and keyword vector, so the server provider
(:mod:`.qdrant_store`) finds exactly what the embedded store found. The
target collections are created by the provider itself (vector slots, scope
indexes with ``user_id`` as the tenant key, the keyword record).

The copy is resumable: it goes through the folder in id order, in batches,
and after each batch records how far it got in ``<folder>/edge/copy-to-<hash>.json``
(the hash names the server and the collection). Run again after an
interruption, it carries on from there. Then it checks every point of the
folder against the server (payload equal, dense vector equal up to float
rounding, keyword vector equal); a point missing or different is copied
again and checked once more, and a point still different is an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._exceptions import MigrationError
from ..local._edge import DENSE, SPARSE, SharedShard, shard_dims, shard_exists, shared_shard
from ..local._folder import COLLECTION, FolderLayout
from ..local._keyword import KeywordEncoder, rewrite_keywords

__all__ = ["CopyReport", "copy_folder", "progress_file"]

logger = logging.getLogger(__name__)

BATCH = 256
"""Points per scroll of the folder and per upsert to the server."""


@dataclass
class CopyReport:
    """What happened to one collection."""

    points: int = 0
    """Points in the folder's collection."""
    copied: int = 0
    """Points sent in this run (a resumed run sends only what was left)."""
    recopied: int = 0
    """Points found missing or different on the server and sent again."""
    verified: int = 0
    """Points checked equal on the server."""
    seconds: float = 0.0
    extra_on_server: int = 0
    """Points the server collection holds beyond the folder's (written by others)."""
    notes: list[str] = field(default_factory=list)


def progress_file(folder: Path, target: str, collection: str) -> Path:
    """The progress record of copying ``folder`` to ``collection`` at ``target``."""
    digest = hashlib.sha256(f"{target}\0{collection}".encode()).hexdigest()[:16]
    return FolderLayout(folder).edge / f"copy-to-{digest}.json"


def copy_folder(
    folder: Path, client: Any, *, target: str, collection: str = COLLECTION
) -> dict[str, CopyReport]:
    """Copy the embedded store in data folder ``folder`` into ``client``'s server.

    Args:
        folder: The data folder (its ``edge/`` store; a release-0.1 folder must
            be migrated to Qdrant Edge first).
        client: A ``QdrantClient`` for the server (or its local mode, in tests).
        target: The server's address, naming the progress record.
        collection: The server collection for the memories; mem0's entity
            links go to ``<collection>_entities``.

    Returns:
        A report per collection.

    Raises:
        MigrationError: Nothing to copy, the server collection holds vectors of
            another size, or a point still differs after being sent again.
        StoreLockedError: Another process holds the folder.
    """
    edge = FolderLayout(folder).edge
    sources = [
        (name, edge / name, target_name)
        for name, target_name in (
            (COLLECTION, collection),
            (f"{COLLECTION}_entities", f"{collection}_entities"),
        )
        if shard_exists(edge / name)
    ]
    if not sources:
        raise MigrationError(f"{folder} holds no embedded store to copy (no edge/{COLLECTION})")
    record_path = progress_file(folder, target, collection)
    progress = _load(record_path)
    reports: dict[str, CopyReport] = {}
    encoder = KeywordEncoder()
    for name, path, target_name in sources:
        dims = shard_dims(path)
        if dims is None:
            raise MigrationError(f"the store's configuration in {path} is unreadable")
        shard = shared_shard(path, dims)
        rewrite_keywords(shard, encoder)  # a folder from release 0.2 gets the engine's BM25 first
        _target_store(client, target_name, dims)
        started = time.monotonic()
        report = CopyReport(points=_count(shard))
        state = progress.setdefault(name, {"offset": None, "done": False})
        if not state["done"]:
            for records, next_offset in _batches(shard, state["offset"]):
                client.upsert(target_name, points=[_server_point(r) for r in records], wait=True)
                report.copied += len(records)
                state["offset"] = _json_id(next_offset)
                state["done"] = next_offset is None
                _save(record_path, progress)
        _verify(shard, client, target_name, report)
        report.extra_on_server = max(0, _server_count(client, target_name) - report.points)
        report.seconds = round(time.monotonic() - started, 2)
        state["verified"] = report.verified
        _save(record_path, progress)
        reports[name] = report
        logger.info("copied %s to %s: %s", path, target_name, report)
    return reports


def _target_store(client: Any, name: str, dims: int) -> None:
    """Create (or open and check) the server collection through the provider."""
    from .._vectors.size import qdrant_vector_size
    from .qdrant_store import HybridQdrant

    if client.collection_exists(name):
        size = qdrant_vector_size(client, name)
        if size != dims:
            raise MigrationError(
                f"the server collection {name!r} holds {size}-dimensional vectors, the "
                f"folder {dims}-dimensional ones; copy into another collection (--collection)"
            )
    HybridQdrant(collection_name=name, embedding_model_dims=dims, client=client)


def _count(shard: SharedShard) -> int:
    from qdrant_edge import CountRequest

    return int(shard.call("count", lambda s: s.count(CountRequest(exact=True))))


def _server_count(client: Any, name: str) -> int:
    return int(client.count(name, exact=True).count)


def _batches(shard: SharedShard, offset: Any) -> Iterator[tuple[list[Any], Any]]:
    from qdrant_edge import ScrollRequest

    while True:
        request = ScrollRequest(offset=offset, limit=BATCH, with_payload=True, with_vector=True)
        records, offset = shard.call("scroll", lambda s, r=request: s.scroll(r))
        if records:
            yield records, offset
        if offset is None:
            return


def _json_id(point_id: Any) -> Any:
    return point_id if point_id is None or isinstance(point_id, int) else str(point_id)


def _server_point(record: Any) -> Any:
    from qdrant_client import models

    vectors: dict[str, Any] = {DENSE: [float(v) for v in record.vector[DENSE]]}
    sparse = record.vector.get(SPARSE)
    if sparse is not None:
        vectors[SPARSE] = models.SparseVector(
            indices=[int(i) for i in sparse.indices], values=[float(v) for v in sparse.values]
        )
    return models.PointStruct(id=record.id, vector=vectors, payload=dict(record.payload or {}))


def _verify(shard: SharedShard, client: Any, name: str, report: CopyReport) -> None:
    """Check every folder point on the server; send a differing one again, once."""
    for records, _ in _batches(shard, None):
        wrong = _differing(records, client, name)
        if wrong:
            client.upsert(name, points=[_server_point(r) for r in wrong], wait=True)
            report.recopied += len(wrong)
            still = _differing(wrong, client, name)
            if still:
                raise MigrationError(
                    f"{len(still)} points of {name!r} still differ on the server after being "
                    f"sent again (first: {still[0].id}); is something else writing to it?"
                )
        report.verified += len(records)


def _differing(records: list[Any], client: Any, name: str) -> list[Any]:
    found = {
        str(p.id): p
        for p in client.retrieve(
            name, ids=[r.id for r in records], with_payload=True, with_vectors=True
        )
    }
    return [r for r in records if not _same(r, found.get(str(r.id)))]


def _same(record: Any, server: Any) -> bool:
    if server is None or dict(server.payload or {}) != dict(record.payload or {}):
        return False
    vectors = server.vector if isinstance(server.vector, dict) else {DENSE: server.vector}
    if not _close(vectors.get(DENSE), record.vector[DENSE]):
        return False
    mine, theirs = record.vector.get(SPARSE), vectors.get(SPARSE)
    if mine is None or theirs is None:
        return mine is None and theirs is None
    a, b = _terms(mine), _terms(theirs)
    return a.keys() == b.keys() and all(math.isclose(a[i], b[i], rel_tol=1e-6) for i in a)


def _terms(sparse: Any) -> dict[int, float]:
    return dict(
        zip((int(i) for i in sparse.indices), (float(v) for v in sparse.values), strict=True)
    )


def _close(a: Any, b: Any) -> bool:
    # Cosine collections normalise what they store.
    if a is None:
        return False
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        return False
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        return bool(nx == ny)
    return bool(np.allclose(x / nx, y / ny, atol=1e-5))


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(path: Path, progress: dict[str, Any]) -> None:
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(progress, indent=2), encoding="utf-8")
    temp.replace(path)
