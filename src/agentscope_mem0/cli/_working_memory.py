"""``agentscope-mem0 working``: show or clear a user's working memory.

Reads the working-memory store directly (no mem0, no model): the SQLite file
in the data folder for the embedded default and hosted mem0, the
``<collection>_working`` table for pgvector, the ``<collection>_working``
collection for a Qdrant server.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import click

from ._common import store_command, user_option
from ._exit_codes import NotFoundError
from ._working_store import open_working_store

if TYPE_CHECKING:
    from .._working.stores import WorkingRecord, WorkingStore
    from ._config import Settings
    from ._output import Output

__all__ = ["working"]


def _as_json(record: WorkingRecord, store: WorkingStore) -> dict[str, Any]:
    content: Any = record.content
    if record.kind == "json" and content:
        with contextlib.suppress(json.JSONDecodeError):
            content = json.loads(content)
    return {
        "user_id": record.user_id,
        "conversation": record.conversation or None,
        "kind": record.kind,
        "version": record.version,
        "updated_at": record.updated_at,
        "store": store.location,
        "content": content,
    }


@click.command("working")
@user_option()
@click.option(
    "--conversation",
    "-c",
    default=None,
    help="A conversation's working memory (the agent state's session_id); default: the user's own.",
)
@click.option("--clear", is_flag=True, help="Empty it (agents see it empty from their next turn).")
@store_command(reads=True)
def working(
    *,
    settings: Settings,
    out: Output,
    user: str,
    conversation: str | None,
    clear: bool,
) -> None:
    """Show (or --clear) a user's working memory, or one conversation's."""
    store = open_working_store(settings)
    key = conversation or ""
    what = f"user {user!r}" + (f", conversation {conversation!r}" if conversation else "")
    try:
        record = store.clear(user, key) if clear else store.load(user, key)
        others = store.conversations(user) if not conversation else []
    finally:
        store.close()
    if record is None:
        raise NotFoundError(
            f"no working memory for {what} in {store.location}; check the ids, "
            "the --folder or --config"
        )
    if out.as_json:
        data = _as_json(record, store)
        if not conversation:
            data["conversations"] = others
        out.json(data)
        return
    if clear:
        out.line(f"Cleared the working memory of {what} (now version {record.version}).")
        return
    out.fields(
        [
            ("working memory of", what),
            ("store", store.location),
            ("format", record.kind),
            ("version", f"{record.version}, updated {record.updated_at}"),
        ]
    )
    out.line()
    out.line(record.content if record.content.strip() else "(empty)")
    if others:
        out.line()
        out.note("Conversations with their own working memory: " + ", ".join(others))
