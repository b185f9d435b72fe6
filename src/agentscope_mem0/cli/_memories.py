"""Commands on memories: list, search, add, forget, history."""

from __future__ import annotations

from typing import Any

import click

from .._exceptions import ConfigurationError
from .._memories.lifecycle import DUPLICATE_OF, SUPERSEDED_BY, SUPERSEDES, VALID_UNTIL, ids_of
from .._memories.validity import check_as_of
from .._scope import Scope
from ._common import (
    FiniteFloatRange,
    agent_option,
    check_memory_id,
    describe_scope,
    hosted_agent_note,
    no_memories,
    session,
    store_command,
    user_option,
    where,
)
from ._config import Settings
from ._exit_codes import CliError, NotFoundError, UsageError
from ._models import chat_model_from_spec
from ._output import Output, count, short_date
from ._records import MemoryRecord, split_metadata

__all__ = ["add", "forget", "history", "list_memories", "search"]


_ALL_HELP = "Include memories a newer one superseded or that repeat another (marked)."


def _marked(record: MemoryRecord) -> str:
    """The text, with ``(superseded <date> by <id>)`` or ``(duplicate of <id>)`` after it."""
    meta = record.metadata
    if meta.get(DUPLICATE_OF):
        return f"{record.text} (duplicate of {meta[DUPLICATE_OF]})"
    if meta.get(SUPERSEDED_BY):
        until = str(meta.get(VALID_UNTIL) or "")[:10]
        return f"{record.text} (superseded{f' {until}' if until else ''} by {meta[SUPERSEDED_BY]})"
    return record.text


def _marked_stored(stored: dict[str, Any]) -> str:
    """A new memory's text, with ``(duplicate of <id>)`` when it repeats a current one."""
    kept = (stored.get("metadata") or {}).get(DUPLICATE_OF)
    return f"{stored['text']} (duplicate of {kept})" if kept else str(stored["text"])


def _row(record: MemoryRecord) -> list[Any]:
    return [
        record.id,
        record.agent_id or "-",
        short_date(record.created_at),
        short_date(record.updated_at),
        _marked(record),
    ]


@click.command("list")
@user_option()
@agent_option()
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Show at most this many, newest first.",
)
@click.option("--all", "show_all", is_flag=True, help=_ALL_HELP)
@store_command(reads=True)
def list_memories(
    *, settings: Settings, out: Output, user: str, agent: str | None, limit: int, show_all: bool
) -> None:
    """List a user's memories, newest first: id, agent, dates, text."""
    scope = Scope(user, agent)
    with session(settings) as (store, run):
        records = [r for r in run(store.records(scope)) if show_all or not r.hidden]
    if not records:
        if out.as_json:
            out.json([])  # scripts get valid JSON; the exit code still says "none"
        raise no_memories(scope, settings)
    hosted_agent_note(out, store, scope)
    newest = sorted(records, key=lambda r: (r.date or "", r.id), reverse=True)[:limit]
    if out.as_json:
        out.json([r.to_json() for r in newest])
        return
    out.table(["ID", "AGENT", "CREATED", "UPDATED", "MEMORY"], [_row(r) for r in newest])
    total = count(len(records), "memory", "memories")
    shown = f"{len(newest)} of {total}" if len(newest) < len(records) else total
    out.note(f"{shown} of {describe_scope(scope)} in {where(settings)}")


@click.command()
@user_option()
@agent_option()
@click.argument("query")
@click.option(
    "--top-k",
    "-k",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="How many memories to return at most.",
)
@click.option(
    "--threshold",
    type=FiniteFloatRange(0.0, 1.0),
    default=None,
    help="Minimum similarity score (default: mem0's).",
)
@click.option("--all", "show_all", is_flag=True, help=_ALL_HELP)
@click.option(
    "--as-of",
    "as_of",
    metavar="DATE",
    default=None,
    help="What was current then (YYYY-MM-DD: at the end of that day, or an ISO 8601 time), "
    "superseded memories included where they still held.",
)
@store_command(reads=True)
def search(
    *,
    settings: Settings,
    out: Output,
    user: str,
    agent: str | None,
    query: str,
    top_k: int,
    threshold: float | None,
    show_all: bool = False,
    as_of: str | None = None,
) -> None:
    """Search a user's memories for QUERY, best first, with scores."""
    if not query.strip():
        raise UsageError("QUERY is empty")
    if as_of is not None and show_all:
        raise UsageError("--as-of and --all do not go together: --as-of shows what was current")
    try:
        moment = None if as_of is None else check_as_of(as_of)
    except ConfigurationError as exc:
        raise UsageError(f"--as-of: {exc}") from exc
    scope = Scope(user, agent)
    with session(settings, embeds=True) as (store, run):
        search = store.search(
            query, scope, top_k=top_k, threshold=threshold, show_all=show_all, as_of=moment
        )
        hits = run(search)
        if not hits and not run(store.records(scope)):
            if out.as_json:
                out.json([])  # scripts get valid JSON; the exit code still says "none"
            raise no_memories(scope, settings)
    hosted_agent_note(out, store, scope)
    if out.as_json:
        out.json([{**record.to_json(), "score": score} for record, score in hits])
        return
    if not hits:
        out.note(f"no memory of {describe_scope(scope)} matches {query!r}")
        return
    out.table(
        ["SCORE", "ID", "AGENT", "UPDATED", "MEMORY"],
        [
            [
                "-" if score is None else f"{score:.3f}",
                record.id,
                record.agent_id or "-",
                short_date(record.date),
                _marked(record),
            ]
            for record, score in hits
        ],
    )


