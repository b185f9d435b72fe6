"""A second process for tests/test_local_store.py; prints one JSON line.

Usage::

    python _store_child.py count <qdrant folder> <collection>
    python _store_child.py open <data folder>

``count`` reopens the on-disk store with a plain ``QdrantClient`` and reports
how many points survived; ``open`` tries this package's shared client and
reports the error it got.
"""

from __future__ import annotations

import json
import sys


def count(storage: str, collection: str) -> dict[str, object]:
    from qdrant_client import QdrantClient

    client = QdrantClient(path=storage)
    try:
        if not client.collection_exists(collection):
            return {"points": 0, "collection": False}
        return {"points": client.count(collection, exact=True).count, "collection": True}
    finally:
        client.close()


def open_folder(folder: str) -> dict[str, object]:
    from agentscope_mem0 import StoreLockedError
    from agentscope_mem0.local import shared_qdrant_client

    try:
        shared_qdrant_client(folder)
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
        result = open_folder(argv[1])
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
