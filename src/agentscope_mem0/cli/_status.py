"""``status``: the configuration in effect and whether the memory store is usable.

What it finds out (the backend's reachability, size and vector size, the
embedder's fit, telemetry, the model tokens memory spent, the write outbox) is
one JSON-ready dict, :func:`gather_status`; it looks at each store directly,
without mem0, so that it creates nothing and answers when mem0 could not open it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .._exceptions import ConfigurationError, StoreLockedError
from ._common import store_command
from ._config import Settings, mask_url
from ._exit_codes import UnreachableError, UsageError
from ._lock import LockHolder, lock_holder
from ._models import embedder_size
from ._output import Output, short_date
from ._queued_writes import PostgresPlace, outbox_path, read_rows

__all__ = ["gather_status", "status"]

_PROBE_TIMEOUT = 5

# How the settings are labelled in the text report (the others by their key).
_LABELS = {
    "folder": "data folder",
    "config_file": "config file",
    "api_key": "api key",
    "history_db": "history db",
    "embedding_model": "embedding model",
    "chat_model": "chat model",
    "outbox": "outbox folder",
}


# -- what it finds out ------------------------------------------------------------


def _info(store: str, **found: Any) -> dict[str, Any]:
    """A backend's report before it was reached."""
    return {"store": store, "reachable": False, "memories": None, "vector_size": None, **found}


def _embedded_backend(settings: Settings) -> dict[str, Any]:
    from ..local import close_shared_clients
    from ..local._embedded import refuse_retired_engine, store_status
    from ..local._folder import COLLECTION, FolderLayout
    from ..local._migrate import migrate_if_needed

    edge = FolderLayout(settings.folder).edge
    info = _info(f"Qdrant Edge in {edge}", collection=COLLECTION, locked=False, lock_holder=None)
    holder = lock_holder(settings.folder)
    if holder is not None and not holder.is_self:
        info.update(
            locked=True,
            lock_holder={"pid": holder.pid, "command": holder.command},
            error=f"the data folder is locked by {holder.describe()}",
        )
        return info
    try:
        refuse_retired_engine()
        migrate_if_needed(settings.folder)
        found = store_status(edge, COLLECTION)
    except StoreLockedError as exc:
        info.update(locked=True, error=str(exc))
        return info
    except ConfigurationError as exc:
        info["error"] = str(exc)
        return info
    finally:
        if holder is None:  # leave this process's own store open
            close_shared_clients(settings.folder)
    info.update(found, reachable=True, memories=found.get("points", 0))
    return info


def _server_backend(settings: Settings) -> dict[str, Any]:
    where = (
        f"Qdrant server at {settings.url}"
        if settings.backend == "qdrant"
        else f"PostgreSQL at {mask_url(settings.dsn or '')}"
    )
    info = _info(where, collection=settings.collection)
    try:
        probe = _probe_qdrant if settings.backend == "qdrant" else _probe_pgvector
        probe(settings, info)
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


def _probe_qdrant(settings: Settings, info: dict[str, Any]) -> None:
    from qdrant_client import QdrantClient

    from .._vectors.size import qdrant_vector_size

    name = settings.collection
    client = QdrantClient(
        url=settings.url,
        api_key=settings.api_key,
        timeout=_PROBE_TIMEOUT,
        check_compatibility=False,
    )
    try:
        if not client.collection_exists(name):
            info.update(reachable=True, memories=0, note=f"collection {name!r} not created yet")
            return
        info["vector_size"] = qdrant_vector_size(client, name)
        info["memories"] = client.count(name, exact=True).count
        info["reachable"] = True
    finally:
        client.close()


def _probe_pgvector(settings: Settings, info: dict[str, Any]) -> None:
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        info["error"] = (
            "psycopg is not installed: pip install 'psycopg[binary]' psycopg-pool "
            "(the [pgvector] extra)"
        )
        return
    from .._vectors.size import pg_vector_size

    table = settings.collection
    with psycopg.connect(settings.dsn or "", connect_timeout=_PROBE_TIMEOUT) as conn:
        info["reachable"] = True
        found = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if found is None or found[0] is None:
            info["note"] = f"table {table!r} not created yet"
            return
        counted = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        ).fetchone()
        info["memories"] = counted[0] if counted else 0
    info["vector_size"] = pg_vector_size(settings.dsn or "", table)


def _hosted_backend(settings: Settings) -> dict[str, Any]:
    info = _info(f"hosted mem0 at {settings.url or 'https://api.mem0.ai'}")
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


