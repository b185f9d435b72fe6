"""What ``status`` finds out: each backend's reachability, size and vector
size, the embedder's fit, telemetry and the write outbox, as one JSON-ready dict."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from .._exceptions import ConfigurationError, StoreLockedError
from .._observe.usage import read_usage
from .._vectors.size import pg_vector_size, qdrant_vector_size
from .._write.outbox import OUTBOX_FILENAME, Outbox, OutboxRow
from ._config import Settings
from ._lock import LockHolder, lock_holder
from ._models import embedding_model_from_spec

__all__ = ["gather_status"]

_PROBE_TIMEOUT = 5


def _held_elsewhere(holder: LockHolder | None, info: dict[str, Any]) -> bool:
    """Whether another process holds the folder; if so, say so in ``info``."""
    if holder is None or holder.is_self:
        return False
    info.update(
        reachable=False,
        locked=True,
        lock_holder={"pid": holder.pid, "command": holder.command},
        error=f"the data folder is locked by {holder.describe()}",
    )
    return True


def _embedded_backend(settings: Settings) -> dict[str, Any]:
    from ..local import close_shared_clients
    from ..local._embedded import refuse_retired_engine, store_status
    from ..local._folder import COLLECTION, FolderLayout
    from ..local._migrate import migrate_if_needed

    edge = FolderLayout(settings.folder).edge
    info: dict[str, Any] = {
        "store": f"Qdrant Edge in {edge}",
        "collection": COLLECTION,
        "reachable": True,
        "locked": False,
        "lock_holder": None,
        "memories": None,
        "vector_size": None,
    }
    holder = lock_holder(settings.folder)
    if _held_elsewhere(holder, info):
        return info
    try:
        refuse_retired_engine()
        migrate_if_needed(settings.folder)
        found = store_status(edge, COLLECTION)
    except StoreLockedError as exc:
        info.update(reachable=False, locked=True, error=str(exc))
        return info
    except ConfigurationError as exc:
        info.update(reachable=False, error=str(exc))
        return info
    finally:
        if holder is None or not holder.is_self:  # leave this process's own store open
            close_shared_clients(settings.folder)
    info.update(found)
    info["memories"] = found.get("points", 0)
    return info


def _read_qdrant(client: Any, collection: str, info: dict[str, Any]) -> None:
    if not client.collection_exists(collection):
        info["memories"] = 0
        info["note"] = f"collection {collection!r} not created yet"
        return
    info["vector_size"] = qdrant_vector_size(client, collection)
    info["memories"] = client.count(collection, exact=True).count


def _server_info(store: str, collection: str) -> dict[str, Any]:
    """A server store's report before it was reached."""
    return {
        "store": store,
        "collection": collection,
        "reachable": False,
        "memories": None,
        "vector_size": None,
    }


def _qdrant_backend(settings: Settings) -> dict[str, Any]:
    from qdrant_client import QdrantClient

    info = _server_info(f"Qdrant server at {settings.url}", settings.collection)
    client = QdrantClient(
        url=settings.url,
        api_key=settings.api_key,
        timeout=_PROBE_TIMEOUT,
        check_compatibility=False,
    )
    try:
        _read_qdrant(client, settings.collection, info)
        info["reachable"] = True
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return info


def _pgvector_backend(settings: Settings) -> dict[str, Any]:
    from ._config import mask_url

    info = _server_info(f"PostgreSQL at {mask_url(settings.dsn or '')}", settings.collection)
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        info["error"] = (
            "psycopg is not installed: pip install 'psycopg[binary]' psycopg-pool "
            "(the [pgvector] extra)"
        )
        return info
    try:
        with psycopg.connect(settings.dsn or "", connect_timeout=_PROBE_TIMEOUT) as conn:
            info["reachable"] = True
            found = conn.execute("SELECT to_regclass(%s)", (settings.collection,)).fetchone()
            if found is None or found[0] is None:
                info["note"] = f"table {settings.collection!r} not created yet"
                return info
            counted = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(settings.collection))
            ).fetchone()
            info["memories"] = counted[0] if counted else 0
        info["vector_size"] = pg_vector_size(settings.dsn or "", settings.collection)
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


def _hosted_backend(settings: Settings) -> dict[str, Any]:
    info: dict[str, Any] = {
        "store": f"hosted mem0 at {settings.url or 'https://api.mem0.ai'}",
        "reachable": False,
        "memories": None,
        "vector_size": None,
    }
    if not settings.api_key:
        info["error"] = f"${settings.api_key_env} is not set"
        return info
    try:
        from mem0 import AsyncMemoryClient

        AsyncMemoryClient(api_key=settings.api_key, host=settings.url)
        info["reachable"] = True
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


_BACKEND_PROBES = {
    "embedded": _embedded_backend,
    "qdrant": _qdrant_backend,
    "pgvector": _pgvector_backend,
    "hosted": _hosted_backend,
}


def _vectors(settings: Settings, store_size: int | None) -> dict[str, Any]:
    info: dict[str, Any] = {"store": store_size, "embedder": None, "match": None}
    if settings.backend == "hosted":
        info["note"] = "the hosted platform embeds on its side"
        return info
    try:
        model = embedding_model_from_spec(settings.embedding_model)
    except ConfigurationError as exc:
        info["error"] = str(exc)
        return info
    info["embedder"] = model.dimensions
    info["embedder_name"] = str(getattr(model, "model", type(model).__name__))
    if store_size is not None:
        info["match"] = store_size == model.dimensions
    return info


def _telemetry() -> dict[str, Any]:
    from .._mem0 import quiet as choice

    try:
        import mem0.memory.telemetry as mem0_telemetry

        enabled = bool(getattr(mem0_telemetry, "MEM0_TELEMETRY", False))
    except ImportError:
        enabled = False
    if choice.USER_CHOSE:
        source = f"MEM0_TELEMETRY={os.environ.get(choice.ENV)!r}, set by you"
    else:
        source = "turned off by agentscope-mem0; set MEM0_TELEMETRY=true to allow it"
    return {"enabled": enabled, "source": source}


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _failed_row(row: OutboxRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "user_id": row.user_id,
        "agent_id": row.agent_id,
        "attempts": row.attempts,
        "error": row.error,
        "queued_at": _when(row.created_at),
    }


def _outbox(settings: Settings) -> dict[str, Any]:
    path = settings.outbox / OUTBOX_FILENAME
    info: dict[str, Any] = {"path": str(path), "exists": path.exists(), "pending": 0, "failed": 0}
    info["failed_writes"] = []
    if not path.exists():
        return info
    outbox = Outbox(path)
    try:
        info.update(outbox.counts())
        info["failed_writes"] = [_failed_row(r) for r in outbox.failed()]
    finally:
        outbox.close()
    return info


def gather_status(settings: Settings) -> dict[str, Any]:
    """Everything ``status`` reports, as one JSON-ready dict."""
    backend = _BACKEND_PROBES[settings.backend](settings)
    report: dict[str, Any] = {
        "settings": settings.describe(),
        "sources": dict(settings.sources),
        "backend": backend,
        "vectors": _vectors(settings, backend.get("vector_size")),
        "telemetry": _telemetry(),
        "outbox": _outbox(settings),
        "tokens": read_usage(settings.outbox),
    }
    report["ok"] = bool(backend["reachable"]) and report["vectors"].get("match") is not False
    return report
