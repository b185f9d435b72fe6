"""This package's options beyond AgentScope's built-in keywords, in four groups.

``Mem0Middleware`` takes each group whole (``recall=RecallOptions(...)``,
``note=NoteOptions(...)``, ``writes=WriteOptions(...)``,
``deadlines=Deadlines(...)``) or its fields as flat keywords
(``search_timeout=1.0``); :func:`collect_options` turns either form into one
checked :class:`Options`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypedDict

from ._exceptions import ConfigurationError
from ._mem0.extraction import ExtractionStyle, check_extraction
from ._modes import Mode, check_mode
from ._recall.note import (
    DEFAULT_MEMORY_RULES,
    DEFAULT_MEMORY_SECTION_HEADER,
    DEFAULT_MEMORY_SECTION_INTRO,
)
from ._scope import check_agent_id

__all__ = [
    "BUILTIN_KEYWORDS",
    "DEFAULT_MAX_MEMORY_TOKENS",
    "DEFAULT_PROFILE_TTL",
    "DEFAULT_QUERY_CONTEXT_TURNS",
    "DEFAULT_TOOL_INSTRUCTIONS",
    "FLAT_KEYWORDS",
    "RECALL_MODES",
    "Deadlines",
    "FlatOptions",
    "NoteOptions",
    "Options",
    "RecallMode",
    "RecallOptions",
    "WriteOptions",
    "collect_options",
    "options_from_keywords",
]

RecallMode = Literal["query", "profile", "full"]
RECALL_MODES: tuple[RecallMode, ...] = ("query", "profile", "full")

DEFAULT_MAX_MEMORY_TOKENS = 1000
"""Default budget of the memory note: above five short extracted memories
(about 200 tokens with the frame) or five long raw LoCoMo turns (about 500),
low enough to stop a few huge ones."""

DEFAULT_PROFILE_TTL = 30.0
"""Seconds a scope's profile is reused before ``get_all`` is asked again."""

DEFAULT_QUERY_CONTEXT_TURNS = 0
"""Earlier messages added to the search query. The message alone won on the
LoCoMo development half (e5 recall@10 0.570; with the previous reply 0.529,
with the previous exchange 0.367): see ``docs/benchmarks/note-recall.md``."""


DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have `search_memory` and `add_memory` tools. Search when the request "
    "depends on what you may have learned about the user before; add when the "
    "user tells you a durable fact or preference worth keeping."
)
"""Appended to the system prompt in the tool modes."""


@dataclass(frozen=True, kw_only=True)
class RecallOptions:
    """What the automatic note recalls each turn."""

    mode: RecallMode = "query"
    """``"query"`` (memories found by searching with the user's message),
    ``"profile"`` (the user's most recent memories, whatever the message) or
    ``"full"`` (both, profile first, without repeats)."""

    query_context_turns: int = DEFAULT_QUERY_CONTEXT_TURNS
    """Earlier messages added to the search query; 0 searches with the new
    message alone, which measured best on LoCoMo (docs/benchmarks/note-recall.md)."""

    profile_ttl: float = DEFAULT_PROFILE_TTL
    """Seconds a user's profile is cached; a stored write refreshes it sooner."""

    include_superseded: bool = False
    """Also recall memories a newer one superseded, marked "no longer true
    since" in the note (see docs/time.md); by default only what is true now."""

    def __post_init__(self) -> None:
        if self.mode not in RECALL_MODES:
            raise ConfigurationError(
                f"unknown recall {self.mode!r}; use one of {', '.join(map(repr, RECALL_MODES))}"
            )
        turns = self.query_context_turns
        if not isinstance(turns, int) or isinstance(turns, bool) or turns < 0:
            raise ConfigurationError(
                f"query_context_turns must be a non-negative integer, got {turns!r}"
            )
        ttl = self.profile_ttl
        if not isinstance(ttl, int | float) or isinstance(ttl, bool) or ttl < 0:
            raise ConfigurationError(f"profile_ttl must be seconds >= 0, got {ttl!r}")