def _vectors(settings: Settings, store_size: int | None) -> dict[str, Any]:
    info: dict[str, Any] = {"store": store_size, "embedder": None, "match": None}
    if settings.backend == "hosted":
        info["note"] = "the hosted platform embeds on its side"
        return info
    try:
        info["embedder"], info["embedder_name"] = embedder_size(settings.embedding_model)
    except ConfigurationError as exc:
        info["error"] = str(exc)
        return info
    if store_size is not None:
        info["match"] = store_size == info["embedder"]
    return info


def _telemetry() -> dict[str, Any]:
    from .._mem0 import quiet as choice

    loaded = sys.modules.get("mem0.memory.telemetry")
    if loaded is not None:
        enabled = bool(getattr(loaded, "MEM0_TELEMETRY", False))
    else:
        # mem0 2.2 reads the variable when imported, by this rule; importing
        # mem0 only to ask would cost status seconds.
        enabled = os.environ.get(choice.ENV, "True").lower() in ("true", "1", "yes")
    if choice.USER_CHOSE:
        source = f"MEM0_TELEMETRY={os.environ.get(choice.ENV)!r}, set by you"
    else:
        source = "turned off by agentscope-mem0; set MEM0_TELEMETRY=true to allow it"
    return {"enabled": enabled, "source": source}


def _outbox(settings: Settings, reachable: bool) -> dict[str, Any]:
    path = outbox_path(settings)
    if isinstance(path, PostgresPlace) and not reachable:
        # The table is in the store's database, which did not answer.
        return {"path": str(path), "exists": False, "unread": True, "pending": None}
    rows = read_rows(path)
    failed = [r for r in rows or () if r.status == "failed"]
    return {
        "path": str(path),
        "exists": rows is not None,
        "pending": sum(r.status == "pending" for r in rows or ()),
        "failed": len(failed),
        "failed_writes": [
            {
                "id": r.id,
                "user_id": r.user_id,
                "agent_id": r.agent_id,
                "attempts": r.attempts,
                "error": r.error,
                "queued_at": r.queued_at,
            }
            for r in failed
        ],
    }


def _tokens(settings: Settings) -> dict[str, Any] | None:
    """The token totals and where they are kept (``kept_in``): in PostgreSQL with
    mem0's history (a pgvector store with no ``history_db``: every replica's,
    added up), else beside the outbox."""
    from .._observe.usage import USAGE_FILENAME, USAGE_TABLE, read_postgres_usage, read_usage

    if settings.backend == "pgvector" and settings.history_db is None and settings.dsn:
        try:
            found = read_postgres_usage(settings.dsn, settings.collection)
        except ImportError:  # no psycopg: the backend's probe says so
            return None
        kept_in = f"PostgreSQL table {USAGE_TABLE}, every process on the store"
    else:
        found, kept_in = read_usage(settings.outbox), str(settings.outbox / USAGE_FILENAME)
    return {**found, "kept_in": kept_in} if found is not None else None


def gather_status(settings: Settings) -> dict[str, Any]:
    """Everything ``status`` reports, as one JSON-ready dict."""

    if settings.backend == "embedded":
        backend = _embedded_backend(settings)
    elif settings.backend == "hosted":
        backend = _hosted_backend(settings)
    else:
        backend = _server_backend(settings)
    report: dict[str, Any] = {
        "settings": settings.describe(),
        "sources": dict(settings.sources),
        "backend": backend,
        "vectors": _vectors(settings, backend.get("vector_size")),
        "telemetry": _telemetry(),
        "outbox": _outbox(settings, bool(backend["reachable"])),
        "tokens": _tokens(settings),
    }
    report["ok"] = bool(backend["reachable"]) and report["vectors"].get("match") is not False
    return report


# -- how it prints it -------------------------------------------------------------


