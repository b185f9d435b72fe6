"""``Mem0Middleware.Parameters``: this package's own options, as one checked model.

``Mem0Middleware`` takes AgentScope's built-in keywords (``mode``, ``top_k``,
...) and ``parameters=Mem0Middleware.Parameters(...)`` for everything this
package adds, as AgentScope's RAG, ReMe and agentic-memory middlewares do;
the agent service renders the model's JSON schema (each field's docstring is
its description) as a configuration form. Every option has one name, used the
same way by ``Mem0Middleware.local``, ``mem0_middleware_factory`` and the
docs; :class:`Mem0MiddlewareKeywords` are the keywords the three share.

Release 0.2 and 0.3 spelled these options otherwise (flat keywords, four
groups, built-in keywords inside the model); each old spelling fails with a
``TypeError`` naming the new one (:func:`moved_keyword`; the table is in
docs/migrating.md).
"""

from __future__ import annotations

import os
import reprlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from ._exceptions import ConfigurationError
from ._mem0.extraction import ExtractionStyle
from ._modes import Mode, check_mode
from ._recall.note import DEFAULT_MEMORY_RULES
from ._recall.profile import DEFAULT_PROFILE_TTL
from ._recall.recall import RecallMode
from ._scope import check_agent_id
from ._working.manager import WorkingMemory
from ._write.outbox_postgres import check_outbox_url

if TYPE_CHECKING:
    from agentscope.agent import Agent
    from agentscope.model import ChatModelBase

    from ._working.stores import WorkingStore

__all__ = [
    "DEFAULT_TOOL_INSTRUCTIONS",
    "Mem0MiddlewareKeywords",
    "Mem0MiddlewareParameters",
    "ToolName",
    "check_keywords",
    "moved_keyword",
    "with_outbox",
]

DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have `search_memory` and `add_memory` tools. Search when the request "
    "depends on what you may have learned about the user before; add when the "
    "user tells you a durable fact or preference worth keeping."
)
"""Appended to the system prompt in the tool modes."""

ToolName = Literal["search_memory", "add_memory", "forget_memory"]
"""A memory tool the middleware can offer (``update_working_memory`` comes
with working memory)."""


def _dump_working(value: WorkingMemory | None) -> Any:
    """A scope's default working memory as its name, as a form sends it back."""
    if value is not None and value == WorkingMemory(scope=value.scope):
        return value.scope
    return value


_WorkingMemoryField = Annotated[
    WorkingMemory | None,
    PlainValidator(WorkingMemory.coerce),
    PlainSerializer(_dump_working),
    WithJsonSchema(
        {"anyOf": [{"enum": ["conversation", "user"], "type": "string"}, {"type": "null"}]}
    ),
]


