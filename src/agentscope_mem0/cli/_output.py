"""How commands print: plain tables for people, one JSON document for scripts.

Results go to stdout; notes, progress and errors go to stderr, so that
``--json`` output and ``export`` files stay clean.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click

__all__ = ["Output", "count", "short_date"]


def short_date(value: str | None) -> str:
    """``2025-06-01 08:00Z`` from an ISO 8601 date, or ``-``."""
    if not value:
        return "-"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC)
        return parsed.strftime("%Y-%m-%d %H:%MZ")
    return parsed.strftime("%Y-%m-%d %H:%M")


def count(number: int, singular: str, plural: str | None = None) -> str:
    """``1 memory``, ``2 memories``."""
    word = singular if number == 1 else (plural or f"{singular}s")
    return f"{number} {word}"


def _one_line(value: Any) -> str:
    text = "-" if value is None or value == "" else str(value)
    return " ".join(text.split())


class Output:
    """Where a command's results and notes go.

    Args:
        as_json: Print results as JSON instead of tables.
    """

    def __init__(self, *, as_json: bool = False) -> None:
        self.as_json = as_json

    def json(self, data: Any) -> None:
        """Print ``data`` as one indented JSON document."""
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))

    def line(self, text: str = "") -> None:
        """Print a result line (stdout)."""
        click.echo(text)

    def note(self, text: str) -> None:
        """Print a remark for people (stderr)."""
        click.echo(text, err=True)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Print ``rows`` under ``headers``; the last column takes what width is left.

        On a terminal the last column is cut to fit; piped output is never cut.
        """
        cells = [[_one_line(c) for c in row] for row in rows]
        widths = [len(h) for h in headers]
        for row in cells:
            for i, cell in enumerate(row[:-1]):
                widths[i] = max(widths[i], len(cell))
        room: int | None = None
        if sys.stdout.isatty():
            used = sum(widths[:-1]) + 2 * (len(headers) - 1)
            room = max(shutil.get_terminal_size().columns - used, 20)

        def render(row: Sequence[str]) -> str:
            last = row[-1]
            if room is not None and len(last) > room:
                last = last[: room - 1] + "…"
            head = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1]))
            return f"{head}  {last}".rstrip() if head else last

        click.echo(render(list(headers)))
        for row in cells:
            click.echo(render(row))

    def fields(self, pairs: Sequence[tuple[str, Any]], *, indent: int = 0) -> None:
        """Print ``label: value`` lines with aligned values."""
        width = max((len(label) for label, _ in pairs), default=0)
        for label, value in pairs:
            click.echo(f"{' ' * indent}{(label + ':').ljust(width + 1)} {value}")
