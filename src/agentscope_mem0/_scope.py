"""Whose memories a call touches: :class:`Scope`, the id checks, and the one
function that turns a scope into mem0's arguments.

mem0 names an owner by ``user_id`` and optionally ``agent_id``. Every read
and write of this package goes through :func:`mem0_ids`, so the rule for the
hosted platform (reads name the user only) lives in one place.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._exceptions import ConfigurationError
from ._text.unicode import is_invisible

__all__ = [
    "WILDCARD",
    "Scope",
    "agent_id_from_name",
    "check_agent_id",
    "check_id",
    "check_user_id",
    "is_hosted",
    "mem0_ids",
    "resolve_agent_id",
]

WILDCARD = "*"
"""mem0 2.2 reads ``"*"`` in a filter as "any value"."""

_WHITESPACE_RUN = re.compile(r"\s+")


def check_id(kind: str, value: Any, source: str | None = None) -> str:
    """``value`` if it names exactly one owner in mem0, else a clear error.

    The one definition of a valid mem0 id (``user_id``, ``agent_id``,
    ``run_id``); :func:`check_user_id` and :func:`check_agent_id` name it.

    mem0 2.2 strips surrounding whitespace from ids (so ``"alice "`` would read
    and write Alice's memories), rejects ids with whitespace inside (so every
    search and write for ``"alice smith"`` would fail) and reads ``"*"`` in a
    filter as "any value" (so it would read everybody's). All three are
    refused here rather than passed on, and so are ids holding an invisible
    character (a zero-width space, a NUL, a lone surrogate, ...: two users
    whose ids differ by one look identical in every listing, and a surrogate
    cannot even be encoded to be stored).
    """
    where = f"{kind} from {source}" if source else kind
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{where} must be a non-blank string, got {value!r}")
    if value != value.strip():
        raise ConfigurationError(
            f"{where} {value!r} has surrounding whitespace; mem0 trims ids, so it "
            f"would share memories with another {kind}. Normalise ids before they get here"
        )
    if any(char.isspace() for char in value):
        raise ConfigurationError(
            f"{where} {value!r} has whitespace inside; mem0 2.2 refuses such ids, so "
            f"every search and write would fail. Use an id without spaces, e.g. "
            f"{_WHITESPACE_RUN.sub('_', value)!r}"
        )
    hidden = next((char for char in value if is_invisible(char)), None)
    if hidden is not None:
        raise ConfigurationError(
            f"{where} {value!r} holds the invisible character U+{ord(hidden):04X}; it "
            f"would look like another {kind} wherever ids are listed. Remove it: "
            f"{''.join(c for c in value if not is_invisible(c))!r}"
        )
    if value == WILDCARD:
        raise ConfigurationError(
            f"{where} '*' is mem0's wildcard and would match the memories of every owner"
        )
    return value


def check_user_id(user_id: Any) -> str:
    """Check that ``user_id`` names exactly one user in mem0 and return it.

    Raises:
        ConfigurationError: ``user_id`` is not a string, is blank, has
            whitespace around or inside it, or is the wildcard ``"*"``.
    """
    return check_id("user_id", user_id)


def check_agent_id(agent_id: Any, source: str | None = None) -> str:
    """Check that ``agent_id`` names exactly one agent in mem0 and return it.

    Args:
        agent_id: The id.
        source: Where it came from, for the error message (``"agent 'bob'"``).

    Raises:
        ConfigurationError: The same rules as :func:`check_user_id`.
    """
    return check_id("agent_id", agent_id, source)


def resolve_agent_id(setting: str | Callable[[Any], str] | None, agent: Any) -> str:
    """The mem0 ``agent_id`` of ``agent`` under the middleware's ``agent_id`` setting.

    Args:
        setting: A fixed id, a function of the agent, or ``None`` for the
            agent's ``name`` (made a valid id by :func:`agent_id_from_name`).
        agent: The AgentScope agent.

    Raises:
        ConfigurationError: The id is not a valid mem0 id.
    """
    if isinstance(setting, str):
        return setting
    if callable(setting):
        return check_agent_id(setting(agent), f"agent {agent.name!r}")
    return check_agent_id(agent_id_from_name(agent.name), f"agent {agent.name!r}")


def agent_id_from_name(name: Any) -> Any:
    """The mem0 ``agent_id`` an agent gets from its name: spaces become ``_``.

    AgentScope names like ``"Research Assistant"`` are common, and mem0 2.2
    refuses ids with whitespace, so the name is stripped and every run of
    whitespace inside it becomes one underscore: ``"Research Assistant"`` ->
    ``"Research_Assistant"``. The mapping is deterministic, so the agent
    finds its memories again in every process. Names that differ only in
    whitespace versus underscores (``"Research Assistant"`` and
    ``"Research_Assistant"``) share one id; give such agents an explicit
    ``agent_id`` to keep them apart. Anything that is not a string is
    returned unchanged, for :func:`check_agent_id` to refuse.
    """
    if not isinstance(name, str):
        return name
    return _WHITESPACE_RUN.sub("_", name.strip())


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memories a call reads or writes."""

    user_id: str
    agent_id: str | None = None
    with_user_level: bool = False
    """A read of an agent's memories also finds the user's memories filed under
    no agent: those AgentScope's built-in middleware writes by default
    (``agent_id=None``), or any other writer without an agent id."""

    def searched(self, *, by_agent: bool) -> Scope:
        """The scope a search of this agent reads: its own memories and the
        user's memories of no agent, or, unless ``by_agent``
        (``scope_search_by_agent``), the user's memories of every agent."""
        if self.agent_id is None:
            return self
        return (
            Scope(self.user_id, self.agent_id, with_user_level=True)
            if by_agent
            else Scope(self.user_id)
        )

    def shows(self, agent_id: str | None) -> bool:
        """Whether a read of this scope shows the user's memories filed under
        ``agent_id`` (``None``: under no agent)."""
        return self.agent_id in (None, agent_id) or (self.with_user_level and not agent_id)

    def filters(self, *, hosted: bool = False) -> dict[str, str]:
        """mem0's read filters for this scope (see :func:`mem0_ids`)."""
        return mem0_ids(self, hosted=hosted, reading=True)


def mem0_ids(scope: Scope, *, hosted: bool = False, reading: bool = False) -> dict[str, str]:
    """The ids that name ``scope`` in a mem0 call.

    For a write (``add``, ``delete_all``) they are its keyword arguments; for a
    read (``search``, ``get_all``) they are its ``filters``.

    The mem0 platform files each added message under the id of its role (the
    user's under ``user_id`` with ``agent_id`` null) and a read that names both
    ids finds nothing, so hosted reads name the user only.

    Args:
        scope: Whose memories.
        hosted: The client is mem0's platform client.
        reading: The ids filter a read rather than name a write's owner.
    """
    ids = {"user_id": scope.user_id}
    if scope.agent_id and not (hosted and reading):
        ids["agent_id"] = scope.agent_id
    return ids


def is_hosted(client: Any) -> bool:
    """Whether ``client`` is mem0's platform client (``mem0.AsyncMemoryClient``)."""
    try:
        from mem0 import AsyncMemoryClient
    except ImportError:  # pragma: no cover - mem0 is a dependency
        return False
    return isinstance(client, AsyncMemoryClient)
