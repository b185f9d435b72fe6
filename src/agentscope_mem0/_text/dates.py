"""Reading and writing the times the package stores: ISO 8601 text in UTC."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime
from typing import Any

from .._exceptions import ConfigurationError

__all__ = ["check_said_at", "iso", "parse_time"]


def parse_time(value: Any) -> datetime | None:
    """``value`` (a datetime, a date, or ISO 8601 text) as an aware datetime, else ``None``.

    Naive values are read as local time, as AgentScope stamps messages; a
    date is that day at midnight UTC.
    """
    if isinstance(value, datetime):
        parsed: datetime | None = value
    elif isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)  # that day, anywhere
    elif isinstance(value, str):
        parsed = _read_iso(value)
    else:
        return None
    if parsed is None or parsed.tzinfo is UTC:
        return parsed
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.astimezone().astimezone(UTC)


@functools.lru_cache(maxsize=4096)
def _read_iso(text: str) -> datetime | None:
    """ISO 8601 ``text`` as a datetime, aware ones in UTC, naive ones as written
    (the local zone is applied by the caller: it may change). A note reads the
    same stored times turn after turn, hence the cache."""
    text = text.strip().replace(" ", "T", 1)
    if not text:
        return None
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed


def iso(moment: datetime) -> str:
    """``moment`` as ISO 8601 text in UTC."""
    return moment.astimezone(UTC).isoformat()


def check_said_at(value: Any) -> datetime:
    """A write's ``said_at`` as an aware UTC datetime.

    Raises:
        ConfigurationError: ``value`` is neither a datetime, a date nor ISO 8601 text.
    """
    parsed = parse_time(value)
    if parsed is None:
        raise ConfigurationError(
            f"said_at must be a datetime, a date or ISO 8601 text such as "
            f"'2024-05-08T10:00:00+00:00', got {value!r}"
        )
    return parsed
