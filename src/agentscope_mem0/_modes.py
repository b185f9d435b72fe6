"""The control modes, as AgentScope's built-in middleware names them; the one list.

A leaf module (it imports nothing heavy), so the command line can offer the
modes as choices without importing agentscope.
"""

from __future__ import annotations

from typing import Any, Literal

from ._exceptions import ConfigurationError

__all__ = ["MODES", "Mode", "check_mode"]

Mode = Literal["static_control", "agent_control", "both"]
"""``static_control``: automatic search and write; ``agent_control``: tools
only; ``both``: the two together (the default)."""

MODES: tuple[Mode, ...] = ("static_control", "agent_control", "both")


def check_mode(mode: Any) -> Mode:
    """``mode`` if it is one of :data:`MODES`, else a clear error.

    Raises:
        ConfigurationError: An unknown mode, naming the known ones.
    """
    if mode not in MODES:
        raise ConfigurationError(f"unknown mode {mode!r}; use one of {', '.join(map(repr, MODES))}")
    return mode  # type: ignore[no-any-return,unused-ignore]