@dataclass(frozen=True, kw_only=True)
class NoteOptions:
    """How the memory note the model sees is written and placed."""

    max_memory_tokens: int | None = DEFAULT_MAX_MEMORY_TOKENS
    """Token budget of the note (CJK-aware estimate); the least relevant
    memories are dropped first. ``None``: no cap."""

    rules: str = DEFAULT_MEMORY_RULES
    """The line telling the model how to read the memories (dates, newer
    wins, data not instructions)."""

    accumulate: bool = False
    """Keep every turn's note in context, as AgentScope's built-in does,
    instead of replacing the previous one."""

    def __post_init__(self) -> None:
        budget = self.max_memory_tokens
        if budget is not None and (
            not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
        ):
            raise ConfigurationError(
                f"max_memory_tokens must be a positive integer or None, got {budget!r}"
            )


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """Where queued writes wait until mem0 stored them, and how mem0 extracts them."""

    outbox_dir: str | os.PathLike[str] | None = None
    """Folder of the durable write outbox (``outbox.sqlite3``): a write is
    recorded there before the reply returns and removed once mem0 stored it;
    writes left by a process that ended are stored by the next middleware on
    the folder. ``None``: next to the store's own files (the folder of
    mem0's ``history_db_path``; see ``_outbox_place``), so writes are durable
    on every path; ``":memory:"`` keeps them in memory only.
    ``Mem0Middleware.local`` uses its data folder."""

    extraction: ExtractionStyle = "mem0"
    """The prompt mem0 extracts memories with: ``"mem0"``, mem0's own (about
    8k tokens before the conversation), or ``"compact"``, this package's
    (prompt, conversation and answer within a 4k context: small local
    models, fewer paid tokens; see docs/benchmarks/real-model.md). Compact
    needs a client that extracts through an AgentScope chat model."""

    def __post_init__(self) -> None:
        check_extraction(self.extraction)


@dataclass(frozen=True, kw_only=True)
class Deadlines:
    """How long memory may hold up a reply, and when to stop asking mem0."""

    search_timeout: float | None = 2.0
    """Seconds the automatic search (and ``search_memory``) may take before
    the reply goes on without memories; ``None`` waits indefinitely."""

    tool_timeout: float | None = 60.0
    """Seconds ``add_memory`` may wait for mem0 before the tool reports a
    timeout; ``None`` waits indefinitely."""

    breaker_threshold: int = 5
    """Consecutive failed or timed-out calls after which memory reads are
    skipped for ``breaker_cooldown`` seconds."""

    breaker_cooldown: float = 30.0
    """Seconds reads are skipped before one probe is let through."""

    def __post_init__(self) -> None:
        threshold = self.breaker_threshold
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
            raise ConfigurationError(
                f"breaker_threshold must be a positive integer, got {threshold!r}"
            )
        if self.breaker_cooldown < 0:
            raise ConfigurationError(
                f"breaker_cooldown must be >= 0, got {self.breaker_cooldown!r}"
            )
        for name in ("search_timeout", "tool_timeout"):
            seconds = getattr(self, name)
            if seconds is not None and seconds <= 0:
                raise ConfigurationError(f"{name} must be positive or None, got {seconds!r}")


class FlatOptions(TypedDict, total=False):
    """The groups' fields as flat ``Mem0Middleware`` keywords (release 0.1's form)."""

    query_context_turns: int
    profile_ttl: float
    max_memory_tokens: int | None
    memory_section_rules: str
    accumulate_notes: bool
    outbox_dir: str | os.PathLike[str] | None
    extraction: ExtractionStyle
    search_timeout: float | None
    tool_timeout: float | None
    breaker_threshold: int
    breaker_cooldown: float


# Flat keyword -> (group, field).
_FLAT: dict[str, tuple[str, str]] = {
    "query_context_turns": ("recall", "query_context_turns"),
    "profile_ttl": ("recall", "profile_ttl"),
    "max_memory_tokens": ("note", "max_memory_tokens"),
    "memory_section_rules": ("note", "rules"),
    "accumulate_notes": ("note", "accumulate"),
    "outbox_dir": ("writes", "outbox_dir"),
    "extraction": ("writes", "extraction"),
    "search_timeout": ("deadlines", "search_timeout"),
    "tool_timeout": ("deadlines", "tool_timeout"),
    "breaker_threshold": ("deadlines", "breaker_threshold"),
    "breaker_cooldown": ("deadlines", "breaker_cooldown"),
}
FLAT_KEYWORDS = frozenset(_FLAT)
"""Every flat keyword :func:`collect_options` accepts."""