def _print_status(out: Output, report: dict[str, Any]) -> None:
    settings, sources = report["settings"], report["sources"]
    out.line("Configuration")
    out.fields(
        [
            (_LABELS.get(key, key), f"{value}" + (f"  ({s})" if (s := sources.get(key)) else ""))
            for key, value in settings.items()
        ],
        indent=2,
    )

    backend = report["backend"]
    out.line("Backend")
    if backend["reachable"]:
        reachable = "yes"
    elif backend.get("locked"):
        reachable = "NO: the folder is locked by another process (see below)"
    else:
        reachable = f"NO: {backend.get('error', 'unknown')}"
    pairs = [("store", backend["store"]), ("reachable", reachable)]
    if "locked" in backend:
        holder = backend.get("lock_holder")
        lock = "free"
        if holder:
            who = LockHolder(holder["pid"], holder["command"]).describe()
            lock = f"LOCKED by {who}; stop that process or use another --folder"
        elif backend["locked"]:
            lock = "LOCKED by another process (holder unknown)"
        pairs.append(("folder lock", lock))
    for key in ("memories", "engine"):
        if backend.get(key) is not None:
            pairs.append((key, backend[key]))
    if backend.get("index"):
        pairs.append(("index", _index_line(backend)))
    if backend.get("note"):
        pairs.append(("note", backend["note"]))
    out.fields(pairs, indent=2)

    vectors = report["vectors"]
    out.line("Vectors")
    if vectors.get("note"):
        out.fields([("note", vectors["note"])], indent=2)
    else:
        embedder = (
            f"{vectors['embedder']} dimensions ({vectors.get('embedder_name')})"
            if vectors["embedder"] is not None
            else f"unavailable: {vectors.get('error')}"
        )
        store = vectors["store"]
        out.fields(
            [
                ("store", f"{store} dimensions" if store is not None else "unknown / empty"),
                ("embedder", embedder),
                ("check", {True: "match", False: "MISMATCH", None: "-"}[vectors["match"]]),
            ],
            indent=2,
        )

    telemetry = report["telemetry"]
    out.line(f"Telemetry: {'on' if telemetry['enabled'] else 'off'} ({telemetry['source']})")
    _print_tokens(out, report.get("tokens"))

    outbox = report["outbox"]
    out.line("Write outbox")
    if outbox.get("unread"):
        out.fields(
            [("table", f"{outbox['path']} (not read: the database is unreachable)")], indent=2
        )
        return
    if not outbox["exists"]:
        out.fields([("file", f"{outbox['path']} (none yet: no queued writes)")], indent=2)
        return
    hint = "  (agentscope-mem0 retry-failed requeues them)" if outbox["failed"] else ""
    out.fields(
        [
            ("file", outbox["path"]),
            ("pending", outbox["pending"]),
            ("failed", f"{outbox['failed']}{hint}"),
        ],
        indent=2,
    )
    for row in outbox["failed_writes"]:
        scope = row["user_id"] + (f"/{row['agent_id']}" if row["agent_id"] else "")
        out.line(
            f"    #{row['id']} {scope}  {short_date(row['queued_at'])}  "
            f"attempts {row['attempts']}  {row['error']}"
        )


def _print_tokens(out: Output, tokens: dict[str, Any] | None) -> None:
    """Model tokens spent on memory, per write and by kind (see ``TokenMeter``)."""
    if not tokens or not tokens["tokens_writes"]:
        out.line("Model tokens: none counted yet (counted from the first write)")
        return
    out.line(f"Model tokens since {short_date(tokens['since'])} ({tokens['kept_in']})")
    pairs = [
        (
            "per write",
            f"{tokens['tokens_in_per_write']:,.0f} in / {tokens['tokens_out_per_write']:,.0f} out"
            f"  ({tokens['tokens_writes']} writes)",
        )
    ]
    for kind, label in (("extraction", "extraction"), ("judge", "time judgement")):
        pairs.append(
            (
                label,
                f"{tokens[f'tokens_in_{kind}']:,} in / {tokens[f'tokens_out_{kind}']:,} out"
                f"  ({tokens[f'model_calls_{kind}']} calls)",
            )
        )
    if tokens["tokens_estimated_calls"]:
        pairs.append(
            ("estimated", f"{tokens['tokens_estimated_calls']} calls (the model reported no usage)")
        )
    out.fields(pairs, indent=2)


def _index_line(backend: dict[str, Any]) -> str:
    """``exact search (no HNSW): 1200 points, 1200 indexed vectors, 1 segment``."""
    kinds = {
        "exact": "exact search (no HNSW; `agentscope-mem0 optimize` builds it)",
        "hnsw": "HNSW (points added since the last optimize are searched exactly)",
    }
    text = kinds.get(backend["index"], str(backend["index"]))
    if backend.get("segments") is not None:
        text += (
            f": {backend.get('points', 0)} points, {backend.get('indexed_vectors', 0)} "
            f"indexed vectors, {backend['segments']} segment(s)"
        )
    return text


@click.command()
@store_command(reads=True)
def status(*, settings: Settings, out: Output) -> None:
    """Show the configuration in effect and whether the memory store is usable.

    Reports the backend and whether it is reachable, the folder lock's holder,
    vector sizes of store and embedder, telemetry, the model tokens memory
    spent per write, and the write outbox.
    Exits 3 when the backend is unreachable or locked, 2 when the embedder
    does not fit the store.
    """
    report = gather_status(settings)
    if out.as_json:
        out.json(report)
    else:
        _print_status(out, report)
    vectors = report["vectors"]
    if not report["backend"]["reachable"]:
        raise click.exceptions.Exit(UnreachableError.exit_code)
    if vectors.get("match") is False or vectors.get("error"):
        raise click.exceptions.Exit(UsageError.exit_code)
