"""Memories as the commands see them: the export format, and the timeline's
links between memories.

The export format is one memory per line of JSON (JSONL): its id (a canonical
UUID), text, scope (``user_id``, ``agent_id``, ``run_id``), who said it
(``actor_id``, ``role``, ``attributed_to``), dates, mem0's ``hash``, and every
the user's own metadata under ``metadata`` and this package's fields (the
timeline, the write's marks) under ``agentscope_mem0``, keys in that order,
nulls left out; docs/cli.md ("The export format") specifies it, what import
requires and what it derives. Both objects are stored as one mem0 metadata, as
the middleware stores them; import also takes a line of the former shape,
with the package's fields inside ``metadata``. Vectors are not exported: the
importing store embeds the text with its own embedding model, so memories can
move between embedders.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from .._exceptions import ConfigurationError
from .._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATE_REASON,
    DUPLICATES,
    EVENT_DATE,
    EXTENDS,
    RESTORED,
    SAID_AT,
    SUPERSEDED_BY,
    SUPERSEDED_REASON,
    SUPERSEDES,
    VALID_FROM,
    VALID_UNTIL,
    ids_of,
)
from .._scope import check_id
from .._text.dates import parse_time
from .._write.delivery import METADATA_KEY as WRITE_KEY
from .._write.judge_pairs import FACT_ANSWER, FACT_QUESTION

__all__ = [
    "CORE_PAYLOAD_KEYS",
    "PACKAGE_FIELDS",
    "PACKAGE_KEY",
    "FormatError",
    "MemoryRecord",
    "parse_line",
    "split_metadata",
    "timeline_links",
]

# Fields mem0 2.2 keeps next to the user's metadata in a memory's payload.
_SCOPE_KEYS = ("user_id", "agent_id", "run_id")
_OPTIONAL_KEYS = ("actor_id", "role", "attributed_to")
_DATE_KEYS = ("created_at", "updated_at", "expiration_date")
CORE_PAYLOAD_KEYS = frozenset(
    {"data", "hash", "id", "text_lemmatized", *_SCOPE_KEYS, *_OPTIONAL_KEYS, *_DATE_KEYS}
)
"""Payload fields that are not user metadata."""

PACKAGE_KEY = "agentscope_mem0"
"""The key of the output's object holding this package's own metadata fields."""
PACKAGE_FIELDS = frozenset(
    {
        SAID_AT,
        VALID_FROM,
        VALID_UNTIL,
        EVENT_DATE,
        SUPERSEDED_BY,
        SUPERSEDES,
        SUPERSEDED_REASON,
        EXTENDS,
        DUPLICATE_OF,
        DUPLICATES,
        DUPLICATE_REASON,
        RESTORED,
        FACT_QUESTION,
        FACT_ANSWER,
        WRITE_KEY,
    }
)
"""The metadata fields this package writes (stored in mem0's metadata beside
the user's own); the output shows them under :data:`PACKAGE_KEY`."""

# Derives ids for imported lines without one; fixed forever, or re-imports duplicate.
_ID_NAMESPACE = uuid.UUID("6f0f9a1e-3c1b-4b7e-9a59-1d3e8f2b7c40")


# How deep metadata may nest: far beyond real metadata, well within what the
# stores' payload conversions and this module's recursive helpers can take.
MAX_METADATA_DEPTH = 32


class FormatError(ValueError):
    """An import line that does not follow the format."""


def _value_problem(data: Any) -> str | None:
    """Why a parsed line's values cannot be stored, or ``None``: a string (key or
    value) that is not Unicode text (a lone surrogate from a ``\\ud800`` escape
    cannot be encoded), or metadata nested too deep. Iterative: the depth is
    unbounded until checked."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH + 1:  # the line's object is level 1
            return f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep; flatten it"
        if isinstance(value, dict):
            stack.extend((key, depth) for key in value)
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (
                    f"{value[max(0, exc.start - 20) : exc.end + 20]!r} holds a lone "
                    f"surrogate ({value[exc.start]!r}), which is not text; fix or drop it"
                )
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _sorted_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _sorted_deep(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted_deep(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True)
class MemoryRecord:
    """One memory as the export format holds it."""

    id: str
    text: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    actor_id: str | None = None
    role: str | None = None
    attributed_to: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    expiration_date: str | None = None
    hash: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def date(self) -> str | None:
        """When the memory was last true: updated, else created."""
        return self.updated_at or self.created_at

    @property
    def hidden(self) -> bool:
        """Whether a newer memory replaced this one, or it repeats a memory kept
        instead: reads leave it out unless asked for everything."""
        return bool(self.metadata.get(SUPERSEDED_BY) or self.metadata.get(DUPLICATE_OF))

    @classmethod
    def from_payload(cls, memory_id: Any, payload: dict[str, Any] | None) -> MemoryRecord:
        """A record from a vector-store row (OSS mem0)."""
        payload = payload or {}
        metadata = {k: v for k, v in payload.items() if k not in CORE_PAYLOAD_KEYS}
        return cls._of(str(memory_id), payload, payload.get("data"), metadata)

    @classmethod
    def from_result(cls, item: dict[str, Any]) -> MemoryRecord:
        """A record from a mem0 ``get``/``get_all``/``search`` result entry."""
        metadata = item.get("metadata")
        text = item.get("memory") or item.get("text") or item.get("data")
        return cls._of(str(item.get("id")), item, text, metadata)

    @classmethod
    def _of(cls, memory_id: str, fields: dict[str, Any], text: Any, metadata: Any) -> MemoryRecord:
        known = {
            key: _text(fields.get(key)) for key in (*_SCOPE_KEYS, *_OPTIONAL_KEYS, *_DATE_KEYS)
        }
        return cls(
            id=memory_id,
            text=str(text or ""),
            hash=_text(fields.get("hash")),
            metadata=_sorted_deep(metadata) if isinstance(metadata, dict) else {},
            **known,
        )

    def to_payload(self, *, lemmatized: str) -> dict[str, Any]:
        """The vector-store payload mem0 would hold for this memory."""
        payload: dict[str, Any] = dict(self.metadata)
        for key in (*_SCOPE_KEYS, *_OPTIONAL_KEYS, *_DATE_KEYS):
            value = getattr(self, key)
            if value is not None:
                payload[key] = value
        payload["data"] = self.text
        payload["hash"] = self.hash or hashlib.md5(self.text.encode()).hexdigest()
        payload["text_lemmatized"] = lemmatized
        return payload

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object, keys in the documented order, nulls left
        out; the package's own metadata fields under :data:`PACKAGE_KEY`."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name != "metadata":
                if value is not None:
                    out[item.name] = value
                continue
            out.update(split_metadata(value))
        return out

    def to_line(self) -> str:
        """The record as one JSONL line, without the newline."""
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(", ", ": "))


def parse_line(line: str, number: int, *, now: datetime | None = None) -> MemoryRecord:
    """Read one JSONL line of the format.

    Args:
        line: The line's text.
        number: Its 1-based line number, for error messages.
        now: The time to use for a missing ``created_at``.

    Raises:
        FormatError: The line is not a valid record.
    """
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FormatError(f"line {number}: not JSON ({exc.msg})") from exc
    except RecursionError as exc:  # the decoder's own depth limit (about 1,000 levels)
        raise FormatError(
            f"line {number}: nested too deep to read; metadata may nest "
            f"{MAX_METADATA_DEPTH} levels at most"
        ) from exc
    if not isinstance(data, dict):
        raise FormatError(f"line {number}: expected a JSON object")
    problem = _value_problem(data)
    if problem is not None:
        raise FormatError(f"line {number}: {problem}")
    if "memory" in data:
        if "text" in data and data["text"] != data["memory"]:
            raise FormatError(f"line {number}: 'text' and 'memory' differ; give one of them")
        data["text"] = data.pop("memory")
    known = {f.name for f in fields(MemoryRecord)}
    own = data.pop(PACKAGE_KEY, None) or {}
    unknown = sorted(set(data) - known)
    if unknown:
        raise FormatError(
            f"line {number}: unknown keys {', '.join(map(repr, unknown))}; "
            "put extra fields under 'metadata'"
        )
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise FormatError(f"line {number}: 'text' must be a non-empty string")
    for key in known - {"metadata"}:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise FormatError(f"line {number}: {key!r} must be a string, got {value!r}")
    scope = {key: data.get(key) for key in _SCOPE_KEYS}
    if not any(scope.values()):
        raise FormatError(f"line {number}: give at least one of user_id, agent_id, run_id")
    for key, value in scope.items():
        if value is not None:
            try:
                check_id(key, value)
            except ConfigurationError as exc:
                raise FormatError(f"line {number}: {exc}") from exc
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise FormatError(f"line {number}: 'metadata' must be an object")
    metadata = _with_package_fields(metadata, own, number)
    clash = sorted(set(metadata) & CORE_PAYLOAD_KEYS)
    if clash:
        raise FormatError(
            f"line {number}: metadata may not hold mem0's own fields {', '.join(clash)}"
        )
    for key in ("created_at", "updated_at"):
        if data.get(key) is not None and parse_time(data[key]) is None:
            raise FormatError(f"line {number}: {key} is not an ISO 8601 date")
    memory_id = data.get("id")
    if memory_id is None:
        memory_id = str(uuid.uuid5(_ID_NAMESPACE, json.dumps([scope, text], sort_keys=True)))
    else:
        try:
            canonical = str(uuid.UUID(memory_id))
        except ValueError as exc:
            raise FormatError(f"line {number}: id {memory_id!r} is not a UUID") from exc
        if canonical != memory_id:
            raise FormatError(
                f"line {number}: id {memory_id!r} is not in canonical form ({canonical})"
            )
    created = data.get("created_at") or (now or datetime.now(UTC)).isoformat()
    return MemoryRecord(
        id=memory_id,
        text=text,
        user_id=scope["user_id"],
        agent_id=scope["agent_id"],
        run_id=scope["run_id"],
        actor_id=data.get("actor_id"),
        role=data.get("role"),
        attributed_to=data.get("attributed_to"),
        created_at=created,
        updated_at=data.get("updated_at") or created,
        expiration_date=data.get("expiration_date"),
        hash=data.get("hash"),
        metadata=_sorted_deep(metadata),
    )


def split_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """mem0's metadata of a memory as the output shows it: the user's fields
    under ``metadata``, this package's under :data:`PACKAGE_KEY` (an empty
    one left out)."""
    users = {k: v for k, v in metadata.items() if k not in PACKAGE_FIELDS}
    own = {k: v for k, v in metadata.items() if k in PACKAGE_FIELDS}
    out: dict[str, Any] = {}
    if users:
        out["metadata"] = _sorted_deep(users)
    if own:
        out[PACKAGE_KEY] = _sorted_deep(own)
    return out


def _with_package_fields(metadata: dict[str, Any], own: Any, number: int) -> dict[str, Any]:
    """The metadata to store: the user's and the package's fields of a line in
    one object, as mem0 keeps them (a line of the former shape has them in one already)."""
    if not isinstance(own, dict):
        raise FormatError(f"line {number}: {PACKAGE_KEY!r} must be an object")
    strange = sorted(set(own) - PACKAGE_FIELDS)
    if strange:
        raise FormatError(
            f"line {number}: {', '.join(map(repr, strange))} under {PACKAGE_KEY!r} are not "
            "fields of this package; put your own fields under 'metadata'"
        )
    differ = sorted(k for k in own if k in metadata and metadata[k] != own[k])
    if differ:
        raise FormatError(
            f"line {number}: {', '.join(map(repr, differ))} differ between 'metadata' and "
            f"{PACKAGE_KEY!r}; give them once"
        )
    return {**metadata, **own}


# A timeline field of one memory (see agentscope_mem0._memories.lifecycle), and what
# the memory it names is to this one; in the order a memory's links are shown.
_LINKS = (
    (SUPERSEDED_BY, SUPERSEDES),
    (SUPERSEDES, SUPERSEDED_BY),
    (EXTENDS, "extended_by"),
    (DUPLICATE_OF, DUPLICATES),
    (DUPLICATES, DUPLICATE_OF),
)
_EVENTS = ("SUPERSEDED_BY", "SUPERSEDES", "EXTENDS", "EXTENDED_BY", "DUPLICATE_OF", "DUPLICATES")


def timeline_links(records: list[MemoryRecord]) -> dict[str, list[tuple[str, str]]]:
    """Each record's links to other memories, both ways, as ``(event, other id)``.

    The events are ``SUPERSEDED_BY``, ``SUPERSEDES``, ``EXTENDS``,
    ``EXTENDED_BY``, ``DUPLICATE_OF`` and ``DUPLICATES``; a link written on
    either memory is found from both.
    """
    found: dict[str, dict[tuple[str, str], None]] = {r.id: {} for r in records}
    for record in records:
        for name, inverse in _LINKS:
            for other in ids_of(record.metadata.get(name)):
                found[record.id][(name.upper(), other)] = None
                if other in found:
                    found[other][(inverse.upper(), record.id)] = None
    return {
        memory_id: sorted(links, key=lambda link: _EVENTS.index(link[0]))
        for memory_id, links in found.items()
    }
