"""``retry-failed``: requeue (or send now) the writes the outbox kept as failed."""

from __future__ import annotations

import sqlite3
from typing import Any

import click

from .._write.outbox import OUTBOX_FILENAME, Outbox, new_owner_id
from ._common import session, store_command
from ._config import Settings
from ._errors import CliError, failure, is_unreachable
from ._models import chat_model_from_spec
from ._output import Output

__all__ = ["retry_failed"]


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
    path = settings.outbox / OUTBOX_FILENAME
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
        raise CliError("some writes were not stored; see `agentscope-mem0 status`")


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
    from .._mem0.backend import Mem0Backend
    from .._write.queue import WriteQueue

    chat = chat_model_from_spec(settings.chat_model)
    click.echo(f"extracting with {chat.description}", err=True)

    async def work(memory: Any) -> int:
        queue = WriteQueue(Mem0Backend(memory), outbox_dir=settings.outbox)
        try:
            count = await queue.retry_failed(user)
            await queue.flush(timeout)  # what is not stored by then is counted below
        finally:
            await queue.aclose(timeout=1.0)
        return count

    with session(settings, chat=chat) as s:
        try:
            count = s.run(work(s.store.memory))
        except Exception as exc:
            raise failure(
                f"sending the writes failed: {exc}", unreachable=is_unreachable(exc)
            ) from exc
    left = _statuses(settings.outbox / OUTBOX_FILENAME, keys)
    failed_again = sum(1 for state in left.values() if state == "failed")
    still_pending = len(left) - failed_again
    return {
        "requeued": count,
        "sent": True,
        "stored": count - failed_again - still_pending,
        "failed_again": failed_again,
        "still_pending": still_pending,
    }
