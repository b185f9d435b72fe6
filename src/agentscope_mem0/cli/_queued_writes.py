"""The write outbox as the commands and the inspector see it, and ``retry-failed``,
which requeues (or sends now) the writes it kept as failed.

Its rows are read from the file read-only (:func:`read_rows`): looking never
changes the outbox a running application writes to. A pgvector store keeps
its writes in a table of its database (:class:`PostgresPlace`), read there.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click

from .._postgres.connection import mask_url
from .._write.outbox import OUTBOX_FILENAME, Outbox, new_owner_id
from .._write.outbox_postgres import PostgresOutbox, pgvector_outbox
from ._common import FiniteFloatRange, session, store_command
from ._config import Settings
from ._exit_codes import CliError, failure
from ._models import chat_model_from_spec
from ._output import Output

if TYPE_CHECKING:
    from ._mem0_store import MemoryStore

__all__ = [
    "PostgresPlace",
    "WriteRow",
    "outbox_path",
    "read_rows",
    "requeue_failed",
    "retry_failed",
]


@dataclass(frozen=True)
class WriteRow:
    """One queued write, as the outbox holds it."""

    id: int
    key: str
    user_id: str
    agent_id: str | None
    status: str
    """``pending`` or ``failed``."""
    attempts: int
    error: str | None
    queued_at: str
    """ISO 8601, UTC."""
    messages: list[Any]


@dataclass(frozen=True)
class PostgresPlace:
    """The outbox table beside a pgvector store (where its middleware puts it)."""

    url: str
    table: str

    def exists(self) -> bool:
        """Whether to look (the table may not be there yet: then there are no rows)."""
        return True

    def __str__(self) -> str:
        return f"{mask_url(self.url)} (table {self.table})"


def outbox_path(settings: Settings) -> Path | PostgresPlace:
    """The outbox file of the store the settings name (for pgvector, its table)."""
    if settings.backend == "pgvector" and settings.sources.get("outbox") == "next to the store":
        fields = settings.server_fields(dims=8, history_db_path=None)["vector_store"]
        place = pgvector_outbox(SimpleNamespace(vector_store=SimpleNamespace(**fields)))
        if place is not None:
            return PostgresPlace(*place)
    return settings.outbox / OUTBOX_FILENAME


def _postgres_rows(place: PostgresPlace) -> list[WriteRow] | None:
    import psycopg

    with psycopg.connect(place.url, connect_timeout=10) as conn:
        found = conn.execute("SELECT to_regclass(%s)", (place.table,)).fetchone()
        if found is None or found[0] is None:
            return None
        rows = conn.execute(
            "SELECT id, key, user_id, agent_id, status, attempts, error, created_at, messages "
            f"FROM {place.table} ORDER BY id"  # a checked identifier (pgvector_outbox)
        ).fetchall()
    return _write_rows(rows)


def read_rows(path: Path | PostgresPlace) -> list[WriteRow] | None:
    """Every row of the outbox, oldest first; ``None`` when there is none."""
    if isinstance(path, PostgresPlace):
        return _postgres_rows(path)
    if not path.exists():
        return None
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        rows = connection.execute(
            "SELECT id, key, user_id, agent_id, status, attempts, error, created_at, messages "
            "FROM writes ORDER BY id"
        ).fetchall()
    finally:
        connection.close()
    return _write_rows(rows)


def _write_rows(rows: list[Any]) -> list[WriteRow]:
    return [
        WriteRow(
            id=row_id,
            key=key,
            user_id=user_id,
            agent_id=agent_id,
            status=status,
            attempts=attempts,
            error=error,
            queued_at=datetime.fromtimestamp(created_at, UTC).isoformat(timespec="seconds"),
            messages=json.loads(messages or "[]"),
        )
        for row_id, key, user_id, agent_id, status, attempts, error, created_at, messages in rows
    ]


def requeue_failed(path: Path | PostgresPlace, user: str | None) -> int:
    """Make the failed writes (of ``user``, or all) pending again, unclaimed, so
    that any writer on this outbox takes them; returns how many."""
    outbox = (
        PostgresOutbox(path.url, table=path.table)
        if isinstance(path, PostgresPlace)
        else Outbox(path)
    )
    try:
        owner = new_owner_id()
        rows = outbox.requeue_failed(owner=owner, lease=0.0, user_id=user)
        outbox.release(owner=owner)
    finally:
        outbox.close()
    return len(rows)


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
    type=FiniteFloatRange(min=0.1),
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
    path = outbox_path(settings)
    failed = {
        r.key for r in read_rows(path) or () if r.status == "failed" and user in (None, r.user_id)
    }
    if not failed:
        if out.as_json:
            out.json({"requeued": 0, "sent": False})
        else:
            out.line(f"No failed writes in {path}.")
        return
    if not send:
        requeued = requeue_failed(path, user)
        if out.as_json:
            out.json({"requeued": requeued, "sent": False})
        else:
            out.line(
                f"Requeued {requeued} failed writes in {path}; the next writer on this "
                "outbox sends them (or run again with --send)."
            )
        return
    requeued = _send(settings, user, timeout)
    rows = read_rows(path) or []
    left = [r.status for r in rows if r.key in failed]  # a stored write leaves the outbox
    report = {
        "requeued": requeued,
        "sent": True,
        "stored": requeued - len(left),
        "failed_again": left.count("failed"),
        "still_pending": left.count("pending"),
        "outbox": {s: sum(r.status == s for r in rows) for s in ("pending", "failed")},
    }
    if out.as_json:
        out.json(report)
    else:
        out.line(
            f"Sent {requeued} failed writes: {report['stored']} stored, "
            f"{report['failed_again']} failed again, {report['still_pending']} still pending."
        )
    if left:
        raise CliError("some writes were not stored; see `agentscope-mem0 status`")


def _send(settings: Settings, user: str | None, timeout: float) -> int:
    """Store the failed writes now, with this command's model; returns how many were sent."""
    from .._write.queue import WriteQueue

    chat = chat_model_from_spec(settings.chat_model)
    click.echo(f"extracting with {chat.description}", err=True)

    async def work(store: MemoryStore) -> int:
        await store.ready()  # mem0 and the embedder, built off the loop
        # None: beside a pgvector store, the queue finds its table as the middleware does.
        place = None if isinstance(outbox_path(settings), PostgresPlace) else settings.outbox
        queue = WriteQueue(store.backend, outbox_dir=place)
        try:
            count = await queue.retry_failed(user)
            await queue.flush(timeout)  # what is not stored by then is counted after
        finally:
            await queue.aclose(timeout=1.0)
        return count

    with session(settings, chat=chat, embeds=True) as (store, run):
        try:
            return run(work(store))
        except Exception as exc:
            raise failure(f"sending the writes failed: {exc}", exc) from exc