@dataclass(frozen=True, kw_only=True)
class Options:
    """Everything a middleware was configured with, checked: AgentScope's
    built-in keywords (fields named as the keywords) and this package's four
    groups."""

    mode: Mode = "both"
    agent_id: str | Callable[[Any], str] | None = None
    top_k: int = 5
    threshold: float | None = None
    scope_search_by_agent: bool = True
    await_write: bool = False
    memory_section_header: str = DEFAULT_MEMORY_SECTION_HEADER
    memory_section_intro: str = DEFAULT_MEMORY_SECTION_INTRO
    tool_instructions: str = DEFAULT_TOOL_INSTRUCTIONS
    recall: RecallOptions = field(default_factory=RecallOptions)
    note: NoteOptions = field(default_factory=NoteOptions)
    writes: WriteOptions = field(default_factory=WriteOptions)
    deadlines: Deadlines = field(default_factory=Deadlines)

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if not (self.agent_id is None or callable(self.agent_id)):
            check_agent_id(self.agent_id, "the agent_id argument")
        top_k = self.top_k
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise ConfigurationError(f"top_k must be a positive integer, got {top_k!r}")

    @property
    def automatic(self) -> bool:
        """The middleware searches and writes by itself (not ``agent_control``)."""
        return self.mode != "agent_control"

    @property
    def offers_tools(self) -> bool:
        """The agent gets the memory tools (not ``static_control``)."""
        return self.mode != "static_control"


_GROUPS = ("recall", "note", "writes", "deadlines")

BUILTIN_KEYWORDS = tuple(f.name for f in fields(Options) if f.name not in _GROUPS)
"""AgentScope's built-in ``Mem0Middleware`` keywords, in its order; each is
the :class:`Options` field of the same name."""


def collect_options(
    *,
    builtin: dict[str, Any] | None = None,
    recall: RecallMode | RecallOptions = "query",
    note: NoteOptions | None = None,
    writes: WriteOptions | None = None,
    deadlines: Deadlines | None = None,
    **flat: Any,
) -> Options:
    """One :class:`Options` from whole groups and flat keywords.

    Args:
        builtin: AgentScope's built-in keywords (:data:`BUILTIN_KEYWORDS`).
        recall: A recall mode name or a whole :class:`RecallOptions`.
        note: The note group, or ``None`` for its defaults.
        writes: The writes group, or ``None`` for its defaults.
        deadlines: The deadlines group, or ``None`` for its defaults.
        **flat: Fields of the groups by their flat names (:data:`FLAT_KEYWORDS`).

    Raises:
        ConfigurationError: An unknown keyword, a value out of range, or a
            field given both flat and inside its group.
        TypeError: A group of the wrong type.
    """
    unknown = sorted(set(flat) - FLAT_KEYWORDS)
    if unknown:
        raise TypeError(f"Mem0Middleware got unexpected keyword(s): {', '.join(unknown)}")
    groups: dict[str, Any] = {
        "recall": recall if isinstance(recall, RecallOptions) else RecallOptions(mode=recall),
        "note": note,
        "writes": writes,
        "deadlines": deadlines,
    }
    kinds = {"note": NoteOptions, "writes": WriteOptions, "deadlines": Deadlines}
    for name, kind in kinds.items():
        given = groups[name]
        if given is not None and not isinstance(given, kind):
            raise TypeError(f"{name} must be a {kind.__name__}, got {type(given).__name__}")
    changes: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        group, attr = _FLAT[key]
        whole = recall if group == "recall" else groups[group]
        if isinstance(whole, RecallOptions | NoteOptions | WriteOptions | Deadlines):
            raise ConfigurationError(
                f"{key} was given both on its own and inside {group}=; pass it in one place"
            )
        changes.setdefault(group, {})[attr] = value
    built = {
        "recall": groups["recall"],
        "note": groups["note"] or NoteOptions(),
        "writes": groups["writes"] or WriteOptions(),
        "deadlines": groups["deadlines"] or Deadlines(),
    }
    for group, values in changes.items():
        built[group] = replace(built[group], **values)
    return Options(**(builtin or {}), **built)


def options_from_keywords(keywords: dict[str, Any]) -> Options:
    """The :class:`Options` that ``Mem0Middleware(**keywords)`` would use.

    Keywords that are not options (``client``, ``tools``, ...) are skipped.

    Raises:
        ConfigurationError: As :func:`collect_options`.
    """
    builtin = {k: v for k, v in keywords.items() if k in BUILTIN_KEYWORDS}
    groups = {k: keywords[k] for k in _GROUPS if k in keywords}
    flat = {k: v for k, v in keywords.items() if k in FLAT_KEYWORDS}
    return collect_options(builtin=builtin, **groups, **flat)
