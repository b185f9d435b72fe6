"""``export`` and ``import``: memories in and out as JSONL (see :mod:`._records`).

Import is idempotent and resumable by construction: every memory keeps its
id, each batch stores only the ids the store does not hold yet, and a batch
is written before the next one starts. Running the same import again, after
it finished or after it was interrupted, stores only what is missing.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click

from .._exceptions import BackendError
from .._scope import Scope
from ._common import agent_option, describe_scope, no_memories, session, store_command, user_option
from ._config import Settings
from ._exit_codes import CliError, Interrupted, UsageError, failure
from ._output import Output, count
from ._records import FormatError, MemoryRecord, parse_line

__all__ = ["export", "import_memories"]

_MAX_SHOWN_ERRORS = 10


@contextlib.contextmanager
def _destination(path: str) -> Iterator[IO[str]]:
    """Stdout for ``-``; a path that exists and is not a regular file (a device,
    a FIFO, a symlink) opened and written through; otherwise a temporary file
    renamed into place on success."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(path)
    try:
        mode: int | None = os.lstat(target).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        # Renaming over it would turn /dev/stdout, a FIFO or a device node into a
        # regular file, and a symlink into a copy: write into what it is instead.
        with open(target, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        return
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@click.command()
@user_option(required=False)
@agent_option()
@click.option("--all-users", is_flag=True, help="Export every memory in the store.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    show_default=True,
    help=(
        "File to write (a regular file is written whole or not at all; a device, FIFO "
        "or symlink is written through); '-' is stdout."
    ),
)
@store_command(json_option=False, reads=True)
def export(
    *,
    settings: Settings,
    out: Output,
    user: str | None,
    agent: str | None,
    all_users: bool,
    output: str,
) -> None:
    """Write memories as JSONL: one memory per line with id, scope, text, dates, metadata.

    Lines are ordered by creation date, then id, so exporting the same
    memories twice gives the same file.
    """
    if all_users == bool(user):
        raise UsageError("give --user U (optionally with --agent A) or --all-users")
    if agent and not user:
        raise UsageError("--agent needs --user")
    scope = Scope(user, agent) if user else None
    with session(settings) as (store, run):
        records = run(store.records(scope))
    if scope is not None and not records:
        raise no_memories(scope, settings)
    with _destination(output) as stream:
        for record in records:
            stream.write(record.to_line() + "\n")
    whose = describe_scope(scope) if scope is not None else "all users"
    out.note(f"exported {count(len(records), 'memory', 'memories')} of {whose}")


def _read_records(stream: IO[str]) -> list[MemoryRecord]:
    records: list[MemoryRecord] = []
    errors: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            record = parse_line(line, number)
        except FormatError as exc:
            errors.append(str(exc))
            continue
        if record.id in first_line:
            errors.append(
                f"line {number}: id {record.id} already appears on line {first_line[record.id]}"
            )
            continue
        first_line[record.id] = number
        records.append(record)
    if errors:
        shown = "\n  ".join(errors[:_MAX_SHOWN_ERRORS])
        more = len(errors) - _MAX_SHOWN_ERRORS
        tail = f"\n  ... and {more} more" if more > 0 else ""
        raise UsageError(
            f"the file is not in the export format; nothing was imported:\n  {shown}{tail}"
        )
    return records


@click.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=100,
    show_default=True,
    help="Memories embedded and written per step.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr (default: when stderr is a terminal).",
)
@store_command()
def import_memories(
    *, settings: Settings, out: Output, file: IO[str], batch_size: int, progress: bool | None
) -> None:
    """Import memories from a JSONL FILE written by `export` ('-' reads stdin).

    Memories keep their ids, scopes, text, dates and metadata; the text is
    embedded again by this store's embedding model. Ids the store already
    holds are skipped, never overwritten, so running an import again (also
    after an interruption) stores only what is missing.
    """
    records = _read_records(file)
    if not records:
        raise UsageError("the file holds no memories")
    if progress is None:
        progress = sys.stderr.isatty()
    stored = present = 0
    with session(settings, embeds=True) as (store, run), open(os.devnull, "w") as devnull:
        bar_file = sys.stderr if progress else devnull
        with click.progressbar(
            length=len(records), label="Importing", file=bar_file, show_pos=True
        ) as bar:
            for start in range(0, len(records), batch_size):
                batch = records[start : start + batch_size]
                try:
                    new = run(store.import_batch(batch))
                except (BackendError, KeyboardInterrupt) as exc:
                    raise _interrupted(exc, stored, present, len(records)) from exc
                stored += new
                present += len(batch) - new
                bar.update(len(batch))
    report = {"read": len(records), "stored": stored, "already_present": present}
    if out.as_json:
        out.json(report)
        return
    out.note(
        f"imported {count(len(records), 'memory', 'memories')}: {stored} stored, "
        f"{present} already present"
    )


def _interrupted(exc: BaseException, stored: int, present: int, total: int) -> CliError:
    done = f"{stored} stored and {present} already present of {total} before this"
    resume = "run the same command again to resume: stored memories are skipped"
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted(f"interrupted; {done}; {resume}")
    return failure(f"{exc}; {done}; {resume}", exc)
