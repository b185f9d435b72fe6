"""A second process for tests/test_local_store.py; prints one JSON line.

Usage::

    python _store_child.py count <store folder> <collection>
    python _store_child.py open <data folder> [edge|qdrant-local]

``count`` reopens an on-disk store (a Qdrant Edge shard folder, or a
qdrant-client local folder) and reports how many points survived; ``open``
tries this package's shared store and reports the error it got.
"""

from __future__ import annotations

import json
import sys


def count(storage: str, collection: str) -> dict[str, object]:
    from pathlib import Path

    if (Path(storage) / "edge_config.json").is_file() or Path(storage).name == collection:
        return count_edge(storage)
    from qdrant_client import QdrantClient

    client = QdrantClient(path=storage)
    try:
        if not client.collection_exists(collection):
            return {"points": 0, "collection": False}
        return {"points": client.count(collection, exact=True).count, "collection": True}
    finally:
        client.close()


def count_edge(storage: str) -> dict[str, object]:
    from pathlib import Path

    from qdrant_edge import CountRequest, EdgeShard

    if not (Path(storage) / "edge_config.json").is_file():
        return {"points": 0, "collection": False}
    shard = EdgeShard.load(storage)
    try:
        return {"points": shard.count(CountRequest(exact=True)), "collection": True}
    finally:
        shard.close()


def open_folder(folder: str, engine: str = "edge") -> dict[str, object]:
    from agentscope_mem0 import StoreLockedError
    from agentscope_mem0.local import embedded_store_config

    try:
        embedded_store_config(dims=64, folder=folder, engine=engine)
    except Exception as exc:
        return {
            "error": type(exc).__name__,
            "store_locked": isinstance(exc, StoreLockedError),
            "value_error": isinstance(exc, ValueError),
            "message": str(exc),
        }
    return {"error": None}


def main(argv: list[str]) -> None:
    if argv[0] == "count":
        result = count(argv[1], argv[2])
    elif argv[0] == "open":
        result = open_folder(*argv[1:3])
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
