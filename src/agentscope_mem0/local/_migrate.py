"""Moving a release-0.1 data folder (on-disk local Qdrant) onto Qdrant Edge.

Release 0.1 kept memories in ``<folder>/qdrant/`` through qdrant-client's
local mode. On the folder's first open, every point of the memory and entity
collections there is read with a ``QdrantClient(path=...)`` and copied, with
its id, payload and dense vector, into shards under ``<folder>/edge.migrating/``
through the Qdrant Edge provider, its keyword vector written anew from its text
with the engine's BM25; the copy is counted and checked point by point, and
only then renamed to ``<folder>/edge/`` in one step. The old ``qdrant/``
folder is left alone (delete it once you are satisfied). A failure removes the
half-built copy, leaves the folder as it was and raises :class:`MigrationError`
saying why; the next open tries again.

Run it by hand with ``agentscope-mem0 migrate`` or :func:`migrate_folder`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from .._exceptions import DimensionMismatchError, MigrationError, StoreLockedError
from ._edge import DENSE, close_shards, is_panic
from ._folder import COLLECTION, DATA_DIR_ENV, ENTITIES, FolderLayout
from ._lock_holder import describe_holder

__all__ = ["MIGRATION_RECORD", "migrate_folder", "migrate_if_needed"]

logger = logging.getLogger(__name__)

MIGRATION_RECORD = "migrated-from-0.1.json"
"""Written into ``<folder>/edge/`` after a migration: counts and time."""

_COLLECTIONS = (COLLECTION, ENTITIES)
_BATCH = 256


def _old_collections(root: Path) -> list[str]:
    storage = FolderLayout(Path(root)).qdrant / "collection"
    return [name for name in _COLLECTIONS if (storage / name).is_dir()]


def migrate_if_needed(root: Path, *, dims: int | None = None) -> dict[str, int] | None:
    """Migrate ``root`` when it holds a release-0.1 store and no Qdrant Edge store yet.

    Returns:
        Points copied per collection, or ``None`` when there was nothing to do.

    Raises:
        MigrationError: The copy failed; the folder is unchanged.
        DimensionMismatchError: The old store holds vectors of another size than ``dims``.
        StoreLockedError: Another process holds the old store.
    """
    if FolderLayout(root).edge.exists() or not _old_collections(root):
        return None
    return migrate_folder(root, dims=dims)


def migrate_folder(root: str | os.PathLike[str], *, dims: int | None = None) -> dict[str, int]:
    """Copy a release-0.1 store in data folder ``root`` to Qdrant Edge (see the module docs).

    Args:
        root: The data folder.
        dims: The vector size expected; checked against the old store.

    Returns:
        Points copied per collection.

    Raises:
        MigrationError: There is nothing to migrate, the new store already
            exists, or the copy failed (the folder is then unchanged).
        StoreLockedError: Another process holds the old store.
    """
    from ._qdrant_path import LockedQdrantClient

    root = Path(root).expanduser().resolve()
    old = FolderLayout(root).qdrant
    target = FolderLayout(root).edge
    staging = root / "edge.migrating"
    if target.exists():
        raise MigrationError(
            f"{target} already exists: the folder was migrated before. Move it away "
            "to migrate the release-0.1 store in qdrant/ again"
        )
    names = _old_collections(root)
    if not names:
        raise MigrationError(
            f"{root} holds no release-0.1 store (no qdrant/collection/{COLLECTION})"
        )
    started = time.monotonic()
    logger.warning("migrating the release-0.1 store in %s to Qdrant Edge", old)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        client = LockedQdrantClient(old)
    except StoreLockedError:
        raise StoreLockedError(
            f"the release-0.1 store {old} is in use by {describe_holder(old / '.lock')}, "
            "so it cannot be moved to Qdrant Edge now: stop that process (an older "
            "release of this package, most likely) and open the folder again, or use "
            f"another data folder (folder=... or ${DATA_DIR_ENV})"
        ) from None
    counts: dict[str, int] = {}
    try:
        for name in names:
            counts[name] = _copy_collection(client, name, staging, dims)
        close_shards(staging)
        os.replace(staging, target)
    except BaseException as exc:
        close_shards(staging)
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, DimensionMismatchError | MigrationError):
            raise
        if not (isinstance(exc, Exception) or is_panic(exc)):
            raise
        raise MigrationError(
            f"could not move the release-0.1 store in {old} to Qdrant Edge: {exc}. The "
            f"folder is unchanged: fix the cause and open it again (`agentscope-mem0 "
            f"migrate --folder {root}` runs the migration alone)"
        ) from exc
    finally:
        client.close()
    record = {"from": "qdrant-local", "points": counts, "seconds": time.monotonic() - started}
    (target / MIGRATION_RECORD).write_text(json.dumps(record, indent=2), encoding="utf-8")
    logger.warning(
        "migrated %s to Qdrant Edge in %.1f s; the old store in %s can be deleted",
        counts,
        record["seconds"],
        old,
    )
    return counts


def _copy_collection(client: Any, name: str, staging: Path, dims: int | None) -> int:
    """Copy collection ``name`` into a shard under ``staging``, checked; the points copied."""
    from .._vectors.size import qdrant_vector_size
    from ._edge_provider import EdgeVectorStore, point_id

    size = qdrant_vector_size(client, name)
    if size is None:
        raise MigrationError(f"collection {name!r} has named dense vectors, which 0.1 never wrote")
    if dims is not None and size != dims:
        raise DimensionMismatchError(
            f"the embedding model makes {dims}-dimensional vectors, but the release-0.1 "
            f"store in {FolderLayout(staging.parent).qdrant} holds {size}-dimensional "
            "ones. Use the embedding model these memories were stored with, or another "
            f"data folder (folder=... or ${DATA_DIR_ENV})"
        )
    # The provider writes each point as mem0's writes do: its keyword vector
    # anew from its text with the engine's BM25 (0.1's came from the former encoder).
    store = EdgeVectorStore(
        path=os.fspath(staging), collection_name=name, embedding_model_dims=size
    )
    copied: dict[str, tuple[list[float], dict[str, Any]]] = {}
    offset = None
    while True:
        records, offset = client.scroll(
            name, limit=_BATCH, offset=offset, with_payload=True, with_vectors=True
        )
        vectors, payloads = [], []
        for record in records:
            vector = record.vector[DENSE] if isinstance(record.vector, dict) else record.vector
            vectors.append([float(v) for v in vector])
            payloads.append(dict(record.payload or {}))
            copied[str(point_id(record.id))] = (vectors[-1], payloads[-1])
        store.insert(vectors, payloads, [record.id for record in records])
        if offset is None:
            break
    if store.count() != len(copied):
        raise MigrationError(
            f"{name}: copied {len(copied)} points but the new store holds {store.count()}"
        )
    ids = list(copied)
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        records = store.shard.call(
            "verify", lambda s, c=chunk: s.retrieve(c, with_payload=True, with_vector=[DENSE])
        )
        if len(records) != len(chunk):
            missing = len(chunk) - len(records)
            raise MigrationError(f"{name}: {missing} points missing after the copy")
        for record in records:
            dense, payload = copied[str(record.id)]
            vector = record.vector[DENSE] if isinstance(record.vector, dict) else record.vector
            if dict(record.payload or {}) != payload or not _same_direction(vector, dense):
                raise MigrationError(f"{name}: point {record.id} differs after the copy")
    return len(copied)


def _same_direction(a: Any, b: list[float]) -> bool:
    # Cosine collections store normalised vectors; 0.1's were normalised too.
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        return bool(nx == ny)
    return bool(np.allclose(x / nx, y / ny, atol=1e-5))
