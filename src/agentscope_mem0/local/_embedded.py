"""The embedded store of one data folder: its mem0 config, opening, closing and upkeep.

The embedded store is Qdrant Edge (``<folder>/edge/``, see :mod:`._edge`).
Release 0.1's qdrant-client local mode (``<folder>/qdrant/``) is no longer an
engine: such a folder is migrated to Qdrant Edge on its first open (see
:mod:`._migrate`), and asking for that engine with ``$AGENTSCOPE_MEM0_ENGINE``
is refused with what to do instead.

A new store is searched exactly: points land in an appendable segment with
keyword payload indexes on the scope fields, and a filtered search scans only
the points of that scope (a few milliseconds at 100k memories, see
docs/benchmarks/edge-scaling.md). Building HNSW is ``EdgeShard.optimize()``,
which on qdrant-edge-py 0.9.0 holds the GIL for its whole run (38 s for 50k x
384 here): in a thread of a serving process it would stop every reply, every
write and the event loop for that long. So the package never optimizes on
its own; :func:`optimize_store` (``agentscope-mem0 optimize``) does it while
nothing else uses the folder. :func:`store_status` is what ``status`` shows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from .._exceptions import ConfigurationError
from ._edge import close_shards, index_state, shard_dims, shard_exists, shared_shard
from ._folder import COLLECTION, ENTITIES, FolderLayout, data_dir, prepare_history_db
from ._migrate import MIGRATION_RECORD, migrate_if_needed

__all__ = [
    "RETIRED_ENGINE_ENV",
    "close_shared_clients",
    "embedded_store_config",
    "embedded_store_fields",
    "folder_size",
    "optimize_store",
    "refuse_retired_engine",
    "store_status",
]

logger = logging.getLogger(__name__)

RETIRED_ENGINE_ENV = "AGENTSCOPE_MEM0_ENGINE"
"""The variable that chose the embedded engine in releases 0.2 and 0.3."""


def refuse_retired_engine() -> None:
    """Fail when ``$AGENTSCOPE_MEM0_ENGINE`` still asks for release 0.1's engine.

    ``edge`` (or an empty value) names the only engine and passes.

    Raises:
        ConfigurationError: It names another engine, such as ``qdrant-local``.
    """
    chosen = os.environ.get(RETIRED_ENGINE_ENV, "").strip()
    if chosen.lower() in ("", "edge"):
        return
    raise ConfigurationError(
        f"{RETIRED_ENGINE_ENV}={chosen!r}: the embedded store runs on Qdrant Edge only; "
        "release 0.1's engine (qdrant-client local mode, 'qdrant-local') was retired. "
        f"Unset {RETIRED_ENGINE_ENV}: a folder holding release 0.1's qdrant/ store moves "
        "to Qdrant Edge on its first open, its old files left in place (see "
        "docs/migrating.md for a folder written by that engine after its migration)"
    )


def embedded_store_fields(
    *, dims: int, folder: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields naming the embedded store in one data folder.

    Describes the store and opens nothing (not even the folder):
    :func:`embedded_store_config` opens it.

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        ``vector_store`` and ``history_db_path`` entries.
    """
    from ._edge_provider import PROVIDER

    layout = FolderLayout.of(folder)
    store = {
        "collection_name": COLLECTION,
        "embedding_model_dims": dims,
        "path": os.fspath(layout.edge),
    }
    return {
        "vector_store": {"provider": PROVIDER, "config": store},
        "history_db_path": os.fspath(layout.history_db),
    }


def embedded_store_config(
    *, dims: int, folder: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields for the embedded store in one data folder, opened.

    Opens (or reuses) the folder's store now, so that another process's lock
    or a vector-size mismatch surfaces here, migrates a release-0.1 folder
    first, and puts the history database in WAL mode. Pass the fields as
    ``mem0_config`` (``build_mem0_config`` and ``build_memory`` accept them).

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`~agentscope_mem0.local.data_dir`).

    Returns:
        ``vector_store`` and ``history_db_path`` entries.

    Raises:
        ConfigurationError: ``$AGENTSCOPE_MEM0_ENGINE`` asks for the retired engine.
        StoreLockedError: Another process holds the folder.
        DimensionMismatchError: The folder holds vectors of another size.
        MigrationError: A release-0.1 folder could not be migrated (it is left as it was).
    """
    refuse_retired_engine()
    layout = FolderLayout(data_dir(folder))
    migrate_if_needed(layout.root, dims=dims)
    for name in (COLLECTION, ENTITIES):
        shared_shard(layout.edge / name, dims)
    prepare_history_db(layout.history_db)
    return embedded_store_fields(dims=dims, folder=layout.root)


def close_shared_clients(folder: str | os.PathLike[str] | None = None) -> None:
    """Close the stores this process shares inside folder ``folder``, or every one.

    That is the embedded store's Qdrant Edge shards and the shared clients of
    on-disk Qdrant paths named in a ``mem0_config`` (see
    :func:`~._qdrant_path.share_local_qdrant`). mem0 clients built on a
    closed store fail on their next call; build new ones. Mostly for tests
    and for handing a folder to another process.
    """
    root = None if folder is None else FolderLayout.of(folder).root
    close_shards(root)
    # Only that module opens such clients; importing it (qdrant-client) just to
    # find none would cost a command seconds.
    qdrant_paths = sys.modules.get(f"{__package__}._qdrant_path")
    if qdrant_paths is not None:
        qdrant_paths.close_qdrant_clients(root)


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
    record = edge / MIGRATION_RECORD
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