@click.command()
@user_option()
@agent_option(writes=True)
@click.argument("text")
@click.option(
    "--raw",
    is_flag=True,
    help="Store TEXT verbatim as one memory (mem0 infer=False) instead of extracting facts.",
)
@store_command()
def add(
    *, settings: Settings, out: Output, user: str, agent: str | None, text: str, raw: bool
) -> None:
    """Add TEXT to a user's memories, through mem0's extraction or verbatim."""
    if not text.strip():
        raise UsageError("TEXT is empty")
    scope = Scope(user, agent)
    chat = None if raw else chat_model_from_spec(settings.chat_model)
    if chat is not None:
        out.note(f"extracting with {chat.description}")
    with session(settings, chat=chat, embeds=True) as (store, run):
        results = run(store.add(text, scope, infer=not raw))
    if not results:
        raise NotFoundError(
            "the extraction model found nothing worth remembering in TEXT, so nothing was "
            "stored; use --raw to store it verbatim"
        )
    # One name for a memory's text in every command's JSON: "text", as in
    # `list --json` and the export format (mem0 answers "memory").
    stored = []
    for result in results:
        rest = dict(result)
        text = rest.pop("memory", None)
        stored.append(
            {"id": rest.pop("id", None), "text": text, "event": rest.pop("event", "ADD"), **rest}
        )
    if out.as_json:
        shown = [
            {
                **{k: v for k, v in r.items() if k != "metadata"},
                **split_metadata(r.get("metadata") or {}),
            }
            for r in stored
        ]
        out.json(
            {
                "stored": shown,
                "extraction_model": chat.description if chat is not None else None,
            }
        )
        return
    out.table(["ID", "EVENT", "MEMORY"], [[r["id"], r["event"], _marked_stored(r)] for r in stored])
    out.note(f"stored {count(len(results), 'memory', 'memories')} for {describe_scope(scope)}")
    for r in stored:
        replaced = ids_of((r.get("metadata") or {}).get(SUPERSEDES))
        if replaced:
            # What the reads of this scope showed until now and no longer do.
            out.line(f"{r['id']} replaces (no longer current): {', '.join(replaced)}")


@click.command()
@click.argument("memory_id", required=False, callback=check_memory_id)
@user_option(required=False)
@agent_option()
@click.option("--all", "forget_all", is_flag=True, help="Forget every memory of --user.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--keep-history",
    is_flag=True,
    help="Keep mem0's change history and stored messages (they hold the forgotten text).",
)
@store_command(reads=True)
def forget(
    *,
    settings: Settings,
    out: Output,
    memory_id: str | None,
    user: str | None,
    agent: str | None,
    forget_all: bool,
    yes: bool,
    keep_history: bool,
) -> None:
    """Forget one memory by ID (and its repeats), or every memory of a user with
    --user U --all.

    Also removes the forgotten memories' change history and, with --all, the
    conversation messages mem0 kept for the scope, unless --keep-history.
    Then checks that nothing of it is left.
    """
    if memory_id is not None:
        if user or agent or forget_all:
            raise UsageError("give either a memory ID or --user U --all, not both")
        _forget_one(settings, out, memory_id, yes=yes, keep=keep_history)
        return
    if not user:
        raise UsageError("give a memory ID, or --user U --all to forget all of a user's memories")
    if not forget_all:
        raise UsageError(
            f"to forget every memory of user {user!r} add --all (or give one memory ID)"
        )
    _forget_scope(settings, out, Scope(user, agent), yes=yes, keep=keep_history)


def _confirmed(question: str, yes: bool, out: Output) -> bool:
    """Whether the user agreed (or gave ``--yes``); a no says nothing was forgotten."""
    if yes:
        return True
    try:
        answer = click.confirm(question, default=False, err=True)
    except click.exceptions.Abort as exc:  # end of input before an answer
        raise UsageError(
            "forget asks for confirmation and got no answer (no input); "
            "pass --yes to forget without asking"
        ) from exc
    if not answer:
        if out.as_json:
            out.json({"removed": 0, "aborted": True})
        else:
            out.note("aborted; nothing was forgotten")
    return answer