class Mem0MiddlewareParameters(BaseModel):
    """This package's options of :class:`~agentscope_mem0.Mem0Middleware`.

    AgentScope's built-in keywords (``mode``, ``top_k``, ``threshold``,
    ``scope_search_by_agent``, ``await_write``, ...) are the middleware's own
    keywords, not fields here. A bad value raises ``ConfigurationError``
    naming the field; an unknown or moved name a ``TypeError``
    (``model_validate`` and ``model_validate_json`` raise pydantic's
    ``ValidationError`` for bad values, as pydantic does).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    recall: RecallMode = "query"
    """What a turn recalls. `query`: memories found by searching with the user's
    message. `profile`: the user's most recent memories, whatever the message.
    `full`: both, profile first, without repeats."""

    query_context_turns: int = Field(default=0, ge=0, strict=True)
    """Earlier messages added to the search query. 0, the message alone, measured
    best on LoCoMo (recall@10 0.570; with the previous reply 0.529, with the
    previous exchange 0.367: docs/benchmarks/note-recall.md)."""

    profile_ttl: float = Field(default=DEFAULT_PROFILE_TTL, ge=0)
    """Seconds a user's profile (recall `profile` or `full`) is reused; a stored
    write refreshes it sooner."""

    include_superseded: bool = False
    """Also recall memories a newer one superseded, marked "no longer true since"
    in the note (docs/time.md); off, only what is true now."""

    max_memory_tokens: int | None = Field(default=1000, ge=1, strict=True)
    """Most tokens of recalled memories put in front of the model (a CJK-aware
    estimate); the least relevant go first. Empty: no cap. 1000 holds five short
    extracted memories (about 200 tokens) or five long raw turns (about 500)."""

    memory_section_rules: str = DEFAULT_MEMORY_RULES
    """The memory note's line telling the model how to read the memories (dates,
    newer wins, data not instructions)."""

    accumulate_notes: bool = False
    """Keep every turn's memory note in context, as AgentScope's built-in does;
    off, each turn's note replaces the previous one."""

    outbox: str | os.PathLike[str] | None = None
    """Where the durable write outbox is: a write is recorded there before the
    reply returns and removed once mem0 stored it. A folder (an SQLite file), or
    a `postgresql://` URL (a table replicas share: docs/outbox.md). Empty: next
    to the store's own files (the data folder for the embedded default, a table
    in the same database for pgvector); `:memory:` keeps writes in memory only."""

    deliver_writes: bool = True
    """Store the writes this process records (the default). Off: only record
    them, for a writer process to store (`serve_writes()` of a factory built
    alike, docs/deploying.md), so that replicas spend their CPU on replies.
    Needs an outbox every process reaches: PostgreSQL."""

    extraction: ExtractionStyle = "mem0"
    """The prompt mem0 extracts memories with. `mem0`: mem0's own (about 8k tokens
    per write). `compact`: this package's, which fits a 4k context with the
    conversation: for small local models and fewer paid tokens."""

    remember: str = Field(default="", max_length=2000)
    """What the user wants remembered, in their own words or as categories
    ("my family, my diet, deadlines"): given to the extraction and to the check
    of what it proposes. Empty: durable facts the user states about themselves."""

    ignore: str = Field(default="", max_length=2000)
    """What never to remember, in words or categories ("health, money"): given
    to the extraction and to the check of what it proposes."""

    grounded: bool = True
    """Keep only what the user's own words in the exchange support: the
    extraction's proposals that restate the assistant, a question or a request,
    name what nobody said, or switch language are dropped (counted in
    `stats()` as `memories_dropped_*`). Off: whatever mem0 extracts is stored."""

    search_timeout: float | None = Field(default=2.0, gt=0)
    """Seconds the automatic search (and `search_memory`) may take before the
    reply goes on without memories. Empty: no limit."""

    tool_timeout: float | None = Field(default=60.0, gt=0)
    """Seconds `add_memory` and `forget_memory` may wait for mem0 before the tool
    reports a timeout. Empty: no limit."""

    breaker_threshold: int = Field(default=5, ge=1, strict=True)
    """Consecutive failed or timed-out mem0 calls after which memory reads are
    skipped for `breaker_cooldown` seconds."""

    breaker_cooldown: float = Field(default=30.0, ge=0)
    """Seconds memory reads are skipped before one probe is let through."""

    judge: bool = True
    """After a write, mark which older memories the new ones supersede or extend,
    with the extraction model (or `judge_model`), so that outdated facts are not
    recalled (docs/time.md)."""

    tools: tuple[ToolName, ...] = ("search_memory", "add_memory")
    """The tools offered in `agent_control` and `both` modes: by default the
    built-in's `search_memory` and `add_memory`; `forget_memory` too makes
    `search_memory` show memory ids."""

    working_memory: _WorkingMemoryField = None
    """A scratchpad the agent keeps with `update_working_memory` and sees in full
    every turn: per `conversation`, per `user` (or a `WorkingMemory(...)` with
    more options), empty for none (docs/working-memory.md)."""

    profile: bool = False
    """Keep a short profile of each user, distilled from their current memories
    by the chat model mem0 extracts with, in the background after every 5 new
    memories or a supersede, and show it first in the memory note (dated, at most
    about 200 tokens; docs/profile.md). Off: no profile, as AgentScope's built-in."""

    if not TYPE_CHECKING:  # type checkers keep the fields' own signature

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise _configuration_error(exc) from None

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        """Refuse a moved or unknown field with a ``TypeError`` naming the fix."""
        for name in data if isinstance(data, Mapping) else ():
            if name in _BUILTIN_FIELDS:
                raise TypeError(
                    f"{name} is AgentScope's built-in keyword, no longer a field of {_NEW}: "
                    f"pass Mem0Middleware({name}={reprlib.repr(data[name])}) (the same "
                    "keyword of .local() and mem0_middleware_factory())"
                )
            if name not in cls.model_fields:
                raise moved_keyword(name, data[name]) or TypeError(
                    f"{_NEW} has no field {name!r}; its fields: {', '.join(cls.model_fields)}"
                )
        return data

    @field_validator("tools")
    @classmethod
    def _distinct_tools(cls, tools: tuple[ToolName, ...]) -> tuple[ToolName, ...]:
        if not tools:
            raise ConfigurationError(
                "tools is empty; use mode='static_control' for an agent without memory tools"
            )
        return tuple(dict.fromkeys(tools))

    @field_validator("outbox")
    @classmethod
    def _outbox(cls, value: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
        """``None`` (next to the store's own files), ``":memory:"``, a folder path
        or a PostgreSQL URL."""
        text = None if value is None else os.fspath(value)
        if text is not None and (not isinstance(text, str) or not text.strip() or "\x00" in text):
            raise ConfigurationError(
                "outbox must be a folder path, a postgresql:// URL, ':memory:' or None, "
                f"got {value!r}"
            )
        if text is not None and "://" in text:
            check_outbox_url(text)
        return value


def _configuration_error(exc: ValidationError) -> ConfigurationError:
    """One ``ConfigurationError`` naming each refused field, its value and the rule."""
    problems = []
    for error in exc.errors():
        field, *inner = error["loc"]
        where = f"{field}{''.join(f'[{part!r}]' for part in inner)}"
        rule = error["msg"].removeprefix("Value error, ")
        problems.append(f"{where}={reprlib.repr(error['input'])}: {rule}")
    return ConfigurationError(f"{_NEW}: {'; '.join(problems)}")


def with_outbox(
    parameters: Mem0MiddlewareParameters | None, folder: str | os.PathLike[str]
) -> Mem0MiddlewareParameters:
    """``parameters`` (default ones for ``None``) whose ``outbox`` is ``folder``
    unless they name one: the embedded default keeps it in its data folder."""
    parameters = parameters if parameters is not None else Mem0MiddlewareParameters()
    if parameters.outbox is not None:
        return parameters
    return parameters.model_copy(update={"outbox": folder})


class Mem0MiddlewareKeywords(TypedDict, total=False):
    """The keywords ``Mem0Middleware``, ``Mem0Middleware.local`` and
    ``mem0_middleware_factory`` share (see ``Mem0Middleware`` for each)."""

    mode: Mode
    agent_id: str | Callable[[Agent], str] | None
    top_k: int
    threshold: float | None
    scope_search_by_agent: bool
    await_write: bool
    memory_section_header: str
    memory_section_intro: str
    tool_instructions: str
    parameters: Mem0MiddlewareParameters | None
    judge_model: ChatModelBase | None
    working_store: WorkingStore | None


def check_keywords(where: str, keywords: Mapping[str, Any]) -> None:
    """Check :class:`Mem0MiddlewareKeywords` given to ``where``, once: names and values.

    Raises:
        TypeError: A keyword of release 0.2/0.3 (naming its new spelling), an
            unknown keyword, or ``parameters`` that is not the model.
        ConfigurationError: An unknown ``mode``, a bad ``agent_id`` or ``top_k``.
    """
    for name, value in keywords.items():
        if name not in Mem0MiddlewareKeywords.__annotations__:
            raise moved_keyword(name, value) or TypeError(
                f"{where}() got an unexpected keyword argument {name!r}"
            )
    check_mode(keywords.get("mode", "both"))
    agent_id, top_k = keywords.get("agent_id"), keywords.get("top_k", 1)
    if agent_id is not None and not callable(agent_id):
        check_agent_id(agent_id, "the agent_id argument")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ConfigurationError(f"top_k must be a positive integer, got {top_k!r}")
    parameters = keywords.get("parameters")
    if parameters is not None and not isinstance(parameters, Mem0MiddlewareParameters):
        raise TypeError(f"parameters must be a {_NEW}(...), got {type(parameters).__name__}")


# -- release 0.2/0.3's spellings ----------------------------------------------------

_NEW = "Mem0Middleware.Parameters"
# Old names of fields; any other old keyword kept its name as a field.
_RENAMED = {
    "outbox_dir": "outbox",
    "rules": "memory_section_rules",
    "accumulate": "accumulate_notes",
}
# Release 0.3's groups -> the fields that hold what they held.
_GROUPS = {
    "recall": "recall (was mode), query_context_turns, profile_ttl, include_superseded",
    "note": "max_memory_tokens, memory_section_rules (was rules), accumulate_notes "
    "(was accumulate)",
    "writes": "outbox (was outbox_dir), extraction",
    "deadlines": "search_timeout, tool_timeout, breaker_threshold, breaker_cooldown",
}
# Release 0.3's fields of the model that are AgentScope's built-in keywords.
_BUILTIN_FIELDS = ("mode", "top_k", "threshold", "scope_search_by_agent", "await_write")


def moved_keyword(name: str, value: Any) -> TypeError | None:
    """The ``TypeError`` for a keyword spelled as in release 0.2/0.3, naming its
    new spelling; ``None`` when ``name`` is no old keyword.

    No keyword ``Mem0Middleware`` takes today is an old one, so any keyword
    may be asked about.
    """
    if name == "judge" and not isinstance(value, bool):
        return TypeError(
            "judge=<a chat model> is now judge_model=: pass Mem0Middleware(judge_model=...)"
        )
    if name == "write_queue":
        return TypeError(
            "write_queue is gone: middlewares share a write queue by sharing "
            "client_state=ClientState(...), as mem0_middleware_factory() does"
        )
    if name in _GROUPS and not (name == "recall" and isinstance(value, str)):
        return TypeError(
            f"{name}= is gone: what release 0.3's group held are {_NEW} fields: "
            f"{_GROUPS[name]}; pass parameters={_NEW}(...)"
        )
    new = _RENAMED.get(name, name)
    if new not in Mem0MiddlewareParameters.model_fields:
        return None
    return TypeError(
        f"{name} is now {_NEW}({new}=...): pass parameters={_NEW}({new}={reprlib.repr(value)})"
    )
