"""``status`` (is everything in order?) and ``retry-failed`` (requeue failed writes)."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from typing import Any

import click

from .._exceptions import ConfigurationError, StoreLockedError
from .._outbox import OUTBOX_FILENAME, Outbox, OutboxRow, new_owner_id
from ._common import session, store_command
from ._config import Settings
from ._errors import CliError, ExitCode, is_unreachable
from ._lock import LockHolder, lock_holder
from ._models import chat_model_from_spec, embedding_model_from_spec
from ._output import Output, short_date
from ._store import pg_vector_size

__all__ = ["gather_status", "retry_failed", "status"]

_PROBE_TIMEOUT = 5


def _embedded_backend(settings: Settings) -> dict[str, Any]:
    from ..local import close_shared_clients, shared_qdrant_client
    from ..local._folder import COLLECTION

    storage = settings.folder / "qdrant"
    info: dict[str, Any] = {
        "store": f"local Qdrant in {storage}",
        "collection": COLLECTION,
        "reachable": True,
        "locked": False,
        "lock_holder": None,
        "memories": None,
        "vector_size": None,
    }
    if not storage.exists():
        info["memories"] = 0
        info["note"] = "nothing stored yet"
        return info
    holder = lock_holder(settings.folder)
    if holder is not None and not holder.is_self:
        info.update(
            reachable=False,
            locked=True,
            lock_holder={"pid": holder.pid, "command": holder.command},
            error=f"the data folder is locked by {holder.describe()}",
        )
        return info
    try:
        client = shared_qdrant_client(settings.folder)
    except StoreLockedError as exc:
        info.update(reachable=False, locked=True, error=str(exc))
        return info
    try:
        _read_qdrant(client, COLLECTION, info)
    finally:
        if holder is None or not holder.is_self:  # leave this process's own client open
            close_shared_clients(settings.folder)
    return info


def _read_qdrant(client: Any, collection: str, info: dict[str, Any]) -> None:
    from qdrant_client.models import VectorParams

    if not client.collection_exists(collection):
        info["memories"] = 0
        info["note"] = f"collection {collection!r} not created yet"
        return
    vectors = client.get_collection(collection).config.params.vectors
    info["vector_size"] = vectors.size if isinstance(vectors, VectorParams) else None
    info["memories"] = client.count(collection, exact=True).count


def _qdrant_backend(settings: Settings) -> dict[str, Any]:
    from qdrant_client import QdrantClient

    info: dict[str, Any] = {
        "store": f"Qdrant server at {settings.url}",
        "collection": settings.collection,
        "reachable": False,
        "memories": None,
        "vector_size": None,
    }
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

    info: dict[str, Any] = {
        "store": f"PostgreSQL at {mask_url(settings.dsn or '')}",
        "collection": settings.collection,
        "reachable": False,
        "memories": None,
        "vector_size": None,
    }
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        info["error"] = "psycopg is not installed: pip install 'agentscope-mem0[pgvector]'"
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
    from .. import _telemetry as choice

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
    path = settings.outbox_dir / OUTBOX_FILENAME
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
    }
    report["ok"] = bool(backend["reachable"]) and report["vectors"].get("match") is not False
    return report


def _exit_code(report: dict[str, Any]) -> ExitCode:
    if not report["backend"]["reachable"]:
        return ExitCode.UNAVAILABLE
    vectors = report["vectors"]
    if vectors.get("match") is False or vectors.get("error"):
        return ExitCode.USAGE
    return ExitCode.OK


def _print_status(out: Output, report: dict[str, Any]) -> None:
    settings, sources = report["settings"], report["sources"]
    out.line("Configuration")
    labels = {
        "backend": "backend",
        "folder": "data folder",
        "config_file": "config file",
        "collection": "collection",
        "dsn": "dsn",
        "url": "url",
        "api_key": "api key",
        "history_db": "history db",
        "embedding_model": "embedding model",
        "chat_model": "chat model",
        "outbox_dir": "outbox folder",
    }
    pairs = []
    for key, label in labels.items():
        if key in settings:
            source = sources.get(key)
            pairs.append((label, f"{settings[key]}" + (f"  ({source})" if source else "")))
    out.fields(pairs, indent=2)

    backend = report["backend"]
    out.line("Backend")
    lock = "free"
    if backend.get("locked"):
        holder = backend.get("lock_holder")
        lock = (
            f"LOCKED by {LockHolder(holder['pid'], holder['command']).describe()}; stop that "
            "process or use another --folder"
            if holder
            else "LOCKED by another process (holder unknown)"
        )
    if backend["reachable"]:
        reachable = "yes"
    elif backend.get("locked"):
        reachable = "NO: the folder is locked by another process (see below)"
    else:
        reachable = f"NO: {backend.get('error', 'unknown')}"
    pairs = [("store", backend["store"]), ("reachable", reachable)]
    if "locked" in backend:
        pairs.append(("folder lock", lock))
    if backend.get("memories") is not None:
        pairs.append(("memories", backend["memories"]))
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
        verdict = {True: "match", False: "MISMATCH", None: "-"}[vectors["match"]]
        out.fields(
            [
                ("store", f"{store} dimensions" if store is not None else "unknown / empty"),
                ("embedder", embedder),
                ("check", verdict),
            ],
            indent=2,
        )

    telemetry = report["telemetry"]
    out.line(f"Telemetry: {'on' if telemetry['enabled'] else 'off'} ({telemetry['source']})")

    outbox = report["outbox"]
    out.line("Write outbox")
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


@click.command()
@store_command()
def status(*, settings: Settings, out: Output) -> None:
    """Show the configuration in effect and whether the memory store is usable.

    Reports the backend and whether it is reachable, the folder lock's holder,
    vector sizes of store and embedder, telemetry, and the write outbox.
    Exits 3 when the backend is unreachable or locked, 2 when the embedder
    does not fit the store.
    """
    report = gather_status(settings)
    if out.as_json:
        out.json(report)
    else:
        _print_status(out, report)
    code = _exit_code(report)
    if code:
        raise click.exceptions.Exit(int(code))


def _failed_keys(outbox: Outbox, user: str | None) -> set[str]:
    return {r.key for r in outbox.failed() if user is None or r.user_id == user}


@click.command("retry-failed")
@click.option("--user", "-u", default=None, help="Only this user's failed writes.")
@click.option(
    "--send",
    is_flag=True,
    help="Send them to mem0 now, with this command's extraction model, instead of "
    "leaving them for the application's next writer.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    help="Seconds --send waits for the writes.",
)
@store_command()
def retry_failed(
    *, settings: Settings, out: Output, user: str | None, send: bool, timeout: float
) -> None:
    """Requeue the writes the outbox kept as failed.

    Without --send they become pending for the next writer on this outbox
    (a running application picks them up, or the next one to start). With
    --send this command stores them now and reports what happened.
    """
    path = settings.outbox_dir / OUTBOX_FILENAME
    if not path.exists():
        _report_nothing(out, path)
        return
    outbox = Outbox(path)
    try:
        before = _failed_keys(outbox, user)
        if not before:
            _report_nothing(out, path)
            return
        if not send:
            owner = new_owner_id()
            rows = outbox.requeue_failed(owner=owner, lease=0.0, user_id=user)
            # Unclaimed at once: any writer may take them.
            outbox.release(owner=owner)
            if out.as_json:
                out.json({"requeued": len(rows), "sent": False})
            else:
                out.line(
                    f"Requeued {len(rows)} failed writes in {path}; the next writer on this "
                    "outbox sends them (or run again with --send)."
                )
            return
        report: dict[str, Any] = _send(settings, user, timeout, before)
        report["outbox"] = outbox.counts()
    finally:
        outbox.close()
    if out.as_json:
        out.json(report)
    else:
        out.line(
            f"Sent {report['requeued']} failed writes: {report['stored']} stored, "
            f"{report['failed_again']} failed again, {report['still_pending']} still pending."
        )
    if report["failed_again"] or report["still_pending"]:
        raise CliError("some writes were not stored; see `agentscope-mem0 status`", ExitCode.FAILED)


def _statuses(path: Any, keys: set[str]) -> dict[str, str]:
    """The status of each of ``keys`` still in the outbox (stored ones are gone)."""
    # Read-only look at the outbox table (see _outbox's schema); Outbox has no
    # public listing of pending rows.
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        rows = connection.execute("SELECT key, status FROM writes").fetchall()
    finally:
        connection.close()
    return {key: state for key, state in rows if key in keys}


def _report_nothing(out: Output, path: Any) -> None:
    if out.as_json:
        out.json({"requeued": 0, "sent": False})
    else:
        out.line(f"No failed writes in {path}.")


def _send(settings: Settings, user: str | None, timeout: float, keys: set[str]) -> dict[str, Any]:
    from .._backend import Mem0Backend
    from .._writer import WriteQueue

    chat = chat_model_from_spec(settings.chat_model)
    click.echo(f"extracting with {chat.description}", err=True)

    async def work(memory: Any) -> tuple[int, bool]:
        queue = WriteQueue(Mem0Backend(memory), outbox_dir=settings.outbox_dir)
        try:
            count = await queue.retry_failed(user)
            drained = await queue.flush(timeout)
        finally:
            await queue.aclose(timeout=1.0)
        return count, drained

    with session(settings, chat=chat) as s:
        try:
            count, _ = s.run(work(s.store.memory))
        except Exception as exc:
            code = ExitCode.UNAVAILABLE if is_unreachable(exc) else ExitCode.FAILED
            raise CliError(f"sending the writes failed: {exc}", code) from exc
    left = _statuses(settings.outbox_dir / OUTBOX_FILENAME, keys)
    failed_again = sum(1 for state in left.values() if state == "failed")
    still_pending = len(left) - failed_again
    return {
        "requeued": count,
        "sent": True,
        "stored": count - failed_again - still_pending,
        "failed_again": failed_again,
        "still_pending": still_pending,
    }