def _forget_one(settings: Settings, out: Output, memory_id: str, *, yes: bool, keep: bool) -> None:
    # Embeds: before what the memory replaced comes back, a search checks that no
    # newer memory states it (the embedder loads only then).
    with session(settings, embeds=True) as (store, run):
        record = run(store.get(memory_id))
        if record is None:
            raise NotFoundError(f"no memory with id {memory_id} in {where(settings)}")
        owner = f" of user {record.user_id!r}" if record.user_id else ""
        if not _confirmed(f"Forget memory {memory_id}{owner}: {record.text!r}?", yes, out):
            return
        purged, back, repeats = run(store.forget(record, keep_history=keep))
    report = {
        "removed": 1 + len(repeats),
        "remaining": 0,
        "ids": [memory_id, *(r.id for r in repeats)],
        "history_entries_removed": purged,
        "current_again": [{"id": r.id, "text": r.text} for r in back],
    }
    if out.as_json:
        out.json(report)
        return
    out.line(f"Forgot memory {memory_id}: {record.text}")
    for repeat in repeats:
        # The same fact said again: forgetting the fact forgets every telling of it.
        out.line(f"Forgot its repeat {repeat.id}: {repeat.text}")
    extra = f"; removed {count(purged, 'history entry', 'history entries')}" if not keep else ""
    gone = "it is gone" if not repeats else "they are gone"
    out.line(f"Verified: {gone}{extra}.")
    for other in back:
        # What it had replaced is true again as far as the store knows.
        out.line(f"Current again (replaced by the forgotten memory): {other.id}: {other.text}")


def _forget_scope(settings: Settings, out: Output, scope: Scope, *, yes: bool, keep: bool) -> None:
    with session(settings) as (store, run):
        records = run(store.records(scope))
        if not records:
            raise no_memories(scope, settings)
        which = (
            "the only memory"
            if len(records) == 1
            else f"all {count(len(records), 'memory', 'memories')}"
        )
        question = (
            f"Forget {which} of {describe_scope(scope)} in {where(settings)}? "
            "This cannot be undone."
        )
        if not _confirmed(question, yes, out):
            return
        history, messages, remaining = run(store.forget_all(scope, records, keep_history=keep))
    removed = len(records) - remaining
    report = {
        "removed": removed,
        "remaining": remaining,
        "ids": [r.id for r in records],
        "history_entries_removed": history,
        "messages_removed": messages,
    }
    if out.as_json:
        out.json(report)
    if remaining:
        raise CliError(
            f"removed {removed} memories of {describe_scope(scope)} but {remaining} remain; "
            "run the command again"
        )
    if out.as_json:
        return
    out.line(f"Forgot {count(removed, 'memory', 'memories')} of {describe_scope(scope)}.")
    extra = (
        f" Removed {count(history, 'history entry', 'history entries')} and "
        f"{count(messages, 'stored message')} too."
        if not keep
        else ""
    )
    out.line(f"Verified: none remain.{extra}")


@click.command()
@click.argument("memory_id", callback=check_memory_id)
@store_command(reads=True)
def history(*, settings: Settings, out: Output, memory_id: str) -> None:
    """Show mem0's change history of one memory (adds, updates, deletes) and the
    memories it superseded or extends, or that superseded or extend it."""
    with session(settings) as (store, run):
        current, entries = run(store.history(memory_id))
    if not entries and current is None:
        raise NotFoundError(f"no memory and no history with id {memory_id} in {where(settings)}")
    if out.as_json:
        out.json(entries)
        return
    if not entries:
        out.note(f"memory {memory_id} exists but mem0 kept no history of it")
        return
    out.table(
        ["WHEN", "EVENT", "BEFORE", "AFTER", "WHY"],
        [
            [
                short_date(e.get("updated_at") or e.get("created_at")),
                e.get("event"),
                e.get("old_memory"),
                e.get("new_memory"),
                e.get("reason") or "",
            ]
            for e in entries
        ],
    )


@click.command()
@click.argument("memory_id", callback=check_memory_id)
@store_command(reads=True)
def restore(*, settings: Settings, out: Output, memory_id: str) -> None:
    """Make a memory the judgement superseded or merged current again: a change
    or a repeat read wrongly ("not a change").

    The memory that hid it no longer lists it, and the memory's history shows
    the undoing and the reason that had been given (see `history`).
    """
    with session(settings) as (store, run):
        record = run(store.get(memory_id))
        if record is None:
            raise NotFoundError(f"no memory with id {memory_id} in {where(settings)}")
        restored = run(store.restore(memory_id))
    if restored is None:
        raise UsageError(
            f"memory {memory_id} is current (neither superseded nor merged): nothing to "
            "restore; `agentscope-mem0 history ID` shows its links"
        )
    report = {
        "id": memory_id,
        "was": restored.was,
        "by": restored.by,
        "reason": restored.reason,
    }
    if out.as_json:
        out.json(report)
        return
    how = "superseded by" if restored.was == "superseded" else "merged as a repeat into"
    out.line(f"Current again: {memory_id}: {record.text}")
    out.line(f"It was {how} {restored.by}" + (f" ({restored.reason})." if restored.reason else "."))
