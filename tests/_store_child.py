"""A second process for tests/local/test_store.py; prints one JSON line.

Usage::

    python _store_child.py count <shard folder>
    python _store_child.py open <data folder>
    python _store_child.py open-path <on-disk Qdrant path>

``count`` reopens a Qdrant Edge shard folder and reports how many points
survived; ``open`` tries this package's embedded store of a data folder and
``open-path`` the shared client of an on-disk Qdrant path named in a
``mem0_config``, and each reports the error it got.
"""

from __future__ import annotations

import json
import sys


def count(storage: str) -> dict[str, object]:
    from pathlib import Path

    from qdrant_edge import CountRequest, EdgeShard

    if not (Path(storage) / "edge_config.json").is_file():
        return {"points": 0, "collection": False}
    shard = EdgeShard.load(storage)
    try:
        return {"points": shard.count(CountRequest(exact=True)), "collection": True}
    finally:
        shard.close()


def open_store(what: str, where: str) -> dict[str, object]:
    from agentscope_mem0 import StoreLockedError
    from agentscope_mem0.local import embedded_store_config, share_local_qdrant

    try:
        if what == "open":
            embedded_store_config(dims=64, folder=where)
        else:
            from mem0.configs.base import MemoryConfig

            share_local_qdrant(
                MemoryConfig(vector_store={"provider": "qdrant", "config": {"path": where}})
            )
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
        result = count(argv[1])
    elif argv[0] in ("open", "open-path"):
        result = open_store(argv[0], argv[1])
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
